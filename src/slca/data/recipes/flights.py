"""Flight task recipes: search, status, search-then-book and airport-lookup-then-search."""

from __future__ import annotations

from slca.data.spec import (
    ChainRecipe,
    Ctx,
    Draw,
    Reject,
    ToolRecipe,
    date_phrase,
    num,
    shift,
)
from slca.tools.entities import FIRST_NAMES, LAST_NAMES
from slca.tools.world import CITY_BY_NAME

D = "flights"


def code(city: str) -> str:
    return CITY_BY_NAME[city.lower()][2]


def place(ctx: Ctx, city: str) -> str:
    """A city named with its airport code, or the bare code."""
    return ctx.rng.choice((f"{city} ({code(city)})", f"{city} ({code(city)})", code(city)))


def _route(ctx: Ctx) -> tuple[str, str, int]:
    origin = ctx.pick("city")
    return origin, ctx.pick("city", exclude=(origin,)), ctx.rng.randint(1, 10)


def _search(ctx: Ctx) -> Draw:
    origin, dest, offset = _route(ctx)
    when = date_phrase(ctx.rng, ctx.world.today, offset)
    a, b = place(ctx, origin), place(ctx, dest)
    slots = {"a": a, "b": b, "when": when}
    return Draw(
        slots,
        {"origin": code(origin), "destination": code(dest), "date": shift(ctx.world.today, offset)},
        f"{a} to {b} {when}",
    )


def _search_facts(response: dict, draw: Draw) -> dict:
    if not response["flights"]:
        raise Reject("no flights on the route")
    best = response["flights"][0]
    return {"count": str(response["count"]), "flight": best["flight_number"], "price": num(best["price"])}


SEARCH = ToolRecipe(
    tool="search_flights",
    domain=D,
    sample=_search,
    facts=_search_facts,
    gist="search for flights",
    asks=(
        "Find me flights from {a} to {b} {when}.",
        "Are there any flights from {a} to {b} {when}?",
        "I need to fly {a} to {b} {when}. What are my options?",
        "Can you search flights {when} from {a} to {b}?",
        "What's the cheapest flight from {a} to {b} {when}?",
        "Please look for flights leaving {a} for {b} {when}.",
        "Show me what's flying from {a} to {b} {when}.",
    ),
    parallel=(
        "Search flights for these trips: {items}.",
        "I'm comparing routes: {items}. What's available?",
        "Find the cheapest options for {items}.",
        "Check flights for {items}, please.",
        "Look up flights {items}.",
        "What flights are there for {items}?",
    ),
    answers=(
        "I found {count} flights from {a} to {b} {when}; the cheapest is {flight} at ${price}.",
        "There are {count} options {when} from {a} to {b}. Cheapest: {flight} for ${price}.",
        "{a} to {b} {when}: {count} flights, starting at ${price} on {flight}.",
    ),
)


def _status(ctx: Ctx) -> Draw:
    origin, dest, _ = _route(ctx)
    day = shift(ctx.world.today, ctx.rng.randint(0, 2))
    flights = ctx.world.flights_on_route(code(origin), code(dest), day)
    fid = ctx.rng.choice(flights)["flight_id"]
    return Draw({"fid": fid}, {"flight_id": fid}, fid)


def _status_facts(response: dict, draw: Draw) -> dict:
    facts = {"status": response["status"].replace("_", " ")}
    facts["_more"] = ""
    if response["gate"]:
        facts["gate"] = response["gate"]
        facts["_more"] += f", departing from gate {response['gate']}"
    if response["delay_min"]:
        facts["delay"] = str(response["delay_min"])
        facts["_more"] += f", with a delay of {response['delay_min']} minutes"
    return facts


STATUS = ToolRecipe(
    tool="get_flight_status",
    domain=D,
    sample=_status,
    facts=_status_facts,
    gist="check a flight's status",
    asks=(
        "What's the status of flight {fid}?",
        "Is {fid} on time?",
        "Can you check whether flight {fid} is delayed?",
        "Any news on my flight {fid}?",
        "Please give me the live status and gate for {fid}.",
        "Status of {fid}, please.",
    ),
    parallel=(
        "Check the status of {items}.",
        "Are these flights on time: {items}?",
        "What's the live status of {items}?",
        "Give me gate and delay info for {items}.",
        "Please look up {items}.",
        "I'm tracking {items}. How are they doing?",
    ),
    answers=(
        "Flight {fid} is {status}{_more}.",
        "Status for {fid}: {status}{_more}.",
        "{fid} is currently {status}{_more}.",
    ),
)


def _book(ctx: Ctx) -> dict:
    origin, dest, offset = _route(ctx)
    first, last = ctx.rng.choice(FIRST_NAMES), ctx.rng.choice(LAST_NAMES)
    card = f"{ctx.rng.randint(0, 9999):04d}"
    return {
        "a": place(ctx, origin),
        "b": place(ctx, dest),
        "when": date_phrase(ctx.rng, ctx.world.today, offset),
        "who": f"{first} {last}",
        "card": card,
        "_route": (code(origin), code(dest)),
        "_date": shift(ctx.world.today, offset),
        "_name": (first, last),
    }


def _book_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        origin, dest = slots["_route"]
        return [
            {"name": "search_flights", "arguments": {"origin": origin, "destination": dest, "date": slots["_date"]}}
        ]
    if len(done) == 1:
        if not done[0][0]["flights"]:
            raise Reject("no flights to book")
        first, last = slots["_name"]
        return [
            {
                "name": "book_flight",
                "arguments": {
                    "flight_id": done[0][0]["flights"][0]["flight_id"],
                    "cabin": "economy",
                    "passengers": [{"first_name": first, "last_name": last}],
                    "payment": {"method": "credit_card", "card_last4": slots["card"]},
                },
            }
        ]
    return None


BOOK = ChainRecipe(
    name="search_then_book",
    domain=D,
    tools=("search_flights", "book_flight"),
    writes=True,
    sample=_book,
    steps=_book_steps,
    facts=lambda s, d: {
        "booking": d[1][0]["booking_id"],
        "flight": d[1][0]["flight_number"],
        "total": num(d[1][0]["total_price"]),
    },
    asks=(
        "Book the cheapest economy flight from {a} to {b} {when} for {who}, paying with the card ending {card}.",
        "Please find flights {a} to {b} {when} and book the cheapest one in economy for {who}. Card ending in {card}.",
        "I need the lowest-priced economy seat from {a} to {b} {when}. Passenger: {who}; credit card last four {card}.",
        "Search {a} → {b} {when}, then reserve the cheapest economy fare for {who} (credit card ending {card}).",
        "Can you get {who} on the cheapest economy flight from {a} to {b} {when}? Charge the card ending {card}.",
        "Cheapest economy ticket {a} to {b} {when} for {who}, please book it on my credit card ending {card}.",
    ),
    answers=(
        "Done: {who} is booked on {flight}, booking {booking}, total ${total}.",
        "I booked the cheapest flight, {flight}, for {who}. Your booking id is {booking} and the total is ${total}.",
        "Booking {booking} is confirmed for {who} on flight {flight}; ${total} was charged.",
    ),
)


def _lookup(ctx: Ctx) -> dict:
    origin, dest, offset = _route(ctx)
    return {
        "a": origin,
        "b": dest,
        "when": date_phrase(ctx.rng, ctx.world.today, offset),
        "_date": shift(ctx.world.today, offset),
    }


def _lookup_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [
            {"name": "search_airports", "arguments": {"query": slots["a"]}},
            {"name": "search_airports", "arguments": {"query": slots["b"]}},
        ]
    if len(done) == 1:
        codes = []
        for found, city in zip(done[0], (slots["a"], slots["b"])):
            match = [a["code"] for a in found["airports"] if a["city"] == city]
            if not match:
                raise Reject(f"no airport for {city}")
            codes.append(match[0])
        return [
            {
                "name": "search_flights",
                "arguments": {"origin": codes[0], "destination": codes[1], "date": slots["_date"]},
            }
        ]
    return None


def _lookup_facts(slots: dict, done: list[list[dict]]) -> dict:
    found = done[1][0]
    if not found["flights"]:
        raise Reject("no flights on the route")
    return {
        "count": str(found["count"]),
        "flight": found["flights"][0]["flight_number"],
        "price": num(found["flights"][0]["price"]),
    }


LOOKUP = ChainRecipe(
    name="airports_then_search",
    domain=D,
    tools=("search_airports", "search_flights"),
    sample=_lookup,
    steps=_lookup_steps,
    facts=_lookup_facts,
    asks=(
        "I don't know the airport codes, but I want to fly from {a} to {b} {when}. What's available?",
        "Look up the airports for {a} and {b}, then find flights between them {when}.",
        "Find flights from {a} to {b} {when}; you'll need to find the airport codes first.",
        "What's the cheapest way to fly from {a} to {b} {when}?",
        "Could you check flights {when} from the city of {a} to {b}?",
        "Any flights {when} going from {a} to {b}? Please find the airports and search.",
    ),
    answers=(
        "There are {count} flights from {a} to {b} {when}; the cheapest is {flight} at ${price}.",
        "I found {count} options. The cheapest from {a} to {b} is {flight} for ${price}.",
        "{a} to {b} {when}: {count} flights, cheapest {flight} at ${price}.",
    ),
)

RECIPES = (SEARCH, STATUS)
CHAINS = (BOOK, LOOKUP)

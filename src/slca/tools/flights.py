"""Flights domain: airport lookup, flight search, status, booking, booking lookup and cancellation."""

from __future__ import annotations

from slca.tools.entities import CITIES
from slca.tools.registry import (
    ToolError,
    array,
    boolean,
    conflict,
    date,
    enum,
    integer,
    not_found,
    nullable,
    number,
    obj,
    params,
    string,
    tool,
)
from slca.tools.world import CITY_BY_CODE, HORIZON_DAYS, World, day_offset

D = "flights"
CABINS = ("economy", "premium_economy", "business")
STATUSES = ("scheduled", "on_time", "delayed", "boarding", "cancelled")
IATA = string("Three-letter IATA airport code, e.g. 'LIM'.", pattern="^[A-Z]{3}$")
FLIGHT_ID = string("Flight id from search_flights, e.g. 'FL-LIM-BOG-20250605-1'.", minLength=5)
BOOKING_ID = string("Booking id from book_flight, e.g. 'BKG-9001'.", minLength=3)
TIME = string("Local time HH:MM.", pattern="^[0-2][0-9]:[0-5][0-9]$")

FLIGHT_ROW = obj(
    {
        "flight_id": string(),
        "flight_number": string(),
        "airline": string(),
        "departure_time": TIME,
        "arrival_time": TIME,
        "arrives_next_day": boolean(),
        "duration_min": integer(minimum=1),
        "stops": integer(minimum=0, maximum=2),
        "price": number(minimum=0),
        "seats_left": integer(minimum=0),
    }
)
PASSENGER = obj(
    {
        "first_name": string("Given name.", minLength=1),
        "last_name": string("Family name.", minLength=1),
        "date_of_birth": date("Date of birth in YYYY-MM-DD format."),
        "seat_preference": enum(("window", "aisle", "middle"), "Preferred seat."),
    },
    ["first_name", "last_name"],
    "One traveller.",
)
PAYMENT = obj(
    {
        "method": enum(("credit_card", "debit_card", "miles"), "How to pay."),
        "card_last4": string("Last four digits of the card.", pattern="^[0-9]{4}$"),
    },
    ["method"],
    "Payment details.",
)
BOOKING = obj(
    {
        "booking_id": string(),
        "flight_id": string(),
        "flight_number": string(),
        "date": date(),
        "origin": string(),
        "destination": string(),
        "status": enum(("confirmed", "cancelled")),
        "cabin": enum(CABINS),
        "passengers": array(string(), min_items=1),
        "checked_bags": integer(minimum=0),
        "total_price": number(minimum=0),
        "currency": enum(("USD",)),
    }
)


def airport(code: str) -> tuple:
    if code not in CITY_BY_CODE:
        raise ToolError(
            "not_found", (f"No airport found with code {code}. Use search_airports to find a city's IATA code.")
        )
    return CITY_BY_CODE[code]


def flight_or_raise(world: World, flight_id: str) -> dict:
    found = world.flight(flight_id)
    if found is None:
        raise not_found("flight", flight_id, "Use search_flights to get valid flight ids.")
    return found


def flight_status(flight: dict) -> str:
    s = flight["status_seed"]
    return (
        "cancelled"
        if s < 0.05
        else "delayed"
        if s < 0.2
        else "scheduled"
        if day_offset(flight["date"]) > 0
        else ("boarding" if s > 0.9 else "on_time")
    )


@tool(
    D,
    "search_airports",
    "Find airports by city, country or code.",
    params(
        {
            "query": string("City, country or code to look for.", minLength=2),
            "limit": integer("Maximum number of airports to return.", 1, 20),
        },
        ["query"],
    ),
    obj(
        {"airports": array(obj({"code": string(), "city": string(), "country": string()})), "count": integer(minimum=0)}
    ),
)
def search_airports(world: World, args: dict) -> dict:
    q = args["query"].strip().lower()
    hits = [
        {"code": c[2], "city": c[0], "country": c[1]}
        for c in CITIES
        if q in c[0].lower() or q in c[1].lower() or q == c[2].lower()
    ]
    hits = hits[: args.get("limit", 10)]
    return {"airports": hits, "count": len(hits)}


@tool(
    D,
    "search_flights",
    "Search flights between two airports on a date.",
    params(
        {
            "origin": IATA,
            "destination": IATA,
            "date": date("Departure date in YYYY-MM-DD format (today up to two weeks ahead)."),
            "cabin": enum(CABINS, "Cabin class; defaults to economy."),
            "passengers": integer("Number of travellers; defaults to 1.", 1, 9),
            "max_price": number("Highest acceptable price per passenger in USD.", 0, 20000),
            "nonstop_only": boolean("Only return flights without stops."),
            "sort_by": enum(("price", "departure_time", "duration"), "Ordering; defaults to price."),
        },
        ["origin", "destination", "date"],
    ),
    obj(
        {
            "origin": string(),
            "destination": string(),
            "date": date(),
            "cabin": enum(CABINS),
            "flights": array(FLIGHT_ROW),
            "count": integer(minimum=0),
        }
    ),
)
def search_flights(world: World, args: dict) -> dict:
    origin, dest, day = args["origin"], args["destination"], args["date"]
    airport(origin), airport(dest)
    if origin == dest:
        raise conflict("Origin and destination must be different airports.")
    if not 0 <= day_offset(day) <= HORIZON_DAYS:
        raise ToolError(
            "not_found",
            (
                f"No flights scheduled on {day}; bookable dates run from "
                f"today ({world.today}) to {HORIZON_DAYS} days ahead."
            ),
        )
    cabin, n = args.get("cabin", "economy"), args.get("passengers", 1)
    rows = []
    for f in world.flights_on_route(origin, dest, day):
        price = f["prices"][cabin]
        if (
            f["seats_left"] < n
            or flight_status(f) == "cancelled"
            or price > args.get("max_price", float("inf"))
            or (args.get("nonstop_only") and f["stops"])
        ):
            continue
        rows.append({k: f[k] for k in FLIGHT_ROW["properties"] if k != "price"} | {"price": price})
    key = {"price": "price", "departure_time": "departure_time", "duration": "duration_min"}
    rows.sort(key=lambda r: (r[key[args.get("sort_by", "price")]], r["flight_id"]))
    return {"origin": origin, "destination": dest, "date": day, "cabin": cabin, "flights": rows, "count": len(rows)}


@tool(
    D,
    "get_flight_status",
    "Get the live status, gate and delay of a flight.",
    params({"flight_id": FLIGHT_ID}, ["flight_id"]),
    obj(
        {
            "flight_id": string(),
            "flight_number": string(),
            "date": date(),
            "status": enum(STATUSES),
            "departure_time": TIME,
            "gate": nullable(string()),
            "delay_min": integer(minimum=0),
        }
    ),
)
def get_flight_status(world: World, args: dict) -> dict:
    f = flight_or_raise(world, args["flight_id"])
    status = flight_status(f)
    gate = (
        None
        if status in ("scheduled", "cancelled")
        else f"{'ABCDE'[int(f['status_seed'] * 50) % 5]}{int(f['status_seed'] * 1000) % 30 + 1}"
    )
    return {
        "flight_id": f["flight_id"],
        "flight_number": f["flight_number"],
        "date": f["date"],
        "status": status,
        "departure_time": f["departure_time"],
        "gate": gate,
        "delay_min": int(f["status_seed"] * 600) % 120 + 15 if status == "delayed" else 0,
    }


@tool(
    D,
    "book_flight",
    "Book seats on a flight for one or more passengers.",
    params(
        {
            "flight_id": FLIGHT_ID,
            "cabin": enum(CABINS, "Cabin class to book."),
            "passengers": array(PASSENGER, "Travellers to book.", 1, 9),
            "payment": PAYMENT,
            "checked_bags": integer("Checked bags in total (USD 35 each).", 0, 18),
        },
        ["flight_id", "cabin", "passengers", "payment"],
    ),
    BOOKING,
)
def book_flight(world: World, args: dict) -> dict:
    f = flight_or_raise(world, args["flight_id"])
    n = len(args["passengers"])
    if flight_status(f) == "cancelled":
        raise conflict(f"Flight {f['flight_id']} is cancelled and cannot be booked.")
    if f["seats_left"] < n:
        raise conflict(f"Flight {f['flight_id']} has only {f['seats_left']} seats left; requested {n}.")
    if args["payment"]["method"] != "miles" and "card_last4" not in args["payment"]:
        raise conflict("Card payments need payment.card_last4.")
    f["seats_left"] -= n
    bags = args.get("checked_bags", 0)
    booking = {
        "booking_id": world.next_id("BKG"),
        "flight_id": f["flight_id"],
        "flight_number": f["flight_number"],
        "date": f["date"],
        "origin": f["origin"],
        "destination": f["destination"],
        "status": "confirmed",
        "cabin": args["cabin"],
        "passengers": [f"{p['first_name']} {p['last_name']}" for p in args["passengers"]],
        "checked_bags": bags,
        "total_price": round(f["prices"][args["cabin"]] * n + 35 * bags, 2),
        "currency": "USD",
    }
    world.bookings[booking["booking_id"]] = booking
    return booking


@tool(
    D, "get_booking", "Look up a flight booking by its id.", params({"booking_id": BOOKING_ID}, ["booking_id"]), BOOKING
)
def get_booking(world: World, args: dict) -> dict:
    if args["booking_id"] not in world.bookings:
        raise not_found("booking", args["booking_id"])
    return world.bookings[args["booking_id"]]


@tool(
    D,
    "cancel_booking",
    "Cancel a flight booking and refund it (80% of the fare).",
    params(
        {
            "booking_id": BOOKING_ID,
            "reason": enum(
                ("change_of_plans", "illness", "schedule_conflict", "other"), "Why the booking is cancelled."
            ),
        },
        ["booking_id"],
    ),
    obj(
        {
            "booking_id": string(),
            "status": enum(("cancelled",)),
            "refund_amount": number(minimum=0),
            "currency": enum(("USD",)),
        }
    ),
)
def cancel_booking(world: World, args: dict) -> dict:
    booking = get_booking(world, args)
    if booking["status"] == "cancelled":
        raise conflict(f"Booking {booking['booking_id']} is already cancelled.")
    booking["status"] = "cancelled"
    flight_or_raise(world, booking["flight_id"])["seats_left"] += len(booking["passengers"])
    return {
        "booking_id": booking["booking_id"],
        "status": "cancelled",
        "refund_amount": round(booking["total_price"] * 0.8, 2),
        "currency": "USD",
    }

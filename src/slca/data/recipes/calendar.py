"""Calendar task recipes: agenda of a day, event details, free slots, find-then-delete, find-slot-then-book."""

from __future__ import annotations

from slca.data.spec import (
    ChainRecipe,
    Ctx,
    Draw,
    Reject,
    ToolRecipe,
    date_phrase,
    join_items,
    shift,
)
from slca.tools.entities import EVENT_TITLES

D = "calendar"


def _day(ctx: Ctx) -> Draw:
    offset = ctx.rng.randint(0, 10)
    when = date_phrase(ctx.rng, ctx.world.today, offset) if offset else "today"
    return Draw({"when": when}, {"date": shift(ctx.world.today, offset)}, when)


def _agenda_facts(response: dict, draw: Draw) -> dict:
    if not response["events"]:
        raise Reject("empty day")
    facts = {f"t{i}": e["title"] for i, e in enumerate(response["events"])}
    facts.update({f"s{i}": e["start_time"] for i, e in enumerate(response["events"])})
    facts["count"] = str(response["count"])
    facts["_list"] = join_items([f"{e['title']} at {e['start_time']}" for e in response["events"]])
    return facts


AGENDA = ToolRecipe(
    tool="list_events",
    domain=D,
    sample=_day,
    facts=_agenda_facts,
    gist="read your calendar",
    asks=(
        "What's on my calendar {when}?",
        "Do I have any meetings {when}?",
        "Can you list my events {when}?",
        "What does my schedule look like {when}?",
        "Please tell me what I have planned {when}.",
        "Agenda for {when}, please.",
    ),
    parallel=(
        "What's on my calendar {items}?",
        "List my events {items}.",
        "What do I have scheduled {items}?",
        "Show me my agenda {items}.",
        "Check my calendar {items}, please.",
        "Any meetings {items}?",
    ),
    answers=(
        "You have {count} event(s) {when}: {_list}.",
        "{when}, your calendar shows {count} event(s): {_list}.",
        "There are {count} item(s) on your calendar {when}: {_list}.",
    ),
)


def _event(ctx: Ctx) -> Draw:
    eid = ctx.pick("event")
    return Draw({"eid": eid}, {"event_id": eid}, eid)


EVENT = ToolRecipe(
    tool="get_event",
    domain=D,
    sample=_event,
    gist="look up a calendar event",
    facts=lambda r, d: {
        "title": r["title"],
        "date": r["date"],
        "start": r["start_time"],
        "end": r["end_time"],
        "location": r["location"],
    },
    asks=(
        "What are the details of event {eid}?",
        "When is event {eid} and where?",
        "Can you pull up calendar entry {eid}?",
        "Tell me about {eid} on my calendar.",
        "Please look up event {eid} for me.",
        "Details for {eid}, please.",
    ),
    parallel=(
        "Give me the details of {items}.",
        "Look up events {items}.",
        "When and where are {items}?",
        "Pull up calendar entries {items}.",
        "What are {items} about?",
        "Check {items} for me.",
    ),
    answers=(
        "{eid} is '{title}' on {date} from {start} to {end} at {location}.",
        "Event {eid}: {title}, {date}, {start}-{end}, location {location}.",
        "'{title}' ({eid}) runs {start} to {end} on {date} in {location}.",
    ),
)


def _free(ctx: Ctx) -> Draw:
    offset = ctx.rng.randint(1, 10)
    duration = 60 if ctx.plain else ctx.rng.choice((30, 45, 60, 90))
    when = date_phrase(ctx.rng, ctx.world.today, offset)
    return Draw(
        {"when": when, "minutes": str(duration)},
        {"date": shift(ctx.world.today, offset), "duration_min": duration},
        when,
    )


def _free_facts(response: dict, draw: Draw) -> dict:
    if not response["slots"]:
        raise Reject("no free slot")
    facts = {f"f{i}": f"{s['start_time']}-{s['end_time']}" for i, s in enumerate(response["slots"])}
    facts["_list"] = join_items(list(facts.values()))
    return facts


FREE = ToolRecipe(
    tool="find_free_slots",
    domain=D,
    sample=_free,
    facts=_free_facts,
    gist="find free time on your calendar",
    asks=(
        "When am I free for {minutes} minutes {when}?",
        "Find me a {minutes}-minute gap {when}.",
        "Do I have {minutes} free minutes anywhere {when}?",
        "Which slots are open {when} for a {minutes} minute meeting?",
        "Please find free time {when} that fits {minutes} minutes.",
        "Open {minutes}-minute slots {when}?",
    ),
    parallel=(
        "When am I free for an hour {items}?",
        "Find one-hour gaps {items}.",
        "Any free hour {items}?",
        "Check my free hours {items}.",
        "I need an hour-long slot {items}. What's open?",
        "Open one-hour slots {items}, please.",
    ),
    answers=(
        "You're free {when} during {_list}.",
        "Free windows {when}: {_list}.",
        "{when} you have these open slots: {_list}.",
    ),
)


def _cancel(ctx: Ctx) -> dict:
    eid = ctx.pick("event")
    event = ctx.world.events[eid]
    same = [e for e in ctx.world.events.values() if e["date"] == event["date"] and e["title"] == event["title"]]
    if len(same) != 1 or event["date"] < ctx.world.today:
        raise Reject("ambiguous or past event")
    return {"title": event["title"], "day": event["date"], "_eid": eid}


def _cancel_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [{"name": "list_events", "arguments": {"date": slots["day"]}}]
    if len(done) == 1:
        match = [e["event_id"] for e in done[0][0]["events"] if e["title"] == slots["title"]]
        return [{"name": "delete_event", "arguments": {"event_id": match[0]}}]
    return None


CANCEL = ChainRecipe(
    name="list_then_delete",
    domain=D,
    tools=("list_events", "delete_event"),
    writes=True,
    sample=_cancel,
    steps=_cancel_steps,
    facts=lambda s, d: {"eid": d[1][0]["event_id"]},
    asks=(
        "Cancel my '{title}' on {day}.",
        "Please remove {title} from my calendar on {day}.",
        "I can't make the {title} on {day}; delete it.",
        "Delete the {title} event on {day}, please.",
        "Take '{title}' off my calendar for {day}.",
        "Could you find {title} on {day} and cancel it?",
    ),
    answers=(
        "I deleted '{title}' ({eid}) from {day}.",
        "Done, {title} on {day} (event {eid}) is cancelled.",
        "Event {eid}, '{title}' on {day}, has been removed.",
    ),
)


def _book(ctx: Ctx) -> dict:
    offset = ctx.rng.randint(1, 10)
    return {
        "title": ctx.rng.choice(EVENT_TITLES),
        "when": date_phrase(ctx.rng, ctx.world.today, offset),
        "minutes": str(ctx.rng.choice((30, 45, 60))),
        "_day": shift(ctx.world.today, offset),
    }


def _book_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [
            {"name": "find_free_slots", "arguments": {"date": slots["_day"], "duration_min": int(slots["minutes"])}}
        ]
    if len(done) == 1:
        if not done[0][0]["slots"]:
            raise Reject("no free slot")
        return [
            {
                "name": "create_event",
                "arguments": {
                    "title": slots["title"],
                    "date": slots["_day"],
                    "start_time": done[0][0]["slots"][0]["start_time"],
                    "duration_min": int(slots["minutes"]),
                },
            }
        ]
    return None


SLOT_THEN_BOOK = ChainRecipe(
    name="free_slot_then_create",
    domain=D,
    tools=("find_free_slots", "create_event"),
    writes=True,
    sample=_book,
    steps=_book_steps,
    facts=lambda s, d: {"eid": d[1][0]["event_id"], "start": d[1][0]["start_time"], "end": d[1][0]["end_time"]},
    asks=(
        "Schedule '{title}' for {minutes} minutes {when} in my first free slot.",
        "Find the earliest free {minutes} minutes {when} and put '{title}' there.",
        "Book {title} ({minutes} min) {when}, whenever I'm first available.",
        "Please add a {minutes}-minute '{title}' {when} at the first open time.",
        "I need {minutes} minutes for {title} {when}; grab the earliest free slot.",
        "Can you slot '{title}' into my calendar {when}? It takes {minutes} minutes; earliest gap please.",
    ),
    answers=(
        "'{title}' is booked {when} from {start} to {end} (event {eid}).",
        "I scheduled {title} {when}, {start}-{end}; the event id is {eid}.",
        "Done: {eid}, '{title}', {start} to {end} {when}.",
    ),
)

RECIPES = (AGENDA, EVENT, FREE)
CHAINS = (CANCEL, SLOT_THEN_BOOK)

"""Calendar domain: list, read, create, reschedule and delete events; find free time slots."""

from __future__ import annotations

from slca.tools.registry import (
    array,
    boolean,
    conflict,
    date,
    enum,
    integer,
    not_found,
    obj,
    params,
    string,
    tool,
)
from slca.tools.world import World

D = "calendar"
CALENDARS = ("work", "personal", "family")
HHMM = string("Time as HH:MM (24-hour).", pattern="^([01][0-9]|2[0-3]):[0-5][0-9]$")
EVENT_ID = string("Event id from list_events or create_event, e.g. 'EVT-101'.", minLength=3)
DURATION = integer("Length in minutes.", 15, 480)
REMINDER = obj(
    {
        "minutes_before": integer("Minutes before the start.", 0, 1440),
        "method": enum(("popup", "email"), "How to remind."),
    },
    ["minutes_before"],
    "Reminder settings.",
)
EVENT = obj(
    {
        "event_id": string(),
        "title": string(),
        "date": date(),
        "start_time": HHMM,
        "end_time": HHMM,
        "duration_min": integer(minimum=1),
        "calendar": enum(CALENDARS),
        "location": string(),
        "attendees": array(string(format="email")),
        "reminder": REMINDER,
    },
    ["event_id", "title", "date", "start_time", "end_time", "duration_min", "calendar", "location", "attendees"],
)


def minutes(hhmm: str) -> int:
    return int(hhmm[:2]) * 60 + int(hhmm[3:])


def hhmm(total: int) -> str:
    return f"{total // 60:02d}:{total % 60:02d}"


def event_or_raise(world: World, event_id: str) -> dict:
    if event_id not in world.events:
        raise not_found("event", event_id, "Use list_events to see the ids on a date.")
    return world.events[event_id]


def day_events(world: World, day: str, skip: str = "") -> list[dict]:
    return sorted(
        (e for e in world.events.values() if e["date"] == day and e["event_id"] != skip),
        key=lambda e: (e["start_time"], e["event_id"]),
    )


def check_slot(world: World, day: str, start: int, duration: int, skip: str = "") -> None:
    """Raise a conflict if [start, start+duration) runs past midnight or overlaps an event."""
    if start + duration > 24 * 60:
        raise conflict(
            f"An event starting at {hhmm(start)} lasting {duration} min would end after "
            "midnight; shorten it or start earlier."
        )
    for e in day_events(world, day, skip):
        if start < minutes(e["end_time"]) and minutes(e["start_time"]) < start + duration:
            raise conflict(
                f"Overlaps {e['title']} ({e['event_id']}) from {e['start_time']} to "
                f"{e['end_time']} on {day}; pick another time or use find_free_slots."
            )


@tool(
    D,
    "list_events",
    "List calendar events on a date.",
    params({"date": date("Day to list, YYYY-MM-DD."), "calendar": enum(CALENDARS, "Only this calendar.")}, ["date"]),
    obj({"date": date(), "events": array(EVENT), "count": integer(minimum=0)}),
)
def list_events(world: World, args: dict) -> dict:
    rows = [e for e in day_events(world, args["date"]) if args.get("calendar", e["calendar"]) == e["calendar"]]
    return {"date": args["date"], "events": rows, "count": len(rows)}


@tool(D, "get_event", "Get the details of a calendar event.", params({"event_id": EVENT_ID}, ["event_id"]), EVENT)
def get_event(world: World, args: dict) -> dict:
    return event_or_raise(world, args["event_id"])


@tool(
    D,
    "create_event",
    "Create a calendar event; fails if it overlaps an existing event.",
    params(
        {
            "title": string("Event title.", minLength=1, maxLength=120),
            "date": date("Event day, YYYY-MM-DD."),
            "start_time": HHMM,
            "duration_min": DURATION,
            "calendar": enum(CALENDARS, "Calendar to add to; defaults to work."),
            "location": string("Where it takes place.", maxLength=120),
            "attendees": array(
                string("Attendee email.", format="email"), "People to invite.", max_items=20, uniqueItems=True
            ),
            "reminder": REMINDER,
            "allow_overlap": boolean("Create it even if it overlaps another event."),
        },
        ["title", "date", "start_time", "duration_min"],
    ),
    EVENT,
)
def create_event(world: World, args: dict) -> dict:
    start, duration = minutes(args["start_time"]), int(args["duration_min"])
    if not args.get("allow_overlap"):
        check_slot(world, args["date"], start, duration)
    elif start + duration > 24 * 60:
        raise conflict("The event would end after midnight; shorten it or start earlier.")
    event = {
        "event_id": world.next_id("EVT"),
        "title": args["title"],
        "date": args["date"],
        "start_time": hhmm(start),
        "end_time": hhmm(start + duration),
        "duration_min": duration,
        "calendar": args.get("calendar", "work"),
        "location": args.get("location", ""),
        "attendees": list(args.get("attendees", [])),
    }
    if "reminder" in args:
        event["reminder"] = {"method": "popup", **args["reminder"]}
    world.events[event["event_id"]] = event
    return event


@tool(
    D,
    "reschedule_event",
    "Move an event to a new date and start time, keeping its length.",
    params(
        {"event_id": EVENT_ID, "new_date": date("New day, YYYY-MM-DD."), "new_start_time": HHMM},
        ["event_id", "new_date", "new_start_time"],
    ),
    EVENT,
)
def reschedule_event(world: World, args: dict) -> dict:
    event = event_or_raise(world, args["event_id"])
    start = minutes(args["new_start_time"])
    check_slot(world, args["new_date"], start, event["duration_min"], skip=event["event_id"])
    event.update(date=args["new_date"], start_time=hhmm(start), end_time=hhmm(start + event["duration_min"]))
    return event


@tool(
    D,
    "delete_event",
    "Delete a calendar event.",
    params({"event_id": EVENT_ID, "notify_attendees": boolean("Email the attendees.")}, ["event_id"]),
    obj({"event_id": string(), "deleted": boolean(), "notified": array(string(format="email"))}),
)
def delete_event(world: World, args: dict) -> dict:
    event = event_or_raise(world, args["event_id"])
    del world.events[event["event_id"]]
    notified = list(event["attendees"]) if args.get("notify_attendees") else []
    return {"event_id": event["event_id"], "deleted": True, "notified": notified}


@tool(
    D,
    "find_free_slots",
    "Find free time slots of a given length on a date.",
    params(
        {
            "date": date("Day to search, YYYY-MM-DD."),
            "duration_min": DURATION,
            "working_hours": obj({"start": HHMM, "end": HHMM}, None, "Search window; defaults to 09:00-17:00."),
        },
        ["date", "duration_min"],
    ),
    obj(
        {
            "date": date(),
            "duration_min": integer(minimum=1),
            "slots": array(obj({"start_time": HHMM, "end_time": HHMM})),
            "count": integer(minimum=0),
        }
    ),
)
def find_free_slots(world: World, args: dict) -> dict:
    hours = args.get("working_hours", {"start": "09:00", "end": "17:00"})
    lo, hi, need = minutes(hours["start"]), minutes(hours["end"]), int(args["duration_min"])
    if lo >= hi:
        raise conflict(f"working_hours.start {hours['start']} must be before end {hours['end']}.")
    slots, cursor = [], lo
    for e in day_events(world, args["date"]) + [{"start_time": hhmm(hi), "end_time": hhmm(hi)}]:
        gap_end = min(minutes(e["start_time"]), hi)
        if gap_end - cursor >= need:
            slots.append({"start_time": hhmm(cursor), "end_time": hhmm(gap_end)})
        cursor = max(cursor, minutes(e["end_time"]))
    return {"date": args["date"], "duration_min": need, "slots": slots, "count": len(slots)}

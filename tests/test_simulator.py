"""Simulator units: error classes and messages, knobs, consistency, statefulness, conformance."""

from __future__ import annotations

import json

import pytest

from slca.config import Params, SimulatorParams
from slca.simulator import (
    EpisodeState,
    Knobs,
    SimulatorSession,
    load_calibrated_knobs,
    simulate,
)
from slca.simulator.specs import toolset
from slca.tools import World, as_openai_tool, catalog, tool_map
from slca.tools.examples import example_calls

TOOLS = tool_map()
FORECAST = TOOLS["get_forecast"]


def call(name: str, **arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def test_valid_call_from_raw_text_and_dict_agree():
    raw = simulate(FORECAST, call("get_forecast", city="Lima", days=2))
    parsed = simulate(FORECAST, {"name": "get_forecast", "arguments": {"city": "Lima", "days": 2}})
    assert raw.ok and raw.error is None and raw.error_class is None
    assert raw.content == parsed.content
    assert raw.content["city"] == "Lima"  # argument echoed into the same-named field
    assert FORECAST["response"]["properties"]["units"]["enum"].count(raw.content["units"]) == 1


def test_openai_tools_entry_is_accepted_and_gets_catalog_response_schema():
    result = simulate([as_openai_tool(FORECAST)], call("get_forecast", city="Quito", days=1))
    assert result.ok and set(result.content) == set(FORECAST["response"]["properties"])


def test_unknown_tool_message():
    result = simulate([FORECAST], call("get_weather", city="Lima"))
    assert (result.ok, result.error_class) == (False, "unknown_tool")
    assert result.error == "Tool get_weather not found in the current available tools set."
    # a catalog tool that is not offered in this toolset is unknown too
    offered = simulate([FORECAST], call("get_current_weather", city="Lima"))
    assert offered.error == "Tool get_current_weather not found in the current available tools set."


def test_missing_required_message_lists_every_missing_parameter():
    result = simulate(FORECAST, call("get_forecast"))
    assert result.error_class == "missing_required"
    assert result.error == "Tool get_forecast missing required parameters: city, days"


@pytest.mark.parametrize(
    ("arguments", "error_class", "fragment"),
    [
        ({"city": "Lima", "days": 2, "color": "red"}, "unexpected_argument", "got unexpected parameters: color"),
        ({"city": "Lima", "days": "2"}, "type", "parameter days must be of type integer, got string \"2\""),
        (
            {"city": "Lima", "days": 2, "units": "kelvin"},
            "enum",
            "must be one of [\"celsius\", \"fahrenheit\"], got \"kelvin\"",
        ),
        ({"city": "Lima", "days": 9}, "range", "parameter days must be <= 7, got 9"),
        ({"city": "L", "days": 2}, "range", "must be at least 2 characters long"),
    ],
)
def test_schema_error_classes_and_messages(arguments, error_class, fragment):
    result = simulate(FORECAST, {"name": "get_forecast", "arguments": arguments})
    assert (result.ok, result.error_class) == (False, error_class)
    assert fragment in result.error and result.error.startswith("Tool get_forecast ")


def test_format_and_nested_errors_name_the_path():
    event = simulate(TOOLS["list_events"], call("list_events", date="June 5"))
    assert event.error_class == "format" and "YYYY-MM-DD" in event.error
    people = [{"first_name": "Ana"}]
    booking = simulate(
        TOOLS["book_flight"],
        call(
            "book_flight",
            flight_id="FL-LIM-BOG-20250605-1",
            cabin="economy",
            passengers=people,
            payment={"method": "miles"},
        ),
    )
    assert booking.error_class == "missing_required" and "passengers[0]" in booking.error
    assert "last_name" in booking.error
    pay = simulate(
        TOOLS["book_flight"],
        call(
            "book_flight",
            flight_id="FL-LIM-BOG-20250605-1",
            cabin="economy",
            passengers=[{"first_name": "A", "last_name": "B"}],
            payment={"method": "cash"},
        ),
    )
    assert pay.error_class == "enum" and "payment.method" in pay.error


def test_simulator_errors_match_real_executor_errors():
    world = World(7)
    cases = [
        ("get_forecast", {"city": "Lima"}),
        ("get_forecast", {"city": "Lima", "days": 0}),
        ("list_events", {"date": "2025-13-01"}),
        ("get_forecast", {"city": "Lima", "days": 1, "x": 1}),
        ("create_event", {"title": "T", "date": "2025-06-03", "start_time": "25:00", "duration_min": 30}),
    ]
    for name, arguments in cases:
        sim = SimulatorSession(None, "schema", knobs={}).call({"name": name, "arguments": arguments})
        real = SimulatorSession(None, "real", world=world).call({"name": name, "arguments": arguments})
        assert (sim.ok, sim.error_class, sim.error) == (real.ok, real.error_class, real.error)


@pytest.mark.parametrize(
    ("raw", "error_class", "fragment"),
    [
        ("", "malformed", "empty"),
        ("get_forecast(city='Lima')", "malformed", "not valid JSON"),
        ('{"name": "get_forecast", "arguments": {"city": "Lima",}}', "malformed", "not valid JSON"),
        ("[1, 2]", "malformed", "must be a JSON object, got array"),
        ('{"arguments": {}}', "malformed", "non-empty string 'name'"),
        ('{"name": 5}', "malformed", "non-empty string 'name'"),
        ('{"name": "get_forecast", "arguments": [1]}', "malformed", "arguments must be a JSON object"),
        ('{"name": "get_forecast", "arguments": {"city": "Lima", "days": NaN}}', "malformed", "not valid JSON"),
        ("[" * 500 + "]" * 500, "too_large", "nested deeper than 32"),
        ('{"name": "get_forecast", "arguments": {"city": "' + "x" * 30000 + '"}}', "too_large", "too large"),
    ],
)
def test_malformed_calls_get_structured_errors(raw, error_class, fragment):
    result = simulate(FORECAST, raw)
    assert (result.ok, result.error_class) == (False, error_class)
    assert fragment in result.error


def test_wrappers_fences_and_string_arguments_are_tolerated():
    wrapped = simulate(
        FORECAST, '<tool_call>\n{"name": "get_forecast", "arguments": {"city": "Lima", "days": 1}}\n</tool_call>'
    )
    fenced = simulate(FORECAST, '```json\n{"name": "get_forecast", "arguments": {"city": "Lima", "days": 1}}\n```')
    as_string = simulate(FORECAST, {"name": "get_forecast", "arguments": '{"city": "Lima", "days": 1}'})
    assert wrapped.ok and fenced.ok and as_string.ok
    assert wrapped.content == fenced.content == as_string.content


def test_deep_dict_and_unserialisable_dict_do_not_raise():
    deep: dict = {}
    node = deep
    for _ in range(100):
        node["a"] = {}
        node = node["a"]
    assert simulate(FORECAST, {"name": "get_forecast", "arguments": deep}).error_class == "too_large"
    assert simulate(FORECAST, {"name": "get_forecast", "arguments": {"city": {1, 2}}}).error_class == "malformed"
    assert simulate(FORECAST, None).error_class == "malformed"


def test_same_call_same_response_within_episode_and_seed_matters():
    state = EpisodeState(seed=5)
    first = simulate(FORECAST, call("get_forecast", city="Lima", days=3), state=state)
    again = simulate(FORECAST, call("get_forecast", days=3, city="Lima"), state=state)  # key order irrelevant
    other = simulate(FORECAST, call("get_forecast", city="Lima", days=3), state=EpisodeState(seed=6))
    assert first.content == again.content
    assert first.content != other.content


def test_create_then_list_and_get_shows_the_written_event():
    session = SimulatorSession(
        [TOOLS["create_event"], TOOLS["list_events"], TOOLS["get_event"], TOOLS["delete_event"]], knobs={}
    )
    created = session.call(
        call(
            "create_event", title="Dentist", date="2025-06-09", start_time="10:30", duration_min=45, calendar="personal"
        )
    )
    assert created.ok and created.content["event_id"] == "EVT-9001"
    assert (created.content["title"], created.content["start_time"]) == ("Dentist", "10:30")
    listed = session.call(call("list_events", date="2025-06-09"))
    assert created.content in listed.content["events"]
    assert listed.content["count"] == len(listed.content["events"])
    other_day = session.call(call("list_events", date="2025-06-10"))
    assert all(e["event_id"] != "EVT-9001" for e in other_day.content["events"])
    fetched = session.call(call("get_event", event_id="EVT-9001"))
    assert fetched.content == created.content
    session.call(call("delete_event", event_id="EVT-9001"))
    after = session.call(call("list_events", date="2025-06-09"))
    assert all(e["event_id"] != "EVT-9001" for e in after.content["events"])


def test_book_then_get_then_cancel_is_consistent():
    session = SimulatorSession(None, knobs={})
    people = [{"first_name": "Ana", "last_name": "Quispe"}]
    booked = session.call(
        call(
            "book_flight",
            flight_id="FL-LIM-BOG-20250605-1",
            cabin="business",
            passengers=people,
            payment={"method": "miles"},
        )
    )
    booking_id = booked.content["booking_id"]
    assert booked.content["flight_id"] == "FL-LIM-BOG-20250605-1" and booked.content["cabin"] == "business"
    assert session.call(call("get_booking", booking_id=booking_id)).content == booked.content
    cancelled = session.call(call("cancel_booking", booking_id=booking_id))
    assert cancelled.content["status"] == "cancelled"
    after = session.call(call("get_booking", booking_id=booking_id)).content
    assert after["status"] == "cancelled" and after["total_price"] == booked.content["total_price"]
    second = session.call(
        call(
            "book_flight",
            flight_id="FL-LIM-BOG-20250605-1",
            cabin="business",
            passengers=people,
            payment={"method": "miles"},
        )
    )
    assert second.content["booking_id"] == "BKG-9002"  # a repeated write makes a new record


def test_track_writes_off_forgets_between_calls():
    session = SimulatorSession(None, knobs={"track_writes": False})
    booked = session.call(
        call(
            "book_flight",
            flight_id="FL-LIM-BOG-20250605-1",
            cabin="business",
            passengers=[{"first_name": "A", "last_name": "B"}],
            payment={"method": "miles"},
        )
    )
    fetched = session.call(call("get_booking", booking_id=booked.content["booking_id"]))
    assert fetched.content["booking_id"] == booked.content["booking_id"]
    assert fetched.content != booked.content


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_schema_responses_conform_for_every_tool(name):
    world = World(7)
    calls = dict(example_calls(world))
    spec = toolset(TOOLS[name])[name]
    for seed in range(5):
        result = SimulatorSession(None, seed=seed, knobs={}).call({"name": name, "arguments": calls[name]})
        assert result.ok, result.error
        assert spec.response_errors(result.content) == []
        assert set(result.content) == set(TOOLS[name]["response"]["properties"])


def test_example_catalog_covers_every_tool():
    assert {n for n, _ in example_calls(World(7))} == {t["name"] for t in catalog()}


@pytest.mark.parametrize(
    ("knobs", "arguments", "ok"),
    [
        ({"coerce_numeric_strings": True}, {"city": "Lima", "days": "3"}, True),
        ({"case_insensitive_enums": True}, {"city": "Lima", "days": 3, "units": "Celsius"}, True),
        ({"strict_extra_arguments": False}, {"city": "Lima", "days": 3, "color": "red"}, True),
        ({"check_ranges": False}, {"city": "Lima", "days": 30}, True),
        ({"check_ranges": False}, {"city": "Lima", "days": "30"}, False),
        ({}, {"city": "Lima", "days": "3"}, False),
    ],
)
def test_lenient_knobs_change_acceptance(knobs, arguments, ok):
    result = simulate(FORECAST, {"name": "get_forecast", "arguments": arguments}, knobs=knobs)
    assert result.ok is ok
    if ok and "units" in arguments:
        assert result.content["units"] == "celsius"  # folded to the schema's spelling before echoing


def test_check_formats_knob():
    strict = simulate(TOOLS["list_events"], call("list_events", date="2025/06/05"))
    lenient = simulate(TOOLS["list_events"], call("list_events", date="2025/06/05"), knobs={"check_formats": False})
    assert strict.error_class == "format" and lenient.ok


def test_knobs_from_params_and_unknown_knob():
    knobs = Knobs.from_mapping(SimulatorParams(coerce_numeric_strings=True, array_max_items=5))
    assert knobs.coerce_numeric_strings and knobs.array_max_items == 5
    with pytest.raises(ValueError, match="unknown simulator knobs"):
        Knobs.from_mapping({"nope": 1})


def test_load_calibrated_knobs_prefers_report_and_falls_back(tmp_path):
    params = Params()
    missing = load_calibrated_knobs(tmp_path / "none.json", params)
    assert missing == Knobs.from_mapping(params.simulator).as_dict()
    report = tmp_path / "calibration.json"
    report.write_text(json.dumps({"knobs": {"coerce_numeric_strings": True, "new_id_start": 101}}))
    loaded = load_calibrated_knobs(report, params)
    assert loaded["coerce_numeric_strings"] is True and loaded["new_id_start"] == 101
    session = SimulatorSession([FORECAST], params=params.simulator.model_copy(update={"calibrated_knobs": str(report)}))
    assert session.knobs.coerce_numeric_strings and session.call(call("get_forecast", city="Lima", days="2")).ok
    report.write_text("{not json")
    with pytest.raises(ValueError, match="calibration report is not readable"):
        load_calibrated_knobs(report, params)


def test_real_backend_runs_executors_on_a_copy_of_the_world():
    world = World(7)
    before = len(world.bookings)
    session = SimulatorSession(None, "real", world=world)
    name, arguments = next((n, a) for n, a in example_calls(World(7)) if n == "book_flight")
    result = session.call({"name": name, "arguments": arguments})
    assert result.ok and result.content["booking_id"] == "BKG-9001" and result.source == "real"
    assert len(world.bookings) == before and len(session.state.world.bookings) == before + 1
    missing = session.call(call("get_booking", booking_id="BKG-1"))
    assert missing.error_class == "not_found"


def test_tool_result_message_text():
    ok = simulate(FORECAST, call("get_forecast", city="Lima", days=1))
    bad = simulate(FORECAST, call("get_forecast"))
    assert json.loads(ok.to_message()) == ok.content
    assert json.loads(bad.to_message()) == {"error": bad.error}


def test_a_failing_backend_becomes_a_backend_error():
    class Broken:
        name = "broken"

        def respond(self, spec, arguments, state, knobs):
            raise KeyError("boom")

    result = SimulatorSession([FORECAST], Broken(), knobs={}).call(call("get_forecast", city="Lima", days=1))
    assert (result.ok, result.error_class) == (False, "backend")
    assert result.error == "Tool get_forecast could not be simulated (KeyError)."


def test_backend_registry_and_unknown_backend():
    from slca.simulator import BACKENDS, make_backend

    assert {"schema", "real"} <= set(BACKENDS)
    assert make_backend("llm").name == "llm" and "llm" in BACKENDS
    with pytest.raises(ValueError, match="unknown simulator backend 'magic'"):
        make_backend("magic")


def test_tool_without_a_response_schema_gets_an_acknowledgement():
    custom = {
        "type": "function",
        "function": {
            "name": "ping_device",
            "description": "Ping a device.",
            "parameters": {"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]},
        },
    }
    result = simulate([custom], call("ping_device", host="printer-2"))
    assert result.ok and result.content == {
        "status": "success",
        "request": {"name": "ping_device", "arguments": {"host": "printer-2"}},
    }
    assert simulate([custom], call("ping_device")).error == "Tool ping_device missing required parameters: host"


def test_documented_defaults_fill_omitted_parameters():
    weather = simulate(TOOLS["get_current_weather"], call("get_current_weather", city="Lima"))
    assert weather.content["units"] == "celsius"  # "Temperature units; defaults to celsius."
    flights = simulate(
        TOOLS["search_flights"], call("search_flights", origin="LIM", destination="BOG", date="2025-06-05")
    )
    assert (flights.content["origin"], flights.content["cabin"]) == ("LIM", "economy")

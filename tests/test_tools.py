"""Tool catalog and executors: schemas, validation errors, business rules, world determinism."""

from __future__ import annotations

import functools
import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from slca.tools import (
    DOMAINS,
    ENTITY_KINDS_BY_DOMAIN,
    ERROR_CLASSES,
    ExecResult,
    World,
    as_openai_tool,
    catalog,
    entity_pools,
    example_calls,
    execute,
    tool_map,
    tools_in_domain,
    validate_arguments,
)
from slca.tools.world import shift_day

CATALOG = catalog()
TOOLS = tool_map()
NAMES = sorted(TOOLS)


def run_examples(seed: int) -> dict[str, ExecResult]:
    world = World(seed)
    return {name: execute(world, name, args) for name, args in example_calls(world)}


@pytest.fixture(scope="module")
def example_results() -> dict[str, ExecResult]:
    return run_examples(11)


@functools.cache
def examples_by_name(seed: int = 11) -> dict[str, dict]:
    return dict(example_calls(World(seed)))


def response_errors(name: str, content: dict) -> list[str]:
    v = Draft202012Validator(TOOLS[name]["response"], format_checker=Draft202012Validator.FORMAT_CHECKER)
    return [e.message for e in v.iter_errors(content)]


def expect_error(result: ExecResult, error_class: str) -> str:
    assert not result.ok and result.content is None, result
    assert result.error_class == error_class, result
    assert isinstance(result.error, str) and len(result.error) > 10 and "\n" not in result.error
    return result.error


# ---------------- catalog invariants ----------------


def walk(schema: dict):
    yield schema
    for sub in schema.get("properties", {}).values():
        yield from walk(sub)
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"])


def test_catalog_size_domains_and_names():
    assert len(CATALOG) >= 30
    assert set(DOMAINS) == {t["domain"] for t in CATALOG} and len(DOMAINS) >= 6
    assert len(NAMES) == len(CATALOG)
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in NAMES)
    for d in DOMAINS:
        names = [t["name"] for t in tools_in_domain(d)]
        assert len(names) >= 5, d
        assert all(TOOLS[n]["domain"] == d for n in names)
    with pytest.raises(ValueError, match="unknown domain"):
        tools_in_domain("astrology")


@pytest.mark.parametrize("name", NAMES)
def test_schema_is_valid_and_closed(name):
    tool = TOOLS[name]
    assert set(tool) == {"name", "description", "parameters", "response", "domain"}
    assert tool["description"].strip()
    Draft202012Validator.check_schema(tool["parameters"])
    Draft202012Validator.check_schema(tool["response"])
    params = tool["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert set(params["required"]) <= set(params["properties"])
    for sub in list(walk(params)) + list(walk(tool["response"])):
        if sub.get("type") == "object":
            assert sub["additionalProperties"] is False
    assert all(p.get("description") for p in params["properties"].values()), "every parameter is described"


def test_catalog_uses_every_schema_feature():
    nodes = [n for t in CATALOG for n in walk(t["parameters"])]
    kinds = {n.get("type") for n in nodes}
    assert {"object", "array", "string", "integer", "number", "boolean"} <= kinds
    assert any("enum" in n for n in nodes)
    assert any(n.get("type") == "number" and "minimum" in n and "maximum" in n for n in nodes)
    assert any(n.get("type") == "object" and n is not t["parameters"] for t in CATALOG for n in walk(t["parameters"]))
    assert any(n.get("format") == "date" for n in nodes) and any("pattern" in n for n in nodes)
    assert any(len(t["parameters"]["required"]) < len(t["parameters"]["properties"]) for t in CATALOG)
    responses = [n for t in CATALOG for n in walk(t["response"])]
    assert any("enum" in n for n in responses) and any(n.get("type") == "array" for n in responses)


def test_read_and_write_tools_exist():
    writes = {
        "create_weather_alert",
        "book_flight",
        "cancel_booking",
        "transfer_funds",
        "pay_bill",
        "create_event",
        "reschedule_event",
        "place_order",
        "cancel_order",
        "return_item",
    }
    reads = {
        "get_forecast",
        "search_flights",
        "list_accounts",
        "get_balance",
        "list_events",
        "get_order",
        "convert_units",
        "calculate",
    }
    assert writes | reads <= set(NAMES)


def test_as_openai_tool_and_catalog_copies():
    tool = as_openai_tool(TOOLS["search_flights"])
    assert tool["type"] == "function"
    assert set(tool["function"]) == {"name", "description", "parameters"}
    assert tool["function"]["parameters"] == TOOLS["search_flights"]["parameters"]
    catalog()[0]["name"] = "mutated"
    assert catalog()[0]["name"] != "mutated"


def test_entity_pools_are_plentiful():
    pools = entity_pools(World(0))
    assert len(pools["city"]) >= 40 and len(set(pools["city"])) == len(pools["city"])
    assert len(pools["airport"]) == len(pools["city"])
    assert len(pools["account_holder"]) >= 20 and len(pools["product_name"]) >= 40
    assert all(isinstance(v, list) and v and all(isinstance(x, str) for x in v) for v in pools.values())
    assert pools["account_holder"] != entity_pools(World(1))["account_holder"]
    assert set(ENTITY_KINDS_BY_DOMAIN) == set(DOMAINS)
    assert {k for kinds in ENTITY_KINDS_BY_DOMAIN.values() for k in kinds} <= set(pools)


# ---------------- valid calls ----------------


def test_examples_cover_every_tool():
    assert sorted(examples_by_name()) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_valid_call_matches_response_schema(name, example_results):
    result = example_results[name]
    assert result.ok and result.error is None and result.error_class is None, result
    assert response_errors(name, result.content) == []
    json.dumps(result.content)  # payloads are plain JSON


@pytest.mark.parametrize("seed", [0, 1, 2, 5, 8, 13, 21, 34])
def test_examples_succeed_for_many_seeds(seed):
    for name, result in run_examples(seed).items():
        assert result.ok, (seed, name, result.error)
        assert response_errors(name, result.content) == []


def test_known_values():
    world = World(0)
    assert execute(world, "calculate", {"expression": "(12.5 + 7) * 3 / 2"}).content["result"] == 29.25
    assert execute(world, "calculate", {"expression": "2 ^ 10"}).content["result"] == 1024
    miles = execute(world, "convert_units", {"value": 5, "from_unit": "mile", "to_unit": "kilometer"})
    assert miles.content["result"] == pytest.approx(8.0467)
    temp = execute(world, "convert_units", {"value": 100, "from_unit": "celsius", "to_unit": "fahrenheit"})
    assert temp.content["result"] == 212
    loan = execute(world, "loan_payment", {"principal": 1200, "annual_rate_percent": 0, "years": 1})
    assert loan.content["monthly_payment"] == 100 and loan.content["total_interest"] == 0
    stats = execute(world, "compute_statistics", {"values": [1, 2, 3, 4], "measures": ["mean", "median", "range"]})
    assert stats.content["results"] == {"mean": 2.5, "median": 2.5, "range": 3.0}
    bill = execute(world, "split_bill", {"total": 100, "people": 4, "tip_percent": 20})
    assert bill.content == {"total_with_tip": 120.0, "tip_amount": 20.0, "per_person": 30.0, "people": 4}
    usd = execute(world, "convert_currency", {"amount": 50, "from_currency": "USD", "to_currency": "USD"})
    assert usd.content["converted_amount"] == 50
    fahrenheit = execute(world, "get_current_weather", {"city": "lima", "units": "fahrenheit"}).content
    celsius = execute(world, "get_current_weather", {"city": "Lima"}).content
    assert fahrenheit["temperature"] == pytest.approx(celsius["temperature"] * 9 / 5 + 32, abs=0.11)
    assert fahrenheit["city"] == "Lima"


def test_optional_flags_change_output():
    world = World(0)
    plain = execute(world, "get_forecast", {"city": "Oslo", "days": 2, "include_precipitation": False})
    assert all("precipitation_chance" not in d for d in plain.content["forecast"])
    assert len(plain.content["forecast"]) == 2
    nonstop = execute(
        world, "search_flights", {"origin": "JFK", "destination": "SYD", "date": shift_day(2), "nonstop_only": True}
    )
    assert all(f["stops"] == 0 for f in nonstop.content["flights"])
    cheap = execute(world, "search_products", {"query": "shoes boots jacket", "max_price": 100})
    assert cheap.content["count"] >= 1 and all(p["price"] <= 100 for p in cheap.content["products"])


# ---------------- validation errors ----------------


@pytest.mark.parametrize("name", [n for n in NAMES if TOOLS[n]["parameters"]["required"]])
def test_missing_required_message(name):
    required = TOOLS[name]["parameters"]["required"]
    args = {k: v for k, v in examples_by_name()[name].items() if k not in required}
    msg = expect_error(execute(World(0), name, args), "missing_required")
    assert msg == f"Tool {name} missing required parameters: {', '.join(required)}"
    one = {k: v for k, v in examples_by_name()[name].items() if k != required[-1]}
    assert execute(World(0), name, one).error == f"Tool {name} missing required parameters: {required[-1]}"


@pytest.mark.parametrize("name", NAMES)
def test_unexpected_argument(name):
    args = {**examples_by_name()[name], "bogus_flag": True}
    msg = expect_error(execute(World(0), name, args), "unexpected_argument")
    assert "bogus_flag" in msg and name in msg


QUOTE = re.compile(r"(?<!\w)'|'(?!\w)")  # an apostrophe that is not inside a word ("customer's")
WRONG_TYPE = {"string": 123, "integer": "7", "number": "7.5", "boolean": "yes", "array": "a,b", "object": "x"}


@pytest.mark.parametrize("name", [n for n in NAMES if examples_by_name()[n]])
def test_error_texts_never_quote_with_apostrophes(name):
    """Errors reach the policy inside JSON; `'account_id'` there is copied into the next call as `"account_id',`
    (the SFT policy did so in half its malformed calls), so names, paths and values stand bare."""
    args = examples_by_name()[name]
    key = next(iter(args))
    kind = TOOLS[name]["parameters"]["properties"][key]["type"]
    required = TOOLS[name]["parameters"]["required"]
    bad = [
        {**args, key: WRONG_TYPE[kind]},
        {**args, "colour": "red"},
        {k: v for k, v in args.items() if k not in required},
        [1, 2],
    ]
    errors = [execute(World(0), name, arguments).error for arguments in bad]
    errors += [execute(World(0), f"{name}_v2", args).error]
    assert all(error and not QUOTE.search(error) for error in errors[:2] + errors[3:]), errors
    assert not required or not QUOTE.search(errors[2])
    world = World(0)
    lookups = [("get_balance", {"account_id": "ACC-99999"}), ("get_forecast", {"city": "Atlantis", "days": 2})]
    for tool, arguments in lookups:
        result = execute(world, tool, arguments)
        assert not result.ok and not QUOTE.search(result.error), result.error


@pytest.mark.parametrize("name", [n for n in NAMES if examples_by_name()[n]])
def test_wrong_type(name):
    args = examples_by_name()[name]
    key = next(iter(args))
    kind = TOOLS[name]["parameters"]["properties"][key]["type"]
    msg = expect_error(execute(World(0), name, {**args, key: WRONG_TYPE[kind]}), "type")
    assert f"parameter {key} " in msg and kind in msg


def first_param(name: str, test) -> str | None:
    return next((k for k, p in TOOLS[name]["parameters"]["properties"].items() if test(p)), None)


@pytest.mark.parametrize("name", [n for n in NAMES if first_param(n, lambda p: "enum" in p)])
def test_enum_violation(name):
    key = first_param(name, lambda p: "enum" in p)
    msg = expect_error(execute(World(0), name, {**examples_by_name()[name], key: "not_a_choice"}), "enum")
    assert "must be one of" in msg and "not_a_choice" in msg


@pytest.mark.parametrize("name", [n for n in NAMES if first_param(n, lambda p: "maximum" in p)])
def test_range_violation(name):
    key = first_param(name, lambda p: "maximum" in p)
    limit = TOOLS[name]["parameters"]["properties"][key]["maximum"]
    msg = expect_error(execute(World(0), name, {**examples_by_name()[name], key: limit + 1000}), "range")
    assert f"must be <= {limit}" in msg


@pytest.mark.parametrize("name", [n for n in NAMES if first_param(n, lambda p: "format" in p or "pattern" in p)])
def test_format_violation(name):
    key = first_param(name, lambda p: "format" in p or "pattern" in p)
    msg = expect_error(execute(World(0), name, {**examples_by_name()[name], key: "31/12/2025 ??"}), "format")
    assert f"parameter {key} " in msg and "31/12/2025" in msg


def test_nested_and_array_errors():
    world = World(0)
    args = examples_by_name()["book_flight"]
    bad_card = {**args, "payment": {"method": "credit_card", "card_last4": "42"}}
    assert "payment.card_last4" in expect_error(execute(world, "book_flight", bad_card), "format")
    no_last = {**args, "passengers": [{"first_name": "Ana"}]}
    msg = expect_error(execute(world, "book_flight", no_last), "missing_required")
    assert "passengers[0]" in msg and "last_name" in msg
    empty = {**args, "passengers": []}
    assert "at least 1 items" in expect_error(execute(world, "book_flight", empty), "range")
    extra = {**args, "payment": {"method": "miles", "pin": "1"}}
    assert "pin" in expect_error(execute(world, "book_flight", extra), "unexpected_argument")
    same = execute(world, "compare_weather", {"cities": ["Lima", "Lima"]})
    assert "must not repeat items" in expect_error(same, "range")
    floats = execute(world, "search_airports", {"query": "united", "limit": 2.0})
    assert floats.ok and floats.content["count"] == 2


def test_unknown_tool_and_odd_inputs():
    world = World(0)
    assert (
        expect_error(execute(world, "teleport", {}), "unknown_tool")
        == "Tool teleport not found in the current available tools set."
    )
    assert execute(world, None, {}).error_class == "unknown_tool"
    assert expect_error(execute(world, "get_balance", [1, 2]), "type").startswith("Tool get_balance arguments")
    assert execute(world, "list_weather_alerts", None).ok
    assert execute(world, "get_balance", None).error_class == "missing_required"
    assert validate_arguments(TOOLS["get_forecast"], {"city": "Lima", "days": 2}) is None
    assert validate_arguments(TOOLS["get_forecast"], {"city": "Lima", "days": True})[0] == "type"


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


FUZZ_WORLD = World(0)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(NAMES + ["nope"]),
    args=JSONISH,
    keys=st.dictionaries(
        st.sampled_from(["city", "days", "account_id", "amount", "date", "items", "expression", "value"]),
        JSONISH,
        max_size=4,
    ),
)
def test_execute_never_raises(name, args, keys):
    world = FUZZ_WORLD  # shared on purpose: whatever earlier calls wrote must not break later ones
    for candidate in (args, keys, {**examples_by_name(0).get(name, {}), **keys}):
        result = execute(world, name, candidate)
        assert isinstance(result, ExecResult)
        assert result.ok or result.error_class in ERROR_CLASSES
        assert result.ok or "could not process" not in result.error, result.error  # no executor bug
        if result.ok:
            assert response_errors(name, result.content) == []


POOLS = entity_pools(FUZZ_WORLD)
KEY_POOLS = {
    "city": POOLS["city"],
    "cities": POOLS["city"],
    "origin": POOLS["airport"],
    "destination": POOLS["airport"],
    "account_id": POOLS["account_id"],
    "from_account_id": POOLS["account_id"],
    "to_account_id": POOLS["account_id"],
    "customer_id": POOLS["bank_customer_id"],
    "product_id": POOLS["product_id"],
    "order_id": POOLS["order_id"],
    "event_id": POOLS["event_id"],
    "email": POOLS["shopper_email"],
    "name": POOLS["account_holder"],
    "query": POOLS["product_name"] + POOLS["country"],
}


def valid_values(schema: dict, key: str, example) -> st.SearchStrategy:
    """Schema-conforming values (mostly): entity pools, the example value, bounded numbers."""
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        if schema.get("format") == "date":
            return st.integers(-40, 20).map(shift_day)
        seeds = list(KEY_POOLS.get(key, [])) + ([example] if isinstance(example, str) else [])
        texts = st.text(min_size=schema.get("minLength", 0), max_size=12)
        return st.sampled_from(seeds) | texts if seeds else texts
    if kind == "integer":
        return st.integers(schema.get("minimum", -50), schema.get("maximum", 50))
    if kind == "number":
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1e6))
        return st.floats(low, schema.get("maximum", 1e6), exclude_min="exclusiveMinimum" in schema, allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        inner = example[0] if isinstance(example, list) and example else None
        return st.lists(
            valid_values(schema["items"], key, inner),
            min_size=schema.get("minItems", 0),
            max_size=schema.get("maxItems", 4),
            unique_by=json.dumps if schema.get("uniqueItems") else None,
        )
    example = example if isinstance(example, dict) else {}
    props = {k: valid_values(v, k, example.get(k)) for k, v in schema["properties"].items()}
    required = set(schema.get("required", []))
    return st.fixed_dictionaries(
        {k: v for k, v in props.items() if k in required},
        optional={k: v for k, v in props.items() if k not in required},
    )


@pytest.mark.parametrize("name", NAMES)
def test_schema_valid_arguments_never_break_executors(name):
    strategy = valid_values(TOOLS[name]["parameters"], "", examples_by_name(0)[name])

    @settings(
        max_examples=25,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(args=strategy)
    def check(args):
        result = execute(FUZZ_WORLD, name, args)
        assert result.ok or result.error_class in ERROR_CLASSES
        assert result.ok or "could not process" not in result.error, (args, result.error)
        if result.ok:
            assert response_errors(name, result.content) == [], args

    check()


# ---------------- business rules ----------------


def test_not_found_errors():
    world = World(0)
    cases = [
        ("get_current_weather", {"city": "Atlantis"}),
        ("get_balance", {"account_id": "ACC-1"}),
        ("list_accounts", {"customer_id": "CUS-9"}),
        ("get_flight_status", {"flight_id": "FL-XXX"}),
        ("get_flight_status", {"flight_id": "FL-LIM-BOG-20990101-1"}),
        ("search_flights", {"origin": "ZZZ", "destination": "LIM", "date": shift_day(1)}),
        ("get_booking", {"booking_id": "BKG-1"}),
        ("get_event", {"event_id": "EVT-0"}),
        ("get_order", {"order_id": "ORD-1"}),
        ("get_product", {"product_id": "PRD-1"}),
        ("list_orders", {"email": "nobody@shop.example"}),
        ("get_historical_weather", {"city": "Lima", "date": "2020-01-01"}),
        ("delete_weather_alert", {"alert_id": "ALR-1"}),
    ]
    for name, args in cases:
        expect_error(execute(world, name, args), "not_found")


def test_conflict_errors():
    world = World(0)
    ex = examples_by_name(0)
    src = ex["transfer_funds"]["from_account_id"]
    broke = {**ex["transfer_funds"], "amount": 999_999}
    assert "Insufficient funds" in expect_error(execute(world, "transfer_funds", broke), "conflict")
    self_move = {**ex["transfer_funds"], "to_account_id": src}
    expect_error(execute(world, "transfer_funds", self_move), "conflict")
    busy = next(e for e in world.events.values())
    overlap = {"title": "Clash", "date": busy["date"], "start_time": busy["start_time"], "duration_min": 30}
    assert busy["event_id"] in expect_error(execute(world, "create_event", overlap), "conflict")
    assert execute(world, "create_event", {**overlap, "allow_overlap": True}).ok
    shipped = next(o for o in world.orders.values() if o["status"] != "processing")
    expect_error(execute(world, "cancel_order", {"order_id": shipped["order_id"], "reason": "other"}), "conflict")
    expect_error(execute(world, "convert_units", {"value": 1, "from_unit": "kilogram", "to_unit": "mile"}), "conflict")
    expect_error(execute(world, "calculate", {"expression": "1 / 0"}), "conflict")
    expect_error(execute(world, "calculate", {"expression": "__import__('os')"}), "format")


def test_double_cancel_and_return_limits():
    world = World(0)
    ex = dict(example_calls(world))
    for name in ("search_flights", "book_flight", "cancel_booking"):
        assert execute(world, name, ex[name]).ok
    assert "already cancelled" in expect_error(execute(world, "cancel_booking", ex["cancel_booking"]), "conflict")
    assert execute(world, "return_item", ex["return_item"]).ok
    expect_error(execute(world, "return_item", ex["return_item"]), "conflict")


# ---------------- world semantics ----------------


def test_same_seed_same_results_different_seed_differs():
    first, again, other = run_examples(5), run_examples(5), run_examples(6)
    assert {k: v.content for k, v in first.items()} == {k: v.content for k, v in again.items()}
    differing = [k for k in first if first[k].content != other[k].content]
    assert len(differing) >= 10


def test_write_then_read():
    world = World(2)
    ex = dict(example_calls(world))
    src, dst = ex["transfer_funds"]["from_account_id"], ex["transfer_funds"]["to_account_id"]
    before = execute(world, "get_balance", {"account_id": src}).content["balance"]
    moved = execute(world, "transfer_funds", {**ex["transfer_funds"], "amount": 12.34}).content
    assert execute(world, "get_balance", {"account_id": src}).content["balance"] == round(before - 12.34, 2)
    latest = execute(world, "get_transactions", {"account_id": dst, "limit": 1}).content["transactions"][0]
    assert latest["amount"] == moved["credited_amount"] and latest["date"] == world.today

    flight_args = ex["search_flights"]
    fid = ex["book_flight"]["flight_id"]

    def seats():
        flights = execute(world, "search_flights", flight_args).content["flights"]
        return next(f["seats_left"] for f in flights if f["flight_id"] == fid)

    start = seats()
    booking = execute(world, "book_flight", ex["book_flight"]).content
    assert seats() == start - 2
    assert execute(world, "get_booking", {"booking_id": booking["booking_id"]}).content == booking

    event = execute(world, "create_event", ex["create_event"]).content
    listed = execute(world, "list_events", {"date": event["date"]}).content["events"]
    assert event in listed
    assert execute(world, "delete_event", {"event_id": event["event_id"]}).ok
    assert execute(world, "get_event", {"event_id": event["event_id"]}).error_class == "not_found"

    order = execute(world, "place_order", ex["place_order"]).content
    assert execute(world, "get_order", {"order_id": order["order_id"]}).content["status"] == "processing"
    email = ex["place_order"]["email"]
    assert order["order_id"] in [
        o["order_id"] for o in execute(world, "list_orders", {"email": email}).content["orders"]
    ]


def test_returned_content_is_detached_from_world():
    world = World(0)
    event = execute(world, "get_event", {"event_id": next(iter(world.events))}).content
    event["title"] = "changed"
    assert execute(world, "get_event", {"event_id": event["event_id"]}).content["title"] != "changed"


def test_copy_is_independent():
    world = World(4)
    clone = world.copy()
    ex = dict(example_calls(world))
    src = ex["transfer_funds"]["from_account_id"]
    assert execute(clone, "transfer_funds", ex["transfer_funds"]).ok
    assert execute(clone, "create_weather_alert", ex["create_weather_alert"]).ok
    assert world.accounts[src]["balance"] != clone.accounts[src]["balance"]
    assert execute(world, "list_weather_alerts", {}).content["count"] == 0
    assert execute(clone, "list_weather_alerts", {}).content["count"] == 1


def test_world_builds_fast():
    best = min(_timed(functools.partial(World, s)) for s in range(5))
    assert best < 0.05


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


ONE_PER_CLASS = {
    "unknown_tool": ("book_hotel", {}),
    "missing_required": ("get_forecast", {"city": "Lima"}),
    "unexpected_argument": ("get_balance", {"account_id": "ACC-10010", "pin": 1234}),
    "type": ("get_forecast", {"city": "Lima", "days": "three"}),
    "enum": ("list_units", {"dimension": "happiness"}),
    "range": ("split_bill", {"total": 10, "people": 0}),
    "format": ("list_events", {"date": "tomorrow"}),
    "not_found": ("get_order", {"order_id": "ORD-1"}),
    "conflict": ("transfer_funds", {"from_account_id": "ACC-10010", "to_account_id": "ACC-10010", "amount": 1}),
}


@pytest.mark.parametrize("error_class", ERROR_CLASSES)
def test_every_error_class_has_a_case(error_class):
    name, args = ONE_PER_CLASS[error_class]
    expect_error(execute(World(0), name, args), error_class)


def test_quadratic_roots_lists_a_double_root_twice_and_each_root_is_an_observable_fact():
    """Each root is its own reference fact at a response path, so a reward finds it in what was observed."""
    from slca.rewards.facts import observed_facts

    world = World(seed=7)
    assert execute(world, "quadratic_roots", {"a": 1, "b": 2, "c": 1}).content["roots"] == [-1.0, -1.0]
    assert execute(world, "quadratic_roots", {"a": 1, "b": 0, "c": 1}).content["roots"] == []
    result = execute(world, "quadratic_roots", {"a": 2, "b": 4, "c": -12})
    task = {
        "gold_steps": [[{"name": "quadratic_roots", "arguments": {"a": 2, "b": 4, "c": -12}}]],
        "gold_responses": [[result.content]],
        "reference": ["-3.645751", "1.645751"],
        "messages": [{"role": "user", "content": "roots of 2x^2 + 4x - 12"}],
    }
    observation = ("quadratic_roots", json.dumps(result.content))
    assert observed_facts(task, [observation]) == ["-3.645751", "1.645751"]

"""Each BFCL checker rule with a passing and a failing case, on small hand-written entries."""

from __future__ import annotations

from typing import Any

import pytest

from slca.eval.bfcl.checker import standardize_string
from slca.eval.bfcl.score import score_entry


def fn(name: str, props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "description": "d", "parameters": {"type": "dict", "properties": props, "required": required}}


WEATHER = fn(
    "get_weather",
    {
        "city": {"type": "string", "description": "c"},
        "days": {"type": "integer", "description": "n"},
        "temp": {"type": "float", "description": "t"},
        "units": {"type": "string", "description": "u"},
        "hourly": {"type": "boolean", "description": "h"},
    },
    ["city"],
)
SIMPLE = {
    "id": "t_0",
    "function": [WEATHER],
    "ground_truth": [
        {
            "get_weather": {
                "city": ["New York City", "NYC"],
                "days": [3],
                "temp": [20.0, ""],
                "units": ["metric", ""],
                "hourly": [False, ""],
            }
        }
    ],
}


def verdict(
    raw: str, entry: dict[str, Any] = SIMPLE, category: str = "simple_python", **kw: Any
) -> tuple[bool, str | None]:
    v = score_entry(entry, category, raw, **kw)
    return v.valid, v.error_type


# ------------------------------------------------------------ decoding


@pytest.mark.parametrize(
    "raw",
    [
        "[get_weather(city='NYC', days=3)]",
        "get_weather(city='NYC', days=3)",  # single call without brackets
        "```\n[get_weather(city='NYC', days=3)]\n```",  # bare markdown fence stripped
        "  [get_weather(city='NYC', days=1+2)]\n",  # arithmetic is evaluated
        "[get_weather('ignored positional', city='NYC', days=3)]",
    ],
)
def test_prompt_decoding_accepts(raw: str) -> None:
    assert verdict(raw) == (True, None)


@pytest.mark.parametrize(
    "raw",
    [
        "```python\n[get_weather(city='NYC', days=3)]\n```",  # BFCL strips backticks only: "python" is left
        "The weather tool needs a city.",
        "[get_weather(city=NYC.name, days=3)]",  # attribute values are unsupported
        "[1, get_weather(city='NYC', days=3)]",
    ],
)
def test_prompt_decoding_failures(raw: str) -> None:
    assert verdict(raw) == (False, "ast_decoder:decoder_failed")


def test_json_tool_calls_decode_and_bad_blocks_are_skipped() -> None:
    good = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "NYC", "days": 3}}\n</tool_call>'
    assert verdict(good) == (True, None)
    assert verdict("<tool_call>{not json}</tool_call>\n" + good) == (True, None)
    assert verdict('<tool_call>\n{"arguments": {"city": "NYC"}}\n</tool_call>') == (False, "ast_decoder:decoder_failed")
    assert verdict("<tool_call>{not json}</tool_call>") == (False, "simple_function_checker:wrong_count")


# ------------------------------------------------------------ dispatch and names


def test_simple_needs_exactly_one_call() -> None:
    two = "[get_weather(city='NYC', days=3), get_weather(city='NYC', days=3)]"
    assert verdict(two) == (False, "simple_function_checker:wrong_count")
    assert verdict("[]") == (False, "simple_function_checker:wrong_count")


def test_function_name_must_match() -> None:
    assert verdict("[get_forecast(city='NYC', days=3)]") == (False, "simple_function_checker:wrong_func_name")


def test_dotted_names_compare_underscored_only_for_tool_calls() -> None:
    entry = {
        "id": "t_1",
        "function": [fn("math.factorial", {"n": {"type": "integer", "description": "n"}}, ["n"])],
        "ground_truth": [{"math.factorial": {"n": [5]}}],
    }
    assert verdict("[math.factorial(n=5)]", entry) == (True, None)
    assert verdict("[math_factorial(n=5)]", entry) == (False, "simple_function_checker:wrong_func_name")
    call = '<tool_call>\n{"name": "%s", "arguments": {"n": 5}}\n</tool_call>'
    assert verdict(call % "math_factorial", entry) == (True, None)
    assert verdict(call % "math.factorial", entry) == (False, "simple_function_checker:wrong_func_name")
    assert verdict(call % "math.factorial", entry, underscore_to_dot=False) == (True, None)


# ------------------------------------------------------------ parameters


def test_required_optional_and_unexpected_parameters() -> None:
    assert verdict("[get_weather(days=3)]") == (False, "simple_function_checker:missing_required")
    # "units" may be omitted ("" among its values) but "days" may not
    assert verdict("[get_weather(city='NYC')]") == (False, "simple_function_checker:missing_optional")
    assert verdict("[get_weather(city='NYC', days=3, wind=True)]") == (
        False,
        "simple_function_checker:unexpected_param",
    )


def test_types_and_int_to_float_promotion() -> None:
    assert verdict("[get_weather(city='NYC', days=3, temp=20)]") == (True, None)
    assert verdict("[get_weather(city='NYC', days=3.0)]") == (False, "type_error:simple")
    assert verdict("[get_weather(city='NYC', days=True)]") == (False, "type_error:simple")
    assert verdict("[get_weather(city=7, days=3)]") == (False, "type_error:simple")


def test_string_normalisation() -> None:
    assert standardize_string("New York-City, N.Y.") == "newyorkcityny"
    assert standardize_string("it's") == 'it"s'
    assert verdict("[get_weather(city='new_york city', days=3)]") == (True, None)
    assert verdict("[get_weather(city='Boston', days=3)]") == (False, "value_error:string")


def test_other_values_must_be_listed() -> None:
    assert verdict("[get_weather(city='NYC', days=3, hourly=False)]") == (True, None)
    assert verdict("[get_weather(city='NYC', days=4)]") == (False, "value_error:others")


LISTS = {
    "id": "t_2",
    "function": [
        fn(
            "plot",
            {
                "xs": {"type": "array", "items": {"type": "integer"}, "description": "x"},
                "tags": {"type": "array", "items": {"type": "string"}, "description": "t"},
                "point": {"type": "tuple", "items": {"type": "float"}, "description": "p"},
            },
            ["xs"],
        )
    ],
    "ground_truth": [{"plot": {"xs": [[1, 2, 3]], "tags": [["Red Wine", "blue"], ""], "point": [[1.5, 2.5], ""]}}],
}


def test_lists_order_matters_and_strings_inside_are_normalised() -> None:
    assert verdict("[plot(xs=[1, 2, 3], tags=['red-wine', 'BLUE'], point=(1.5, 2.5))]", LISTS) == (True, None)
    assert verdict("[plot(xs=[3, 2, 1])]", LISTS) == (False, "value_error:list/tuple")
    assert verdict("[plot(xs=[1, 'two', 3])]", LISTS) == (False, "type_error:nested")


DICTS = {
    "id": "t_3",
    "function": [
        fn(
            "book",
            {
                "guest": {"type": "dict", "description": "g", "properties": {}},
                "rooms": {"type": "array", "items": {"type": "dict"}, "description": "r"},
            },
            ["guest"],
        )
    ],
    "ground_truth": [
        {
            "book": {
                "guest": [{"name": ["Ann Lee"], "age": [30, ""]}],
                "rooms": [[{"kind": ["double"]}, {"kind": ["single"]}], ""],
            }
        }
    ],
}


def test_dict_rules() -> None:
    assert verdict("[book(guest={'name': 'ann lee'})]", DICTS) == (True, None)
    assert verdict("[book(guest={'name': 'Ann Lee', 'vip': True})]", DICTS) == (False, "value_error:dict_key")
    assert verdict("[book(guest={'age': 30})]", DICTS) == (False, "value_error:dict_key")
    assert verdict("[book(guest={'name': 'Bob'})]", DICTS) == (False, "value_error:dict_value")


def test_list_of_dict_rules() -> None:
    ok_rooms = "[book(guest={'name': 'Ann Lee'}, rooms=[{'kind': 'double'}, {'kind': 'single'}])]"
    assert verdict(ok_rooms, DICTS) == (True, None)
    assert verdict("[book(guest={'name': 'Ann Lee'}, rooms=[{'kind': 'double'}])]", DICTS) == (
        False,
        "value_error:list_dict_count",
    )
    swapped = "[book(guest={'name': 'Ann Lee'}, rooms=[{'kind': 'single'}, {'kind': 'double'}])]"
    # order matters; the error reported is the last candidate's (the optional "" has 0 dicts), as in BFCL
    assert verdict(swapped, DICTS) == (False, "value_error:list_dict_count")
    only = {**DICTS, "ground_truth": [{"book": {"guest": [{"name": ["Ann Lee"]}], "rooms": [[{"kind": ["double"]}]]}}]}
    assert verdict("[book(guest={'name': 'Ann Lee'}, rooms=[{'kind': 'single'}])]", only) == (
        False,
        "value_error:dict_value",
    )


# ------------------------------------------------------------ multiple / parallel / irrelevance


TWO_FUNCS = [WEATHER, fn("get_time", {"zone": {"type": "string", "description": "z"}}, ["zone"])]
PARALLEL = {
    "id": "t_4",
    "function": TWO_FUNCS,
    "ground_truth": [{"get_weather": {"city": ["Paris"], "days": [1]}}, {"get_time": {"zone": ["UTC"]}}],
}
MULTIPLE = {"id": "t_5", "function": TWO_FUNCS, "ground_truth": [{"get_time": {"zone": ["UTC"]}}]}


def test_parallel_matches_without_order() -> None:
    assert verdict("[get_time(zone='UTC'), get_weather(city='Paris', days=1)]", PARALLEL, "parallel") == (True, None)
    assert verdict("[get_time(zone='UTC')]", PARALLEL, "parallel") == (
        False,
        "parallel_function_checker_no_order:wrong_count",
    )
    wrong = "[get_time(zone='UTC'), get_weather(city='Rome', days=1)]"
    assert verdict(wrong, PARALLEL, "parallel_multiple") == (
        False,
        "parallel_function_checker_no_order:cannot_find_match",
    )


def test_multiple_picks_the_described_function() -> None:
    assert verdict("[get_time(zone='utc')]", MULTIPLE, "multiple") == (True, None)
    assert verdict("[get_weather(city='Paris', days=1)]", MULTIPLE, "multiple") == (
        False,
        "simple_function_checker:wrong_func_name",
    )
    assert verdict("[get_time(zone='UTC'), get_time(zone='UTC')]", MULTIPLE, "multiple") == (
        False,
        "multiple_function_checker:wrong_count",
    )


@pytest.mark.parametrize(
    "raw", ["I cannot help with that.", "[]", "", "<tool_call>\nnot json\n</tool_call>", "[f(x=NYC.name)]"]
)
def test_irrelevance_valid_when_no_call(raw: str) -> None:
    assert verdict(raw, {"id": "irrelevance_0", "function": [WEATHER], "ground_truth": None}, "irrelevance") == (
        True,
        None,
    )


@pytest.mark.parametrize(
    "raw", ["[get_weather(city='NYC')]", '<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>']
)
def test_irrelevance_invalid_when_a_call_decodes(raw: str) -> None:
    entry = {"id": "irrelevance_0", "function": [WEATHER], "ground_truth": None}
    assert verdict(raw, entry, "irrelevance") == (False, "irrelevance_error:decoder_success")


def test_checker_exception_is_recorded_not_raised() -> None:
    broken = {
        "id": "t_6",
        "function": [fn("f", {"x": {"type": "array", "description": "no items"}}, ["x"])],
        "ground_truth": [{"f": {"x": [[1]]}}],
    }
    assert verdict("[f(x=[1])]", broken) == (False, "ast_checker:exception")

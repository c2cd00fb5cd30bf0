"""Java/JavaScript decoding and conversion, tool conversion, messages and the leaderboard aggregation."""

from __future__ import annotations

import pytest

from slca.eval.bfcl import (
    aggregate,
    bfcl_questions_to_messages,
    bfcl_to_openai_tools,
    entry_tools,
    load_category,
    measured,
)
from slca.eval.bfcl.converters import java_value, js_value
from slca.eval.bfcl.decode import decode_prompt_output
from slca.eval.bfcl.score import score_entry


def by_id(category: str, entry_id: str) -> dict:
    return next(e for e in load_category(category) if e["id"] == entry_id)


# ------------------------------------------------------------ Java


def test_java_decoding_keeps_source_text() -> None:
    calls = decode_prompt_output('[Db.query(sql="SELECT 1", n=5L, ids=new long[]{1L, 2L}, ok=true, who=user)]', "Java")
    assert calls == [
        {"Db.query": {"sql": "SELECT 1", "n": "5L", "ids": "new long[]{1L,2L}", "ok": "true", "who": "user"}}
    ]
    assert decode_prompt_output("[x = 1;]", "Java") == {}  # no method call: wrong output format, as in BFCL
    with pytest.raises(SyntaxError):
        decode_prompt_output("[Db.query(sql=]", "Java")


@pytest.mark.parametrize(
    ("text", "declared", "nested", "value"),
    [
        ("5L", "long", None, 5),
        ("5", "long", None, "5"),  # a long needs its L suffix
        ("2.5f", "float", None, 2.5),
        ("2.5", "double", None, 2.5),
        ("-12", "integer", None, -12),
        ("false", "boolean", None, False),
        ("new int[]{1, 2}", "Array", "integer", [1, 2]),
        ('new ArrayList<>(Arrays.asList("a", "b"))', "ArrayList", "String", ["a", "b"]),
        ("new ArrayList<Long>() {{ add(1L); add(2L); }}", "ArrayList", "long", [1, 2]),
        ('new HashMap<String, Object>() {{ put("k", 1); put("s", "v"); }}', "HashMap", None, {"k": 1, "s": "v"}),
        ("new HashMap<>()", "HashMap", None, {}),
        ("myVar", "any", None, "myVar"),
    ],
)
def test_java_converter(text: str, declared: str, nested: str | None, value) -> None:
    assert java_value(text, declared, nested) == value


def test_java_entry_scoring_pass_and_fail() -> None:
    entry = by_id("simple_java", "simple_java_25")  # id: long, sort: integer
    good = "[SmsHomeRecommendSubjectController.updateSort(id=42L, sort=5)]"
    assert score_entry(entry, "simple_java", good).valid
    assert score_entry(entry, "simple_java", good.replace("42L", "42")).error_type == "type_error:simple"
    assert score_entry(entry, "simple_java", good.replace("42L", "43L")).error_type == "value_error:others"


def test_java_tool_call_values_must_be_strings() -> None:
    entry = by_id("simple_java", "simple_java_25")
    call = '<tool_call>\n{"name": "SmsHomeRecommendSubjectController_updateSort", "arguments": %s}\n</tool_call>'
    assert score_entry(entry, "simple_java", call % '{"id": "42L", "sort": "5"}').valid
    assert score_entry(entry, "simple_java", call % '{"id": 42, "sort": "5"}').error_type == "type_error:java"


# ------------------------------------------------------------ JavaScript


def test_javascript_decoding() -> None:
    calls = decode_prompt_output("validate(field='userInput', done=true, list=[1, 2], opts={a: 1})", "JavaScript")
    assert calls == [{"validate": {"field": "userInput", "done": "true", "list": "[1, 2]", "opts": "{a: 1}"}}]
    assert decode_prompt_output("[let x = 1]", "JavaScript") is None


@pytest.mark.parametrize(
    ("text", "declared", "nested", "value"),
    [
        ("true", "Boolean", None, True),
        ("12n", "Bigint", None, 12),
        ("1.5", "float", None, 1.5),
        ("1e3", "float", None, "1e3"),  # BFCL's float pattern has no exponent
        ("'abc'", "String", None, "abc"),
        ('["a", "b"]', "array", "String", ["a", "b"]),
        ("new Array(1, 2)", "array", "integer", [1, 2]),
        ("[[1, 2], [3, 4]]", "array", "array", [[1, 2], [3, 4]]),
        ("{'key': 'value', 'n': 3, 'ok': false}", "dict", None, {"key": "value", "n": 3, "ok": False}),
        ("{}", "dict", None, {}),
    ],
)
def test_javascript_converter(text: str, declared: str, nested: str | None, value) -> None:
    assert js_value(text, declared, nested) == value


def test_javascript_entry_scoring_pass_and_fail() -> None:
    entry = by_id("simple_javascript", "simple_javascript_0")
    assert score_entry(
        entry, "simple_javascript", "[validateUserInput(inputField='userInputField', isComplete=true)]"
    ).valid
    bad = score_entry(entry, "simple_javascript", "[validateUserInput(inputField='userInputField', isComplete=false)]")
    assert bad.error_type == "value_error:others"
    odd = score_entry(entry, "simple_javascript", "[validateUserInput(inputField='userInputField', isComplete=maybe)]")
    assert odd.error_type == "type_error:simple"


# ------------------------------------------------------------ tools and messages


def test_bfcl_to_openai_tools_maps_types_and_names() -> None:
    functions = [
        {
            "name": "geo.distance",
            "description": "Distance.",
            "parameters": {
                "type": "dict",
                "properties": {
                    "origin": {"type": "tuple", "items": {"type": "float"}, "description": "o"},
                    "scale": {"type": "float", "description": "s"},
                    "opts": {
                        "type": "dict",
                        "description": "x",
                        "properties": {"mode": {"type": "any", "description": "m"}},
                    },
                    "tags": {
                        "type": "array",
                        "items": {"type": "dict", "properties": {"k": {"type": "integer", "description": "k"}}},
                        "description": "t",
                    },
                },
                "required": ["origin"],
            },
        }
    ]
    tool = bfcl_to_openai_tools(functions)[0]
    assert tool["type"] == "function"
    fn = tool["function"]
    props = fn["parameters"]["properties"]
    assert fn["name"] == "geo_distance" and fn["parameters"]["type"] == "object"
    assert props["origin"] == {"type": "array", "items": {"type": "number"}, "description": "o"}
    assert props["scale"] == {"type": "number", "format": "float", "description": "s This is a float type value."}
    assert props["opts"]["type"] == "object" and props["opts"]["properties"]["mode"]["type"] == "string"
    assert props["tags"]["items"]["properties"]["k"]["type"] == "integer"
    assert functions[0]["name"] == "geo.distance"  # the input is left untouched


def test_java_tools_take_source_text_strings() -> None:
    entry = by_id("simple_java", "simple_java_27")  # nums: Array of integer
    props = entry_tools(entry, "simple_java")[0]["function"]["parameters"]["properties"]
    assert props["nums"]["type"] == "string" and "items" not in props["nums"]
    assert "The list elements are of type integer" in props["nums"]["description"]


def test_messages_fc_and_prompt_modes() -> None:
    entry = by_id("simple_python", "simple_python_0")
    assert bfcl_questions_to_messages(entry) == entry["question"][0]
    prompt = bfcl_questions_to_messages(entry, mode="prompt")
    assert prompt[0]["role"] == "system" and "calculate_triangle_area" in prompt[0]["content"]
    assert prompt[1:] == entry["question"][0]


# ------------------------------------------------------------ aggregation


def test_aggregate_is_the_unweighted_leaderboard_mean() -> None:
    acc = {
        "simple_python": 0.9,
        "simple_java": 0.6,
        "simple_javascript": 0.3,
        "multiple": 0.8,
        "parallel": 0.7,
        "parallel_multiple": 0.5,
        "irrelevance": 0.95,
    }
    summary = aggregate(acc)
    assert summary["simple_ast_non_live"] == pytest.approx(0.6)
    assert summary["overall_accuracy_non_live"] == pytest.approx((0.6 + 0.8 + 0.7 + 0.5) / 4)
    assert summary["summary_ast_non_live"] == summary["overall_accuracy_non_live"]
    assert summary["irrelevance_non_live"] == 0.95
    with pytest.raises(ValueError, match="unknown BFCL category"):
        aggregate({"live_simple": 1.0})
    assert measured(summary, acc) == summary  # every category ran: every entry measured


def test_measured_keeps_only_entries_whose_categories_all_ran() -> None:
    ran = {"simple_python": 0.9, "simple_java": 0.6, "irrelevance": 0.4}
    summary = aggregate(ran)
    assert summary["overall_accuracy_non_live"] == pytest.approx((0.5 + 0 + 0 + 0) / 4)  # the leaderboard's zeros
    assert measured(summary, ran) == {
        "python_simple_ast_non_live": 0.9,
        "java_simple_ast_non_live": 0.6,
        "irrelevance_non_live": 0.4,
    }
    assert measured(aggregate({"irrelevance": 0.6}), ["irrelevance"]) == {"irrelevance_non_live": 0.6}
    assert measured(summary, []) == {}

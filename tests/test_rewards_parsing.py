"""The shared `<tool_call>` parser and loose value equality."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slca.rewards.parsing import parse_tool_calls
from slca.rewards.values import loosely_equal

KNOWN = {"get_weather", "get_time"}


def block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def test_well_formed_parallel_calls():
    text = (
        block('{"name": "get_weather", "arguments": {"city": "Lima"}}')
        + "\n"
        + block('{"name": "get_time", "arguments": "{\\"zone\\": \\"UTC\\"}"}')
    )
    parsed = parse_tool_calls(text, KNOWN)
    assert parsed.n_blocks == 2 and parsed.n_valid == 2
    assert parsed.calls == [
        {"name": "get_weather", "arguments": {"city": "Lima"}},
        {"name": "get_time", "arguments": {"zone": "UTC"}},
    ]


@pytest.mark.parametrize(
    ("text", "n_valid", "n_blocks", "n_calls"),
    [
        ("no calls here", 0, 0, 0),
        (block('{"name": "get_weather", "arguments": {"city": "Lima"'), 0, 1, 0),  # malformed JSON
        (block('["get_weather"]'), 0, 1, 0),  # not an object
        (block('{"name": "get_weather", "arguments": [1]}'), 0, 1, 0),  # arguments not a dict
        (block('{"name": "get_weather"}'), 0, 1, 0),  # arguments missing
        (block('{"name": 3, "arguments": {}}'), 0, 1, 0),  # name not a string
        (
            block('{"name": "launch_rocket", "arguments": {}}'),
            0,
            1,
            1,
        ),  # unknown tool: listed, not valid
        ('<tool_call>{"name": "get_time", "arguments": {}}', 0, 1, 0),  # never closed
        ('{"name": "get_time", "arguments": {}}</tool_call>', 0, 1, 0),  # never opened
        ('<tool_call>oops <tool_call>{"name": "get_time", "arguments": {}}</tool_call>', 1, 2, 1),
    ],
)
def test_malformed_and_unknown_blocks(text, n_valid, n_blocks, n_calls):
    parsed = parse_tool_calls(text, KNOWN)
    assert (parsed.n_valid, parsed.n_blocks, len(parsed.calls)) == (n_valid, n_blocks, n_calls)


def test_unknown_tool_is_valid_without_a_catalog_and_recorded_with_one():
    text = block('{"name": "launch_rocket", "arguments": {}}')
    assert parse_tool_calls(text).n_valid == 1
    assert parse_tool_calls(text, KNOWN).unknown == ["launch_rocket"]


def test_non_string_inputs_never_raise():
    assert parse_tool_calls(None).n_blocks == 0
    assert parse_tool_calls(12345).calls == []
    assert parse_tool_calls(block("[" * 5000)).n_valid == 0  # deep nesting


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<tool_call>",
                "</tool_call>",
                "{",
                "}",
                '"name"',
                ":",
                '"get_time"',
                ",",
                '"arguments"',
                "{}",
                " ",
                "x",
                "[",
                "\\",
                '"',
            ]
        ),
        max_size=40,
    )
)
def test_parser_never_raises_and_counts_stay_consistent(pieces):
    text = "".join(pieces)
    parsed = parse_tool_calls(text, KNOWN)
    assert 0 <= parsed.n_valid <= len(parsed.calls) <= parsed.n_blocks
    assert parsed.n_blocks == max(text.count("<tool_call>"), text.count("</tool_call>"))


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        ("Lima", "  lima ", True),
        (5, "5.0", True),
        ("5", 5.0, True),
        (5, 6, False),
        (True, "true", True),
        ("False", False, True),
        (True, 1, False),
        (1, "one", False),
        ({"b": 1, "a": "X"}, {"a": "x", "b": "1"}, True),
        ([1, 2], [2, 1], False),
        (["a", 2], ["A", "2"], True),
        (None, None, True),
        (None, "none", False),
    ],
)
def test_loose_equality(expected, actual, equal):
    assert loosely_equal(expected, actual) is equal

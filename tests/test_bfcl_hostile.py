"""Hostile model output on the BFCL path: every decode is fast and small, and is scored as BFCL scores a failure.

The regression cases once took seconds to hours, or gigabytes, each (a backtracking tag regex,
unbounded literal arithmetic, unbounded output length). They run in one child process under a
1 GiB address-space cap and a wall-clock timeout, so on the old code they fail or time out
rather than hang the suite or exhaust the machine. Times are CPU seconds, so a busy machine
does not make the bounds flaky.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slca.eval.bfcl import decode
from slca.eval.bfcl.data import CATEGORIES, category_language
from slca.eval.bfcl.score import score_entry

WEATHER = {
    "name": "get_weather",
    "description": "d",
    "parameters": {
        "type": "dict",
        "properties": {"city": {"type": "string", "description": "c"}, "days": {"type": "integer", "description": "n"}},
        "required": ["city"],
    },
}
ENTRY = {
    "id": "hostile_0",
    "function": [WEATHER],
    "ground_truth": [{"get_weather": {"city": ["NYC"], "days": [3, ""]}}],
}
CHILD_TIMEOUT_S = 40
DECODE_LIMIT_S = 0.05
RSS_LIMIT_KB = 32 * 1024
FAILED = "ast_decoder:decoder_failed"
UNCLOSED_TAG = score_entry(ENTRY, "simple_python", "<tool_call>\n").error_type  # what an unclosed tag scores

# name -> (raw output, category, expected error_type, fragment of the decoder's message or None).
# Ordered so that the cases the old code stalls on come last.
HOSTILE: dict[str, tuple[str, str, str | None, str | None]] = {
    "unclosed_tag_1000_newlines": ("<tool_call>" + "\n" * 1000, "simple_python", UNCLOSED_TAG, None),
    "unclosed_tag_2000_spaces": ("<tool_call>" + " " * 2000, "simple_python", UNCLOSED_TAG, None),
    "string_repeat": ("[get_weather(city='a'*10**10)]", "simple_python", FAILED, "limit 100000"),
    "list_repeat": ("[get_weather(city='NYC', days=[0]*10**9)]", "simple_python", FAILED, "limit 100000"),
    "format_width": ("[get_weather(city='%0100000000d'%1)]", "simple_python", FAILED, "limit 100000"),
    "format_star_width": ("[get_weather(city='%*d'%(10**8, 1))]", "simple_python", FAILED, "limit 100000"),
    "irrelevance_string_repeat": ("[get_weather(city='a'*10**10)]", "irrelevance", None, None),
    "garbage_javascript_200k": ("get_weather(city=" + ")(}{][" * 33_000, "simple_javascript", FAILED, "too long"),
    "nested_power": ("[get_weather(city='NYC', days=((10**1000)**1000)**1000)]", "simple_python", FAILED, "bits"),
    "unclosed_tag_8000_spaces": ("<tool_call>" + " " * 8000, "simple_python", UNCLOSED_TAG, None),
}

CHILD = r"""
import json, resource, sys, time
from slca.eval.bfcl.score import score_entry
entry, cases = json.load(sys.stdin)
for category in ("simple_python", "simple_java", "simple_javascript"):  # warm up parsers and imports
    score_entry(entry, category, "get_weather(city='NYC')")
with open("/proc/self/statm") as statm:
    used = int(statm.read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + 2**30, used + 2**30))
for name, (raw, category) in cases.items():
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.process_time()
    verdict = score_entry(entry, category, raw)
    seconds = time.process_time() - start
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss
    print(json.dumps({"name": name, "seconds": seconds, "rss_kb": grown, "valid": verdict.valid,
                      "error_type": verdict.error_type, "error": [str(e) for e in verdict.error]}), flush=True)
"""


@pytest.fixture(scope="module")
def child_results() -> dict[str, dict[str, Any]]:
    """Score every hostile case in a capped child process; a case missing from the result did not finish."""
    cases = {name: (raw, category) for name, (raw, category, _, _) in HOSTILE.items()}
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD],
            input=json.dumps([ENTRY, cases]),
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            check=False,
        )
        stdout = done.stdout
    except subprocess.TimeoutExpired as timeout:
        stdout = timeout.stdout.decode() if isinstance(timeout.stdout, bytes) else (timeout.stdout or "")
    return {row["name"]: row for row in map(json.loads, stdout.splitlines())}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_output_is_scored_fast_and_small(name: str, child_results: dict[str, dict[str, Any]]) -> None:
    _, _, error_type, fragment = HOSTILE[name]
    assert name in child_results, f"{name} did not finish within {CHILD_TIMEOUT_S} s (or crashed the scorer)"
    row = child_results[name]
    assert row["seconds"] < DECODE_LIMIT_S, f"{name} took {row['seconds']:.3f} s"
    assert row["rss_kb"] < RSS_LIMIT_KB, f"{name} grew the peak RSS by {row['rss_kb'] // 1024} MiB"
    assert row["error_type"] == error_type
    assert row["valid"] is (error_type is None)
    if fragment is not None:  # refused by a bound, not by running out of memory
        assert fragment in row["error"][0]


# ------------------------------------------------------------ bounds and their edges


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2**64", 2**64),
        ("10**1000 % 7", 10**1000 % 7),
        ("1000**1000 // 7", 1000**1000 // 7),  # 9,966 bits: just under MAX_INT_BITS
        ("'-'*40", "-" * 40),
        ("[0]*100 + [1]", [0] * 100 + [1]),
        ("'%05d' % 42", "00042"),
        ("'%*d' % (6, 42)", "    42"),
        ("b'%3d' % 7", b"  7"),
        ("2**-2", 0.25),
    ],
)
def test_ordinary_arithmetic_is_still_evaluated(expression: str, value: Any) -> None:
    assert decode.decode_output(f"[f(x={expression})]", "Python") == ([{"f": {"x": value}}], "prompt")


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1024**1000", "bits"),  # over MAX_INT_BITS
        ("0x" + "f" * 2600 + " + 1", "bits"),  # a literal over MAX_INT_BITS
        ("10**1001", "exponent too large"),
        ("[[0]*1000]*1000", "limit 100000"),  # shared rows still count in full
        ("'%((a)b)0100000000d' % 1", "limit 100000"),  # a width behind a nested mapping key
        ("b'%0100000000d' % 1", "limit 100000"),
        ("('%r' % ('\\x00'*9000,)) * 2", "limit 100000"),  # repr grows the text 4x; the growth is charged
    ],
)
def test_bounded_arithmetic_raises_decode_error(expression: str, message: str) -> None:
    with pytest.raises(decode.DecodeError, match=re.escape(message)):
        decode.decode_output(f"[f(x={expression})]", "Python")


def test_budget_is_shared_by_all_arguments_of_one_output() -> None:
    one = "'a'*60000"
    assert decode.decode_output(f"[f(x={one})]", "Python")[0] == [{"f": {"x": "a" * 60000}}]
    with pytest.raises(decode.DecodeError, match="limit 100000"):
        decode.decode_output(f"[f(x={one}), g(y={one})]", "Python")


def test_output_length_bound() -> None:
    call = "[get_weather(city='NYC', days=3)]"
    padded = call + " " * (decode.MAX_OUTPUT_CHARS - len(call))
    assert score_entry(ENTRY, "simple_python", padded).valid
    verdict = score_entry(ENTRY, "simple_python", padded + " ")
    assert (verdict.valid, verdict.error_type) == (False, FAILED)
    assert "too long" in verdict.error[0]


def test_decode_errors_keep_the_underlying_message() -> None:
    with pytest.raises(decode.DecodeError, match="not a function call") as caught:
        decode.decode_output("[1, f(x=1)]", "Python")
    assert isinstance(caught.value.__cause__, ValueError)


# ------------------------------------------------------------ tag scanning


_OLD_TAG_REGEX = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
tag_text = st.lists(
    st.sampled_from(
        ["<tool_call>", "</tool_call>", "<tool_call", "</tool_", " ", "\n", "\t", "\x1c", "\u3000", "a", "{}", "<", ">"]
    ),
    max_size=12,
).map("".join)


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(tag_text)
def test_tag_scan_finds_the_blocks_the_old_regex_found(raw: str) -> None:
    assert decode.tool_call_blocks(raw) == _OLD_TAG_REGEX.findall(raw)


# ------------------------------------------------------------ fuzzing every category's decoder


PIECES = [
    "<tool_call>",
    "</tool_call>",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    "f(",
    "a.b(",
    "x=",
    ", ",
    "'",
    '"',
    "`",
    "```",
    "**",
    "*",
    "%",
    "-",
    "10",
    "9" * 60,
    "0x" + "f" * 3000,
    "'%0999999999d'",
    "'%*d'",
    "10**10**10",
    "'a'*10**10",
    "[0]*10**9",
    "((10**1000)**1000)**1000",
    "new int[]{",
    "{{",
    "put(",
    "true",
    "null",
    "\\",
    '{"name": "f", "arguments": {',
    "}}",
    "new ArrayList<>(Arrays.asList(",
    "=>",
    ";",
]
whitespace_runs = st.builds(
    lambda char, count: char * count, st.sampled_from([" ", "\n", "\t", "\r\n", "\u3000"]), st.integers(0, 2500)
)
deep_nesting = st.builds(
    lambda char, depth: char * depth, st.sampled_from(["(", "[", "{", "-", "not "]), st.integers(1, 400)
)
literals = st.sampled_from(
    [
        "10",
        "2",
        "1000",
        "-1",
        "0",
        "1.5",
        "'a'",
        "b'x'",
        "[0]",
        "(1, 2)",
        "'%0999d'",
        "'%s%s'",
        "10**1000",
        "'%*d'",
        "0x" + "f" * 300,
    ]
)
arithmetic = st.recursive(
    literals,
    lambda inner: st.builds(
        lambda left, op, right: f"({left}{op}{right})",
        inner,
        st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]),
        inner,
    ),
    max_leaves=12,
)
hostile_text = st.one_of(
    st.lists(st.one_of(st.sampled_from(PIECES), whitespace_runs, deep_nesting, st.text(max_size=6)), max_size=16).map(
        "".join
    ),
    arithmetic.map(lambda expression: f"[f(x={expression})]"),
    st.tuples(arithmetic, whitespace_runs).map(lambda pair: f"<tool_call>{pair[1]}[f(x={pair[0]})]"),
)


@settings(max_examples=200, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(hostile_text)
def test_every_category_decodes_hostile_text_fast_or_raises_decode_error(raw: str) -> None:
    for category in CATEGORIES:
        for output_format in ("auto", "prompt", "json"):
            start = time.process_time()
            with contextlib.suppress(decode.DecodeError):
                decode.decode_output(raw, category_language(category), output_format)
            seconds = time.process_time() - start
            assert seconds < DECODE_LIMIT_S, f"{category}/{output_format} took {seconds:.3f} s on {raw[:80]!r}"

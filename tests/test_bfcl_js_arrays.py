"""JavaScript arrays: the linear-time two-level matcher agrees with the official checker's regex.

The official pattern (`converters._JS_ARRAY_2D`) backtracks exponentially, so the converter never
runs it; these tests run it only on short inputs, where it is fast, as the reference.
"""

from __future__ import annotations

import re
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slca.eval.bfcl.converters import (
    _JS_ARRAY_2D,
    _bracket_bodies,
    js_array,
    js_object,
    match_js_array_2d,
)

TOKENS = [
    "[",
    "]",
    ",",
    " ",
    "\t",
    "\n",
    "x",
    "1",
    "'a'",
    "[1]",
    "[x] ",
    " ,",
    "[[",
    "]]",
    "new Array(",
    ")",
    "new  Array(",
    "new\nArray(",
    "\u3000",
    "\r",
]
token_text = st.lists(st.sampled_from(TOKENS), max_size=12).map("".join)
SETTINGS = settings(
    max_examples=3000, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
)


def reference_js_array(code: str) -> object:
    """The converter as the official checker writes it (exponential regex: short inputs only)."""
    two_level = _JS_ARRAY_2D.match(code)
    if two_level:
        rows = []
        for index, inner in enumerate(re.findall(r"\[(.*?)\]", two_level.group(0))):
            inner = inner.strip()
            if index == 0 and inner.startswith("["):
                inner = inner[1:]
            rows.append(inner.split(","))
        return rows
    return None


@SETTINGS
@given(st.sampled_from(["", "[", "new Array("]), token_text)
def test_the_linear_matcher_returns_the_official_regex_match(head: str, tail: str) -> None:
    code = head + tail
    found = _JS_ARRAY_2D.match(code)
    assert match_js_array_2d(code) == (found.group(0) if found else None)
    assert _bracket_bodies(code) == re.findall(r"\[(.*?)\]", code)


scalars = st.sampled_from(["1", "-2", "3.5", "true", "'a'", '"b c"', "x", "null", ""])
spaces = st.sampled_from(["", " ", "  ", "\n", "\t"])


def _render(children: list[tuple[str, str, str]], open_: str, close: str) -> str:
    return open_ + ",".join(f"{before}{child}{after}" for before, child, after in children) + close


js_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(st.tuples(spaces, inner, spaces), max_size=4).map(lambda c: _render(c, "[", "]")),
        st.lists(st.tuples(spaces, inner, spaces), max_size=4).map(lambda c: _render(c, "new Array(", ")")),
        st.lists(st.tuples(st.sampled_from(["k", "'k'", '"a b"']), inner), max_size=3).map(
            lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
        ),
    ),
    max_leaves=10,
)


@SETTINGS
@given(js_values)
def test_nested_arrays_and_maps_of_random_shape_convert_like_the_official_checker(code: str) -> None:
    code = code[:200]  # the reference regex is exponential; keep its inputs short
    expected = reference_js_array(code)
    converted = js_array(code)
    if expected is not None:
        assert isinstance(converted, list) and len(converted) == len(expected)
        assert all(len(row) == len(want) for row, want in zip(converted, expected, strict=True))
    js_object(code)  # maps: never raises, whatever the shape


@settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(st.lists(js_values, min_size=1, max_size=400).map(lambda parts: "[" + ",".join(parts) + "]"))
def test_long_nested_arrays_convert_in_linear_time(code: str) -> None:
    start = time.process_time()
    js_array(code)
    assert time.process_time() - start < 0.05, f"{len(code)} characters"


def test_the_backtracking_case_is_linear() -> None:
    code = "[" + "[1]," * 5000 + "[1] x"  # the bare official regex needs seconds at 94 characters
    start = time.process_time()
    assert js_array(code) == ["[1"]  # no two-level match: the flat pattern's answer, as the checker gives
    assert js_array(code[:-2] + "]") == [[1]] * 5001
    assert time.process_time() - start < 0.05

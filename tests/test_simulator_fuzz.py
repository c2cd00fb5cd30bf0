"""Property tests: the simulator never raises and always answers with a well-formed result.

10,000 generated inputs (3500 + 3000 + 2000 + 1500) in total (raw text, mutated calls, arbitrary JSON shapes, per-tool
arguments); the per-tool test also checks that schema errors agree exactly with the real executor
and that accepted calls get schema-conforming responses.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slca.simulator import (
    ERROR_CLASSES,
    EpisodeState,
    SimulatorSession,
    ToolResult,
    simulate,
)
from slca.simulator.specs import toolset
from slca.tools import World, execute, tool_map
from slca.tools.examples import example_calls

TOOLS = tool_map()
NAMES = sorted(TOOLS)
SPECS = toolset(None)
WORLD = World(7)  # shared: write tools mutate it, which only moves business-rule outcomes
EXAMPLES = dict(example_calls(World(7)))
VALID = [json.dumps({"name": n, "arguments": a}) for n, a in EXAMPLES.items()]


def fuzz(examples: int) -> settings:
    return settings(
        max_examples=examples, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
    )


SCHEMA_CLASSES = {"missing_required", "unexpected_argument", "type", "enum", "range", "format"}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=8),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
cheap_values = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.sampled_from(["first_name", "last_name", "method", "metric", "a"]), scalars, max_size=3),
)


def well_formed(result: ToolResult) -> None:
    assert isinstance(result, ToolResult)
    if result.ok:
        assert isinstance(result.content, dict) and result.error is None
        json.dumps(result.content)
    else:
        assert isinstance(result.error, str) and result.error and result.error_class in ERROR_CLASSES
        assert len(result.error) < 2000


@fuzz(3500)
@given(st.text(max_size=300))
def test_any_text_gets_a_result(text):
    well_formed(simulate(None, text))


@fuzz(3000)
@given(st.sampled_from(VALID), st.integers(0, 400), st.text(max_size=6), st.integers(0, 6))
def test_mutated_valid_calls_get_a_result(valid, position, insert, cut):
    position = min(position, len(valid))
    well_formed(simulate(None, valid[:position] + insert + valid[position + cut :]))


@fuzz(2000)
@given(st.one_of(st.sampled_from(NAMES), st.text(max_size=10)), json_values)
def test_arbitrary_json_shapes_get_a_result(name, arguments):
    well_formed(simulate(None, {"name": name, "arguments": arguments}))
    well_formed(simulate(None, json.dumps({"name": name, "arguments": arguments})))


@st.composite
def tool_arguments(draw):
    name = draw(st.sampled_from(NAMES))
    properties = TOOLS[name]["parameters"]["properties"]
    valid = dict(EXAMPLES[name]) if draw(st.booleans()) else {}
    keys = draw(st.lists(st.sampled_from(sorted(properties) + ["extra"]), max_size=3))
    for key in keys:
        valid[key] = draw(cheap_values)
    return name, valid


LENIENT = {
    "coerce_numeric_strings": True,
    "case_insensitive_enums": True,
    "strict_extra_arguments": False,
    "check_formats": False,
    "check_ranges": False,
}


@fuzz(1500)
@given(tool_arguments(), st.integers(0, 3), st.sampled_from([{}, {}, LENIENT]))
def test_tool_arguments_agree_with_real_and_conform(case, seed, knobs):
    name, arguments = case
    result = SimulatorSession(None, seed=seed, knobs=knobs).call({"name": name, "arguments": arguments})
    well_formed(result)
    if knobs:  # lenient knobs accept more than the executors; responses must still conform
        assert not result.ok or SPECS[name].response_errors(result.content) == []
        return
    real = execute(WORLD, name, arguments)
    if not result.ok:  # the simulator only rejects what the real executor rejects, the same way
        assert (real.ok, real.error_class, real.error) == (False, result.error_class, result.error)
    else:
        assert SPECS[name].response_errors(result.content) == []
        assert real.ok or real.error_class not in SCHEMA_CLASSES


def test_state_survives_a_fuzzed_episode():
    state = EpisodeState(seed=1)
    results = [simulate(None, text, state=state) for text in VALID + ["{", "[]", '{"name": "x"}']]
    assert sum(r.ok for r in results) == len(VALID)

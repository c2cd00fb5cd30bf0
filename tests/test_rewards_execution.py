"""Execution reward R_tool: every component on hand-built cases, and behavioural ordering."""

from __future__ import annotations

import json

import pytest

from slca.rewards import ToolRewardWeights, execution_reward, rollout_rewards

KNOWN = {"get_weather", "get_time", "convert_currency"}
WEATHER = {"name": "get_weather", "arguments": {"city": "Lima", "units": "metric"}}
TIME = {"name": "get_time", "arguments": {"zone": "UTC"}}


def turn(*calls: dict, text: str = "") -> str:
    return text + "".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>\n" for c in calls)


def components(reward) -> tuple[float, ...]:
    return tuple(round(getattr(reward, c), 4) for c in ("fmt", "name", "key", "value", "parallel"))


def test_perfect_single_call():
    r = execution_reward([turn(WEATHER), "It is 19 C in Lima."], [[WEATHER]], KNOWN)
    assert components(r) == (1, 1, 1, 1, 1) and r.total == pytest.approx(1.0)
    assert not r.penalty and r.n_calls == 1


def test_duplicated_call():
    r = execution_reward([turn(WEATHER, WEATHER)], [[WEATHER]], KNOWN)
    assert components(r) == (1, round(2 / 3, 4), 1, 1, 0)
    assert r.total == pytest.approx(0.10 + 0.25 * 2 / 3 + 0.15 + 0.20)


def test_missing_parallel_call():
    r = execution_reward([turn(WEATHER)], [[WEATHER, TIME]], KNOWN)
    assert components(r) == (1, round(2 / 3, 4), 0.5, 0.5, 0)


def test_malformed_json_is_an_attempt_not_the_penalty():
    r = execution_reward(['<tool_call>{"name": "get_weather", "arguments": {</tool_call>'], [[WEATHER]], KNOWN)
    assert components(r) == (0, 0, 0, 0, 0) and r.total == 0.0 and not r.penalty


def test_unknown_tool_loses_format_and_name():
    wrong = {"name": "get_wether", "arguments": WEATHER["arguments"]}
    r = execution_reward([turn(wrong)], [[WEATHER]], KNOWN)
    assert components(r) == (0, 0, 0, 0, 1) and r.total == pytest.approx(0.30)


def test_no_call_penalty():
    r = execution_reward(["I think it is sunny."], [[WEATHER]], KNOWN)
    assert r.penalty and r.total == -0.5 and components(r) == (0, 0, 0, 0, 0)
    assert rollout_rewards(r, 0.9) == (0.0, -0.5)
    custom = execution_reward([], [[WEATHER]], KNOWN, no_call_penalty=-1.0)
    assert custom.total == -1.0


def test_irrelevance_task():
    refusal = execution_reward(["I cannot book flights; no tool does that."], [], KNOWN)
    assert refusal.total == pytest.approx(1.0) and components(refusal) == (1, 1, 1, 1, 1)
    called = execution_reward([turn(TIME), "It is noon."], [], KNOWN)
    assert called.total == 0.0 and called.n_calls == 1 and not called.penalty
    assert rollout_rewards(refusal, 0.7) == (pytest.approx(1.0), 0.7)


def test_multi_step_parallel_first_and_per_step():
    gold = [[WEATHER], [TIME]]
    stepwise = execution_reward([turn(WEATHER), turn(TIME), "Done."], gold, KNOWN)
    assert stepwise.parallel == 1.0 and stepwise.total == pytest.approx(1.0)
    merged = execution_reward([turn(WEATHER, TIME), "Done."], gold, KNOWN)
    assert merged.parallel == 0.0 and merged.name == 1.0
    late = execution_reward([turn(WEATHER), turn(TIME, TIME)], gold, KNOWN, parallel_mode="per_step")
    assert late.parallel == 0.5
    with pytest.raises(ValueError, match="parallel_mode"):
        execution_reward([turn(WEATHER)], gold, KNOWN, parallel_mode="all")


def test_arguments_are_matched_to_the_best_unused_prediction():
    lima, oslo = WEATHER, {"name": "get_weather", "arguments": {"city": "Oslo", "units": "metric"}}
    r = execution_reward([turn(oslo, lima)], [[lima, oslo]], KNOWN)
    assert (r.key, r.value) == (1.0, 1.0)
    half = {"name": "get_weather", "arguments": {"city": "Lima"}}
    r = execution_reward([turn(half)], [[lima]], KNOWN)
    assert r.key == pytest.approx(0.5) and r.value == pytest.approx(0.5)


def test_loose_values_and_argument_free_gold():
    gold = {"name": "convert_currency", "arguments": {"amount": 5, "from": "USD", "round": True}}
    said = {
        "name": "convert_currency",
        "arguments": {"amount": "5.0", "from": " usd", "round": "true"},
    }
    assert execution_reward([turn(said)], [[gold]], KNOWN).value == 1.0
    no_args = {"name": "get_time", "arguments": {}}
    r = execution_reward([turn(TIME)], [[no_args]], KNOWN)
    assert (r.key, r.value) == (1.0, 1.0)  # no gold call has arguments


def test_custom_weights():
    weights = ToolRewardWeights(fmt=1.0, name=0.0, key=0.0, value=0.0, parallel=0.0)
    r = execution_reward([turn(WEATHER) + "<tool_call>{bad</tool_call>"], [[WEATHER]], KNOWN, weights=weights)
    assert r.total == pytest.approx(0.5)


def _perturbations() -> dict[str, list[str]]:
    args = WEATHER["arguments"]
    return {
        "wrong name": [turn({"name": "get_time", "arguments": args})],
        "unknown name": [turn({"name": "weather", "arguments": args})],
        "dropped arg": [turn({"name": "get_weather", "arguments": {"city": "Lima"}})],
        "extra arg": [turn({"name": "get_weather", "arguments": {**args, "days": 3}})],
        "wrong value": [turn({"name": "get_weather", "arguments": {**args, "city": "Oslo"}})],
        "renamed key": [turn({"name": "get_weather", "arguments": {"town": "Lima", "units": "metric"}})],
        "extra call": [turn(WEATHER, TIME)],
        "duplicated call": [turn(WEATHER, WEATHER)],
        "split across turns": [turn(WEATHER), turn(WEATHER)],
        "malformed json": [turn(WEATHER).replace("}}", "}")],
        "extra broken block": [turn(WEATHER) + "<tool_call>{</tool_call>"],
        "no call": ["The weather is fine."],
    }


@pytest.mark.parametrize("case", sorted(_perturbations()))
def test_correct_call_beats_every_single_field_perturbation(case):
    correct = execution_reward([turn(WEATHER), "It is 19 C."], [[WEATHER]], KNOWN).total
    perturbed = execution_reward(_perturbations()[case] + ["It is 19 C."], [[WEATHER]], KNOWN).total
    assert correct > perturbed, case

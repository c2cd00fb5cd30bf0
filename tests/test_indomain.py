"""In-domain metrics: hand-built episodes and a scripted perfect policy give known values."""

from __future__ import annotations

import pytest
from policy_fixtures import (
    no_call_task,
    parallel_task,
    single_task,
    small_params,
    tiny_tasks,
)
from scripted_policy import FakeSession, ScriptedPolicy, gold_turns

from slca.eval.indomain import (
    aggregate,
    by_kind,
    episode_metrics,
    evaluate_policy,
    pass_at_k,
    train_values,
)
from slca.rollout import Episode, reward_fn
from slca.train.policy import corpus_texts, train_tokenizer

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>'


def scored(task, turns, responses=(), sample=0):
    """An episode with the given assistant turns, scored by the real HierR rewards."""
    from slca.rollout.loop import tool_blocks

    episode = Episode(
        task, sample, prompt_ids=[1], turns=list(turns), observations=[("get_weather", text) for text in responses]
    )
    episode.calls = [tool_blocks(turn) for turn in turns]
    episode.response_mask = [1] * (7 * len(turns))
    return reward_fn(small_params())(episode)


def test_perfect_episodes_score_full_success():
    single, none = single_task(0), no_call_task(1)
    rows = [
        episode_metrics(scored(single, gold_turns(single), ['{"city": "Lima", "temp_c": 14, "sky": "clear"}']), 0.9),
        episode_metrics(scored(none, gold_turns(none)), 0.9),
    ]
    summary = aggregate(rows)
    assert summary["success"] == 1.0 and summary["process"] == 1.0
    assert summary["name_f1"] == 1.0 and summary["arg_match"] == 1.0
    assert summary["no_call_accuracy"] == 1.0 and summary["call_recall"] == 1.0
    assert summary["calls"] == 0.5 and summary["redundant_call_rate"] == 0.0


def test_failures_are_counted_per_kind():
    single, none = single_task(0), no_call_task(1)
    silent = scored(single, ["I cannot tell."])
    repeated = scored(single, [CALL + "\n" + CALL, "Lima is 14 C and clear today."], ['{"temp_c": 14}'] * 2)
    chatty = scored(none, [CALL, "Here is the weather in Lima."], ['{"temp_c": 14}'])
    episodes = [silent, repeated, chatty]
    rows = [episode_metrics(e, 0.9) for e in episodes]
    assert rows[0]["process"] == 0.0 and rows[0]["success"] == 0.0 and rows[0]["name_f1"] == 0.0
    assert rows[1]["redundant_calls"] == 1.0 and rows[1]["calls"] == 2.0
    assert rows[1]["success"] == 0.0  # the parallel component fails: 2 calls where gold has 1
    table = by_kind(episodes, rows)
    assert table["no_call"]["no_call_accuracy"] == 0.0
    assert table["single"]["call_recall"] == 0.5
    assert table["single"]["redundant_call_rate"] == pytest.approx(1 / 2)
    assert aggregate(rows)["redundant_call_rate"] == pytest.approx(1 / 3)


def test_pass_at_k_takes_the_best_sample_per_task():
    single = single_task(0)
    good = scored(single, gold_turns(single), ['{"city": "Lima", "temp_c": 14, "sky": "clear"}'], sample=1)
    bad = scored(single, ["no idea"], sample=0)
    other = scored(single_task(1), ["no idea"])
    episodes = [bad, good, other]
    result = pass_at_k(episodes, [episode_metrics(e, 0.9) for e in episodes])
    assert result["pass_at_k"] == 0.5 and result["pass_at_k.single"] == 0.5


def test_evaluate_policy_end_to_end_with_a_perfect_policy():
    tokenizer = train_tokenizer(corpus_texts(tiny_tasks(12)), vocab_size=600, seed=0)
    tasks = [single_task(0, "test"), parallel_task(1, "test"), no_call_task(2, "test")]
    params = small_params().model_copy(update={"eval": small_params().eval.model_copy(update={"pass_k": 2})})
    result = evaluate_policy(ScriptedPolicy(tokenizer, tasks), tokenizer, tasks, params, env=lambda task: FakeSession())
    metrics = result["metrics"]
    assert metrics["success"] == 1.0 and metrics["pass_at_k"] == 1.0
    assert metrics["no_call_accuracy"] == 1.0 and metrics["calls"] == 1.0
    assert metrics["success.parallel"] == 1.0 and set(result["per_kind"]) == {"single", "parallel", "no_call"}
    assert metrics["generated_tokens"] > 10


@pytest.mark.parametrize(
    ("policy_dtype", "eval_dtype", "expected"), [("bfloat16", "float32", "float32"), ("bfloat16", "policy", "bfloat16")]
)
def test_evaluation_generates_in_the_eval_dtype(monkeypatch, policy_dtype, eval_dtype, expected):
    """Greedy and pass@k generators are built in `eval.generation_dtype` (`policy` = the policy's)."""
    import slca.rollout.evaluation as evaluation

    built, real = [], evaluation.turn_generator

    def spy(*args, **kwargs):
        built.append(kwargs["dtype"])
        return real(*args, **{**kwargs, "dtype": "float32"})  # the scripted policy has no bf16 copy

    monkeypatch.setattr(evaluation, "turn_generator", spy)
    tokenizer = train_tokenizer(corpus_texts(tiny_tasks(12)), vocab_size=600, seed=0)
    tasks = [single_task(0, "test"), no_call_task(2, "test")]
    base = small_params()
    params = base.model_copy(
        update={
            "policy": base.policy.model_copy(update={"generation_dtype": policy_dtype}),
            "eval": base.eval.model_copy(update={"pass_k": 2, "generation_dtype": eval_dtype}),
        }
    )
    result = evaluate_policy(ScriptedPolicy(tokenizer, tasks), tokenizer, tasks, params, env=lambda task: FakeSession())
    assert built == [expected, expected] and result["metrics"]["success"] == 1.0


def test_argument_values_are_split_into_seen_in_training_and_held_out():
    train = [single_task(0), single_task(1)]  # Lima, Oslo
    seen = train_values(train)
    assert seen == train_values([single_task(0), single_task(1)]) and len(seen) == 2
    lima, quito = single_task(0, "val"), single_task(2, "val")  # Lima was trained on, Quito never
    wrong_city = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    rows = [
        episode_metrics(scored(lima, [CALL.replace("Lima", " lima ")]), 0.9, seen),  # loosely equal
        episode_metrics(scored(quito, [wrong_city]), 0.9, seen),  # a trained value where a new one belongs
        episode_metrics(scored(quito, [CALL.replace("Lima", "Quito")]), 0.9, seen),
    ]
    assert [
        (r["values_seen"], r["values_seen_right"], r["values_heldout"], r["values_heldout_right"]) for r in rows
    ] == [(1, 1, 0, 0), (0, 0, 1, 0), (0, 0, 1, 1)]
    summary = aggregate(rows)
    assert summary["arg_match_seen"] == 1.0 and summary["arg_match_heldout"] == 0.5
    assert "arg_match_seen" not in aggregate([episode_metrics(scored(lima, [CALL]), 0.9)])  # no pool: no split
    other_tool = CALL.replace("get_weather", "get_time")
    assert episode_metrics(scored(lima, [other_tool]), 0.9, seen)["values_seen_right"] == 0  # same tool only

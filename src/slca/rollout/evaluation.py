"""In-domain evaluation of a live policy: greedy episodes against the REAL tool executors, and their metrics.

The one evaluation every caller shares: the evaluate stage (`slca.eval.indomain.evaluate_path`
on a saved policy), the learning curve (`slca.train.val_curve`) and the SFT sweep
(`slca.train.sweep`) on a policy still in memory; it lives in `rollout` so that training and
evaluation both sit above it.

Per episode: Name-F1 and ArgMatch (the execution reward's name and value components), Process
(= R_tool), Success ((R_tool + R_sum) / 2 >= eval.success_threshold), whether any call was made,
calls, redundant calls (identical name + arguments repeated in one episode) and generated tokens.
Aggregates: overall and per task kind, greedy, plus pass@k over `eval.pass_k` sampled episodes.
Episodes are generated `eval.batch_size` at a time (`slca.rollout.cached`: one KV cache per batch).

Given the values of the train split's gold calls (`seen_values`), each gold argument value is also
counted as *seen* (it appears as some argument value in training) or *held-out*, and whether a call
of the same tool wrote it: `arg_match_seen` and `arg_match_heldout` are the shares written right.
A scratch model can copy a held-out value only from the request; a seen one it may recall.

    result = evaluate_policy(model, tokenizer, tasks, params)
    result["metrics"]["success"], result["per_kind"]["parallel"]["success"]
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from slca.rewards.values import loosely_equal, normalise
from slca.rollout.cached import turn_generator
from slca.rollout.loop import Episode, call_key, run_episodes
from slca.rollout.precision import eval_generation_dtype
from slca.rollout.scoring import eval_env, reward_fn

MEAN_METRICS = ("name_f1", "arg_match", "process", "r_sum", "success", "calls", "redundant_calls", "generated_tokens")


def value_key(value: Any) -> str:
    """A value's identity under loose equality (trimmed, lower-cased, numbers as floats)."""
    return json.dumps(normalise(value), sort_keys=True, ensure_ascii=False, default=str)


def train_values(tasks: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Every top-level argument value of the given tasks' gold calls (as `value_key`)."""
    return frozenset(
        value_key(value)
        for task in tasks
        for step in task.get("gold_steps") or []
        for call in step
        for value in (call.get("arguments") or {}).values()
    )


def value_hits(episode: Episode, seen_values: frozenset[str]) -> dict[str, float]:
    """Gold argument values, seen in training or held-out, and how many a same-tool call wrote."""
    predicted = [call for parsed in episode.parsed for call in parsed.calls]
    out = {"values_seen": 0.0, "values_seen_right": 0.0, "values_heldout": 0.0, "values_heldout_right": 0.0}
    for step in episode.task.get("gold_steps") or []:
        for gold in step:
            same = [dict(call.get("arguments") or {}) for call in predicted if call.get("name") == gold["name"]]
            for key, value in (gold.get("arguments") or {}).items():
                kind = "values_seen" if value_key(value) in seen_values else "values_heldout"
                out[kind] += 1
                out[f"{kind}_right"] += float(any(key in args and loosely_equal(value, args[key]) for args in same))
    return out


def episode_metrics(episode: Episode, threshold: float, seen_values: frozenset[str] | None = None) -> dict[str, float]:
    """The per-episode numbers every aggregate is built from (rewards must be filled)."""
    reward, parsed = episode.tool_reward, episode.parsed
    blocks = [body for turn in episode.calls for body in turn]
    keys = [call_key(body) for body in blocks]
    needs_call = bool(episode.task.get("gold_steps"))
    return {
        "name_f1": 0.0 if reward is None or reward.penalty else float(reward.name),
        "arg_match": 0.0 if reward is None or reward.penalty else float(reward.value),
        "process": float(episode.r_tool),
        "r_sum": float(episode.r_sum),
        "success": float(episode.scores.get("success", (episode.r_tool + episode.r_sum) / 2 >= threshold)),
        "called": float(bool(blocks)),
        "needs_call": float(needs_call),
        "calls": float(len(blocks)),
        "redundant_calls": float(len(keys) - len(set(keys))),
        "generated_tokens": float(episode.n_generated),
        "call_blocks": float(sum(p.n_blocks for p in parsed)),
        "valid_blocks": float(sum(p.n_valid for p in parsed)),
        **(value_hits(episode, seen_values) if seen_values is not None else {}),
    }


def aggregate(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Means over episodes, no-call accuracy, call recall and the redundant-call rate."""
    if not rows:
        return {"n": 0.0}
    n = len(rows)
    out = {name: sum(row[name] for row in rows) / n for name in MEAN_METRICS}
    no_call = [row for row in rows if not row["needs_call"]]
    with_call = [row for row in rows if row["needs_call"]]
    if no_call:
        out["no_call_accuracy"] = sum(1.0 - row["called"] for row in no_call) / len(no_call)
    if with_call:
        out["call_recall"] = sum(row["called"] for row in with_call) / len(with_call)
    blocks = sum(row.get("call_blocks", 0.0) for row in rows)
    # well-formed calls: valid <tool_call> blocks (JSON, known tool, dict of arguments) / blocks written
    out["well_formed_calls"] = sum(row.get("valid_blocks", 0.0) for row in rows) / blocks if blocks else 0.0
    total_calls = sum(row["calls"] for row in rows)
    out["redundant_call_rate"] = sum(row["redundant_calls"] for row in rows) / total_calls if total_calls else 0.0
    for kind in ("seen", "heldout"):
        values = sum(row.get(f"values_{kind}", 0.0) for row in rows)
        if values:
            out[f"arg_match_{kind}"] = sum(row.get(f"values_{kind}_right", 0.0) for row in rows) / values
            out[f"values_{kind}"] = values
    out["n"] = float(n)
    return out


def by_kind(episodes: Sequence[Episode], rows: Sequence[Mapping[str, float]]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[Mapping[str, float]]] = defaultdict(list)
    for episode, row in zip(episodes, rows, strict=True):
        groups[str(episode.task.get("kind", "unknown"))].append(row)
    return {kind: aggregate(groups[kind]) for kind in sorted(groups)}


def pass_at_k(episodes: Sequence[Episode], rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Share of tasks where at least one sampled episode succeeded, overall and per kind."""
    best: dict[str, tuple[str, float]] = {}
    for episode, row in zip(episodes, rows, strict=True):
        kind, seen = str(episode.task.get("kind", "unknown")), best.get(episode.task_id, ("", 0.0))[1]
        best[episode.task_id] = (kind, max(seen, row["success"]))
    out = {"pass_at_k": sum(v for _, v in best.values()) / len(best)} if best else {}
    kinds: dict[str, list[float]] = defaultdict(list)
    for kind, value in best.values():
        kinds[kind].append(value)
    out.update({f"pass_at_k.{kind}": sum(v) / len(v) for kind, v in sorted(kinds.items())})
    return out


def flatten_table(table: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {f"{name}.{kind}": value for kind, row in table.items() for name, value in row.items() if name != "n"}


def prompt_size(task: Mapping[str, Any]) -> int:
    """Characters of a task's prompt (messages and tool schemas): orders tasks into like-sized batches."""
    return len(json.dumps(task.get("tools") or [])) + sum(len(str(m.get("content") or "")) for m in task["messages"])


def evaluate_policy(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Mapping[str, Any]],
    params: Any,
    *,
    env: Any = None,
    judge: Any = None,
    seen_values: frozenset[str] | None = None,
) -> dict[str, Any]:
    """Greedy (and, with eval.pass_k > 1, sampled) in-domain evaluation with real executors.

    `seen_values` (`train_values` of the train split) adds `arg_match_seen` / `arg_match_heldout`.

    Returns {"metrics": flat dict (overall, `<metric>.<kind>`, pass@k), "per_kind": {kind: {...}},
    "episodes": one row per greedy episode (task id, kind and its numbers, for paired statistics)}.
    """
    tasks = list(tasks)[: params.eval.n_test]
    env = env if env is not None else eval_env(params)
    score = reward_fn(params, judge)
    rollout = {
        "env_factory": env,
        "max_turns": params.train.max_tool_turns,
        "max_new_tokens": params.train.max_completion_length,
        "reward_fn": score,
    }
    threshold = params.eval.success_threshold
    seed = params.project.seed
    dtype, batch = eval_generation_dtype(params), params.eval.batch_size
    greedy_generator = turn_generator(model, tokenizer, temperature=0.0, seed=seed, dtype=dtype)
    # batches of like-sized prompts (a batch is prefilled to its longest prompt), reported in task order
    order = sorted(range(len(tasks)), key=lambda i: prompt_size(tasks[i]))
    by_size = [tasks[i] for i in order]
    done = [
        episode
        for start in range(0, len(by_size), batch)
        for episode in run_episodes(greedy_generator, by_size[start : start + batch], num_samples=1, **rollout)
    ]
    greedy = done.copy()
    for position, episode in zip(order, done, strict=True):
        greedy[position] = episode
    rows = [episode_metrics(episode, threshold, seen_values) for episode in greedy]
    per_kind = by_kind(greedy, rows)
    metrics = {**aggregate(rows), **flatten_table(per_kind)}
    if params.eval.pass_k > 1:
        sampler = turn_generator(model, tokenizer, temperature=params.train.temperature, seed=seed, dtype=dtype)
        per_chunk = max(1, batch // params.eval.pass_k)
        sampled = [
            episode
            for start in range(0, len(tasks), per_chunk)
            for episode in run_episodes(
                sampler, tasks[start : start + per_chunk], num_samples=params.eval.pass_k, **rollout
            )
        ]
        metrics.update(pass_at_k(sampled, [episode_metrics(e, threshold) for e in sampled]))
    metrics["pass_k"] = float(params.eval.pass_k)
    episodes = [
        {"task_id": episode.task_id, "kind": str(episode.task.get("kind", "unknown")), **row}
        for episode, row in zip(greedy, rows, strict=True)
    ]
    return {"metrics": metrics, "per_kind": per_kind, "episodes": episodes}

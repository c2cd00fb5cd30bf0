"""Execution reward R_tool: rule-based score of a rollout's tool calls against the gold calls.

    R_tool = 0.10·fmt + 0.25·name + 0.15·key + 0.20·value + 0.30·parallel      (DESIGN §1)

`assistant_turns` is the text of each assistant message in order; the well-formed calls of a
turn form one predicted step (turns without calls are not steps). Over all turns:
- fmt      = valid blocks / blocks, blocks = Σ_turn max(#open, #close) tags;
- name     = multiset F1 of the tool names, flattened over steps;
- key      = for each gold call, the best unused prediction with the same name (pairs assigned
             greedily, best key+value score first), Jaccard of the argument keys; a gold call
             left unmatched scores 0; averaged over gold calls;
- value    = same pairing, loosely-equal values / #gold keys (a gold call without arguments
             scores 1 when matched); key and value are 1.0 when no gold call has arguments;
- parallel = 1 if #calls in the first predicted step == #calls in the first gold step
             (`parallel_mode="per_step"` averages that test over all gold steps instead).

Special cases:
- no-call penalty: the gold needs a call and the rollout wrote no `<tool_call>` tag at all →
  total = `no_call_penalty` (−0.5), every component 0, `penalty=True`. Writing a malformed
  block is an attempt, not a refusal: it is scored normally (and earns close to 0);
- irrelevance (gold_steps == []): no tag written → every component 1 (total = Σ weights, 1.0 by
  default); any tag written → every component 0, total 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any, Literal

from slca.rewards.parsing import ParsedCalls, parse_tool_calls
from slca.rewards.values import loosely_equal

Call = dict[str, Any]
COMPONENTS = ("fmt", "name", "key", "value", "parallel")


@dataclass(frozen=True)
class ToolRewardWeights:
    """Weights of the execution-reward components (they sum to 1 by default)."""

    fmt: float = 0.10
    name: float = 0.25
    key: float = 0.15
    value: float = 0.20
    parallel: float = 0.30

    def combine(self, parts: dict[str, float]) -> float:
        return sum(getattr(self, c) * parts[c] for c in COMPONENTS)


@dataclass(frozen=True)
class ToolReward:
    """R_tool (`total`) and its components for one rollout."""

    total: float
    fmt: float
    name: float
    key: float
    value: float
    parallel: float
    penalty: bool
    n_calls: int

    def as_dict(self) -> dict[str, float | bool | int]:
        return asdict(self)


def name_f1(predicted: list[str], gold: list[str]) -> float:
    """Multiset F1 of tool names; 1.0 when both are empty."""
    if not predicted and not gold:
        return 1.0
    overlap = sum((Counter(predicted) & Counter(gold)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted), overlap / len(gold)
    return 2 * precision * recall / (precision + recall)


def key_jaccard(gold_args: dict[str, Any], predicted_args: dict[str, Any]) -> float:
    """Jaccard of the argument key sets; 1.0 when both are empty."""
    gold_keys, predicted_keys = set(gold_args), set(predicted_args)
    union = gold_keys | predicted_keys
    return len(gold_keys & predicted_keys) / len(union) if union else 1.0


def value_match(gold_args: dict[str, Any], predicted_args: dict[str, Any]) -> float:
    """Loosely-equal values / #gold keys; 1.0 when the gold call has no arguments."""
    if not gold_args:
        return 1.0
    hits = sum(1 for k, v in gold_args.items() if k in predicted_args and loosely_equal(v, predicted_args[k]))
    return hits / len(gold_args)


def match_arguments(gold: list[Call], predicted: list[Call]) -> tuple[float, float]:
    """(key, value) averaged over gold calls, pairing each with its best unused same-name call."""
    if not any(g.get("arguments") for g in gold):
        return 1.0, 1.0
    pairs = []
    for gi, g in enumerate(gold):
        for pi, p in enumerate(predicted):
            if p["name"] == g["name"]:
                k, v = (
                    key_jaccard(g["arguments"], p["arguments"]),
                    value_match(g["arguments"], p["arguments"]),
                )
                pairs.append((-(k + v), gi, pi, k, v))
    pairs.sort()  # best score first; ties broken by gold then prediction order
    used_gold: set[int] = set()
    used_pred: set[int] = set()
    key_total = value_total = 0.0
    for _, gi, pi, k, v in pairs:
        if gi in used_gold or pi in used_pred:
            continue
        used_gold.add(gi)
        used_pred.add(pi)
        key_total += k
        value_total += v
    return key_total / len(gold), value_total / len(gold)


def parallel_score(predicted_steps: list[list[Call]], gold_steps: list[list[Call]], mode: str) -> float:
    """1 if the first steps hold equally many calls; `per_step` averages over gold steps."""
    counts = [len(s) for s in predicted_steps]
    if mode == "first":
        return float(bool(counts) and counts[0] == len(gold_steps[0]))
    if mode == "per_step":
        hits = [i < len(counts) and counts[i] == len(g) for i, g in enumerate(gold_steps)]
        return sum(hits) / len(hits)
    raise ValueError(f"parallel_mode must be 'first' or 'per_step'; got {mode!r}")


def _uniform(total: float, level: float, penalty: bool, n_calls: int) -> ToolReward:
    return ToolReward(total, level, level, level, level, level, penalty, n_calls)


def _clean_gold(gold_steps: list[list[dict]]) -> list[list[Call]]:
    steps = [[{"name": c["name"], "arguments": dict(c.get("arguments") or {})} for c in step] for step in gold_steps]
    return [s for s in steps if s]


def execution_reward(
    assistant_turns: list[str],
    gold_steps: list[list[dict]],
    known_tools: Collection[str] | None,
    *,
    weights: ToolRewardWeights = ToolRewardWeights(),
    no_call_penalty: float = -0.5,
    parallel_mode: Literal["first", "per_step"] = "first",
    parsed: list[ParsedCalls] | None = None,
) -> ToolReward:
    """Score one rollout's calls against the gold steps (see the module docstring).

    `parsed`: the turns already parsed with `parse_tool_calls(turn, known_tools)`, when the caller has them."""
    if parsed is None:
        parsed = [parse_tool_calls(turn, known_tools) for turn in assistant_turns]
    predicted_steps = [p.calls for p in parsed if p.calls]
    n_blocks = sum(p.n_blocks for p in parsed)
    n_calls = sum(len(s) for s in predicted_steps)
    gold = _clean_gold(gold_steps)
    if not gold:
        if n_blocks == 0:
            return _uniform(weights.combine(dict.fromkeys(COMPONENTS, 1.0)), 1.0, False, 0)
        return _uniform(0.0, 0.0, False, n_calls)
    if n_blocks == 0:
        return _uniform(no_call_penalty, 0.0, True, 0)
    predicted = [c for step in predicted_steps for c in step]
    gold_calls = [c for step in gold for c in step]
    key, value = match_arguments(gold_calls, predicted)
    parts = {
        "fmt": sum(p.n_valid for p in parsed) / n_blocks,
        "name": name_f1([c["name"] for c in predicted], [c["name"] for c in gold_calls]),
        "key": key,
        "value": value,
        "parallel": parallel_score(predicted_steps, gold, parallel_mode),
    }
    return ToolReward(total=weights.combine(parts), penalty=False, n_calls=n_calls, **parts)

"""Reward inputs of the ToolPO and RLTR baselines, as their papers' code defines them.

- ToolPO trains tool tokens on the **correct-call ratio** Σ C(a_call) / |gold calls|: a predicted
  call is correct when it names a gold tool and its arguments equal that gold call's (same keys,
  loosely equal values); each gold call can be matched once. A task whose gold needs no call
  scores 1 when no call was written and 0 otherwise.
- RLTR trains the planner on R_comp + R_repeat + R_error:
  R_comp = 1[process ≥ threshold] (process = R_tool after the no-call penalty),
  R_repeat = −λ·(calls identical to the call right before them),
  R_error = −μ·(calls the environment rejected with an error);
  the reward is −1 when the format is invalid (a block that is not a well-formed call to a
  known tool), which is why malformed calls need no term of their own in R_error.

    parsed = [parse_tool_calls(turn, known) for turn in turns]
    ratio = call_accuracy(parsed, gold_steps)
    parts = rltr_reward(parsed, r_tool, n_env_errors, threshold=0.9, repeat_penalty=0.25, invalid_penalty=0.25)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import pairwise

from slca.rewards.parsing import ParsedCalls
from slca.rewards.values import calls_match


def call_accuracy(parsed: Sequence[ParsedCalls], gold_steps: Sequence[Sequence[dict]]) -> float:
    """ToolPO's correct-call ratio Σ C(a_call)/|gold| over the parsed turns (module docstring)."""
    predicted = [call for p in parsed for call in p.calls]
    gold = [call for step in gold_steps for call in step]
    if not gold:
        return 0.0 if any(p.n_blocks for p in parsed) else 1.0
    unused = list(range(len(gold)))
    correct = 0
    for call in predicted:
        match = next((i for i in unused if calls_match(gold[i], call)), None)
        if match is not None:
            unused.remove(match)
            correct += 1
    return correct / len(gold)


def rltr_reward(
    parsed: Sequence[ParsedCalls],
    process: float,
    env_errors: int,
    *,
    threshold: float,
    repeat_penalty: float,
    invalid_penalty: float,
) -> dict[str, float]:
    """RLTR's planner reward and its parts over the parsed turns (see the module docstring)."""
    n_blocks = sum(p.n_blocks for p in parsed)
    n_valid = sum(p.n_valid for p in parsed)
    keys = [json.dumps(call, sort_keys=True) for p in parsed for call in p.calls]
    repeats = sum(1 for before, key in pairwise(keys) if key == before)
    parts = {
        "rltr_comp": float(process >= threshold),
        "rltr_repeat": -repeat_penalty * repeats,
        "rltr_error": -invalid_penalty * env_errors,
        "rltr_format_ok": float(n_valid == n_blocks),
    }
    total = -1.0 if n_valid < n_blocks else parts["rltr_comp"] + parts["rltr_repeat"] + parts["rltr_error"]
    return {"rltr": total, **parts}

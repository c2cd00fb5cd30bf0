"""Environments and the one scoring path for rollouts, in training and evaluation alike.

    env = eval_env(params)                 # task -> session over the real executors
    env = training_env(params)             # task -> grounded session over the configured simulator
    score = reward_fn(params)              # fills episode.scores (HierR, baselines, success)
    episodes = run_episodes(generator, tasks, env_factory=env, ..., reward_fn=score)

`score_episode` computes, for one finished rollout:
- R_tool and its components (execution reward against the gold steps), the no-call penalty;
- R_sum: the judge scores the summary against the user request, the tool responses this rollout
  observed, and the requested facts as those responses state them (`slca.rewards.facts`);
- the baselines' reward inputs: ToolPO's correct-call ratio, RLTR's planner reward and parts;
- Success ((R_tool + R_sum)/2 ≥ eval.success_threshold) and the task kind.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from slca.rollout.grounding import GroundedSession
from slca.rollout.loop import Episode

KINDS = ("no_call", "single", "parallel", "multiple", "multi_step")


def env_factory(
    params: Any, backend: str | None = None, world: Any = None, *, grounded: bool = False
) -> Callable[[Mapping[str, Any]], Any]:
    """task -> a fresh `SimulatorSession` over the task's tools (backend from params unless given).

    The `real` backend runs the catalog's executors on a copy of the synthesis world, so every
    episode starts from the state the gold responses were computed against. `grounded` wraps the
    session so the task's gold calls get their recorded responses (`slca.rollout.grounding`).
    """
    from slca.simulator import SimulatorSession

    name = backend or params.simulator.backend
    if name == "real" and world is None:
        from slca.tools import World

        world = World(params.data.world_seed)

    def make(task: Mapping[str, Any]) -> Any:
        session = SimulatorSession(list(task.get("tools") or []), name, params, world=world, seed=params.project.seed)
        return GroundedSession(task, session) if grounded else session

    return make


def eval_env(params: Any) -> Callable[[Mapping[str, Any]], Any]:
    """Evaluation: the real executors."""
    return env_factory(params, backend="real")


def training_env(params: Any) -> Callable[[Mapping[str, Any]], Any]:
    """Training: the configured simulator, grounded on the task's recorded gold calls (params)."""
    return env_factory(params, grounded=params.simulator.grounded)


def build_judge(params: Any) -> Any:
    """The summary judge configured in `params.rewards`."""
    from slca.rewards import judge_from_params

    return judge_from_params(params.rewards)


def user_request(task: Mapping[str, Any]) -> str:
    users = [m.get("content") or "" for m in task.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def _error_responses(episode: Episode) -> int:
    from slca.rewards.facts import parse_observation

    return sum(1 for _, text in episode.observations if parse_observation(text) is None)


def score_episode(episode: Episode, params: Any, judge: Any) -> Episode:
    """Fill `episode.scores`, `episode.tool_reward` and `episode.parsed` (see the module docstring)."""
    from slca.rewards import (
        execution_reward,
        execution_settings,
        rollout_rewards,
        summary_reward,
    )
    from slca.rewards.baselines import call_accuracy, rltr_reward
    from slca.rewards.execution import COMPONENTS
    from slca.rewards.facts import observed_facts
    from slca.rewards.parsing import parse_tool_calls

    task = episode.task
    known = [tool["function"]["name"] for tool in task.get("tools") or [] if "function" in tool]
    gold = task.get("gold_steps") or []
    parsed = [parse_tool_calls(turn, known) for turn in episode.turns]  # once, for every reward below
    tool_reward = execution_reward(episode.turns, gold, known, parsed=parsed, **execution_settings(params.rewards))
    facts = observed_facts(task, episode.observations)
    r_sum = summary_reward(
        judge,
        episode.summary,
        episode.tool_responses,
        facts,
        user_request(task),
        min_chars=params.rewards.min_summary_chars,
        no_call_task=not gold,
    )
    r_tool, r_sum = rollout_rewards(tool_reward, r_sum)
    rltr = params.credit.rltr
    scores = {
        "r_tool": r_tool,
        "r_sum": r_sum,
        "penalty": float(tool_reward.penalty),
        **{name: float(getattr(tool_reward, name)) for name in COMPONENTS},
        "call_accuracy": call_accuracy(parsed, gold),
        **rltr_reward(
            parsed,
            r_tool,
            _error_responses(episode),
            threshold=rltr.completeness_threshold,
            repeat_penalty=rltr.repeat_penalty,
            invalid_penalty=rltr.invalid_penalty,
        ),
        "success": float((r_tool + r_sum) / 2 >= params.eval.success_threshold),
    }
    episode.tool_reward, episode.parsed = tool_reward, parsed
    episode.scores = scores
    return episode


def reward_fn(params: Any, judge: Any = None) -> Callable[[Episode], Episode]:
    judge = judge if judge is not None else build_judge(params)
    return lambda episode: score_episode(episode, params, judge)


def per_kind_means(episodes: list[Episode], prefix: str = "rollout") -> dict[str, float]:
    """`<prefix>/reward.<kind>` (R_tool + R_sum) and `<prefix>/success.<kind>` for kinds present."""
    out: dict[str, float] = {}
    for kind in KINDS:
        rows = [e for e in episodes if e.task.get("kind") == kind and e.scores]
        if rows:
            out[f"{prefix}/reward.{kind}"] = sum(e.r_tool + e.r_sum for e in rows) / len(rows)
            out[f"{prefix}/success.{kind}"] = sum(e.scores["success"] for e in rows) / len(rows)
    return out

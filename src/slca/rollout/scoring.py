"""Environments and HierR scoring for rollouts: simulator sessions per task, rewards per episode.

    env = env_factory(params, backend="real")          # task -> session answering tool calls
    score = reward_fn(params)                          # fills episode.r_tool / r_sum / penalty
    episodes = run_episodes(..., env_factory=env, reward_fn=score)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from slca.rollout.loop import Episode


def env_factory(params: Any, backend: str | None = None, world: Any = None) -> Callable[[Mapping[str, Any]], Any]:
    """task -> a fresh `SimulatorSession` over the task's tools (backend from params unless given).

    The `real` backend runs the catalog's executors on a copy of the synthesis world, so every
    episode starts from the state the gold responses were computed against.
    """
    from slca.simulator import SimulatorSession

    name = backend or params.simulator.backend
    if name == "real" and world is None:
        from slca.tools import World

        world = World(params.data.world_seed)

    def make(task: Mapping[str, Any]) -> Any:
        return SimulatorSession(list(task.get("tools") or []), name, params, world=world)

    return make


def build_judge(params: Any) -> Any:
    """The summary judge configured in `params.rewards`."""
    from slca.rewards import judge_from_params

    return judge_from_params(params.rewards)


def user_request(task: Mapping[str, Any]) -> str:
    users = [m.get("content") or "" for m in task.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def score_episode(episode: Episode, params: Any, judge: Any) -> Episode:
    """R_tool (execution vs gold), R_sum (judge on the final answer), no-call penalty override."""
    from slca.rewards import (
        execution_reward,
        execution_settings,
        rollout_rewards,
        summary_reward,
    )

    task = episode.task
    known = [tool["function"]["name"] for tool in task.get("tools") or [] if "function" in tool]
    tool_reward = execution_reward(episode.assistant_turns, task.get("gold_steps") or [], known,
                                   **execution_settings(params.rewards))
    no_call_task = not (task.get("gold_steps") or [])
    r_sum = summary_reward(judge, episode.summary, episode.tool_responses, list(task.get("reference") or []),
                           user_request(task), min_chars=params.rewards.min_summary_chars, no_call_task=no_call_task)
    episode.tool_reward = tool_reward
    episode.r_tool, episode.r_sum = rollout_rewards(tool_reward, r_sum)
    episode.penalty = bool(tool_reward.penalty)
    return episode


def reward_fn(params: Any, judge: Any = None) -> Callable[[Episode], Episode]:
    judge = judge if judge is not None else build_judge(params)
    return lambda episode: score_episode(episode, params, judge)

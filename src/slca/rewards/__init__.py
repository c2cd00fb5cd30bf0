"""HierR: the execution reward R_tool, the preference reward R_sum, and the shared call parser.

`rollout_rewards(tool_reward, r_sum)` gives the pair the advantage estimators consume: a
penalised rollout (gold needed a call, none made) gets R_tool = 0 and R_sum overridden by the
penalty total (−0.5), so R_tool + R_sum equals that total (DESIGN §1).
"""

from slca.rewards.execution import ToolReward, ToolRewardWeights, execution_reward
from slca.rewards.parsing import ParsedCalls, parse_tool_calls
from slca.rewards.preference import (
    Judge,
    JudgeFailure,
    get_judge,
    judge_from_params,
    list_judges,
    summary_reward,
)


def execution_settings(rewards: object) -> dict:
    """`execution_reward` keyword arguments from the `rewards` params section (slca.config)."""
    return {
        "weights": ToolRewardWeights(**rewards.tool_weights.model_dump()),  # type: ignore[attr-defined]
        "no_call_penalty": rewards.no_call_penalty,  # type: ignore[attr-defined]
        "parallel_mode": rewards.parallel_mode,  # type: ignore[attr-defined]
    }


def rollout_rewards(tool_reward: ToolReward, r_sum: float) -> tuple[float, float]:
    """(R_tool, R_sum) of one rollout after the no-call penalty override."""
    if tool_reward.penalty:
        return 0.0, tool_reward.total
    return tool_reward.total, r_sum


__all__ = [
    "Judge",
    "JudgeFailure",
    "ParsedCalls",
    "ToolReward",
    "ToolRewardWeights",
    "execution_reward",
    "execution_settings",
    "get_judge",
    "judge_from_params",
    "list_judges",
    "parse_tool_calls",
    "rollout_rewards",
    "summary_reward",
]

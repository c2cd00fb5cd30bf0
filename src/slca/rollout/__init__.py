"""Rollouts: one engine (generate a turn, parse `<tool_call>`, answer, continue) for training and
evaluation, its turn generators, environments and the one scoring path.

    from slca.rollout import HFTurnGenerator, run_episodes, eval_env, training_env, reward_fn
"""

from slca.rollout.chat import (
    gold_conversation,
    prompt_messages,
    render_prompt,
    tool_calls_message,
    tool_content,
    tool_message,
)
from slca.rollout.hf import make_generate_fn
from slca.rollout.loop import (
    Episode,
    HFTurnGenerator,
    Turn,
    TurnGenerator,
    generate_turns,
    new_episodes,
    run_episodes,
    tool_blocks,
    tool_suffix_ids,
    turn_text,
)
from slca.rollout.scoring import (
    KINDS,
    build_judge,
    env_factory,
    eval_env,
    per_kind_means,
    reward_fn,
    score_episode,
    training_env,
)

__all__ = [
    "KINDS",
    "Episode",
    "HFTurnGenerator",
    "Turn",
    "TurnGenerator",
    "build_judge",
    "env_factory",
    "eval_env",
    "generate_turns",
    "gold_conversation",
    "make_generate_fn",
    "new_episodes",
    "per_kind_means",
    "prompt_messages",
    "render_prompt",
    "reward_fn",
    "run_episodes",
    "score_episode",
    "tool_blocks",
    "tool_calls_message",
    "tool_content",
    "tool_message",
    "tool_suffix_ids",
    "training_env",
    "turn_text",
]

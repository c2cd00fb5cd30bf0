"""Rollouts: the multi-turn agent loop (generate, parse `<tool_call>`, answer, continue) and its scoring.

    from slca.rollout import run_episodes, env_factory, reward_fn, make_generate_fn
"""

from slca.rollout.chat import (
    gold_conversation,
    prompt_messages,
    tool_calls_message,
    tool_content,
    tool_message,
)
from slca.rollout.hf import make_generate_fn
from slca.rollout.loop import (
    Episode,
    generate_turns,
    run_episodes,
    tool_blocks,
    tool_suffix_ids,
    turn_text,
)
from slca.rollout.scoring import build_judge, env_factory, reward_fn, score_episode

__all__ = [
    "Episode",
    "build_judge",
    "env_factory",
    "generate_turns",
    "gold_conversation",
    "make_generate_fn",
    "prompt_messages",
    "reward_fn",
    "run_episodes",
    "score_episode",
    "tool_blocks",
    "tool_calls_message",
    "tool_content",
    "tool_message",
    "tool_suffix_ids",
    "turn_text",
]

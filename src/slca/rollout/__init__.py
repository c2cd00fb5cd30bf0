"""Rollouts: the multi-turn agent loop (generate, parse `<tool_call>`, answer, continue).

    from slca.rollout import run_episodes, gold_conversation
"""

from slca.rollout.chat import gold_conversation, prompt_messages, tool_calls_message, tool_content, tool_message

__all__ = ["gold_conversation", "prompt_messages", "tool_calls_message", "tool_content", "tool_message"]

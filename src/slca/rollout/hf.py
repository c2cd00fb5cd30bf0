"""A `generate_fn(messages, tools) -> str` adapter over a Hugging Face model, for benchmark runners.

BFCL and tau2 runners hand over a chat (OpenAI-style messages, tool schemas) and want the raw
assistant text back; the policy answers greedily with its chat template.

    generate = make_generate_fn(model, tokenizer, max_new_tokens=256)
    text = generate([{"role": "user", "content": "Weather in Lima?"}], tools)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slca.rollout.loop import generate_turns, turn_text


def make_generate_fn(model: Any, tokenizer: Any, max_new_tokens: int = 256
                     ) -> Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None], str]:
    """Greedy single-turn generation from a chat; returns the decoded assistant text (tool tags kept)."""
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30

    def generate(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> str:
        ids = tokenizer.apply_chat_template(list(messages), tools=list(tools) if tools else None, tokenize=True,
                                            return_dict=False, add_generation_prompt=True)
        budget = min(max_new_tokens, limit - len(ids))
        if budget <= 0:
            return ""
        model.eval()
        turn = generate_turns(model, tokenizer, [ids], max_new_tokens=budget, temperature=0.0, seed=0)[0]
        return turn_text(tokenizer, turn)

    return generate

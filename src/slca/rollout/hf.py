"""A `generate_fn(messages, tools) -> str` adapter over a Hugging Face model, for benchmark runners.

BFCL and tau2 runners hand over a chat (OpenAI-style messages, tool schemas) and want the raw
assistant text back; the policy answers greedily with its chat template.

    generate = make_generate_fn(model, tokenizer, max_new_tokens=256)
    text = generate([{"role": "user", "content": "Weather in Lima?"}], tools)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slca.rollout.chat_format import chat_format, render
from slca.rollout.loop import generate_turns, turn_text


def make_generate_fn(model: Any, tokenizer: Any, max_new_tokens: int = 256
                     ) -> Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None], str]:
    """Greedy single-turn generation from a chat; returns the assistant text in canonical form
    (`<tool_call>` blocks). Earlier assistant turns, canonical too, go back to the model in its own tags."""
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    fmt = chat_format(tokenizer, model)

    def generate(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> str:
        own = [dict(m, content=fmt.model_text(m["content"])) if m.get("role") == "assistant"
               and isinstance(m.get("content"), str) else m for m in messages]
        ids = render(tokenizer, own, tools, tokenize=True, return_dict=False, add_generation_prompt=True)
        budget = min(max_new_tokens, limit - len(ids))
        if budget <= 0:
            return ""
        model.eval()
        turn = generate_turns(model, tokenizer, [ids], max_new_tokens=budget, temperature=0.0, seed=0)[0]
        return turn_text(tokenizer, turn)

    return generate

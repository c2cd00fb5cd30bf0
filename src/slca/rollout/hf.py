"""A `generate_fn(messages, tools) -> str` adapter over a Hugging Face model, for benchmark runners.

BFCL and tau2 runners hand over a chat (OpenAI-style messages, tool schemas) and want the raw
assistant text back; the policy answers greedily with its chat template.

    generate = make_generate_fn(model, tokenizer, max_new_tokens=256)
    text = generate([{"role": "user", "content": "Weather in Lima?"}], tools)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slca.rollout.cached import turn_generator
from slca.rollout.chat_format import chat_format, render
from slca.rollout.loop import Episode, turn_text


def make_generate_fn(
    model: Any, tokenizer: Any, max_new_tokens: int = 256, dtype: str = "float32"
) -> Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None], str]:
    """Greedy single-turn generation from a chat; returns the assistant text in canonical form
    (`<tool_call>` blocks). Earlier assistant turns, canonical too, go back to the model in its own tags.
    Generates with the rollout engine's generator (`slca.rollout.cached`, weights in `dtype`)."""
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    fmt = chat_format(tokenizer, model)
    generator = turn_generator(model, tokenizer, temperature=0.0, seed=0, dtype=dtype)

    def generate(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> str:
        own = [
            dict(m, content=fmt.model_text(m["content"]))
            if m.get("role") == "assistant" and isinstance(m.get("content"), str)
            else m
            for m in messages
        ]
        ids = render(tokenizer, own, tools, tokenize=True, return_dict=False, add_generation_prompt=True)
        budget = min(max_new_tokens, limit - len(ids))
        if budget <= 0:
            return ""
        episode = Episode(task={}, sample_idx=0, prompt_ids=list(ids))
        turn = generator.generate([episode], [budget], 0)[0]
        return turn_text(tokenizer, turn.ids)

    return generate

"""A `generate_fn(messages, tools) -> str` adapter over a Hugging Face model, for benchmark runners.

BFCL and tau2 runners hand over a chat (OpenAI-style messages, tool schemas) and want the raw
assistant text back; the policy answers greedily with its chat template.

    generate = make_generate_fn(model, tokenizer, max_new_tokens=256)
    text = generate([{"role": "user", "content": "Weather in Lima?"}], tools)
    texts = generate.many([(messages, tools), ...])   # independent chats as one batch (BFCL)
    texts = generate.turns([(key, messages, tools), ...])   # the next turn of several dialogues (τ²)
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from slca.rollout.cached import turn_generator
from slca.rollout.chat_format import chat_format, render
from slca.rollout.loop import Episode, turn_text

_SINGLE = object()  # the dialogue key of single chats
Chat = tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None]


def make_generate_fn(
    model: Any, tokenizer: Any, max_new_tokens: int = 256, dtype: str = "float32", batch_size: int = 16
) -> Callable[[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None], str]:
    """Greedy single-turn generation from a chat; returns the assistant text in canonical form
    (`<tool_call>` blocks). Earlier assistant turns, canonical too, go back to the model in its own tags.
    Generates with the rollout engine's generator (`slca.rollout.cached`, weights in `dtype`).

    The function's `many(chats)` answers independent `(messages, tools)` chats `batch_size` at a time in
    one decode batch each (a CPU decodes 8 rows in little more time than one). A single chat reads only the
    tokens after those its prompt shares with the previous single chat's prompt and answer.

    Its `turns(requests)` answers the next turn of several dialogues, `(key, messages, tools)` each, as one
    decode batch: when every key's last turn was in the previous `turns` call, each row reads only the
    tokens after those its prompt shares with that turn's prompt and answer (dialogues that ended leave
    the batch); otherwise all rows start afresh."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    fmt = chat_format(tokenizer, model)
    generator = turn_generator(model, tokenizer, temperature=0.0, seed=0, dtype=dtype)

    def prompt_ids(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None) -> list[int]:
        own = [
            dict(m, content=fmt.model_text(m["content"]))
            if m.get("role") == "assistant" and isinstance(m.get("content"), str)
            else m
            for m in messages
        ]
        return list(render(tokenizer, own, tools, tokenize=True, return_dict=False, add_generation_prompt=True))

    # the dialogues of the last `turns` call: key -> its episode (prompt and answer); a single chat is the
    # dialogue `_SINGLE`, so its next turn (τ²'s agent asks once a turn with the whole conversation) reads
    # only the tokens after the part it shares with the last prompt and answer
    dialogues: dict[Hashable, Episode] = {}
    state = {"round": 0}

    def many(chats: Sequence[Chat]) -> list[str]:
        dialogues.clear()  # the generator's cache is about to hold this batch
        prompts = [prompt_ids(messages, tools) for messages, tools in chats]
        texts = [""] * len(prompts)  # a prompt that fills the context gets no answer
        # like-sized prompts batched together: a batch is prefilled to its longest prompt (32 rows of 262
        # tokens on average, padded to 598, took 28 s; 8 rows 3.3 s)
        open_rows = sorted((i for i, ids in enumerate(prompts) if limit - len(ids) > 0), key=lambda i: len(prompts[i]))
        for start in range(0, len(open_rows), batch_size):
            rows = open_rows[start : start + batch_size]
            episodes = [Episode(task={}, sample_idx=0, prompt_ids=prompts[i]) for i in rows]
            budgets = [min(max_new_tokens, limit - len(prompts[i])) for i in rows]
            for i, turn in zip(rows, generator.generate(episodes, budgets, 0), strict=True):
                texts[i] = turn_text(tokenizer, turn.ids)
        return texts

    def generate(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None) -> str:
        return turns([(_SINGLE, messages, tools)])[0]

    def turns(
        requests: Sequence[tuple[Hashable, Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]] | None]],
    ) -> list[str]:
        keys = [key for key, _, _ in requests]
        if len(set(keys)) != len(keys):
            raise ValueError(f"turns: each dialogue may ask once a call, got keys {keys}")
        prompts = [prompt_ids(messages, tools) for _, messages, tools in requests]
        texts = [""] * len(requests)  # a prompt that fills the context gets no answer
        rows = [i for i, ids in enumerate(prompts) if limit - len(ids) > 0]
        episodes = [Episode(task={}, sample_idx=0, prompt_ids=prompts[i]) for i in rows]
        held = [dialogues.get(keys[i]) for i in rows]
        adopt_rows = getattr(generator, "adopt_rows", None)
        resumed = (
            bool(rows)
            and callable(adopt_rows)
            and all(h is not None for h in held)
            and adopt_rows([(h, e) for h, e in zip(held, episodes, strict=True)]) > 0
        )
        state["round"] = state["round"] + 1 if resumed else 0
        dialogues.clear()
        if not rows:
            return texts
        budgets = [min(max_new_tokens, limit - len(prompts[i])) for i in rows]
        for i, episode, turn in zip(rows, episodes, generator.generate(episodes, budgets, state["round"]), strict=True):
            episode.append(turn.ids, True)
            dialogues[keys[i]] = episode
            texts[i] = turn_text(tokenizer, turn.ids)
        return texts

    generate.many = many  # type: ignore[attr-defined]
    generate.turns = turns  # type: ignore[attr-defined]
    generate.generator = generator  # type: ignore[attr-defined]  # its counters, for tests and benchmarks
    return generate

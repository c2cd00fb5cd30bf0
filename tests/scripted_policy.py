"""A scripted stand-in for a causal LM: it writes the gold dialogue's next assistant turn.

It reads the user request from the rendered sequence to find the task, counts the tool-response
rounds already in the sequence to find the step, and emits that turn's text plus `<|im_end|>`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import torch

from slca.rollout.chat import gold_conversation


def gold_turns(task: Mapping[str, Any]) -> list[str]:
    """Assistant turn texts of the gold dialogue, as the policy would write them."""
    turns = []
    for message in gold_conversation(task):
        if message["role"] != "assistant":
            continue
        if message.get("tool_calls"):
            blocks = [
                json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
                for c in message["tool_calls"]
            ]
            turns.append("\n".join(f"<tool_call>\n{b}\n</tool_call>" for b in blocks))
        else:
            turns.append(message["content"])
    return turns


class ScriptedPolicy(torch.nn.Module):
    """generate() appends `reply(task, round)` for each sequence of the batch."""

    def __init__(
        self,
        tokenizer: Any,
        tasks: Sequence[Mapping[str, Any]],
        reply: Callable[[Mapping[str, Any], int], str] | None = None,
        max_positions: int = 8192,
    ) -> None:
        super().__init__()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.tokenizer = tokenizer
        self.tasks = list(tasks)
        self.reply = reply or (lambda task, step: gold_turns(task)[min(step, len(gold_turns(task)) - 1)])
        self.config = SimpleNamespace(max_position_embeddings=max_positions)
        self.calls = 0

    def find_task(self, text: str) -> Mapping[str, Any]:
        for task in self.tasks:
            if task["messages"][-1]["content"] in text:
                return task
        raise AssertionError("sequence matches no task")

    def generate(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        max_new_tokens: int,
        eos_token_id: int,
        pad_token_id: int,
        **_: Any,
    ) -> torch.Tensor:
        self.calls += 1
        rows = []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist(), strict=True):
            text = self.tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
            step = text.count("<tool_response>") and text.count("</tool_response><|im_end|>")
            reply = self.reply(self.find_task(text), step)
            new = self.tokenizer.encode(reply, add_special_tokens=False) + [eos_token_id]
            rows.append(new[:max_new_tokens])
        width = max(len(r) for r in rows)
        padded = [r + [pad_token_id] * (width - len(r)) for r in rows]
        return torch.cat([input_ids, torch.tensor(padded, dtype=input_ids.dtype)], dim=1)


class FakeSession:
    """Answers get_weather with the fixture's weather, anything else with an error."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def call(self, body: str) -> Any:
        from policy_fixtures import weather

        self.seen.append(body)
        try:
            call = json.loads(body)
        except ValueError:
            return SimpleNamespace(ok=False, content=None, error="malformed call", name=None)
        if call.get("name") != "get_weather":
            return SimpleNamespace(
                ok=False,
                content=None,
                error=(f"Tool {call.get('name')} not found in the current available tools set."),
                name=call.get("name"),
            )
        return SimpleNamespace(ok=True, content=weather(call["arguments"]["city"]), error=None, name="get_weather")

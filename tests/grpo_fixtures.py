"""Shared pieces of the SLCA-GRPO trainer and train-stage tests: tasks, a tiny policy, small params
and a scripted turn generator that writes real tool calls and summaries.

The scripted generator stands in for `GRPOTrainer._generate_single_turn` so that rollouts have
tool segments, tool responses and summaries of varying quality whatever the (untrained) tiny
model would sample; everything downstream (simulator, rewards, masks, advantages, loss) is real.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slca.config import DataParams, Params, TinyModelParams

_TINY = {
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "intermediate_size": 64,
    "vocab_size": 1500,
    "max_position_embeddings": 4096,
}


def synthetic_tasks(n: int = 16, seed: int = 7) -> list[dict[str, Any]]:
    """Train tasks that need calls and offer one tool (short prompts), from the in-repo synthesizer."""
    from slca.data.synthesis import synthesize

    rows = synthesize(DataParams(n_train=6 * n, n_val=8, n_test=8), seed)["train"]
    short = [row for row in rows if row["gold_steps"] and len(row["tools"]) == 1]
    if len(short) < n:
        raise ValueError(f"the synthesizer gave {len(short)} one-tool tasks with calls, {n} needed")
    return short[:n]


def make_policy(folder: Path, tasks: list[dict[str, Any]]) -> Path:
    """Save an untrained tiny policy (model + tokenizer) that load_policy can read by path."""
    from slca.train.policy import build_tiny_model, corpus_texts, train_tokenizer

    tokenizer = train_tokenizer(corpus_texts(tasks), _TINY["vocab_size"], 0)
    model = build_tiny_model(TinyModelParams(**_TINY), tokenizer, 0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def small_params(root: Path, **train: Any) -> Params:
    return Params.model_validate(small_raw(root, **train))


def small_raw(root: Path, **train: Any) -> dict[str, Any]:
    """The params sections these tests set (the rest are defaults), as a params.yaml mapping."""
    section = {
        "out_dir": str(root / "models"),
        "max_steps": 3,
        "num_generations": 4,
        "prompts_per_step": 2,
        "max_completion_length": 128,
        "max_tool_turns": 2,
        "checkpoint_every": 2,
        "sample_every": 2,
        "learning_rate": 1e-3,
        "beta": 0.001,
        "rollout_generator": "trl",
    }  # the scripted turns stand in for TRL's _generate_single_turn
    section.update(train)
    return {
        "data": {"out_dir": str(root / "data")},
        "sft": {"out_dir": str(root / "sft")},
        "policy": {"tiny": dict(_TINY)},
        "train": section,
    }


def write_tasks(root: Path, tasks: list[dict[str, Any]]) -> None:
    (root / "data").mkdir(parents=True, exist_ok=True)
    with (root / "data" / "train.jsonl").open("w", encoding="utf-8") as handle:
        for task in tasks:
            handle.write(json.dumps(task) + "\n")


def _call_text(calls: list[dict[str, Any]]) -> str:
    return "\n".join(
        f'<tool_call>\n{json.dumps({"name": c["name"], "arguments": c["arguments"]})}\n</tool_call>' for c in calls
    )


def _wrong(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"name": c["name"], "arguments": dict.fromkeys(c["arguments"], "???")} for c in calls]


class ScriptedTurns:
    """A `_generate_single_turn` replacement cycling through good and bad calls and summaries.

    First turn of a rollout, by counter: the gold first step, the gold tools with wrong
    values, or plain text with no call (no-call penalty). After a tool response: the task's gold
    summary or a too-short reply.
    """

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.count = 0

    def _task_of(self, text: str) -> dict[str, Any]:
        users = [(t, t["messages"][-1]["content"]) for t in self.trainer._current_tasks]
        return next(t for t, content in users if content in text)

    def _turn(self, text: str) -> str:
        task = self._task_of(text)
        self.count += 1
        if "<tool_response>" in text:
            return task["gold_summary"] if self.count % 2 else "ok"
        variant = self.count % 3
        first = task["gold_steps"][0]
        return [_call_text(first), _call_text(_wrong(first)), "I think it is fine."][variant]

    def __call__(
        self, prompt_ids: list[list[int]], images: Any, fields: Any, num_generations: int, **_: Any
    ) -> tuple[list[list[int]], None]:
        tokenizer = self.trainer.processing_class
        out = []
        for ids in prompt_ids:
            text = tokenizer.decode(ids, skip_special_tokens=False)
            reply = self._turn(text) + "<|im_end|>"
            out.append(tokenizer(reply, add_special_tokens=False)["input_ids"])
        return out, None

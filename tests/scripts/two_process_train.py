"""Launched by tests/test_multiprocess.py under `accelerate launch --num_processes 2 --cpu`.

A few SLCA-GRPO steps where the two processes' rollouts have uneven turn counts: process 0's
scripted policy calls tools for every turn it is allowed, process 1's answers at once. The
scripted generation does a collective gather every call, as vLLM server mode and ZeRO-3 do, so
a process that skipped a round would hang here. The main process writes what it saw to
`<workspace>/two_process.json`: generation calls and batch sizes per process, and whether every
group's rows share one prompt.
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path
from typing import ClassVar

import torch

ROOT = Path(sys.argv[1])
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_fixtures import small_params  # noqa: E402

from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset  # noqa: E402
from slca.train.policy import load_policy, read_tasks  # noqa: E402


class Checked(SLCAGRPOTrainer):
    """Records generation calls and checks the gathered group layout after each batch."""

    calls: ClassVar[list[int]] = []
    groups_ok: ClassVar[list[bool]] = []

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        local = torch.tensor([zlib.crc32(str(t["id"]).encode()) for t in self._current_tasks], dtype=torch.long)
        every = self.accelerator.gather(local)
        groups = every.view(-1, self.num_generations)
        self.groups_ok.append(bool((groups == groups[:, :1]).all()))
        return output


def scripted_turn(trainer: Checked):
    tokenizer = trainer.processing_class

    def single_turn(prompt_ids, images, fields, num_generations, **_):
        size = torch.tensor([len(prompt_ids)])
        sizes = trainer.accelerator.gather(size).tolist()  # collective, as vLLM server mode
        Checked.calls.append(len(prompt_ids))
        assert len(set(sizes)) == 1, f"unequal generation batches across processes: {sizes}"
        out = []
        for ids in prompt_ids:
            text = tokenizer.decode(ids, skip_special_tokens=False)
            task = next(t for t in trainer._current_tasks if t["messages"][-1]["content"] in text)
            if trainer.accelerator.process_index == 0:
                call = task["gold_steps"][0][0]
                reply = (
                    f'<tool_call>\n{json.dumps({"name": call["name"], "arguments": call["arguments"]})}\n</tool_call>'
                )
            else:
                reply = task["gold_summary"]
            out.append(tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"])
        return out, None

    return single_turn


def main() -> None:
    params = small_params(ROOT, max_steps=2, num_generations=2, prompts_per_step=2, max_tool_turns=2)
    model, tokenizer = load_policy(params.sft.out_dir, params)
    tasks = read_tasks(ROOT / "data" / "train.jsonl")
    args = grpo_config(params, "slca", 0, str(ROOT / "two-proc-out"), save=False)
    trainer = Checked(
        model, params=params, estimator="slca", args=args, train_dataset=task_dataset(tasks), processing_class=tokenizer
    )
    trainer._generate_single_turn = scripted_turn(trainer)
    trainer.train()
    calls = trainer.accelerator.gather(torch.tensor([len(Checked.calls)])).tolist()
    if trainer.accelerator.is_main_process:
        (ROOT / "two_process.json").write_text(
            json.dumps(
                {
                    "world_size": trainer.accelerator.num_processes,
                    "global_step": trainer.state.global_step,
                    "generation_calls": calls,
                    "groups_ok": Checked.groups_ok,
                }
            )
        )


if __name__ == "__main__":
    main()

"""An RL step's update on SmolLM2: peak memory and time of the loss forward + backward, in one pass or in
passes under `train.loss_pass_tokens` (`slca.loss_passes`), on fixed batch shapes, in one run.

The update's activations grow with the loss batch's padded tokens (rows × (prompt + completion) width),
and rows are padded to the batch's longest: one long rollout sets every row's cost. Each case builds one
batch of a group's rows with the real policy (SmolLM2-135M-Instruct, LoRA r 16, the SFT start when given),
random completion tokens and advantages, and runs the trainer's own `compute_loss` + backward (the path a
training step takes, shared-prompt forward included) once per budget. Per case and budget: seconds, the
peak resident size above the size before it (Linux VmHWM, after freed memory is given back), passes, and
the largest gradient difference from the one-pass gradient. Ratios against one pass are printed at the end.

    python benchmarks/loss_memory.py --start models/sft
    python benchmarks/loss_memory.py --budget 4096 --case one-long --repeat 3
    python benchmarks/loss_memory.py --start models/sft --bf16 --case uniform-400 --budget 2048
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from policy_cost import SMOLLM2, add_source_args, smollm2_dir  # noqa: E402

from slca.config import load_params  # noqa: E402
from slca.train.sweep import apply_overrides  # noqa: E402

PROMPT = 300  # tokens of system prompt and tool schemas, about the synthetic tasks' average
#: case -> completion lengths of the group's rows (one prompt, G rows)
CASES: dict[str, list[int]] = {
    "uniform-400": [400] * 8,  # an ordinary group of G 8 with tool responses
    "one-long": [600] + [150] * 7,  # one rollout with long tool responses: every row padded to it
}  # larger groups do not fit one pass in 24 GB (8 x (300 + 1000 | 250 x 7) was killed by the OOM killer)
BUDGETS: list[int | None] = [None, 4096, 2048, 1024]


def make_batch(lengths: list[int], vocab: int, seed: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    rows, width = len(lengths), max(lengths)
    prompt = torch.randint(10, vocab, (PROMPT,), generator=gen)
    completion_ids = torch.zeros(rows, width, dtype=torch.long)
    completion_mask = torch.zeros(rows, width, dtype=torch.long)
    for row, length in enumerate(lengths):
        completion_ids[row, :length] = torch.randint(10, vocab, (length,), generator=gen)
        completion_mask[row, :length] = 1
    return {
        "prompt_ids": prompt.repeat(rows, 1),
        "prompt_mask": torch.ones(rows, PROMPT, dtype=torch.long),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "tool_mask": torch.ones(rows, width, dtype=torch.long),
        "advantages": torch.randn(rows, width, generator=gen),
        "num_items_in_batch": completion_mask.sum().float(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--start", type=Path, default=None, help="SmolLM2 model directory (default: the base).")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="Batch shapes (default all).")
    parser.add_argument(
        "--budget", action="append", type=int, help="Token budgets besides one pass (default 4096 2048 1024)."
    )
    parser.add_argument("--repeat", type=int, default=2, help="Timed runs per case and budget (median).")
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast (policy.cpu_bf16) instead of fp32.")
    add_source_args(parser)
    args = parser.parse_args()
    import torch

    from slca.rollout.memory import peak_resident_bytes, release_freed_memory, reset_peak_resident
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy, read_tasks

    torch.set_num_threads(2)
    base = load_params(args.params)
    model_dir = smollm2_dir(args.cache)
    params = apply_overrides(
        base,
        {
            **SMOLLM2,
            "policy.model_path": str(model_dir),
            "policy.cpu_bf16": args.bf16,
            "train.share_prompt": True,
            "train.num_generations": 8,
            "train.prompts_per_step": 1,
        },
    )
    model, tokenizer = load_policy(args.start or model_dir, params)
    tasks = [t for t in read_tasks(Path(base.data.out_dir) / "train.jsonl") if t["gold_steps"]][:8]
    budgets: list[int | None] = [None, *(args.budget or BUDGETS[1:])]
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="slca-loss-memory-") as tmp:
        trainer = SLCAGRPOTrainer(
            model,
            params=params,
            estimator="slca",
            args=grpo_config(params, "slca", 0, tmp, save=False, disable_tqdm=True),
            train_dataset=task_dataset(tasks),
            processing_class=tokenizer,
        )
        trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which is not running here
        trainer.model.train()
        for case in args.case or list(CASES):
            batch = make_batch(CASES[case], len(tokenizer), seed=0)
            reference: dict[str, torch.Tensor] = {}
            for budget in budgets:
                trainer.loss_pass_tokens = budget
                seconds, peaks, passes = [], [], 0.0
                for _ in range(args.repeat):
                    trainer.model.zero_grad(set_to_none=True)
                    trainer._metrics["train"].clear()
                    release_freed_memory()
                    reset_peak_resident()
                    before = peak_resident_bytes()
                    began = time.perf_counter()
                    with trainer.compute_loss_context_manager():  # the training step's autocast
                        loss = trainer.compute_loss(trainer.model, batch)
                    loss.backward()
                    seconds.append(time.perf_counter() - began)
                    peaks.append((peak_resident_bytes() - before) / 2**30)
                    passes = (trainer._metrics["train"].get("batch/loss_passes") or [1.0])[-1]
                grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
                if budget is None:
                    reference = grads
                scale = max(float(g.abs().max()) for g in reference.values())
                diff = max(float((grads[n] - g).abs().max()) for n, g in reference.items()) / scale
                row = {
                    "padded_tokens": len(CASES[case]) * (PROMPT + max(CASES[case])),
                    "passes": int(passes),
                    "seconds": round(statistics.median(seconds), 2),
                    "peak_gb_above_start": round(max(peaks), 2),
                    "grad_max_rel_diff": float(f"{diff:.2e}"),
                }
                name = f"{case} budget={budget or 'one-pass'}"
                results[name] = row
                print(name, json.dumps(row), flush=True)
    ratios = {}
    for name, row in results.items():
        case = name.split(" ")[0]
        one = results[f"{case} budget=one-pass"]
        if row is not one:
            ratios[name] = {
                "seconds": round(row["seconds"] / one["seconds"], 2),
                "peak": round(row["peak_gb_above_start"] / one["peak_gb_above_start"], 2),
            }
    print(json.dumps({"results": results, "ratio_over_one_pass": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

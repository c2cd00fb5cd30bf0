"""Is bf16 generation a free speed-up? One policy evaluated with fp32 and with bf16 generation weights.

The same saved policy (default: the SmolLM2 row of the SFT sweep) runs greedy in-domain evaluation on the
first `--tasks` test tasks with the real executors, once with `policy.generation_dtype: float32` and once
with `bfloat16`, alone, one after the other. Printed: tasks per minute of each and their ratio, the
headline metrics of each and their difference, and on how many tasks the two wrote the same tokens.
Greedy decoding in another precision can flip a near-tie, so the question is whether the metrics move
by more than the task-to-task noise (the printed standard error of the fp32 Success).

    python benchmarks/generation_dtype.py --model models/sft_sweep/s-300 --tasks 60
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from slca.config import load_params  # noqa: E402
from slca.train.sweep import apply_overrides  # noqa: E402

METRICS = ("success", "name_f1", "arg_match", "well_formed_calls", "no_call_accuracy", "generated_tokens")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "sft_sweep" / "s-300")
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    args = parser.parse_args()
    import torch

    from slca.rollout.evaluation import evaluate_policy, train_values
    from slca.train.policy import load_policy, read_tasks

    torch.set_num_threads(2)
    base = apply_overrides(
        load_params(args.params),
        {"policy.model_path": str(args.model), "policy.chat_template": "slca_compact", "eval.n_test": args.tasks},
    )
    data = Path(base.data.out_dir)
    tasks = read_tasks(data / "test.jsonl")[: args.tasks]
    seen = train_values(read_tasks(data / "train.jsonl"))
    model, tokenizer = load_policy(args.model, base)
    runs = {}
    for dtype in ("float32", "bfloat16"):
        params = apply_overrides(base, {"policy.generation_dtype": dtype})
        began = time.perf_counter()
        result = evaluate_policy(model, tokenizer, tasks, params, seen_values=seen)
        seconds = time.perf_counter() - began
        runs[dtype] = {
            "tasks_per_minute": round(60 * len(tasks) / seconds, 2),
            **{key: round(result["metrics"].get(key, 0.0), 4) for key in METRICS},
            "rows": result["episodes"],
        }
    fp32, bf16 = runs["float32"], runs["bfloat16"]
    same = sum(a == b for a, b in zip(fp32.pop("rows"), bf16.pop("rows"), strict=True))
    success = fp32["success"]
    out = {
        "tasks": len(tasks),
        "float32": fp32,
        "bfloat16": bf16,
        "speed_ratio_bf16_over_fp32": round(bf16["tasks_per_minute"] / fp32["tasks_per_minute"], 2),
        "difference_bf16_minus_fp32": {key: round(bf16[key] - fp32[key], 4) for key in METRICS},
        "fp32_success_standard_error": round(math.sqrt(success * (1 - success) / len(tasks)), 4),
        "tasks_with_identical_metrics": same,
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

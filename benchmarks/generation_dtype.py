"""Is bf16 generation a free speed-up? One policy evaluated with fp32 and with bf16 generation weights.

The same saved policy (default: the SmolLM2 row of the SFT sweep) runs greedy in-domain evaluation on the
first `--tasks` test tasks with the real executors, once generating in float32 and once in bfloat16
(`policy.generation_dtype` and `eval.generation_dtype` both set), alone, one after the other. Printed:
tasks per minute of each and their ratio, the headline metrics of each and their difference, and on how
many tasks the two wrote the same tokens.
Greedy decoding in another precision can flip a near-tie, so the question is whether the metrics move
by more than the task-to-task noise: each difference is printed with a 95 % paired bootstrap interval over
the tasks (well-formed calls, a ratio of valid to written call blocks, resampled as a ratio), and the calls
each precision wrote malformed are counted. `--rows` writes both runs' per-task rows for a closer look.

    python benchmarks/generation_dtype.py --model models/sft_sweep/s-300 --tasks 60
    python benchmarks/generation_dtype.py --model models/experiment/sft --tasks 300 --rows /tmp/rows.json
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

import numpy as np  # noqa: E402

from slca.config import load_params  # noqa: E402
from slca.train.sweep import apply_overrides  # noqa: E402

METRICS = ("success", "name_f1", "arg_match", "well_formed_calls", "no_call_accuracy", "generated_tokens")
PAIRED = ("success", "arg_match", "well_formed_calls", "no_call_accuracy")
BOOTSTRAP_SAMPLES = 2000


def _column(rows: list[dict], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator) per task, so that a resample's value is sum(numerator) / sum(denominator):
    per-task metrics have denominator 1, well-formed calls are valid over written blocks, no-call accuracy
    counts the no-call tasks only."""
    if metric == "well_formed_calls":
        return np.array([r["valid_blocks"] for r in rows]), np.array([r["call_blocks"] for r in rows])
    if metric == "no_call_accuracy":
        no_call = np.array([0.0 if r["needs_call"] else 1.0 for r in rows])
        return no_call * np.array([1.0 - r["called"] for r in rows]), no_call
    return np.array([float(r[metric]) for r in rows]), np.ones(len(rows))


def paired_interval(a: list[dict], b: list[dict], metric: str, seed: int = 0) -> list[float]:
    """b − a for `metric` over the same tasks and its 95 % interval, resampling tasks (2000 resamples)."""
    (na, da), (nb, db) = _column(a, metric), _column(b, metric)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(BOOTSTRAP_SAMPLES, len(a)))
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = nb[idx].sum(1) / db[idx].sum(1) - na[idx].sum(1) / da[idx].sum(1)
    low, high = np.nanpercentile(diffs, [2.5, 97.5])
    return [round(float(nb.sum() / db.sum() - na.sum() / da.sum()), 4), round(float(low), 4), round(float(high), 4)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "models" / "sft_sweep" / "s-300")
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--rows", type=Path, default=None, help="write both runs' per-task rows here (JSON)")
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
        params = apply_overrides(base, {"policy.generation_dtype": dtype, "eval.generation_dtype": dtype})
        began = time.perf_counter()
        result = evaluate_policy(model, tokenizer, tasks, params, seen_values=seen)
        seconds = time.perf_counter() - began
        runs[dtype] = {
            "tasks_per_minute": round(60 * len(tasks) / seconds, 2),
            **{key: round(result["metrics"].get(key, 0.0), 4) for key in METRICS},
            "rows": result["episodes"],
        }
    fp32, bf16 = runs["float32"], runs["bfloat16"]
    rows32, rows16 = fp32.pop("rows"), bf16.pop("rows")
    same = sum(a == b for a, b in zip(rows32, rows16, strict=True))
    if args.rows:
        args.rows.write_text(json.dumps({"float32": rows32, "bfloat16": rows16}, indent=1))
    success = fp32["success"]
    out = {
        "tasks": len(tasks),
        "float32": fp32,
        "bfloat16": bf16,
        "speed_ratio_bf16_over_fp32": round(bf16["tasks_per_minute"] / fp32["tasks_per_minute"], 2),
        "difference_bf16_minus_fp32": {key: round(bf16[key] - fp32[key], 4) for key in METRICS},
        "fp32_success_standard_error": round(math.sqrt(success * (1 - success) / len(tasks)), 4),
        "tasks_with_identical_metrics": same,
        "paired_bf16_minus_fp32_95": {key: paired_interval(rows32, rows16, key) for key in PAIRED},
        "malformed_blocks": {
            dtype: int(sum(r["call_blocks"] - r["valid_blocks"] for r in rows))
            for dtype, rows in (("float32", rows32), ("bfloat16", rows16))
        },
        "tasks_with_a_malformed_block": {
            dtype: sum(r["call_blocks"] > r["valid_blocks"] for r in rows)
            for dtype, rows in (("float32", rows32), ("bfloat16", rows16))
        },
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

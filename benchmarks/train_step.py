"""Per-step time of SLCA-GRPO vs GRPO in one training run (target ratio ≤ 1.05).

One trainer alternates the estimator step by step (slca, grpo, slca, ...), so both see the same
machine load, model and data stream; the report is the median optimizer-step time of each and
their ratio, plus the median time of the advantage computation itself (segments, estimator,
credit diagnostics). The policy is `--model` (default `models/sft` when present, else a fresh
tiny policy); tasks come from `data/train.jsonl` when present, else the in-repo synthesizer.

    python benchmarks/train_step.py --steps 12
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from transformers import TrainerCallback  # noqa: E402

from slca.config import Params  # noqa: E402

ESTIMATORS = ("slca", "grpo")


class Alternate(TrainerCallback):
    """Switches the estimator before each step and times the step."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.times: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
        self.started = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.trainer.estimator = ESTIMATORS[state.global_step % 2]
        self.started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.times[self.trainer.estimator].append(time.perf_counter() - self.started)


def timed_advantages(trainer: Any) -> dict[str, list[float]]:
    """Wrap the advantage replacement to time it per estimator."""
    times: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
    original = trainer._segment_advantages

    def wrapper(output: dict[str, Any]) -> Any:
        start = time.perf_counter()
        result = original(output)
        times[trainer.estimator].append(time.perf_counter() - start)
        return result

    trainer._segment_advantages = wrapper
    return times


def load_tasks(n: int) -> list[dict[str, Any]]:
    path = Path("data/train.jsonl")
    if path.exists():
        from slca.train.policy import read_tasks

        return read_tasks(path, limit=n)
    from slca.train.smoke import smoke_tasks

    return smoke_tasks(n, 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="optimizer steps in all (half per estimator)")
    parser.add_argument("--model", default=None, help="local model dir (default models/sft or a fresh tiny policy)")
    parser.add_argument("--params", default="params.yaml", help="params.yaml for the train section (if present)")
    args = parser.parse_args(argv)

    from slca.config import load_params
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy
    from slca.train.smoke import tiny_policy

    params = load_params(args.params) if Path(args.params).exists() else Params()
    tasks = load_tasks(max(64, args.steps * params.train.prompts_per_step))
    with tempfile.TemporaryDirectory(prefix="slca-bench-") as tmp:
        model_dir = Path(args.model) if args.model else Path(params.sft.out_dir)
        if not (model_dir / "config.json").exists():
            model_dir = tiny_policy(params, tasks, Path(tmp) / "policy")
        model, tokenizer = load_policy(model_dir, params)
        config = grpo_config(params, "slca", 0, str(Path(tmp) / "out"), max_steps=args.steps, save=False)
        trainer = SLCAGRPOTrainer(model, params=params, estimator="slca", args=config,
                                  train_dataset=task_dataset(tasks), processing_class=tokenizer)
        steps = Alternate(trainer)
        trainer.add_callback(steps)
        advantage_times = timed_advantages(trainer)
        trainer.train()
    median = {name: statistics.median(steps.times[name][1:] or steps.times[name]) for name in ESTIMATORS}
    adv = {name: statistics.median(advantage_times[name]) for name in ESTIMATORS}
    report = {"steps": args.steps, "median_step_s": median, "median_advantage_ms": {k: 1e3 * v for k, v in adv.items()},
              "ratio_slca_over_grpo": median["slca"] / median["grpo"]}
    print(f"median step: slca {median['slca']:.3f} s, grpo {median['grpo']:.3f} s, "
          f"ratio {report['ratio_slca_over_grpo']:.3f} (target <= 1.05); advantages: "
          f"slca {1e3 * adv['slca']:.2f} ms, grpo {1e3 * adv['grpo']:.2f} ms")
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

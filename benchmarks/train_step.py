"""Per-step time of SLCA-GRPO vs GRPO in one training run (target ratio ≤ 1.05).

One trainer runs steps in pairs: the first step of a pair generates rollouts, the second replays
the very same rollouts, and the two steps of a pair use the two estimators (the order swaps from
pair to pair). So both estimators update on identical token batches under the same machine load.
Reported: the median update time (step time minus rollout generation, which is the same code for
every estimator) of each and their ratio, the median full step time, and the median time of the
advantage computation itself (segments, estimator, credit diagnostics). The policy is `--model`
(default `models/sft` when present, else a fresh tiny policy); tasks come from `data/train.jsonl`
when present, else the in-repo synthesizer.

    python benchmarks/train_step.py --steps 12
"""

from __future__ import annotations

import argparse
import copy
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

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from slca.config import Params

ESTIMATORS = ("slca", "grpo")


def estimator_at(step: int) -> str:
    """Pair k = steps 2k, 2k+1; the estimator going first alternates between pairs."""
    pair, second = divmod(step, 2)
    return ESTIMATORS[(pair + second) % 2]


class Alternate(TrainerCallback):
    """Sets the estimator before each step, replays rollouts on odd steps and times the steps."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.steps: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
        self.updates: dict[str, list[float]] = {name: [] for name in ESTIMATORS}
        self.started = 0.0
        self.generation = 0.0
        self.cache: Any = None
        rollout = trainer.rollout_func

        def replaying(prompts: list, owner: Any) -> dict[str, Any]:
            start = time.perf_counter()
            if owner.state.global_step % 2 == 0:
                payload = rollout(prompts, owner)
                self.cache = (copy.deepcopy(payload), copy.deepcopy(owner._episode_batch))
            else:
                payload, owner._episode_batch = copy.deepcopy(self.cache[0]), copy.deepcopy(self.cache[1])
            self.generation = time.perf_counter() - start
            return payload

        trainer.rollout_func = replaying

    def on_step_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.trainer.estimator = estimator_at(state.global_step)
        self.started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        elapsed = time.perf_counter() - self.started
        self.steps[self.trainer.estimator].append(elapsed)
        self.updates[self.trainer.estimator].append(elapsed - self.generation)


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
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1 keeps the timing stable on a shared machine)"
    )
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)

    from slca.config import load_params
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy
    from slca.train.smoke import tiny_policy
    from slca.train.train_stage import QuietProgress

    params = load_params(args.params) if Path(args.params).exists() else Params()
    tasks = load_tasks(max(64, args.steps * params.train.prompts_per_step))
    with tempfile.TemporaryDirectory(prefix="slca-bench-") as tmp:
        model_dir = Path(args.model) if args.model else Path(params.sft.out_dir)
        if not (model_dir / "config.json").exists():
            model_dir = tiny_policy(params, tasks, Path(tmp) / "policy")
        model, tokenizer = load_policy(model_dir, params)
        config = grpo_config(params, "slca", 0, str(Path(tmp) / "out"), max_steps=args.steps, save=False)
        trainer = SLCAGRPOTrainer(
            model,
            params=params,
            estimator="slca",
            args=config,
            train_dataset=task_dataset(tasks),
            processing_class=tokenizer,
        )
        steps = Alternate(trainer)
        trainer.add_callback(steps)
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(QuietProgress())
        advantage_times = timed_advantages(trainer)
        trainer.train()
    update = {name: statistics.median(steps.updates[name]) for name in ESTIMATORS}
    step = {name: statistics.median(steps.steps[name]) for name in ESTIMATORS}
    adv = {name: statistics.median(advantage_times[name]) for name in ESTIMATORS}
    report = {
        "steps": args.steps,
        "median_update_s": update,
        "median_step_s": step,
        "median_advantage_ms": {k: 1e3 * v for k, v in adv.items()},
        "ratio_slca_over_grpo": update["slca"] / update["grpo"],
    }
    print(
        f"median update on the same rollouts: slca {update['slca']:.3f} s, grpo {update['grpo']:.3f} s, "
        f"ratio {report['ratio_slca_over_grpo']:.3f} (target <= 1.05); advantages: "
        f"slca {1e3 * adv['slca']:.2f} ms, grpo {1e3 * adv['grpo']:.2f} ms"
    )
    print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

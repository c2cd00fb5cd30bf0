"""RL rollouts per minute and SFT trained tokens per second: the setup before the compact template vs the defaults.

Both setups run in one process, one after the other, under the same thread count, on the same train
tasks and the same policy size (`policy.tiny` of params.yaml):

- **before**: the embedded policy reading its tools as JSON schemas (`policy.chat_template: qwen2_5`)
  with the KL term on (`train.beta: 0.001`, so TRL keeps a reference model and runs its forward);
- **defaults**: params.yaml as it is (the compact `slca_compact` template, `train.beta` as set there).

Each setup trains its own tokenizer and policy with a short SFT warm-up (`--sft-steps`; the SFT figure
is assistant, loss-bearing tokens per second of optimisation), then runs `--rl-steps` SLCA-GRPO steps
from that policy (P×G rollouts a step, params.yaml's `train` section). Rollouts per minute use the
median step time (step 1 excluded: warm-up). Also printed: the tokens of an SFT example (all of them,
and those that carry loss), the generated tokens per rollout (a policy that writes longer
turns costs more, whatever its prompt), whether a reference model exists, and, for a setup with β > 0,
the mean KL and β·KL against the mean loss: how much the KL term weighs in the objective it pays for.

    python benchmarks/rl_throughput.py                      # 300 SFT steps, 8 RL steps, 1 thread
    python benchmarks/rl_throughput.py --threads 2 --rl-steps 12
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
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from transformers import TrainerCallback  # noqa: E402
from transformers.trainer_callback import ProgressCallback  # noqa: E402

from slca.config import DataParams, Params, load_params  # noqa: E402
from slca.train.sweep import apply_overrides  # noqa: E402

#: the embedded setup before the compact template: JSON-schema prompts and the KL term on
BEFORE = {"policy.chat_template": "qwen2_5", "train.beta": 0.001}


class StepClock(TrainerCallback):
    """Wall seconds of each optimizer step."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.started = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.started = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.seconds.append(time.perf_counter() - self.started)


def tasks_for(params: Params) -> list[dict]:
    path = Path(params.data.out_dir) / "train.jsonl"
    if path.exists():
        from slca.train.policy import read_tasks

        return read_tasks(path)
    from slca.data.synthesis import synthesize

    return synthesize(DataParams(n_train=1000, n_val=10, n_test=10), params.project.seed)["train"]


def measure(params: Params, tasks: list[dict], sft_steps: int, rl_steps: int) -> dict[str, Any]:
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy, select_tasks
    from slca.train.sft import save_atomically, train_sft
    from slca.train.train_stage import QuietProgress

    params = apply_overrides(params, {"sft.max_steps": sft_steps, "sft.n_examples": min(len(tasks), 3000)})
    model, tokenizer, sft = train_sft(params, tasks)
    calling = [task for task in select_tasks(tasks, len(tasks), params.project.seed + 1) if task["gold_steps"]]
    with tempfile.TemporaryDirectory(prefix="slca-rl-bench-") as tmp:
        save_atomically(model, tokenizer, Path(tmp) / "sft", sft)  # the train stage starts from a saved policy
        model, tokenizer = load_policy(Path(tmp) / "sft", params)
        config = grpo_config(
            params, "slca", params.project.seed, str(Path(tmp) / "out"), max_steps=rl_steps, save=False
        )
        trainer = SLCAGRPOTrainer(
            model,
            params=params,
            estimator="slca",
            args=config,
            train_dataset=task_dataset(calling[: rl_steps * params.train.prompts_per_step * 4]),
            processing_class=tokenizer,
        )
        clock = StepClock()
        trainer.add_callback(clock)
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(QuietProgress())
        trainer.train()
    logs = [row for row in trainer.state.log_history if "loss" in row]
    rollouts = params.train.prompts_per_step * params.train.num_generations
    step_s = statistics.median(clock.seconds[1:] or clock.seconds)
    out = {
        "template": params.policy.chat_template or "slca_compact",
        "beta": params.train.beta,
        "reference_model": trainer.ref_model is not None,
        "sft_assistant_tokens_per_s": sft["sft_assistant_tokens_per_s"],
        "sft_tokens_per_example": round(sft.get("sft_tokens_per_example", 0.0), 1),
        "sft_assistant_tokens_per_example": sft["sft_assistant_tokens_per_example"],
        "policy_parameters": sft["policy_parameters"],
        "rl_median_step_s": round(step_s, 3),
        "rollouts_per_step": rollouts,
        "rl_rollouts_per_minute": round(60 * rollouts / step_s, 1),
        "generated_tokens_per_rollout": round(statistics.mean(r.get("completions/mean_length", 0.0) for r in logs), 1),
        "mean_loss": round(statistics.mean(abs(r["loss"]) for r in logs), 5),
    }
    kls = [r["kl"] for r in logs if "kl" in r]
    if kls and params.train.beta > 0:
        out["mean_kl"] = round(statistics.mean(kls), 5)
        out["beta_times_kl"] = round(params.train.beta * out["mean_kl"], 7)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sft-steps", type=int, default=300, help="SFT warm-up steps per setup.")
    parser.add_argument("--rl-steps", type=int, default=8, help="RL optimizer steps per setup.")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for both setups.")
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    base = apply_overrides(load_params(args.params), {"sft.threads": args.threads})
    tasks = tasks_for(base)
    before = measure(apply_overrides(base, BEFORE), tasks, args.sft_steps, args.rl_steps)
    default = measure(base, tasks, args.sft_steps, args.rl_steps)
    ratios = {
        "rl_rollouts_per_minute": round(default["rl_rollouts_per_minute"] / before["rl_rollouts_per_minute"], 3),
        "sft_assistant_tokens_per_s": round(
            default["sft_assistant_tokens_per_s"] / before["sft_assistant_tokens_per_s"], 3
        ),
    }
    print(
        json.dumps(
            {"threads": args.threads, "before": before, "default": default, "ratio_default_over_before": ratios},
            indent=2,
        )
    )
    print(
        f"RL rollouts/min: before {before['rl_rollouts_per_minute']:.1f} "
        f"({before['generated_tokens_per_rollout']:.0f} generated tokens a rollout), default "
        f"{default['rl_rollouts_per_minute']:.1f} ({default['generated_tokens_per_rollout']:.0f}); "
        f"ratio {ratios['rl_rollouts_per_minute']:.2f}"
    )
    print(
        f"SFT assistant tokens/s: before {before['sft_assistant_tokens_per_s']:.0f}, default "
        f"{default['sft_assistant_tokens_per_s']:.0f}; ratio {ratios['sft_assistant_tokens_per_s']:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

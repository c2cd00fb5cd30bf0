"""Smoke run of SLCA-GRPO: a few optimizer steps per estimator, with tokens/s and peak memory.

Runs on any device: `--device cuda` is what `scripts/gpu_smoke.sh` uses (vLLM colocate when
vllm is importable, plain `generate` otherwise); `--device cpu` runs the same code on CPU.
`--model` is a local Hugging Face model directory (the trained tiny policy or any causal LM);
without it a tiny policy is built from scratch. Tasks come from the in-repo synthesizer, so
nothing is downloaded.

    python -m slca.train.smoke --device cpu --steps 2
    python -m slca.train.smoke --device cuda --model models/sft --steps 3 --estimators slca,grpo
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

from slca.config import Params


def smoke_tasks(n: int, seed: int) -> list[dict[str, Any]]:
    """Train tasks from the in-repo synthesizer (no data files needed)."""
    from slca.config import DataParams
    from slca.data.synthesis import synthesize

    return synthesize(DataParams(n_train=max(n, 8), n_val=8, n_test=8), seed)["train"][:n]


def smoke_params(args: argparse.Namespace, use_vllm: bool) -> Params:
    train = {
        "max_steps": args.steps,
        "num_generations": args.generations,
        "prompts_per_step": args.prompts,
        "max_completion_length": args.max_completion_length,
        "max_tool_turns": args.max_tool_turns,
        "checkpoint_every": 10_000,
        "sample_every": 10_000,
        "use_vllm": use_vllm,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": args.vllm_memory,
    }
    # a pretrained --model goes through the same chat-format checks as the pipeline (its own template,
    # or the one --chat-template installs), with LoRA as in the real profile
    policy = {"chat_template": args.chat_template, "lora": {"enabled": bool(args.model)}}
    return Params.model_validate({"train": train, "policy": policy})


def tiny_policy(params: Params, tasks: list[dict[str, Any]], folder: Path) -> Path:
    """Build and save an untrained tiny policy so the trainer can load it (and its reference) by path."""
    from slca.train.policy import build_tiny_model, corpus_texts, train_tokenizer

    tokenizer = train_tokenizer(corpus_texts(tasks), params.policy.tiny.vocab_size, params.project.seed)
    model = build_tiny_model(params.policy.tiny, tokenizer, params.project.seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means plain generation
        return False
    return True


def single_process_env() -> None:
    """vLLM colocate expects a (one-process) distributed environment."""
    for key, value in (
        ("RANK", "0"),
        ("LOCAL_RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29517"),
    ):
        os.environ.setdefault(key, value)


def run_estimator(
    params: Params,
    estimator: str,
    model_path: Path,
    tasks: list[dict[str, Any]],
    out: Path,
    max_model_len: int,
    device: str,
) -> dict[str, float]:
    """Train `params.train.max_steps` steps; returns tokens/s, seconds per step and peak memory."""
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy

    overrides: dict[str, Any] = {"vllm_max_model_length": max_model_len} if params.train.use_vllm else {}
    if device == "cpu":
        overrides.update(use_cpu=True, bf16=False, gradient_checkpointing=False)
    args = grpo_config(params, estimator, 0, str(out / estimator), save=False, **overrides)
    model, tokenizer = load_policy(model_path, params)
    trainer = SLCAGRPOTrainer(
        model,
        params=params,
        estimator=estimator,
        args=args,
        train_dataset=task_dataset(tasks),
        processing_class=tokenizer,
    )
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    tokens = float(trainer.state.num_input_tokens_seen)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else 0.0
    rewards = [row["reward"] for row in trainer.state.log_history if "reward" in row]
    del trainer, model
    if device == "cuda":
        torch.cuda.empty_cache()
    return {
        "tokens_per_s": tokens / seconds,
        "s_per_step": seconds / params.train.max_steps,
        "peak_gpu_mem_gib": peak,
        "reward_mean": sum(rewards) / max(len(rewards), 1),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="A few SLCA-GRPO steps per estimator, with throughput.")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cuda", help="where to train")
    parser.add_argument("--model", default=None, help="local HF model directory (default: a fresh tiny policy)")
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per estimator")
    parser.add_argument("--estimators", default="slca,grpo", help="comma-separated estimator names")
    parser.add_argument("--generations", type=int, default=4, help="group size G")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per step")
    parser.add_argument("--max-completion-length", type=int, default=128, help="tokens per assistant turn")
    parser.add_argument("--max-tool-turns", type=int, default=2, help="tool-calling iterations per rollout")
    parser.add_argument("--max-model-len", type=int, default=4096, help="vLLM context length")
    parser.add_argument("--vllm-memory", type=float, default=0.3, help="GPU memory share for vLLM colocate")
    parser.add_argument("--no-vllm", action="store_true", help="plain generate even when vllm is importable")
    parser.add_argument(
        "--chat-template",
        default=None,
        help="named template to install on --model (policy.chat_template: qwen2_5, slca_compact, gemma3_tools)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("smoke: --device cuda but torch sees no CUDA device; use --device cpu", file=sys.stderr)
        return 2
    use_vllm = args.device == "cuda" and not args.no_vllm and vllm_available()
    if use_vllm:
        single_process_env()
    params = smoke_params(args, use_vllm)
    tasks = smoke_tasks(args.prompts * args.steps * 2, params.project.seed)
    results = {}
    with tempfile.TemporaryDirectory(prefix="slca-smoke-") as tmp:
        model_path = Path(args.model) if args.model else tiny_policy(params, tasks, Path(tmp) / "policy")
        for estimator in [e.strip() for e in args.estimators.split(",") if e.strip()]:
            results[estimator] = run_estimator(
                params, estimator, model_path, tasks, Path(tmp), args.max_model_len, args.device
            )
            r = results[estimator]
            print(
                f"{estimator:>7}: {r['tokens_per_s']:9.1f} tokens/s  {r['s_per_step']:6.2f} s/step  "
                f"peak GPU memory {r['peak_gpu_mem_gib']:6.2f} GiB  mean reward {r['reward_mean']:+.3f}"
            )
    print(json.dumps({"device": args.device, "vllm": use_vllm, "results": results}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

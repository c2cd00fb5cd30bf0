"""SFT throughput: trained assistant tokens per second, the pre-sweep setup vs the default params.

Both setups warm up a fresh tiny policy for `--steps` optimizer steps on the same train tasks in one
run, one after the other, under the same thread count; the figure is assistant (loss-bearing)
tokens of the examples consumed per second of optimisation (tokenizer training and data
preparation excluded). The ratio is default / pre-sweep. Examples longer than `sft.max_length`
are dropped by both, as the SFT stage does, and the count of dropped examples is printed: a setup
that drops the long (multi-step, multi-tool) examples trains on easier, shorter ones.

    python benchmarks/sft_throughput.py --steps 60
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

from sft_sweep import TODAY  # noqa: E402  (the pre-sweep setup, pinned)

from slca.config import DataParams, Params, load_params  # noqa: E402
from slca.train.sweep import apply_overrides  # noqa: E402


def tasks_for(params: Params) -> list[dict]:
    path = Path(params.data.out_dir) / "train.jsonl"
    if path.exists():
        from slca.train.policy import read_tasks

        return read_tasks(path)
    from slca.data.synthesis import synthesize

    return synthesize(DataParams(n_train=1000, n_val=10, n_test=10), params.project.seed)["train"]


def measure(params: Params, tasks: list[dict], steps: int, examples: int) -> dict:
    from slca.train.sft import train_sft

    params = apply_overrides(params, {"sft.max_steps": steps, "sft.n_examples": examples})
    _, _, metrics = train_sft(params, tasks)
    return {
        key: metrics[key]
        for key in (
            "sft_assistant_tokens_per_s",
            "sft_train_seconds",
            "sft_examples",
            "sft_dropped_too_long",
            "sft_assistant_tokens_per_example",
            "policy_parameters",
            "vocab_size",
        )
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60, help="Optimizer steps per setup.")
    parser.add_argument("--examples", type=int, default=400, help="Train tasks sampled (as sft.n_examples).")
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    args = parser.parse_args()
    base = load_params(args.params)
    tasks = tasks_for(base)
    today = measure(apply_overrides(base, TODAY), tasks, args.steps, args.examples)
    default = measure(base, tasks, args.steps, args.examples)
    ratio = default["sft_assistant_tokens_per_s"] / today["sft_assistant_tokens_per_s"]
    print(
        json.dumps({"pre_sweep": today, "default": default, "ratio_default_over_pre_sweep": round(ratio, 3)}, indent=2)
    )
    print(
        f"assistant tokens/s: pre-sweep {today['sft_assistant_tokens_per_s']:.0f} "
        f"({today['sft_dropped_too_long']} of {args.examples} examples dropped), "
        f"default {default['sft_assistant_tokens_per_s']:.0f} ({default['sft_dropped_too_long']} dropped); "
        f"ratio {ratio:.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

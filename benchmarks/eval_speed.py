"""How long the evaluate stage takes: one policy through in-domain, BFCL and τ² the way `slca evaluate` runs
them, with the evaluation path of today and with the one it replaced, in one run.

Setups, one after the other in one process (run it alone on the machine):

- `before`: the path evaluation took before the cached generator: each in-domain round re-reads every
  episode's whole sequence through transformers' `generate` (`HFTurnGenerator`, the LoRA layers unmerged),
  BFCL's entries and τ²'s turns are answered one chat at a time, each read whole.
- `now`: the stage as it runs (`slca.rollout.cached`): one prefill per distinct prompt and of the part
  all prompts share, the KV cache kept across turns, BFCL's categories in one batch, τ²'s simulations
  side by side with their turns in one batch.

Both generate in `eval.generation_dtype` (float32 by default) from the same policy on the same tasks:
the first `eval.n_test` test tasks with the real executors, BFCL's `eval.bfcl` categories and limit,
τ²'s `eval.tau2` tasks. Printed per setup and part: seconds and the headline figures, then the ratios
(before / now) and how many in-domain tasks scored the same.

    python benchmarks/eval_speed.py --model models/experiment/sft
    python benchmarks/eval_speed.py --model models/sft --only now
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from slca.config import Params, load_params  # noqa: E402

SETUPS = ("before", "now")


@contextmanager
def before_path(model: Any, tokenizer: Any) -> Iterator[Any]:
    """In-domain rounds through `HFTurnGenerator`; yields a one-chat-at-a-time `generate_fn` for BFCL and τ²
    (`generate` over the whole rendered chat, as the adapter did before the cached generator)."""
    from slca.rollout import evaluation
    from slca.rollout.chat_format import chat_format, render
    from slca.rollout.loop import HFTurnGenerator, generate_turns, turn_text

    limit = getattr(model.config, "max_position_embeddings", None) or 1 << 30
    fmt = chat_format(tokenizer, model)
    budget = {"tokens": 0}

    def generate(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        own = [
            dict(m, content=fmt.model_text(m["content"]))
            if m.get("role") == "assistant" and isinstance(m.get("content"), str)
            else m
            for m in messages
        ]
        ids = render(tokenizer, own, tools, tokenize=True, return_dict=False, add_generation_prompt=True)
        tokens = min(budget["tokens"], limit - len(ids))
        if tokens <= 0:
            return ""
        model.eval()
        return turn_text(
            tokenizer, generate_turns(model, tokenizer, [ids], max_new_tokens=tokens, temperature=0.0, seed=0)[0]
        )

    original = evaluation.turn_generator
    evaluation.turn_generator = lambda m, t, **kw: HFTurnGenerator(m, t, temperature=kw["temperature"], seed=kw["seed"])
    try:
        yield generate, budget
    finally:
        evaluation.turn_generator = original


def run_setup(setup: str, params: Params, model_dir: Path) -> dict[str, Any]:
    """The three parts of `slca evaluate` for one setup: seconds, figures and the in-domain rows."""
    from slca.eval.indomain import evaluate_policy, split_train_values
    from slca.eval.stage import evaluate_bfcl, evaluate_tau2_bench, load_test_tasks
    from slca.rollout.hf import make_generate_fn
    from slca.rollout.precision import eval_generation_dtype
    from slca.train.policy import load_policy

    model, tokenizer = load_policy(model_dir, params)
    tasks = load_test_tasks(params)
    seen = split_train_values(params)
    out: dict[str, Any] = {"setup": setup}

    def parts(generate_fn: Any) -> None:
        began = time.perf_counter()
        indomain = evaluate_policy(model, tokenizer, tasks, params, seen_values=seen)
        out["indomain_s"] = time.perf_counter() - began
        print(f"  {setup}: indomain {out['indomain_s']:.1f} s", flush=True)
        began = time.perf_counter()
        bfcl = evaluate_bfcl(generate_fn, params)
        out["bfcl_s"] = time.perf_counter() - began
        print(f"  {setup}: bfcl {out['bfcl_s']:.1f} s", flush=True)
        began = time.perf_counter()
        tau2 = evaluate_tau2_bench(generate_fn, params)
        out["tau2_s"] = time.perf_counter() - began
        print(f"  {setup}: tau2 {out['tau2_s']:.1f} s", flush=True)
        out["rows"] = indomain["episodes"]
        out["success"] = indomain["metrics"]["success"]
        out["arg_match"] = indomain["metrics"]["arg_match"]
        out["bfcl"] = bfcl["accuracy"]
        out["tau2"] = (tau2 or {}).get("metrics")

    if setup == "before":
        with before_path(model, tokenizer) as (generate_fn, budget):
            budget["tokens"] = params.train.max_completion_length
            parts(generate_fn)
    else:
        parts(
            make_generate_fn(
                model,
                tokenizer,
                max_new_tokens=params.train.max_completion_length,
                dtype=eval_generation_dtype(params),
                batch_size=params.eval.batch_size,
            )
        )
    out["total_s"] = out["indomain_s"] + out["bfcl_s"] + out["tau2_s"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=Path("models/sft"), help="The saved policy to evaluate.")
    parser.add_argument("--params", default=str(ROOT / "params.yaml"))
    parser.add_argument("--only", action="append", choices=SETUPS, help="Setups to run (default both).")
    parser.add_argument("--json", type=Path, default=None, help="Also write the figures (no rows) here.")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    params = load_params(args.params)
    n = params.eval.n_test
    bfcl, tau2 = params.eval.bfcl, params.eval.tau2
    print(f"policy {args.model}, {n} in-domain test tasks, BFCL {bfcl.limit} a category, τ² {tau2.domain}")
    results = {}
    for setup in args.only or SETUPS:
        result = run_setup(setup, params, args.model)
        results[setup] = result
        print(
            f"{setup:7s} in-domain {result['indomain_s']:6.1f} s ({60 * n / result['indomain_s']:5.1f} tasks/min), "
            f"BFCL {result['bfcl_s']:5.1f} s, τ² {result['tau2_s']:5.1f} s, total {result['total_s']:6.1f} s | "
            f"Success {result['success']:.3f}, ArgMatch {result['arg_match']:.3f}, "
            f"BFCL {json.dumps(result['bfcl'])}, τ² {json.dumps(result['tau2'])}",
            flush=True,
        )
    if len(results) == 2:
        before, now = results["before"], results["now"]
        for part in ("indomain", "bfcl", "tau2", "total"):
            print(f"{part:9s} before / now: {before[f'{part}_s'] / now[f'{part}_s']:.2f}x")
        same = sum(a == b for a, b in zip(before["rows"], now["rows"], strict=True))
        print(f"in-domain tasks scored the same by both: {same} of {len(now['rows'])}")
    if args.json:
        args.json.write_text(
            json.dumps({k: {m: v for m, v in r.items() if m != "rows"} for k, r in results.items()}, indent=2)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

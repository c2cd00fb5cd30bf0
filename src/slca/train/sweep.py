"""SFT sweep: warm up the policy under several configurations and score each on validation tasks.

Each configuration is a name plus overrides of `params.yaml` sections (dotted keys). One run = the
SFT warm-up (timed) + in-domain evaluation of the SFT-only policy on `n_val` validation tasks with
the real executors (greedy). Runs are independent processes, so two can share a 2-core machine
with one torch thread each. The report ranks nothing: it lists every configuration with its SFT
minutes, Success, Name-F1, ArgMatch and well-formed-call rate, and a plot of each metric against
SFT minutes.

    python scripts/sft_sweep.py                   # all configurations, 2 at a time, then the report
    python scripts/sft_sweep.py --only base deep  # some of them
    python scripts/sft_sweep.py --report          # rebuild reports/sft_sweep.md from saved runs
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slca.config import Params, with_overrides

METRICS = ("success", "name_f1", "arg_match", "well_formed_calls", "process", "no_call_accuracy")
LABELS = {"success": "Success", "name_f1": "Name-F1", "arg_match": "ArgMatch",
          "well_formed_calls": "Well-formed calls", "process": "Process", "no_call_accuracy": "No-call acc."}


def apply_overrides(params: Params, overrides: Mapping[str, Any]) -> Params:
    """params with dotted-key overrides applied, validated again as a whole."""
    return with_overrides(params, overrides, "sweep override")


def run_config(params: Params, name: str, overrides: Mapping[str, Any], out_dir: Path, n_val: int,
               results_dir: Path) -> dict[str, Any]:
    """SFT under one configuration (model in `<out_dir>/<name>`), then its validation metrics,
    written to `<results_dir>/<name>.json`."""
    from slca.eval.indomain import evaluate_policy
    from slca.train.policy import read_tasks
    from slca.train.sft import cpu_threads, save_atomically, train_sft

    # two runs share the 2 cores: one thread each, unless a configuration runs alone and says otherwise
    params = apply_overrides(params, {"sft.threads": 1, **overrides, "sft.out_dir": str(out_dir / name)})
    tasks = read_tasks(Path(params.data.out_dir) / "train.jsonl")
    val = read_tasks(Path(params.data.out_dir) / "val.jsonl")[:n_val]
    model, tokenizer, sft_metrics = train_sft(params, tasks)
    save_atomically(model, tokenizer, Path(params.sft.out_dir), sft_metrics)
    started = time.perf_counter()
    with cpu_threads(1):
        evaluation = evaluate_policy(model, tokenizer, val, apply_overrides(params, {"eval.n_test": n_val}))
    result = {"name": name, "overrides": dict(overrides), "sft": sft_metrics,
              "sft_minutes": round(sft_metrics["sft_seconds"] / 60, 2),
              "eval_seconds": round(time.perf_counter() - started, 1),
              "val": {key: evaluation["metrics"].get(key, 0.0) for key in (*METRICS, "n")},
              "per_kind": evaluation["per_kind"]}
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    return result


def changes(first: Mapping[str, Any], overrides: Mapping[str, Any]) -> str:
    """The overrides that differ from the first configuration's, `key=value`, short keys."""
    diff = {k: v for k, v in overrides.items() if first.get(k) != v}
    return ", ".join(f"{k.split('.', 1)[1] if k.startswith(('policy.', 'sft.')) else k}={v}"
                     for k, v in diff.items()) or "—"


def markdown(results: Sequence[Mapping[str, Any]], command: str) -> str:
    head = ["config", "changes vs the first row", "SFT min", "params", "vocab", "examples (dropped)", "final loss",
            *(LABELS[m] for m in METRICS)]
    first = results[0]["overrides"] if results else {}
    base = ", ".join(f"{k}={v}" for k, v in first.items())
    lines = ["# SFT sweep", "",
             f"Every configuration run, in the order listed; each SFT-only policy evaluated greedily on "
             f"{int(results[0]['val'].get('n', 0)) if results else 0} validation tasks with the real executors. "
             f"Two configurations ran at a time on the 2 cores, one torch thread each, so the minutes compare "
             f"across rows; a row whose changes say threads=2 ran alone on both cores (about 1.6x less wall "
             f"time for the same steps). Regenerate with `{command}`.",
             "", f"First row: {results[0]['name'] if results else '-'} ({base}).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        sft = r["sft"]
        cells = [r["name"], changes(first, r["overrides"]) if r is not results[0] else "—",
                 f"{r['sft_minutes']:.1f}", f"{sft.get('policy_parameters', 0) / 1e6:.2f} M",
                 str(sft.get("vocab_size", "?")),
                 f"{sft['sft_examples']} ({sft['sft_dropped_too_long']})", f"{sft['sft_final_loss']:.3f}",
                 *(f"{r['val'].get(m, 0.0):.3f}" for m in METRICS)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "![SFT sweep](sft_sweep.png)", ""]
    return "\n".join(lines)


def plot(results: Sequence[Mapping[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    for ax, metric in zip(axes, ("success", "name_f1", "arg_match", "well_formed_calls"), strict=True):
        for r in results:
            ax.scatter(r["sft_minutes"], r["val"].get(metric, 0.0))
            ax.annotate(r["name"], (r["sft_minutes"], r["val"].get(metric, 0.0)), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("SFT minutes (2-core CPU)")
        ax.set_title(LABELS[metric])
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

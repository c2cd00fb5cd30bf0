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

from transformers import TrainerCallback

from slca.config import Params, with_overrides

METRICS = (
    "success",
    "name_f1",
    "arg_match",
    "arg_match_seen",
    "arg_match_heldout",
    "well_formed_calls",
    "process",
    "no_call_accuracy",
)
LABELS = {
    "success": "Success",
    "name_f1": "Name-F1",
    "arg_match": "ArgMatch",
    "arg_match_seen": "values seen",
    "arg_match_heldout": "values held-out",
    "well_formed_calls": "Well-formed calls",
    "process": "Process",
    "no_call_accuracy": "No-call acc.",
}
#: metrics older rows did not record (shown as "—")
OPTIONAL = frozenset({"arg_match_seen", "arg_match_heldout"})


def apply_overrides(params: Params, overrides: Mapping[str, Any]) -> Params:
    """params with dotted-key overrides applied, validated again as a whole."""
    return with_overrides(params, overrides, "sweep override")


#: a configuration key that is not a param: steps at which the live policy is also evaluated
EVAL_AT = "sweep.eval_at"
#: not a param either: the SFT minutes of a configuration that evaluates a committed adapter as it is
#: (`sft.init_adapter` with `sft.max_steps` 0), measured when the adapter was trained
SFT_MINUTES = "sweep.sft_minutes"


class CurvePoints(TrainerCallback):
    """Evaluates the live policy on the validation tasks at given steps of one SFT run.

    Each point records the step and the SFT minutes spent so far, evaluation time excluded (the
    callback keeps its own clock, and the run's SFT minutes are reported without it). Under the
    cosine schedule an intermediate point is not annealed, so it understates what a run of that
    length would reach.
    """

    def __init__(
        self,
        steps: Sequence[int],
        val: Sequence[Mapping[str, Any]],
        params: Params,
        seen_values: frozenset[str] | None = None,
    ) -> None:
        self.steps, self.val, self.params = sorted({int(s) for s in steps}), list(val), params
        self.seen_values = seen_values
        self.points: list[dict[str, Any]] = []
        self.eval_seconds = 0.0
        self.started = 0.0

    def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.started = time.perf_counter()

    def on_step_end(
        self, args: Any, state: Any, control: Any, model: Any = None, processing_class: Any = None, **_: Any
    ) -> None:
        step = int(state.global_step)
        if step not in self.steps or step >= state.max_steps:  # the final point is the run's own evaluation
            return
        from slca.train.val_curve import evaluate_live

        began = time.perf_counter()
        minutes = (began - self.started - self.eval_seconds) / 60
        metrics = evaluate_live(model, processing_class, self.val, self.params, self.seen_values)
        self.eval_seconds += time.perf_counter() - began
        self.points.append(
            {"step": step, "sft_minutes": round(minutes, 2), "val": {key: metrics.get(key, 0.0) for key in METRICS}}
        )


def sweep_data(params: Params, overrides: Mapping[str, Any], out_dir: Path) -> dict[str, Any]:
    """A configuration that changes `data.*` (e.g. more train tasks) gets its own synthesized data under
    `<out_dir>/data-<hash of its data overrides>` (made once, validated like the stage's); the val split
    does not depend on `data.n_train`, so rows stay comparable."""
    import hashlib

    from slca.data.stage import synthesize_and_publish

    data = {key: value for key, value in overrides.items() if key.startswith("data.")}
    if not data:
        return {}
    tag = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
    where = out_dir / f"data-{tag}"
    moved = {**data, "data.out_dir": str(where), "data.report_path": str(where / "validation.json")}
    if not (where / "train.jsonl").exists():
        synthesize_and_publish(apply_overrides(params, moved))
    return moved


def run_config(
    params: Params, name: str, overrides: Mapping[str, Any], out_dir: Path, n_val: int, results_dir: Path
) -> dict[str, Any]:
    """SFT under one configuration (model in `<out_dir>/<name>`), then its validation metrics,
    written to `<results_dir>/<name>.json`. `sweep.eval_at: [steps]` adds curve points along the run.
    Value accuracy is split into values seen in the configuration's train split and held-out ones."""
    from slca.rollout.evaluation import evaluate_policy, train_values
    from slca.train.policy import EMBEDDED_TEMPLATE, read_tasks
    from slca.train.sft import cpu_threads, save_atomically, train_sft

    overrides = dict(overrides)
    eval_at = overrides.pop(EVAL_AT, [])
    recorded_minutes = overrides.pop(SFT_MINUTES, None)
    data = sweep_data(params, overrides, out_dir)
    # two runs share the 2 cores: one thread each, unless a configuration runs alone and says otherwise
    params = apply_overrides(params, {"sft.threads": 1, **overrides, **data, "sft.out_dir": str(out_dir / name)})
    tasks = read_tasks(Path(params.data.out_dir) / "train.jsonl")
    val = read_tasks(Path(params.data.out_dir) / "val.jsonl")[:n_val]
    seen = train_values(tasks)
    curve = CurvePoints(eval_at, val, params, seen)
    model, tokenizer, sft_metrics = train_sft(params, tasks, callbacks=[curve] if eval_at else [])
    sft_seconds = sft_metrics["sft_seconds"] - curve.eval_seconds
    if params.sft.max_steps == 0 and sft_metrics.get("init_adapter"):
        # a committed adapter evaluated as it is: the row shows how it was trained, not the merge
        if recorded_minutes is None:
            raise ValueError(f"{name}: an adapter row needs {SFT_MINUTES} (its training minutes)")
        sft_metrics = {**sft_metrics, **sft_metrics["init_adapter"]["metrics"]}
        sft_seconds = 60.0 * float(recorded_minutes)
    save_atomically(model, tokenizer, Path(params.sft.out_dir), sft_metrics)
    started = time.perf_counter()
    with cpu_threads(params.sft.threads):  # a run alone on both cores evaluates on both
        evaluation = evaluate_policy(
            model, tokenizer, val, apply_overrides(params, {"eval.n_test": n_val}), seen_values=seen
        )
    val_metrics = {key: evaluation["metrics"].get(key, 0.0) for key in (*METRICS, "n", "values_seen", "values_heldout")}
    default = EMBEDDED_TEMPLATE if params.policy.model_path is None else "own"
    prompts = params.policy.chat_template or default
    if params.policy.model_path is not None:  # a pretrained policy: its own table
        prompts = f"{Path(params.policy.base_gguf or params.policy.model_path).stem}: {prompts}"
    result = {
        "name": name,
        "overrides": {**overrides, **({EVAL_AT: list(eval_at)} if eval_at else {})},
        "prompts": prompts,
        "sft": sft_metrics,
        "sft_minutes": round(sft_seconds / 60, 2),
        "eval_seconds": round(time.perf_counter() - started + curve.eval_seconds, 1),
        "val": val_metrics,
        "per_kind": evaluation["per_kind"],
    }
    if eval_at:
        final = {
            "step": int(sft_metrics["sft_steps"]),
            "sft_minutes": result["sft_minutes"],
            "val": {key: val_metrics[key] for key in METRICS},
        }
        result["curve"] = [*curve.points, final]
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / f"{name}.json").write_text(json.dumps(result, indent=2, sort_keys=True))
    return result


def changes(first: Mapping[str, Any], overrides: Mapping[str, Any]) -> str:
    """The overrides that differ from the first configuration's, `key=value`, short keys."""
    diff = {k: v for k, v in overrides.items() if first.get(k) != v}
    return (
        ", ".join(f"{k.split('.', 1)[1] if k.startswith(('policy.', 'sft.')) else k}={v}" for k, v in diff.items())
        or "—"
    )


def cell(values: Mapping[str, Any], metric: str) -> str:
    """A metric to three places; "—" where an older row did not record it."""
    if metric in OPTIONAL and metric not in values:
        return "—"
    return f"{values.get(metric, 0.0):.3f}"


#: how each prompt format reads, for the section headings
PROMPT_TITLES = {
    "qwen2_5": "Tools as JSON schemas (the Qwen2.5 template)",
    "slca_compact": "Compact tools (the slca_compact template: one typed line per tool)",
    "SmolLM2-135M-Instruct.Q4_1: slca_compact": (
        "SmolLM2-135M-Instruct (pretrained, LoRA r 16, compact tools with the call tags as text)"
    ),
}


def prompts_of(result: Mapping[str, Any]) -> str:
    """The template a row's prompts were rendered with (rows from before the field: qwen2_5)."""
    return str(result.get("prompts", "qwen2_5"))


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    head = [
        "config",
        "changes vs the first row",
        "SFT min",
        "params",
        "vocab",
        "examples (dropped)",
        "final loss",
        *(LABELS[m] for m in METRICS),
    ]
    first = rows[0]["overrides"]
    lines = [
        f"First row: {rows[0]['name']} ({', '.join(f'{k}={v}' for k, v in first.items())}).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        sft = r["sft"]
        cells = [
            r["name"],
            changes(first, r["overrides"]) if r is not rows[0] else "—",
            f"{r['sft_minutes']:.1f}",
            f"{sft.get('policy_parameters', 0) / 1e6:.2f} M",
            str(sft.get("vocab_size", "?")),
            f"{sft['sft_examples']} ({sft['sft_dropped_too_long']})",
            f"{sft['sft_final_loss']:.3f}",
            *(cell(r["val"], m) for m in METRICS),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown(results: Sequence[Mapping[str, Any]], command: str, notes: Mapping[str, str] | None = None) -> str:
    """The report: one table per prompt format (in the order first run), notes, plot, curves along a run."""
    n_val = int(results[0]["val"].get("n", 0)) if results else 0
    lines = [
        "# SFT sweep",
        "",
        (
            f"Every configuration run, in the order listed; each SFT-only policy evaluated greedily on "
            f"{n_val} validation tasks with the real executors. *values seen* / *values held-out*: the share "
            f"of gold argument values a call of the same tool wrote, for values that occur as an argument in "
            f"the configuration's train split and for values that do not (rows from before this split show "
            f"\u2014). JSON-schema rows ran two at a time on the 2 cores, one torch thread each, unless their "
            f"changes say threads=2 (alone on both cores); compact rows ran one at a time on both cores. "
            f"Regenerate with `{command}`."
        ),
        "",
    ]
    for prompts in dict.fromkeys(prompts_of(r) for r in results):
        lines += [
            f"## {PROMPT_TITLES.get(prompts, prompts)}",
            "",
            *_table([r for r in results if prompts_of(r) == prompts]),
            "",
        ]
    shown = [(r["name"], (notes or {}).get(r["name"])) for r in results]
    if any(note for _, note in shown):
        lines += ["Notes:", ""] + [f"- {name}: {note}" for name, note in shown if note] + [""]
    lines += ["![SFT sweep](sft_sweep.png)", ""]
    for r in results:
        if not r.get("curve"):
            continue
        lines += [
            f"## Along one run: {r['name']}",
            "",
            (
                "The live policy evaluated on the same validation tasks at these steps of the one run (the "
                "cosine schedule has not annealed at an intermediate point, so it understates a run of that "
                "length); SFT minutes exclude the evaluations."
            ),
            "",
            "| step | SFT min | " + " | ".join(LABELS[m] for m in METRICS) + " |",
            "|" + "---|" * (2 + len(METRICS)),
        ]
        lines += [
            f"| {p['step']} | {p['sft_minutes']:.1f} | " + " | ".join(cell(p["val"], m) for m in METRICS) + " |"
            for p in r["curve"]
        ]
        lines.append("")
    return "\n".join(lines)


def plot(results: Sequence[Mapping[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(20, 4))
    shown = ("success", "name_f1", "arg_match", "arg_match_heldout", "well_formed_calls")
    for ax, metric in zip(axes, shown, strict=True):
        for r in results:
            if metric in OPTIONAL and metric not in r["val"]:
                continue
            marker = "^" if prompts_of(r) == "slca_compact" else "o"
            if r.get("curve"):  # checkpoints along one run, joined
                ax.plot(
                    [p["sft_minutes"] for p in r["curve"]],
                    [p["val"].get(metric, 0.0) for p in r["curve"]],
                    marker=".",
                    linewidth=1,
                    alpha=0.7,
                )
            ax.scatter(r["sft_minutes"], r["val"].get(metric, 0.0), marker=marker)
            ax.annotate(
                r["name"],
                (r["sft_minutes"], r["val"].get(metric, 0.0)),
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        ax.set_xlabel("SFT minutes (2-core CPU; ^ compact prompts, o JSON)")
        ax.set_title(LABELS[metric])
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

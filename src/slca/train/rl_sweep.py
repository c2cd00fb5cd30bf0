"""RL sweep: short RL runs from one SFT checkpoint, each scored by what it added on validation.

Each configuration is a set of dotted overrides of params.yaml (learning rate, β, group size,
prompts per step, temperature, max tool turns, estimator). Its run is the ordinary train stage
(`run_train`) with the learning curve evaluated at step 0 (the SFT start) and at the last step,
greedy, on the first `n_val` validation tasks, so "RL − SFT" is the difference of two evaluations
of the same tasks by the same code. Configurations are chosen on validation, never on test.

    result = run_config(params, "base", {"train.max_steps": 188}, out_dir, n_val=100, results=...)
    text = markdown([result, ...], command)
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slca.config import Params, with_overrides
from slca.rollout.precision import precision_summary
from slca.train.val_curve import CURVE_METRICS, checkpoint_digest

#: a configuration key that is not a param: the estimator its run trains (default slca)
ESTIMATOR = "sweep.estimator"
LABELS = {
    "success": "Success",
    "name_f1": "Name-F1",
    "arg_match": "ArgMatch",
    "process": "Process",
    "r_sum": "R_sum",
    "no_call_accuracy": "No-call acc.",
}
#: the RL knobs a row's "setting" column spells out, in this order
KNOBS = {
    "train.learning_rate": "lr",
    "train.beta": "β",
    "train.num_generations": "G",
    "train.prompts_per_step": "P",
    "train.temperature": "T",
    "train.max_tool_turns": "turns",
    "train.max_completion_length": "len",
    "train.max_steps": "steps",
}


def run_params(params: Params, name: str, overrides: Mapping[str, Any], out_dir: Path, n_val: int) -> Params:
    """The params of one configuration's run: its overrides, its own out dir, validation at 0 and the end."""
    knobs = {k: v for k, v in overrides.items() if k != ESTIMATOR}
    tuned = with_overrides(params, knobs, "RL sweep override")
    steps = tuned.train.max_steps
    return with_overrides(
        tuned,
        {
            "train.out_dir": str(out_dir / name),
            "train.val_every": steps,
            "train.val_tasks": n_val,
            "train.checkpoint_every": steps,
            "train.sample_every": steps,
        },
        "RL sweep layout",
    )


def curve_ends(history: Path) -> tuple[dict[str, float], dict[str, float], int]:
    """(validation metrics at step 0, at the last evaluated step, that step) from metrics_history.jsonl."""
    rows = [json.loads(line) for line in history.read_text(encoding="utf-8").splitlines() if line.strip()]
    evaluated = sorted((row for row in rows if "val/success" in row), key=lambda row: row["step"])
    if len(evaluated) < 2 or evaluated[0]["step"] != 0:
        raise ValueError(
            f"{history}: needs validation at step 0 and at a later step; found steps "
            f"{[row['step'] for row in evaluated]}"
        )

    def pick(row: Mapping[str, Any]) -> dict[str, float]:
        return {m: float(row[f"val/{m}"]) for m in CURVE_METRICS if f"val/{m}" in row}

    return pick(evaluated[0]), pick(evaluated[-1]), int(evaluated[-1]["step"])


def run_config(
    params: Params, name: str, overrides: Mapping[str, Any], out_dir: Path, n_val: int, results: Path
) -> dict[str, Any]:
    """Train one configuration (seed 0) and write `<results>/<name>.json`; returns that record."""
    from slca.train.train_stage import HISTORY_FILE, reward_curve, run_train

    estimator = str(overrides.get(ESTIMATOR, "slca"))
    run = run_params(params, name, overrides, out_dir, n_val)
    started = time.perf_counter()
    summary = run_train(run, estimator, 0)
    minutes = (time.perf_counter() - started) / 60
    folder = Path(run.train.out_dir) / f"{estimator}-s0"
    start, end, step = curve_ends(folder / HISTORY_FILE)
    rows = [json.loads(line) for line in (folder / HISTORY_FILE).read_text(encoding="utf-8").splitlines() if line]
    first = next((row for row in rows if row.get("step") == 0 and "val/success" in row), {})
    train = run.train
    record = {
        "name": name,
        "estimator": estimator,
        "overrides": dict(overrides),
        "minutes": round(minutes, 2),
        # step 0 read from the start cache: `minutes` leaves out that evaluation (the first row paid it)
        "start_cached": bool(first.get("val/start_cached", 0.0)),
        "sft_start": checkpoint_digest(run.sft.out_dir)[:16],
        "threads": int(os.environ.get("OMP_NUM_THREADS", "0") or 0),
        "precision": precision_summary(run.policy, run),  # as resolved on the machine that ran it
        "n_val": n_val,
        "steps": step,
        "rollouts": step * train.prompts_per_step * train.num_generations,
        "setting": {label: _lookup(run, key) for key, label in KNOBS.items()},
        "start": start,
        "end": end,
        "delta": {m: end[m] - start[m] for m in start if m in end},
        **reward_curve(folder / HISTORY_FILE, window=10),
        "global_step": summary["global_step"],
    }
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{name}.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return record


def exit_outcome(code: int) -> str:
    """A row process's exit status in words; a kill names its signal (SIGKILL is most often the OOM killer,
    which leaves no traceback in the row's log)."""
    if code == 0:
        return "ok"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the kernel's OOM killer? `dmesg | grep -i kill` says)" if -code == signal.SIGKILL else ""
        return f"killed by {name}{hint}"
    return f"failed (exit {code})"


def _lookup(params: Params, dotted: str) -> Any:
    section, leaf = dotted.split(".")
    return getattr(getattr(params, section), leaf)


def precision_label(row: Mapping[str, Any]) -> str:
    """A row's training precision in a word: `fp32`, `bf16`, or `bf16 (emulated)` on a CPU without bf16
    instructions. Rows from before the record kept it read their pinned overrides."""
    resolved = row.get("precision")
    if resolved is None:
        pinned = row.get("overrides", {}).get("policy.cpu_bf16")
        return "—" if pinned is None else "bf16" if pinned else "fp32"
    if not resolved.get("cpu_bf16"):
        return "fp32"
    return "bf16" if resolved.get("native_bf16", True) else "bf16 (emulated)"


def _signed(value: float) -> str:
    return f"{value:+.3f}"


def choose(results: Sequence[Mapping[str, Any]], metric: str = "success") -> Mapping[str, Any] | None:
    """The configuration with the largest validation RL − SFT on `metric` (ties: Process, then fewer minutes)."""
    if not results:
        return None
    return max(
        results,
        key=lambda r: (round(r["delta"].get(metric, 0.0), 6), round(r["delta"].get("process", 0.0), 6), -r["minutes"]),
    )


def markdown(
    results: Sequence[Mapping[str, Any]],
    command: str,
    notes: Mapping[str, str] | None = None,
    chosen: str | None = None,
    *,
    superseded: Sequence[str] = (),
    title: str | None = None,
    sections: Sequence[str] = (),
    unrecorded_precision: str = "",
) -> str:
    """reports/rl_sweep.md: one row per configuration, RL − SFT start on validation.

    With `title`, one regime's section ("## RL sweep on <title>"); with `sections`, the whole report:
    its introduction followed by those sections (results then unused). `unrecorded_precision`: what the
    rows that did not record their precision ran in, where known.
    """
    notes = notes or {}
    metrics = [m for m in LABELS if any(m in r["delta"] for r in results)]
    if title is None:
        intro = [
            "# RL sweep: what each configuration added to the SFT start on validation",
            "",
            (
                f"Regenerated by `{command} --report` from `reports/rl_sweep/**/*.json`. Within a regime every row "
                "trains from the same SFT checkpoint (`models/sft`, params.yaml's SFT settings) with seed 0 and is "
                "evaluated greedily on the same first validation tasks at step 0 (the SFT start) and at its last step "
                "(never on test). Cells are RL − SFT start; the start's own values are in each regime's first table."
            ),
            "",
        ]
        if sections:
            return "\n".join(intro) + "\n" + "\n".join(sections)
        lines, sub = intro, "##"
    else:
        lines, sub = [f"## RL sweep on {title}", ""], "###"
    if not results:
        return "\n".join([*lines, "No configuration has been run yet.", ""])
    starts: dict[str, list[dict]] = {}  # one line per distinct step-0 evaluation, naming its rows
    for r in results:
        starts.setdefault(json.dumps(r["start"], sort_keys=True), []).append(r)
    lines += [
        f"{sub} SFT start (step 0, every row evaluates the same checkpoint)",
        "",
        "| " + " | ".join(["rows", "validation tasks", *(LABELS[m] for m in metrics)]) + " |",
        "|" + "---|" * (len(metrics) + 2),
        *(
            "| "
            + " | ".join(
                [", ".join(r["name"] for r in rows), str(rows[0]["n_val"])]
                + [f"{rows[0]['start'].get(m, 0.0):.3f}" for m in metrics]
            )
            + " |"
            for rows in starts.values()
        ),
        "",
        f"{sub} RL − SFT start",
        "",
    ]
    head = [
        "config",
        "estimator",
        *KNOBS.values(),
        "precision",
        "rollouts",
        "minutes (threads)",
        "reward first → last 10",
        *(f"Δ {LABELS[m]}" for m in metrics),
    ]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        mark = " (chosen)" if r["name"] == chosen else " (superseded)" if r["name"] in superseded else ""
        reward = f"{r['reward_first']:.3f} → {r['reward_last']:.3f}" if "reward_first" in r else "—"
        lines.append(
            "| "
            + " | ".join(
                [
                    f"{r['name']}{mark}",
                    r["estimator"],
                    *(str(r["setting"].get(k, "—")) for k in KNOBS.values()),
                    precision_label(r),
                    str(r["rollouts"]),
                    f"{r['minutes']:.1f}{'*' if r.get('start_cached') else ''} ({r['threads']})",
                    reward,
                    *(_signed(r["delta"][m]) if m in r["delta"] else "—" for m in metrics),
                ]
            )
            + " |"
        )
    lines += [
        "",
        (
            "Every row's step-0 evaluation is identical (one SFT checkpoint, greedy decoding)."
            if len(starts) == 1
            else f"The rows' step-0 evaluations are {len(starts)} different ones: the SFT checkpoint is one, so "
            "what the evaluation reads (turn budget, simulator, executors) differs between them; each row's "
            "cells are against its own step 0 (notes below)."
        ),
    ]
    if any(r["name"] in superseded for r in results):
        lines.append(
            "Rows marked superseded ran before a change to what a rollout sees (notes below): kept as measured, "
            "never chosen."
        )
    if any(precision_label(r) == "—" for r in results):
        lines.append(
            "Precision — : the row ran before rows recorded their precision"
            + (f"; {unrecorded_precision}." if unrecorded_precision else ".")
        )
    if any(r.get("start_cached") for r in results):
        lines.append(
            "Minutes marked * leave out the step-0 evaluation: it was read from the start cache "
            "(`SLCA_VAL_START_CACHE`), evaluated once by the first row from this checkpoint."
        )
    for name, note in notes.items():  # a configuration that ran without a result (killed, failed) is named too
        finished = any(r["name"] == name for r in results)
        lines.append(f"- **{name}**{'' if finished else ' (no result)'}: {note}")
    lines.append("")
    return "\n".join(lines)

"""The `calibrate` stage: measure how faithfully the simulator reproduces the real executors and
tune its knobs to agree with them.

1. Calibration set from the validation split's gold calls plus perturbations (`calibration_set`).
2. Every item runs through the real executors once (the truth) and through the `schema` backend.
3. Grid search on the search half: validation knobs first (maximise error-agreement F1, then class
   and message agreement), then synthesis knobs (conformance, value agreement, consistency); ties
   keep the params' setting. The chosen knobs are re-scored on the held-out half.
4. `reports/calibration.json` (atomic) with the knobs and every metric, `reports/calibration.png`,
   and an MLflow run `calibrate` with params, metrics, the grid and both files.

    report = run_calibrate(load_params("params.yaml"))
    report["knobs"], report["heldout"]["error_f1"]
"""

from __future__ import annotations

import io
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm import tqdm

from slca.runinfo import pop_keys, update_runinfo
from slca.simulator.backends import make_backend
from slca.simulator.calibration_metrics import (
    Outcome,
    error_agreement,
    knob_diff,
    row_specs,
    run_items,
    score,
)
from slca.simulator.calibration_set import CalibItem, build_items, read_rows
from slca.simulator.types import Knobs
from slca.tracking import write_atomic

VALIDATION_KNOBS = (
    "strict_extra_arguments",
    "coerce_numeric_strings",
    "case_insensitive_enums",
    "check_formats",
    "check_ranges",
)
KNOB_VALUES: dict[str, tuple] = {
    "strict_extra_arguments": (True, False),
    "coerce_numeric_strings": (False, True),
    "case_insensitive_enums": (False, True),
    "check_formats": (True, False),
    "check_ranges": (True, False),
    "echo_arguments": (True, False),
    "track_writes": (True, False),
    "new_id_start": (0, 101, 1001, 9001),
    "array_min_items": (0, 1, 2),
    "array_max_items": (1, 3, 5),
}
TARGETS = {"error_f1": 0.99, "conformance": 1.0}
LATENCY_KEYS = frozenset({"latency_us", "real_latency_us"})


def run_calibrate(params: Any, *, rows: list[dict] | None = None, progress: bool = True) -> dict:
    """Build the set, search the knobs, score them held out, write the report and log to MLflow."""
    from slca.tracking import log_json, log_metrics, stage_run

    cal = params.calibration
    check_search_knobs(cal.search_knobs)
    if rows is None:
        rows = read_rows(Path(params.data.out_dir) / "val.jsonl")
    with stage_run(
        "calibrate",
        params,
        log_params={
            "calibration": cal.model_dump(mode="json"),
            "simulator": Knobs.from_mapping(params.simulator).as_dict(),
        },
    ):
        report = calibrate(rows, params, progress=progress)
        # latencies are wall-clock: beside the report (.runinfo/), so the DVC-tracked report is fixed by the seed
        stable, latencies = pop_keys(report, LATENCY_KEYS)
        write_atomic(cal.report_path, json.dumps(stable, indent=2, sort_keys=True) + "\n")
        update_runinfo(cal.report_path, latency=latencies)
        write_atomic(cal.plot_path, plot_png(report))
        log_metrics(flat_metrics(report))
        for step, entry in enumerate(report["grid"]):
            log_metrics({f"grid/{k}": v for k, v in entry["metrics"].items()}, step=step)
        log_json(report, "calibration.json")
        _log_artifact(cal.plot_path)
    return report


def calibrate(rows: list[dict], params: Any, *, progress: bool = False) -> dict:
    """The calibration report for these validation rows (no files, no tracking)."""
    from slca.tools import World

    cal, seed = params.calibration, params.project.seed
    items = build_items(rows, cal.n_calls, cal.perturbations_per_call, seed)
    if not items:
        raise ValueError("calibration: the validation rows hold no gold calls; check data.n_val and kind_mix")
    search, heldout = split_items(items, cal.heldout_fraction, seed)
    specs = row_specs(items)
    world = World(params.data.world_seed)
    truth = {
        id(item): outcome
        for item, outcome in zip(items, run_items(items, make_backend("real"), Knobs(), specs, world=world, seed=seed))
    }
    real_search, real_heldout = [truth[id(i)] for i in search], [truth[id(i)] for i in heldout]
    base = Knobs.from_mapping(params.simulator)
    chosen, grid = search_knobs(search, real_search, specs, base, cal.search_knobs, seed, progress)
    backend = make_backend("schema")
    heldout_metrics = score(heldout, real_heldout, run_items(heldout, backend, chosen, specs, seed=seed), specs)
    return {
        "knobs": chosen.as_dict(),
        "changed_from_params": knob_diff(chosen, base),
        "searched": {name: list(KNOB_VALUES[name]) for name in cal.search_knobs},
        "search": score(search, real_search, run_items(search, backend, chosen, specs, seed=seed), specs),
        "heldout": heldout_metrics,
        "params_heldout": score(heldout, real_heldout, run_items(heldout, backend, base, specs, seed=seed), specs),
        "grid": grid,
        "targets": {
            name: {"target": target, "heldout": heldout_metrics[name], "met": heldout_metrics[name] >= target}
            for name, target in TARGETS.items()
        },
        "sizes": {
            "rows": len({i.row_id for i in items}),
            "items": len(items),
            "search": len(search),
            "heldout": len(heldout),
            "gold": sum(i.kind == "gold" for i in items),
        },
        "seed": seed,
        "world_seed": params.data.world_seed,
    }


def check_search_knobs(names: list[str]) -> None:
    unknown = sorted(set(names) - set(KNOB_VALUES))
    if unknown:
        raise ValueError(f"calibration.search_knobs: unknown knobs {unknown}; choose from {sorted(KNOB_VALUES)}")


def split_items(items: list[CalibItem], heldout_fraction: float, seed: int) -> tuple[list, list]:
    """Search and held-out halves split by row (no row straddles them), stratified by call kind:
    rows holding rare kinds are placed first, each on the side whose share of its kinds lags most."""
    import random

    rng = random.Random(f"split|{seed}")
    kinds_of: dict[str, Counter] = {}
    for item in items:
        kinds_of.setdefault(item.row_id, Counter())[item.kind] += 1
    total = sum(kinds_of.values(), Counter())
    rows = sorted(kinds_of)
    rng.shuffle(rows)
    rows.sort(key=lambda row: min(total[k] for k in kinds_of[row]))
    share = {True: heldout_fraction, False: 1 - heldout_fraction}
    placed: dict[bool, Counter] = {True: Counter(), False: Counter()}
    held = set()
    for row in rows:
        lag = {side: sum(share[side] - placed[side][k] / total[k] for k in kinds_of[row]) for side in (True, False)}
        side = lag[True] > lag[False] or (lag[True] == lag[False] and rng.random() < heldout_fraction)
        placed[side].update(kinds_of[row])
        if side:
            held.add(row)
    return [i for i in items if i.row_id not in held], [i for i in items if i.row_id in held]


def search_knobs(
    items: list[CalibItem], real: list[Outcome], specs: dict, base: Knobs, names: list[str], seed: int, progress: bool
) -> tuple[Knobs, list[dict]]:
    """Two-stage grid search; returns the chosen knobs and one entry per evaluated setting."""
    backend = make_backend("schema")
    stages = [[n for n in names if n in VALIDATION_KNOBS], [n for n in names if n not in VALIDATION_KNOBS]]
    total = sum(len(list(grid_of(stage))) for stage in stages)
    bar = tqdm(total=total, desc="calibrate: knob search", disable=not progress, leave=False)
    grid: list[dict] = []
    best = base
    for stage_index, stage in enumerate(stages, 1):
        scored = []
        for combo in grid_of(stage):
            knobs = best.replace(**combo)
            full = stage_index == 2  # validation verdicts do not depend on episode state
            sim = run_items(items, backend, knobs, specs, full=full, seed=seed)
            metrics = score(items, real, sim, specs) if full else error_agreement(real, sim)
            metrics.pop("by_kind", None)
            grid.append({"stage": stage_index, "knobs": combo, "metrics": metrics})
            scored.append((objective(metrics, stage_index) + (-len(knob_diff(knobs, base)),), knobs))
            bar.update()
        if scored:
            best = max(scored, key=lambda pair: pair[0])[1]
    bar.close()
    return best, grid


def grid_of(names: list[str]):
    for values in itertools.product(*(KNOB_VALUES[n] for n in names)):
        yield dict(zip(names, values))


def objective(metrics: dict, stage: int) -> tuple:
    if stage == 1:
        return (
            round(metrics["error_f1"], 9),
            round(metrics["error_class_agreement"], 9),
            round(metrics["error_message_agreement"], 9),
        )
    return (
        round(metrics["conformance"], 9),
        round(metrics["value_agreement"], 9),
        round(metrics.get("consistency", 1.0), 9),
    )


def flat_metrics(report: dict) -> dict[str, float]:
    """Numeric metrics of the search/held-out/params scores as `heldout.error_f1`-style keys."""
    out = {}
    for part in ("search", "heldout", "params_heldout"):
        for key, value in report[part].items():
            if isinstance(value, (int, float)):
                out[f"{part}.{key}"] = float(value)
    return out


SHORT = {
    "strict_extra_arguments": "strict",
    "coerce_numeric_strings": "coerce",
    "case_insensitive_enums": "casefold",
    "check_formats": "formats",
    "check_ranges": "ranges",
}


def plot_png(report: dict) -> bytes:
    """Headline metrics (search / held-out / params knobs) and the error F1 of every searched setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["error_f1", "error_class_agreement", "conformance", "value_agreement", "consistency"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5.5), gridspec_kw={"width_ratios": [1.1, 1]})
    width = 0.27
    for offset, (part, label) in enumerate(
        (("search", "tuned, search half"), ("heldout", "tuned, held out"), ("params_heldout", "params knobs, held out"))
    ):
        values = [report[part].get(name, 0.0) for name in names]
        left.bar([i + (offset - 1) * width for i in range(len(names))], values, width, label=label)
    left.set_xticks(range(len(names)), [n.replace("_", "\n") for n in names], fontsize=8)
    left.set_ylim(0, 1.05)
    left.set_title("Simulator vs real executors")
    left.legend(fontsize=7, loc="lower left")
    stage1 = sorted((e for e in report["grid"] if e["stage"] == 1), key=lambda e: e["metrics"]["error_f1"])
    labels = [_setting_label(e["knobs"], report["knobs"]) for e in stage1]
    colors = ["tab:orange" if label == "chosen" else "tab:blue" for label in labels]
    right.barh(range(len(stage1)), [e["metrics"]["error_f1"] for e in stage1], color=colors)
    right.set_yticks(range(len(stage1)), labels, fontsize=6)
    low = min([e["metrics"]["error_f1"] for e in stage1] + [1.0])
    right.set_xlim(max(0.0, low - 0.05), 1.0)
    right.set_title("Error-agreement F1 per validation-knob setting (search half)", fontsize=9)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return buffer.getvalue()


def _setting_label(combo: dict, chosen: dict) -> str:
    changed = [f"{SHORT.get(k, k)}={'on' if v else 'off'}" for k, v in combo.items() if chosen.get(k) != v]
    return " ".join(changed) if changed else "chosen"


def _log_artifact(path: str) -> None:
    import mlflow

    mlflow.log_artifact(path)

"""The headline experiment's report: every estimator against SLCA, over seeds and test tasks.

Reads the evaluation reports (`<eval.out_dir>/<estimator>-s<seed>.json`, `sft.json`) and the
training histories (`<train.out_dir>/<estimator>-s<seed>/metrics_history.jsonl`) of one
experiment and writes `reports/experiment.md` with its figures:

- mean ± std over seeds per estimator (and the SFT checkpoint) for the in-domain metrics, BFCL
  and τ², overall and by task kind;
- SLCA − baseline with a 95 % paired bootstrap interval: test tasks and seeds are resampled
  together (seed i of SLCA is paired with seed i of the baseline, task t with task t);
- each estimator − the SFT start it trained from, paired the same way (what RL added);
- learning curves (validation Success every k steps, R_tool, R_sum) with steps-to-threshold;
- misattribution rate and corr(R_tool, R_sum) over training;
- per setting (ablations), SLCA − GRPO and SLCA − GDPO; the judge-noise curve over the settings that
  differ only in the training judge's noise σ;
- the segment-normalisation bias per task kind, read from the training histories;
- the verdict and a list of findings computed from these numbers (the spec's discussion adds
  interpretation only).

    report = write_experiment_report(params, Path("reports/experiment.md"))
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

EPISODE_METRICS = ("success", "process", "name_f1", "arg_match", "r_sum", "calls", "redundant_calls")
LABELS = {
    "success": "Success",
    "process": "Process",
    "name_f1": "Name-F1",
    "arg_match": "ArgMatch",
    "r_sum": "R_sum",
    "no_call_accuracy": "No-call acc.",
    "calls": "Calls/task",
    "redundant_calls": "Redundant/task",
    "bfcl": "BFCL",
    "bfcl_irrelevance": "BFCL irrel.",
    "tau2": "τ² Pass^1",
}
TABLE_METRICS = (
    "success",
    "process",
    "name_f1",
    "arg_match",
    "r_sum",
    "no_call_accuracy",
    "calls",
    "redundant_calls",
    "bfcl",
    "bfcl_irrelevance",
    "tau2",
)
PAIRED_METRICS = ("success", "process", "name_f1", "arg_match", "r_sum", "no_call")
CURVES = {
    "val/success": "Validation Success (greedy)",
    "val/process": "Validation Process (greedy)",
    "rewards/r_tool/mean": "R_tool (rollouts)",
    "rewards/r_sum/mean": "R_sum (rollouts)",
    "credit/misattribution_rate": "Misattribution rate",
    "credit/corr_r_tool_r_sum": "corr(R_tool, R_sum)",
}
BOOTSTRAP_SAMPLES = 2000
NAMES = {"grpo": "GRPO", "gdpo": "GDPO", "toolpo": "ToolPO", "rltr": "RLTR", "slca": "SLCA-GRPO"}
#: the baselines an ablation setting is compared with (each borrowed from the main setting when not rerun)
ABLATION_BASELINES = ("grpo", "gdpo")


def steps_to_threshold(history: Sequence[Mapping[str, float]], metric: str, threshold: float) -> int | None:
    """First logged step whose `metric` reaches `threshold` (None: never)."""
    for row in sorted((r for r in history if metric in r), key=lambda r: r["step"]):
        if row[metric] >= threshold - 1e-12:
            return int(row["step"])
    return None


class ExperimentReportError(ValueError):
    """An experiment whose runs are missing; the message names the file."""


def run_label(estimator: str, seed: int) -> str:
    return f"{estimator}-s{seed}"


def load_eval(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ExperimentReportError(f"{path} is missing: evaluate that run first (slca evaluate)")
    return json.loads(path.read_text())


def run_summary(report: Mapping[str, Any]) -> dict[str, float]:
    """The table's numbers of one evaluated run."""
    metrics = report["indomain"]["metrics"]
    out = {name: float(metrics.get(name, math.nan)) for name in TABLE_METRICS[:8]}
    accuracy = (report.get("bfcl") or {}).get("aggregate") or {}
    out["bfcl"] = float(accuracy.get("overall_accuracy_non_live", math.nan))
    out["bfcl_irrelevance"] = float(((report.get("bfcl") or {}).get("accuracy") or {}).get("irrelevance", math.nan))
    tau2 = (report.get("tau2") or {}).get("metrics") or {}
    out["tau2"] = float(tau2.get("pass_hat_1", math.nan))
    for kind, row in (report["indomain"].get("per_kind") or {}).items():
        out[f"success.{kind}"] = float(row.get("success", math.nan))
    return out


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, std


def episode_matrix(reports: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[str], np.ndarray]:
    """(task ids, seeds × tasks values) of one estimator; `no_call` is 1 - called on no-call tasks."""
    rows = [{row["task_id"]: row for row in report["indomain"]["episodes"]} for report in reports]
    tasks = sorted(set.intersection(*(set(r) for r in rows))) if rows else []
    if metric == "no_call":
        tasks = [t for t in tasks if not rows[0][t]["needs_call"]]
        values = [[1.0 - r[t]["called"] for t in tasks] for r in rows]
    else:
        values = [[float(r[t][metric]) for t in tasks] for r in rows]
    return tasks, np.asarray(values, dtype=float)


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of a − b and its 95 % interval, resampling seeds (rows) and tasks (columns) together."""
    diff = a - b
    if diff.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    n_seeds, n_tasks = diff.shape
    seed_idx = rng.integers(0, n_seeds, size=(samples, n_seeds))
    task_idx = rng.integers(0, n_tasks, size=(samples, n_tasks))
    means = np.array([diff[np.ix_(s, t)].mean() for s, t in zip(seed_idx, task_idx, strict=True)])
    low, high = np.percentile(means, [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)


def read_history(path: Path) -> list[dict[str, float]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line of a killed run
            continue
    return rows


def mean_curve(histories: Sequence[Sequence[Mapping[str, float]]], key: str) -> tuple[list[int], list[float]]:
    """Steps at which every seed logged `key`, and the mean over seeds there."""
    per_seed = [{int(r["step"]): float(r[key]) for r in h if key in r} for h in histories]
    if not per_seed or not all(per_seed):
        return [], []
    steps = sorted(set.intersection(*(set(s) for s in per_seed)))
    return steps, [sum(s[step] for s in per_seed) / len(per_seed) for step in steps]


def fmt(mean: float, std: float | None = None, digits: int = 3) -> str:
    if math.isnan(mean):
        return "—"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def history_path(params: Any, run: str) -> Path:
    """A run's training history: in its run folder, else the copy the experiment driver keeps (committed)."""
    from slca.experiment import history_copy

    live, kept = Path(params.train.out_dir) / run / "metrics_history.jsonl", history_copy(params, run)
    return live if live.exists() or not kept.exists() else kept


def collect(params: Any) -> dict[str, Any]:
    """Every run's evaluation report, summary and training history, by estimator."""
    eval_dir = Path(params.eval.out_dir)
    runs: dict[str, list[dict[str, Any]]] = {}
    missing: list[str] = []
    for estimator in params.train.estimators:
        for seed in params.train.seeds:
            path = eval_dir / f"{run_label(estimator, seed)}.json"
            if not path.exists():  # an experiment stopped early is reported as such, never padded
                missing.append(run_label(estimator, seed))
                continue
            report = load_eval(path)
            history = read_history(history_path(params, run_label(estimator, seed)))
            runs.setdefault(estimator, []).append(
                {"seed": seed, "report": report, "summary": run_summary(report), "history": history}
            )
    sft_path = eval_dir / "sft.json"
    sft = load_eval(sft_path) if sft_path.exists() else None
    return {"runs": runs, "sft": sft, "missing": missing}


def summary_table(data: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    head = ["estimator", "runs", *(LABELS.get(k, k.replace("success.", "Success ")) for k in keys)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    if data["sft"] is not None:
        summary = run_summary(data["sft"])
        lines.append("| SFT (start) | 1 | " + " | ".join(fmt(summary.get(k, math.nan)) for k in keys) + " |")
    for estimator, runs in data["runs"].items():
        cells = [fmt(*mean_std([r["summary"].get(k, math.nan) for r in runs])) for k in keys]
        lines.append(f"| {estimator} | {len(runs)} | " + " | ".join(cells) + " |")
    return lines


def paired_table(data: Mapping[str, Any], reference: str) -> tuple[list[str], dict[str, Any]]:
    base_runs = data["runs"].get(reference)
    if not base_runs:
        return [f"({reference} was not run: no paired comparison.)"], {}
    head = [
        "SLCA − baseline",
        *(LABELS.get(m, "No-call acc.") if m != "no_call" else "No-call acc." for m in PAIRED_METRICS),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    found: dict[str, Any] = {}
    for other, runs in data["runs"].items():
        if other == reference:
            continue
        seeds = sorted({r["seed"] for r in base_runs} & {r["seed"] for r in runs})
        cells = []
        for metric in PAIRED_METRICS:
            found[f"{other}.{metric}"] = paired_difference(
                [r["report"] for r in base_runs if r["seed"] in seeds],
                [r["report"] for r in runs if r["seed"] in seeds],
                metric,
            )
            cells.append(_interval(found[f"{other}.{metric}"]))
        lines.append(f"| vs {other} | " + " | ".join(cells) + " |")
    return lines, found


def paired_difference(
    a_reports: Sequence[Mapping[str, Any]], b_reports: Sequence[Mapping[str, Any]], metric: str
) -> dict[str, float]:
    """Mean of a − b with its paired bootstrap interval, on the test tasks both were evaluated on.

    Seed i of a is paired with seed i of b; a single b report (the SFT start) pairs with every seed of a.
    """
    tasks_a, a = episode_matrix(a_reports, metric)
    tasks_b, b = episode_matrix(b_reports, metric)
    common = sorted(set(tasks_a) & set(tasks_b))
    if not common:
        return {"mean": math.nan, "low": math.nan, "high": math.nan}
    a = a[:, [tasks_a.index(t) for t in common]]
    b = b[:, [tasks_b.index(t) for t in common]]
    if len(b) == 1:
        b = np.repeat(b, len(a), axis=0)
    mean, low, high = paired_bootstrap(a, b)
    return {"mean": mean, "low": low, "high": high}


def start_table(data: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Each estimator − the SFT start it trained from, paired over test tasks (seeds resampled too)."""
    if data["sft"] is None:
        return ["(the SFT start was not evaluated: nothing to compare RL against.)"], {}
    head = [
        "estimator − SFT start",
        *(LABELS.get(m, "No-call acc.") if m != "no_call" else "No-call acc." for m in PAIRED_METRICS),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    found: dict[str, Any] = {}
    for estimator, runs in data["runs"].items():
        for metric in PAIRED_METRICS:
            found[f"{estimator}.{metric}"] = paired_difference([r["report"] for r in runs], [data["sft"]], metric)
        lines.append(
            f"| {estimator} | " + " | ".join(_interval(found[f"{estimator}.{m}"]) for m in PAIRED_METRICS) + " |"
        )
    return lines, found


def _interval(value: Mapping[str, float] | None) -> str:
    if value is None or math.isnan(value["mean"]):
        return "—"
    return f"{value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]"


def _resolved(value: Mapping[str, float] | None) -> bool:
    return value is not None and not math.isnan(value["mean"]) and (value["low"] > 0 or value["high"] < 0)


def findings(
    data: Mapping[str, Any],
    paired: Mapping[str, Any],
    start: Mapping[str, Any],
    curves: Mapping[str, Any],
    ablations: Mapping[str, Any],
    labels: Mapping[str, str],
) -> list[str]:
    """Plain statements read off this report's own numbers (so a rerun rewrites them too)."""
    out = []
    if start:
        moved = [e for e in data["runs"] if _resolved(start.get(f"{e}.success"))]
        detail = "; ".join(f"{e} {_interval(start.get(f'{e}.success'))}" for e in data["runs"])
        if moved:
            out.append(
                f"- RL against its SFT start (Success): {detail}. The interval excludes 0 for {', '.join(moved)}."
            )
        else:
            out.append(
                f"- RL against its SFT start (Success): {detail}. No estimator's Success separates from "
                "the SFT start: RL did not measurably move the policy at this budget."
            )
    reached = {e: c["steps_to_threshold"] for e, c in curves.items() if c.get("steps_to_threshold") is not None}
    if curves:
        out.append(
            "- Convergence: "
            + (
                ", ".join(f"{e} reached the validation threshold at step {s}" for e, s in reached.items())
                if reached
                else "no estimator reached the validation threshold, so steps-to-threshold cannot rank them"
            )
            + "."
        )
    no_call = {
        e: mean_std([r["summary"].get("no_call_accuracy", math.nan) for r in runs])[0]
        for e, runs in data["runs"].items()
    }
    if no_call and not all(math.isnan(v) for v in no_call.values()):
        ranked = sorted((v, e) for e, v in no_call.items() if not math.isnan(v))
        worse = [
            k.split(".")[0] for k, v in paired.items() if k.endswith(".no_call") and _resolved(v) and v["high"] < 0
        ]
        better = [
            k.split(".")[0] for k, v in paired.items() if k.endswith(".no_call") and _resolved(v) and v["low"] > 0
        ]
        text = (
            f"- No-call accuracy: lowest {ranked[0][1]} ({ranked[0][0]:.3f}), highest {ranked[-1][1]} "
            f"({ranked[-1][0]:.3f})."
        )
        if worse:
            text += f" SLCA abstains significantly less often than {', '.join(worse)}."
        if better:
            text += f" SLCA abstains significantly more often than {', '.join(better)}."
        if not worse and not better:
            text += " No SLCA − baseline no-call interval excludes 0."
        out.append(text)
    if len(ablations) > 1:
        for other in ABLATION_BASELINES:
            parts = [
                f"{labels.get(name, name)}: {_interval(found.get(f'{other}.success'))}"
                for name, found in ablations.items()
                if f"{other}.success" in found
            ]
            if parts:
                out.append(f"- SLCA − {NAMES[other]} Success per setting: " + "; ".join(parts) + ".")
    return out


def curve_section(data: Mapping[str, Any], threshold_gain: float) -> tuple[list[str], dict[str, Any]]:
    lines = [
        (
            "| estimator | val Success at step 0 | at the last step | steps to start + "
            f"{threshold_gain:.2f} | val Process at step 0 | at the last step | mean misattribution "
            "| mean corr(R_tool, R_sum) |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    found: dict[str, Any] = {}
    for estimator, runs in data["runs"].items():
        steps, values = mean_curve([r["history"] for r in runs], "val/success")
        start, last = (values[0], values[-1]) if values else (math.nan, math.nan)
        reach = (
            steps_to_threshold(
                [{"step": s, "v": v} for s, v in zip(steps, values, strict=True)], "v", start + threshold_gain
            )
            if values
            else None
        )
        mis = mean_std(
            [
                r.get("credit/misattribution_rate", math.nan)
                for run in runs
                for r in run["history"]
                if "credit/misattribution_rate" in r
            ]
        )[0]
        corr = mean_std(
            [
                r.get("credit/corr_r_tool_r_sum", math.nan)
                for run in runs
                for r in run["history"]
                if "credit/corr_r_tool_r_sum" in r
            ]
        )[0]
        _, process = mean_curve([r["history"] for r in runs], "val/process")
        p_start, p_last = (process[0], process[-1]) if process else (math.nan, math.nan)
        found[estimator] = {
            "start": start,
            "last": last,
            "steps_to_threshold": reach,
            "misattribution": mis,
            "corr": corr,
            "process_start": p_start,
            "process_last": p_last,
        }
        lines.append(
            f"| {estimator} | {fmt(start)} | {fmt(last)} | {reach if reach is not None else 'not reached'}"
            f" | {fmt(p_start)} | {fmt(p_last)} | {fmt(mis)} | {fmt(corr)} |"
        )
    return lines, found


def plot_curves(data: Mapping[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 3
    rows = -(-len(CURVES) // columns)
    fig, grid = plt.subplots(rows, columns, figsize=(4.4 * columns, 3.4 * rows), squeeze=False)
    axes = list(grid.flat)
    for ax in axes[len(CURVES) :]:
        ax.set_visible(False)
    for ax, (key, title) in zip(axes, CURVES.items(), strict=False):
        for estimator, runs in data["runs"].items():
            steps, values = mean_curve([r["history"] for r in runs], key)
            if steps:
                ax.plot(steps, values, marker="o" if key.startswith("val/") else None, markersize=3, label=estimator)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_summary(data: Mapping[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("success", "process", "name_f1", "arg_match", "r_sum", "no_call_accuracy", "bfcl")
    names = list(data["runs"])
    fig, ax = plt.subplots(figsize=(11, 3.8))
    width = 0.8 / max(1, len(names) + (data["sft"] is not None))
    offset = 0
    if data["sft"] is not None:
        summary = run_summary(data["sft"])
        ax.bar(
            np.arange(len(keys)) + offset * width, [summary.get(k, 0) for k in keys], width, label="SFT", color="0.7"
        )
        offset += 1
    for estimator in names:
        stats = [mean_std([r["summary"].get(k, math.nan) for r in data["runs"][estimator]]) for k in keys]
        ax.bar(
            np.arange(len(keys)) + offset * width,
            [s[0] for s in stats],
            width,
            yerr=[s[1] for s in stats],
            capsize=2,
            label=estimator,
        )
        offset += 1
    ax.set_xticks(np.arange(len(keys)) + width * (offset - 1) / 2, [LABELS[k] for k in keys])
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, ncol=5)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def mlflow_runs(params: Any) -> list[tuple[str, str, str]]:
    """(run, MLflow run id, status) of each training run, read back from the tracking store."""
    from mlflow.tracking import MlflowClient

    from slca.runinfo import read_runinfo
    from slca.tracking import resolve_tracking_uri

    client = MlflowClient(resolve_tracking_uri(params.project.tracking_uri))
    out = []
    for estimator in params.train.estimators:
        for seed in params.train.seeds:
            run = run_label(estimator, seed)
            run_id = str(read_runinfo(Path(params.train.out_dir) / run).get("mlflow_run_id", ""))
            kept = history_path(params, run).with_suffix(".runinfo.json")
            if not run_id and kept.exists():  # a run of an earlier session: its id was kept with its history
                run_id = str(json.loads(kept.read_text()).get("mlflow_run_id", ""))
            out.append((run, run_id, _status(client, run_id)))
    return out


def _status(client: Any, run_id: str) -> str:
    if not run_id:
        return "missing"
    try:
        return str(client.get_run(run_id).info.status)
    except Exception:  # noqa: BLE001 - a run tracked in another session's store
        return "not in this tracking store"


def compute_line(stamps: Sequence[Mapping[str, Any]]) -> str:
    """Job-minutes in all and how many jobs ran alone (one lane) or side by side, from the jobs' stamps."""
    total = sum(float(stamp.get("seconds", 0.0)) for stamp in stamps)
    known = [stamp for stamp in stamps if "lanes" in stamp]
    alone = sum(1 for stamp in known if int(stamp["lanes"]) <= 1)
    where = f"{alone} of {len(stamps)} jobs ran alone (one lane), {len(known) - alone} side by side in lanes" + (
        f", {len(stamps) - len(known)} unrecorded" if len(known) < len(stamps) else ""
    )
    line = f"- Compute: {total / 60:.1f} job-minutes in all; {where} (side by side, wall time is less than the sum)."
    resumed = sum(1 for stamp in stamps if int(stamp.get("attempts", 1)) > 1)
    if resumed:
        line += (
            f" {resumed} job(s) ran in 2 or more attempts (stopped with a session, then continued from their last"
            " checkpoint; their minutes add the attempts, and any attempt's neighbours count against ran alone)."
        )
    discarded = sum(float(stamp.get("discarded_seconds", 0.0)) for stamp in stamps)
    if discarded:
        line += f" {discarded / 60:.1f} job-minutes of stopped attempts were started over and are not in the total."
    starts = sorted({str(stamp["sft_start"]) for stamp in stamps if "sft_start" in stamp})
    if len(starts) == 1:
        line += f" Every evaluated job read one SFT start (checkpoint digest `{starts[0]}`)."
    elif starts:
        line += f" **The jobs read {len(starts)} different SFT starts** (checkpoint digests {', '.join(starts)})."
    commits = sorted({str(stamp["commit"]) for stamp in stamps if stamp.get("commit")})
    modified = sum(1 for stamp in stamps if stamp.get("src_modified"))
    if commits:
        line += f" Code: {'commit' if len(commits) == 1 else 'commits'} {', '.join(f'`{c}`' for c in commits)}" + (
            f", {modified} job(s) with uncommitted changes under src/." if modified else "."
        )
    return line + precision_clause(stamps) + processors_clause(stamps)


def precision_clause(stamps: Sequence[Mapping[str, Any]]) -> str:
    """How the jobs computed (from their stamps): one precision, or **differed** where it did; and, when the
    jobs ran on CPUs with and without bf16 instructions, how many on each (their minutes are not comparable)."""
    kinds: dict[str, int] = {}
    native = {True: 0, False: 0}
    for stamp in stamps:
        p = stamp.get("precision")
        if isinstance(p, Mapping):
            bf16 = bool(p.get("cpu_bf16")) or p.get("generation_dtype") == "bfloat16"
            training = "bf16 autocast" if p.get("cpu_bf16") else "fp32"
            label = f"{training} training, {p.get('generation_dtype')} generation"
            if bf16:  # bf16 runs natively or emulated; fp32 computes the same either way
                label += f" ({'native' if p.get('native_bf16') else 'emulated'} bf16)"
            kinds[label] = kinds.get(label, 0) + 1
            native[bool(p.get("native_bf16"))] += 1
    if not kinds:
        return ""
    if len(kinds) == 1:
        clause = f" Precision: {next(iter(kinds))} in every recorded job."
    else:
        counts = "; ".join(f"{n} × {label}" for label, n in kinds.items())
        clause = f" **Precision differed between jobs**: {counts}."
    if native[True] and native[False]:
        clause += (
            f" Machines differed: {native[True]} job(s) on a CPU with bf16 instructions, {native[False]} on one without"
            " (job-minutes compare only between jobs on one kind)."
        )
    return clause


def processors_clause(stamps: Sequence[Mapping[str, Any]]) -> str:
    """How many jobs ran on each processor, where stamps name it (stamps written before they did are counted
    apart); empty when none does."""
    cpus = Counter(str(stamp["cpu"]) for stamp in stamps if stamp.get("cpu"))
    if not cpus:
        return ""
    unnamed = len(stamps) - sum(cpus.values())
    counts = "; ".join(f"{n} × {cpu}" for cpu, n in sorted(cpus.items()))
    return f" Processors: {counts}" + (f"; not recorded: {unnamed} earlier job(s)." if unnamed else ".")


def configuration(params: Any) -> list[str]:
    t, r, s = params.train, params.rewards, params.simulator
    if params.policy.base_gguf:
        lora = params.policy.lora
        policy = (
            f"- Policy: `{Path(params.policy.base_gguf).stem}` (converted from its GGUF), template "
            f"`{params.policy.chat_template}`, one SFT checkpoint (the LoRA warm-up `{params.sft.init_adapter}` merged"
            + (f", then {params.sft.max_steps} more steps" if params.sft.max_steps else "")
            + f") shared by every run; RL trains LoRA r {lora.r} (α {lora.alpha}) on it"
            + {True: ", bf16 autocast", False: ", fp32", "auto": ", bf16 autocast where the CPU has bf16 (auto)"}[
                params.policy.cpu_bf16
            ]
            + "."
        )
    else:
        policy = (
            f"- Policy: embedded tiny Qwen2 ({params.policy.tiny.num_hidden_layers} layers, hidden "
            f"{params.policy.tiny.hidden_size}, pre-tokenizer `{params.policy.tiny.pretokenizer}`), one SFT checkpoint "
            f"({params.sft.max_steps} steps on {params.sft.n_examples} examples, copy augmentation "
            f"{params.sft.copy_augment}) shared by every run."
        )
    return [
        policy,
        (
            f"- RL: {t.max_steps} optimizer steps × {t.prompts_per_step} prompts × group size G = {t.num_generations}, "
            f"lr {t.learning_rate}, β {t.beta}, loss `{t.loss_type}`, ≤ {t.max_tool_turns} tool turns, "
            f"≤ {t.max_completion_length} tokens a turn, temperature {t.temperature}."
        ),
        (
            f"- Rewards: judge `{r.judge}`, training judge noise σ = {r.summary_noise}; simulator `{s.backend}` "
            f"(grounded: {s.grounded}); λ_tool = {params.credit.tool_weight}, λ_sum = {params.credit.summary_weight}."
        ),
        f"- Seeds {list(t.seeds)}; estimators {list(t.estimators)}.",
        (
            f"- Evaluation: {params.eval.n_test} test tasks (held-out templates and entities), greedy, real executors, "
            f"Success = (R_tool + R_sum)/2 ≥ {params.eval.success_threshold}; BFCL {len(params.eval.bfcl.categories)} "
            f"categories × {params.eval.bfcl.limit or 'all'} items; τ² `{params.eval.tau2.domain}` domain."
        ),
    ]


def verdict(paired: Mapping[str, Any]) -> list[str]:
    lines = []
    for key, value in paired.items():
        other, metric = key.split(".", 1)
        if metric != "success" or math.isnan(value["mean"]):
            continue
        if value["low"] > 0:
            word = "SLCA is better"
        elif value["high"] < 0:
            word = "SLCA is worse"
        else:
            word = "no significant difference (the interval contains 0)"
        lines.append(f"- vs {other}: Success {value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]: {word}.")
    success = {k.split(".", 1)[0]: v for k, v in paired.items() if k.endswith(".success") and not math.isnan(v["mean"])}
    better = [k for k, v in success.items() if v["low"] > 0]
    worse = [k for k, v in success.items() if v["high"] < 0]
    if success and len(better) == len(success):
        lines += ["", "**Yes: SLCA's Success is above every baseline's, each interval excluding 0.**"]
    elif better:
        lines += ["", f"**In part: SLCA's Success is significantly above {', '.join(better)} only.**"]
    elif worse:
        lines += ["", f"**No: SLCA's Success is significantly below {', '.join(worse)}.**"]
    elif success:
        lines += ["", "**No, not at this budget: no SLCA − baseline Success interval excludes 0.**"]
    return lines


def baseline_names(params: Any) -> str:
    names = [NAMES.get(e, e) for e in params.train.estimators if e != "slca"]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else (names[0] if names else "nothing")


VS_MAIN_METRICS = ("success", "no_call", "r_sum")


def vs_main_slca(groups: Sequence[Any], datas: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """Each ablation setting's SLCA runs against the main setting's SLCA runs on the same test tasks, seed
    with seed (only the seeds both ran): what the setting itself changed in SLCA, beside the baselines; and
    every run of the setting's SLCA against the SFT start the main group evaluated (the one checkpoint all
    settings train from), the target's own measure."""
    main_runs = datas[groups[0].name]["runs"].get("slca") or []
    start = datas[groups[0].name].get("sft")
    found: dict[str, Any] = {}
    rows = []
    for group in groups[1:]:
        runs = datas.get(group.name, {}).get("runs", {}).get("slca") or []
        seeds = sorted({r["seed"] for r in runs} & {r["seed"] for r in main_runs})
        if not seeds:
            continue
        found[group.name] = {
            metric: paired_difference(
                [r["report"] for r in runs if r["seed"] in seeds],
                [r["report"] for r in main_runs if r["seed"] in seeds],
                metric,
            )
            for metric in VS_MAIN_METRICS
        }
        found[group.name]["seeds"] = seeds
        found[group.name]["start_success"] = (
            paired_difference([r["report"] for r in runs], [start], "success") if start is not None else None
        )
        found[group.name]["start_seeds"] = sorted(r["seed"] for r in runs)
        rows.append(
            f"| {group.label} | {', '.join(map(str, seeds))} | "
            + " | ".join(_interval(found[group.name][m]) for m in VS_MAIN_METRICS)
            + f" | {_interval(found[group.name]['start_success'])} ({len(runs)}) |"
        )
    if not rows:
        return [], found
    return [
        (
            "Each setting's SLCA against the main setting's SLCA on the same test tasks (seed with seed, only the "
            "seeds both ran): what the setting changed in SLCA itself. The last column is the setting's SLCA "
            "against the SFT start, every run of the setting paired with the start task by task (runs in "
            "brackets), as in the main group's RL − SFT table."
        ),
        "",
        (
            "| setting | seeds paired | Δ Success [95 %] | Δ No-call acc. [95 %] | Δ R_sum [95 %] "
            "| SLCA − SFT start Success [95 %] (runs) |"
        ),
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ], found


def noise_of(group: Any) -> float:
    return float(group.params.rewards.summary_noise)


def segbias_section(groups: Sequence[Any], datas: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], dict[str, Any]]:
    """Per task kind: the mean hidden bonus the paper's rule gives a segment's tokens (see
    `slca.credit.diagnostics.segment_normalisation_bias`), over every logged step and seed of each run
    group, beside that group's no-call accuracy; only what the histories logged."""
    found: dict[str, Any] = {}
    rows = []
    for group in groups:
        for estimator, runs in datas[group.name]["runs"].items():
            if estimator not in ("slca", "gdpo") or (group is not groups[0] and estimator != "slca"):
                continue
            values: dict[str, list[float]] = {}
            for run in runs:
                for row in run["history"]:
                    for key, value in row.items():
                        if key.startswith("credit/segbias/") and "_mean." in key:
                            values.setdefault(key.removeprefix("credit/segbias/"), []).append(float(value))
            if not values:
                continue
            means = {key: sum(v) / len(v) for key, v in values.items()}
            no_call = mean_std([r["summary"].get("no_call_accuracy", math.nan) for r in runs])[0]
            found[f"{group.name}.{estimator}"] = {**means, "no_call_accuracy": no_call}
            rows.append((group, estimator, means, no_call))
    if not rows:
        return [], found
    kinds = sorted({key.split(".", 1)[1] for _, _, means, _ in rows for key in means})
    head = ["setting", "runs of", *(f"tool {k}" for k in kinds), *(f"summary {k}" for k in kinds), "No-call acc."]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for group, estimator, means, no_call in rows:
        lines.append(
            f"| {group.label} | {estimator} | "
            + " | ".join(fmt(means.get(f"tool_mean.{k}", math.nan)) for k in kinds)
            + " | "
            + " | ".join(fmt(means.get(f"summary_mean.{k}", math.nan)) for k in kinds)
            + f" | {fmt(no_call)} |"
        )
    return lines, found


def plot_noise(points: Mapping[float, Mapping[str, Any]], path: Path) -> Path:
    """Left: test Success per estimator against σ (mean over seeds, ± std where a cell has two or more runs).
    Right: SLCA's lead over GDPO and over GRPO against σ, with its paired-bootstrap 95 % interval: the
    question the noise curve asks is whether that lead grows with σ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6))
    sigmas = sorted(points)
    colours = {"slca": "C0", "gdpo": "C1", "grpo": "C2"}  # one colour per estimator in both panels

    def present(key: str) -> list[float]:  # the σ whose cell has `key` (an empty cell holds NaN)
        return [s for s in sigmas if not math.isnan(points[s][key])]

    for estimator in ("slca", "gdpo", "grpo"):
        xs = present(estimator)
        if xs:
            left.errorbar(
                xs,
                [points[s][estimator] for s in xs],
                yerr=[points[s][f"{estimator}_std"] for s in xs],  # 0 for a single run, never NaN beside a mean
                marker="o",
                capsize=3,
                color=colours[estimator],
                label=estimator,
            )
    left.set_xlabel("training judge noise σ")
    left.set_ylabel("test Success (mean over seeds)")
    left.grid(alpha=0.3)
    left.legend(fontsize=8)
    for offset, baseline in ((-0.01, "gdpo"), (0.01, "grpo")):
        key = f"slca-{baseline}"
        xs = present(key)
        if xs:
            ys = [points[s][key] for s in xs]
            low = [points[s][key] - points[s][f"{key}_low"] for s in xs]
            high = [points[s][f"{key}_high"] - points[s][key] for s in xs]
            right.errorbar(
                [x + offset for x in xs],
                ys,
                yerr=[low, high],
                marker="o",
                capsize=3,
                color=colours[baseline],
                label=f"SLCA − {baseline.upper()}",
            )
    right.axhline(0.0, color="black", linewidth=0.8)
    right.set_xlabel("training judge noise σ")
    right.set_ylabel("SLCA − baseline Success [95 %]")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_experiment_report(
    groups: Sequence[Any],
    path: Path,
    *,
    threshold_gain: float = 0.05,
    timings: Mapping[str, float] | None = None,
    stamps: Path | None = None,
    notes: Sequence[str] = (),
    discussion: Sequence[str] = (),
) -> dict[str, Any]:
    """reports/experiment.md and its figures from the groups' finished runs; returns the numbers."""
    main = groups[0]
    data = collect(main.params)
    if "slca" not in data["runs"]:
        raise ExperimentReportError("the experiment has no slca runs to compare against")
    figures = path.parent / path.stem
    figures.mkdir(parents=True, exist_ok=True)
    plot_summary(data, figures / "summary.png")
    plot_curves(data, figures / "curves.png")
    kinds = sorted(
        {k for runs in data["runs"].values() for r in runs for k in r["summary"] if k.startswith("success.")}
    )
    paired_lines, paired = paired_table(data, "slca")
    curve_lines, curves = curve_section(data, threshold_gain)
    start_lines, start = start_table(data)
    rel = figures.name
    lines = [
        f"# {path.stem.replace('_', ' ').capitalize()}: SLCA-GRPO against {baseline_names(main.params)}",
        "",
        (
            "Regenerated by `make experiment` (`slca experiment`); every number below is read from the runs' "
            "evaluation reports and training histories. Standard deviations are over seeds; intervals are 95 % "
            "paired bootstrap intervals over test tasks and seeds together "
            f"({BOOTSTRAP_SAMPLES} resamples)."
        ),
        "",
        "## Configuration",
        "",
        *configuration(main.params),
    ]
    if stamps is not None and stamps.exists():
        lines.append(compute_line([json.loads(p.read_text()) for p in sorted(stamps.rglob("*.json"))]))
    lines += [f"- Note: {note}" for note in notes]
    if data["missing"]:
        lines += [
            "",
            (
                f"**Incomplete: {len(data['missing'])} planned run(s) had not finished when this report was "
                f"written and are left out: {', '.join(data['missing'])}.**"
            ),
        ]
    lines += [
        "",
        "## Results (test split)",
        "",
        *summary_table(data, TABLE_METRICS),
        "",
        f"![summary]({rel}/summary.png)",
        "",
        "### Success by task kind",
        "",
        *summary_table(data, kinds),
        "",
        "### SLCA − baseline (paired bootstrap, 95 %)",
        "",
        *paired_lines,
        "",
        "### What RL added: each estimator − its SFT start (paired bootstrap, 95 %)",
        "",
        (
            "The SFT checkpoint every run started from, evaluated on the same test tasks; each seed's run is "
            "paired with it task by task."
        ),
        "",
        *start_lines,
        "",
        "## Learning curves",
        "",
        (
            f"Validation Success is greedy, on the first {main.params.train.val_tasks} validation tasks, every "
            f"{main.params.train.val_every} steps; the threshold is the start value + {threshold_gain:.2f}. "
            "Misattribution rate and corr(R_tool, R_sum) are means over all steps of a run's rollout groups."
        ),
        "",
        *curve_lines,
        "",
        f"![curves]({rel}/curves.png)",
        "",
    ]
    ablations: dict[str, Any] = {}
    vs_main: dict[str, Any] = {}
    datas: dict[str, Mapping[str, Any]] = {main.name: data}
    if len(groups) > 1:
        lines += [
            "## Ablations",
            "",
            (
                "SLCA − GRPO and SLCA − GDPO on the same test tasks, per setting (every setting that was run). A "
                "setting that does not train a baseline is paired with the main setting's runs of it (same SFT "
                "checkpoint and seeds). A difference pairs seed i of SLCA with seed i of the baseline, so where "
                "the run counts differ it uses only the seeds both ran and need not equal the difference of the "
                "means beside it."
            ),
            "",
            (
                "| setting | runs SLCA/GRPO/GDPO | SLCA Success | GRPO Success | GDPO Success "
                "| SLCA − GRPO Success [95 %] | SLCA − GDPO Success [95 %] | SLCA − GRPO No-call acc. [95 %] "
                "| SLCA BFCL irrel. |"
            ),
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for group in groups:
            group_data = data if group is main else collect(group.params)
            borrowed = {
                e: data["runs"][e]
                for e in ABLATION_BASELINES
                if e not in group.params.train.estimators and e in data["runs"]
            }
            if borrowed:
                group_data = {**group_data, "runs": {**group_data["runs"], **borrowed}}
            datas[group.name] = group_data
            _, found = paired_table(group_data, "slca")
            ablations[group.name] = found
            stat = {
                e: {k: mean_std([r["summary"][k] for r in runs])[0] for k in ("success", "bfcl_irrelevance")}
                for e, runs in group_data["runs"].items()
            }
            cells = [_interval(found.get(key)) for key in ("grpo.success", "gdpo.success", "grpo.no_call")]
            counts = "/".join(str(len(group_data["runs"].get(e, []))) for e in ("slca", "grpo", "gdpo"))
            lines.append(
                f"| {group.label} | {counts} | {fmt(stat.get('slca', {}).get('success', math.nan))} "
                f"| {fmt(stat.get('grpo', {}).get('success', math.nan))} "
                f"| {fmt(stat.get('gdpo', {}).get('success', math.nan))} | "
                + " | ".join(cells)
                + f" | {fmt(stat.get('slca', {}).get('bfcl_irrelevance', math.nan))} |"
            )
        lines.append("")
        vs_main_lines, vs_main = vs_main_slca(groups, datas)
        lines += vs_main_lines
    noise_groups = [g for g in groups if g is main or (noise_of(g) != noise_of(main) and g.name in ablations)]
    noise: dict[float, dict[str, float]] = {}
    if len({noise_of(g) for g in noise_groups}) > 1:
        lines += [
            "## Judge noise",
            "",
            (
                "Theory: SLCA keeps summary-reward noise out of the tool tokens' credit; GRPO and GDPO put it on "
                "every token, so SLCA's lead over both should grow with the noise σ of the training judge "
                "(evaluation always uses the clean judge). Settings that differ from the main one only in σ "
                "(differences pair seed with seed, as above, so they use only the seeds both estimators ran):"
            ),
            "",
            (
                "| σ | setting | runs SLCA/GDPO/GRPO | SLCA Success | GDPO Success | GRPO Success "
                "| SLCA − GDPO [95 %] | SLCA − GRPO [95 %] |"
            ),
            "|---|---|---|---|---|---|---|---|",
        ]
        r_sum_lines = [
            "",
            (
                "Test R_sum (the clean judge's summary reward, the term the noisy judge corrupted in training), "
                "same runs and pairing:"
            ),
            "",
            (
                "| σ | runs SLCA/GDPO/GRPO | SLCA R_sum | GDPO R_sum | GRPO R_sum "
                "| SLCA − GDPO R_sum [95 %] | SLCA − GRPO R_sum [95 %] |"
            ),
            "|---|---|---|---|---|---|---|",
        ]
        for group in sorted(noise_groups, key=noise_of):
            group_data, found = datas.get(group.name, data), ablations.get(group.name, paired)
            estimators = ("slca", "gdpo", "grpo")
            spread = {e: mean_std([r["summary"]["success"] for r in group_data["runs"].get(e, [])]) for e in estimators}
            means = {e: spread[e][0] for e in estimators}
            r_sum = {e: mean_std([r["summary"]["r_sum"] for r in group_data["runs"].get(e, [])])[0] for e in estimators}
            noise[noise_of(group)] = {
                **means,
                **{f"{e}_std": spread[e][1] for e in estimators},
                **{f"{e}_runs": len(group_data["runs"].get(e, [])) for e in estimators},
                **{f"{e}_r_sum": r_sum[e] for e in estimators},
                **{
                    f"slca-{b}{metric_suffix}{suffix}": found.get(f"{b}.{metric}", {}).get(part, math.nan)
                    for b in ("gdpo", "grpo")
                    for metric, metric_suffix in (("success", ""), ("r_sum", "_r_sum"))
                    for suffix, part in (("", "mean"), ("_low", "low"), ("_high", "high"))
                },
            }
            counts = "/".join(str(noise[noise_of(group)][f"{e}_runs"]) for e in estimators)
            lines.append(
                f"| {noise_of(group):.1f} | {group.label} | {counts} | {fmt(means['slca'])} | {fmt(means['gdpo'])} "
                f"| {fmt(means['grpo'])} | {_interval(found.get('gdpo.success'))} "
                f"| {_interval(found.get('grpo.success'))} |"
            )
            r_sum_lines.append(
                f"| {noise_of(group):.1f} | {counts} | {fmt(r_sum['slca'])} | {fmt(r_sum['gdpo'])} "
                f"| {fmt(r_sum['grpo'])} | {_interval(found.get('gdpo.r_sum'))} "
                f"| {_interval(found.get('grpo.r_sum'))} |"
            )
        plot_noise(noise, figures / "noise.png")
        lines += [*r_sum_lines, "", f"![judge noise]({rel}/noise.png)", ""]
    bias_lines, bias = segbias_section(groups, datas)
    if bias_lines:
        lines += [
            "## Segment-normalisation bias",
            "",
            (
                "The paper normalises each segment's reward over the group members that have the segment. When "
                "the policy decides whether a segment exists (no call on a no-call task, no summary after a cut), "
                "the others' absence changes the baseline: per task kind, the mean over training rollouts of "
                "Â_seg(paper's rule) − Â_seg(over every member), on the rows that have the segment (positive: a "
                "hidden bonus; `credit/segbias/*` in each run's history). GDPO normalises over every member, so "
                "its own credit has no such term; its row measures the same quantity on the batches GDPO's policy "
                "produced. The opt-in variant (`credit.abstain_in_tool_baseline`) removes the tool column's term "
                "for SLCA; its own batches are measured the same way."
            ),
            "",
            *bias_lines,
            "",
        ]
    lines += [
        "## Does the paper's direction reproduce here?",
        "",
        "The paper reports SLCA-GRPO above GRPO, ToolPO and RLTR (7B: +2.53 pp in-domain Success). Here:",
        "",
        *verdict(paired),
        "",
        "From this report's numbers:",
        "",
        *findings(data, paired, start, curves, ablations, {g.name: g.label for g in groups}),
        "",
        *(line for paragraph in discussion for line in (paragraph, "")),
    ]
    try:
        runs = mlflow_runs(main.params)
        lines += [
            "## MLflow runs",
            "",
            "| run | MLflow run id | status |",
            "|---|---|---|",
            *(f"| {name} | {f'`{run_id}`' if run_id else '—'} | {status} |" for name, run_id, status in runs),
            "",
        ]
    except Exception as error:  # noqa: BLE001 - the report stays useful when the store is elsewhere
        lines += ["## MLflow runs", "", f"(tracking store not readable here: {str(error).splitlines()[0]})", ""]
    from slca.tracking import write_atomic

    write_atomic(path, "\n".join(lines))
    numbers = {
        "paired": paired,
        "vs_start": start,
        "curves": curves,
        "ablations": ablations,
        "vs_main_slca": vs_main,
        "noise": noise,
        "segbias": bias,
        "verdict_lines": verdict(paired),
        "summary": {
            e: {k: mean_std([r["summary"].get(k, math.nan) for r in runs]) for k in TABLE_METRICS}
            for e, runs in data["runs"].items()
        },
    }
    text = json.dumps(strict_json(numbers), indent=2, sort_keys=True, default=str, allow_nan=False)
    write_atomic(figures / "numbers.json", text)
    return numbers


def strict_json(value: Any) -> Any:
    """`value` with every NaN or infinite float (an empty cell) as None, so numbers.json is strict JSON
    (`null`) that any parser reads, not Python's bare `NaN`; tuples become lists as json writes them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    return value

"""The `compare` stage: one table across estimators × seeds, plus plots.

    slca compare        # reports/comparison.md, reports/comparison.png, reports/training_curves.png

Reads the SFT report `reports/eval/sft.json` (when present, the "sft" column: what RL started from),
every evaluation report `reports/eval/<estimator>-s<seed>.json` and every training history
`models/<estimator>-s<seed>/metrics_history.jsonl` named by params (train.estimators × train.seeds),
and writes a Markdown table of mean ± std per estimator for each headline metric, a bar chart of
final metrics and the training curves. Everything also goes to the stage's MLflow run.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slca.config import Params
from slca.tracking import log_metrics, stage_run, write_atomic

# Headline metrics first (report key -> column title); any other numeric metric follows.
HEADLINE = {
    "indomain.success": "Success",
    "indomain.process": "Process (R_tool)",
    "indomain.name_f1": "Name-F1",
    "indomain.arg_match": "ArgMatch",
    "indomain.arg_match_seen": "Values seen",
    "indomain.arg_match_heldout": "Values held-out",
    "indomain.well_formed_calls": "Well-formed calls",
    "indomain.no_call_accuracy": "No-call acc.",
    "bfcl.overall_accuracy_non_live": "BFCL (non-live)",
    "tau2.pass_hat_1": "τ² Pass^1",
}
CURVES = ("reward", "rewards/r_tool/mean", "rewards/r_sum/mean", "credit/misattribution_rate")
SMOOTHING = 5  # steps in the moving average drawn over each noisy curve


class CompareError(RuntimeError):
    """Nothing to compare; the message names what is missing."""


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample std (0 for a single value)."""
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return mean, std


def summarise(reports: Mapping[str, Sequence[Mapping[str, float]]]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """{estimator: [metrics per seed]} -> {estimator: {metric: (mean, std, n)}} over shared metrics."""
    table: dict[str, dict[str, tuple[float, float, int]]] = {}
    for estimator, runs in reports.items():
        keys = sorted(set().union(*(run.keys() for run in runs))) if runs else []
        row = {}
        for key in keys:
            values = [float(run[key]) for run in runs if key in run and math.isfinite(float(run[key]))]
            if values:
                mean, std = mean_std(values)
                row[key] = (mean, std, len(values))
        table[estimator] = row
    return table


def ordered_metrics(table: Mapping[str, Mapping[str, Any]]) -> list[str]:
    present = set().union(*(row.keys() for row in table.values())) if table else set()
    first = [key for key in HEADLINE if key in present]
    return first + sorted(present - set(first))


def markdown_table(table: Mapping[str, Mapping[str, tuple[float, float, int]]], metrics: Sequence[str]) -> str:
    """Rows = metrics, columns = estimators, cells = mean ± std (n)."""
    estimators = list(table)
    lines = ["| metric | " + " | ".join(estimators) + " |", "|---|" + "---|" * len(estimators)]
    for metric in metrics:
        cells = []
        for estimator in estimators:
            cell = table[estimator].get(metric)
            cells.append(f"{cell[0]:.3f} ± {cell[1]:.3f} (n={cell[2]})" if cell else "–")
        lines.append(f"| {HEADLINE.get(metric, metric)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_history(path: Path) -> list[dict[str, float]]:
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted(rows, key=lambda row: row.get("step", 0))


def plot_final_metrics(
    table: Mapping[str, Mapping[str, tuple[float, float, int]]], metrics: Sequence[str], path: Path
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [m for m in metrics if m in HEADLINE] or list(metrics)[:6]
    estimators = list(table)
    width = 0.8 / max(len(estimators), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(shown)), 4))
    for index, estimator in enumerate(estimators):
        means = [table[estimator].get(m, (0.0, 0.0, 0))[0] for m in shown]
        stds = [table[estimator].get(m, (0.0, 0.0, 0))[1] for m in shown]
        xs = [i + index * width for i in range(len(shown))]
        ax.bar(xs, means, width, yerr=stds, capsize=3, label=estimator)
    ax.set_xticks([i + width * (len(estimators) - 1) / 2 for i in range(len(shown))])
    ax.set_xticklabels([HEADLINE.get(m, m) for m in shown], rotation=20, ha="right")
    ax.set_ylabel("score")
    ax.set_title("Final metrics by estimator (mean ± std over seeds)")
    ax.legend()
    fig.tight_layout()
    return _save(fig, path)


def moving_average(values: Sequence[float], window: int) -> list[float]:
    """Trailing mean over up to `window` values (shorter at the start)."""
    out = []
    for index in range(len(values)):
        chunk = values[max(0, index - window + 1) : index + 1]
        out.append(sum(chunk) / len(chunk))
    return out


def plot_training_curves(histories: Mapping[str, Sequence[Mapping[str, float]]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in CURVES if any(k in row for rows in histories.values() for row in rows)] or ["reward"]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 3.5), squeeze=False)
    for ax, key in zip(axes[0], keys):
        for run, rows in histories.items():
            points = [(row["step"], row[key]) for row in rows if key in row and "step" in row]
            if points:
                steps, values = zip(*points)
                (line,) = ax.plot(steps, values, marker=".", alpha=0.35, linewidth=0.8)
                ax.plot(
                    steps,
                    moving_average(values, SMOOTHING),
                    color=line.get_color(),
                    linewidth=2,
                    label=f"{run} ({SMOOTHING}-step mean)",
                )
        ax.set_title(key)
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    return write_atomic(path, buffer.getvalue())


def collect(params: Params) -> tuple[dict[str, list[dict[str, float]]], dict[str, list[dict[str, float]]]]:
    """Evaluation metrics per estimator (one dict per seed) and training histories per run."""
    reports: dict[str, list[dict[str, float]]] = {}
    histories: dict[str, list[dict[str, float]]] = {}
    missing = []
    sft = Path(params.eval.out_dir) / "sft.json"
    if sft.exists():  # the starting point of every RL run: its row shows what RL added
        reports["sft"] = [json.loads(sft.read_text(encoding="utf-8"))["metrics"]]
    for estimator in params.train.estimators:
        for seed in params.train.seeds:
            run = f"{estimator}-s{seed}"
            path = Path(params.eval.out_dir) / f"{run}.json"
            if not path.exists():
                missing.append(str(path))
                continue
            reports.setdefault(estimator, []).append(json.loads(path.read_text(encoding="utf-8"))["metrics"])
            histories[run] = read_history(Path(params.train.out_dir) / run / "metrics_history.jsonl")
    if not reports:
        raise CompareError(
            f"no evaluation reports found (expected e.g. {missing[0] if missing else '?'}); "
            "run the evaluate stage first"
        )
    return reports, histories


def run_compare(params: Params) -> dict[str, Any]:
    """Write reports/comparison.md (+ PNG plots) and log them to MLflow; returns the table."""
    reports, histories = collect(params)
    table = summarise(reports)
    metrics = ordered_metrics(table)
    out = Path(params.eval.out_dir).parent
    headline = [m for m in metrics if m in HEADLINE]
    bars = plot_final_metrics(table, metrics, out / "comparison.png")
    curves = plot_training_curves(histories, out / "training_curves.png")
    seeds = ", ".join(str(s) for s in params.train.seeds)
    text = (
        "\n\n".join(
            [
                "# Estimator comparison",
                (
                    f"Estimators {', '.join(table)} × seeds {seeds}; mean ± std over seeds (n = runs). "
                    "In-domain figures are on the test split with the real executors."
                ),
                "## Headline metrics",
                markdown_table(table, headline or metrics),
                f"![final metrics]({bars.name})",
                "## Training curves",
                f"![training curves]({curves.name})",
                "## All metrics",
                markdown_table(table, metrics),
            ]
        )
        + "\n"
    )
    markdown = write_atomic(out / "comparison.md", text)
    with stage_run("compare", params):
        import mlflow

        log_metrics({f"{est}.{key}": cell[0] for est, row in table.items() for key, cell in row.items()})
        for artifact in (markdown, bars, curves):
            mlflow.log_artifact(str(artifact), "comparison")
    return {est: {key: list(cell) for key, cell in row.items()} for est, row in table.items()}

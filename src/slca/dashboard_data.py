"""Data behind the Streamlit dashboard (`dashboards/app.py`), free of Streamlit so tests can call it.

Reads the MLflow tracking store (runs tagged `slca.stage` = train / evaluate / calibrate, metric
histories, `samples/step_NNNNNN.json` artifacts) and the files the stages leave on disk
(`models/<run>/samples/`, `reports/eval/*.json`, `reports/comparison.md`, `reports/calibration.*`),
and turns them into what the pages show: token spans coloured by advantage, per-segment credit
summaries, mean ± std tables over seeds and the calibration table. The store and the folder are
fixed when `slca dashboard` starts the app (`launch_command`, `launch_env`); visitors cannot change them.

    runs = list_runs("sqlite:///mlflow.db", "train")
    sample = load_sample(uri, runs[0].run_id, sample_steps(uri, runs[0].run_id)[-1])
    html = tokens_html(sample["rollouts"][0], "advantages", scale=1.0)
"""

from __future__ import annotations

import html
import json
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

DEFAULT_URI = "sqlite:///mlflow.db"
PROJECT_DIR_ENV = "SLCA_PROJECT_DIR"
APP_PATH = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 8501
SAMPLES_DIR = "samples"
NEGATIVE_RGB = (202, 0, 32)  # diverging map: red for negative credit, blue for positive
POSITIVE_RGB = (5, 113, 176)
CURVE_GROUPS = {
    "Rewards": ("reward", "reward_std", "rewards/r_tool", "rewards/r_sum", "rewards/penalty_rate"),
    "Reward components": ("rewards/components/",),
    "Credit diagnostics": ("credit/",),
}
CALIBRATION_METRICS = (
    "error_f1",
    "error_precision",
    "error_recall",
    "error_class_agreement",
    "error_message_agreement",
    "conformance",
    "value_agreement",
    "consistency",
    "latency_us",
    "real_latency_us",
)
CALIBRATION_PARTS = {
    "search": "tuned, search half",
    "heldout": "tuned, held out",
    "params_heldout": "params knobs, held out",
}


class StoreError(RuntimeError):
    """The tracking store cannot be read; the message names the URI and what to do."""


@dataclass(frozen=True)
class RunRow:
    """One MLflow run of a pipeline stage, flattened for display."""

    run_id: str
    name: str
    stage: str
    estimator: str
    seed: str
    status: str
    start_time: int
    metrics: dict[str, float] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.estimator}-s{self.seed} ({self.run_id[:8]})"


@dataclass(frozen=True)
class ProjectPaths:
    """Where the stages write their files, read from `params.yaml` in the project folder when present."""

    root: Path
    models: Path
    eval_dir: Path
    comparison_md: Path
    comparison_png: Path
    calibration_json: Path
    calibration_png: Path


def tracking_uri(text: str | None = None) -> str:
    """`text` when given, else `MLFLOW_TRACKING_URI`, else ./mlflow.db."""
    return (text or "").strip() or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_URI


def project_dir() -> Path:
    """The project folder the dashboard was launched on: `SLCA_PROJECT_DIR`, else the working directory."""
    return Path(os.environ.get(PROJECT_DIR_ENV) or ".")


def launch_command(host: str = LOOPBACK, port: int = DEFAULT_PORT, app: Path = APP_PATH) -> list[str]:
    """`streamlit run` of the dashboard bound to host:port, headless (no first-run prompt), no usage stats."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.address",
        host,
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]


def launch_env(uri: str | None, folder: str | Path, base: Mapping[str, str]) -> dict[str, str]:
    """`base` plus the fixed store and folder the app reads; the store defaults to <folder>/mlflow.db."""
    folder = Path(folder).resolve()
    env = dict(base)
    env[PROJECT_DIR_ENV] = str(folder)
    chosen = (uri or "").strip() or base.get("MLFLOW_TRACKING_URI")
    env["MLFLOW_TRACKING_URI"] = chosen or f"sqlite:///{folder / 'mlflow.db'}"
    return env


def project_paths(root: str | Path = ".") -> ProjectPaths:
    """Output locations; a missing or unreadable params.yaml falls back to the defaults."""
    root = Path(root)
    params: dict[str, Any] = {}
    try:
        params = yaml.safe_load((root / "params.yaml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        params = {}

    def get(section: str, key: str, default: str) -> Path:
        value = (params.get(section) or {}).get(key) or default
        return root / value

    reports = get("eval", "out_dir", "reports/eval").parent
    return ProjectPaths(
        root,
        get("train", "out_dir", "models"),
        get("eval", "out_dir", "reports/eval"),
        reports / "comparison.md",
        reports / "comparison.png",
        get("calibration", "report_path", "reports/calibration.json"),
        get("calibration", "plot_path", "reports/calibration.png"),
    )


def check_store(uri: str) -> None:
    """Raise StoreError for a SQLite file that does not exist or a server that does not answer."""
    if uri.startswith("sqlite:///"):
        path = Path(uri[len("sqlite:///") :])
        if not path.exists():
            raise StoreError(f"no tracking store at {path}: run `make run` first or point the URI elsewhere")
        return
    from slca.tracking import TrackingError, check_reachable

    try:
        check_reachable(uri)
    except TrackingError as error:
        raise StoreError(str(error)) from None


def client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def list_runs(uri: str, stage: str) -> list[RunRow]:
    """Every run tagged `slca.stage = <stage>` in any experiment, newest first."""
    check_store(uri)
    mlflow_client = client(uri)
    try:
        experiments = [e.experiment_id for e in mlflow_client.search_experiments()]
        query = f"tags.`slca.stage` = '{stage}'"
        runs = (
            mlflow_client.search_runs(experiments, query, order_by=["attributes.start_time DESC"], max_results=1000)
            if experiments
            else []
        )
    except Exception as error:  # noqa: BLE001 - a broken store surfaces as one line on the page
        raise StoreError(f"cannot read runs from {uri}: {error}") from None
    return [run_row(run, stage) for run in runs]


def run_row(run: Any, stage: str) -> RunRow:
    tags, params = run.data.tags, run.data.params
    return RunRow(
        run_id=run.info.run_id,
        name=tags.get("mlflow.runName", run.info.run_id[:8]),
        stage=stage,
        estimator=tags.get("slca.estimator") or params.get("estimator", "?"),
        seed=tags.get("slca.seed") or params.get("seed", "?"),
        status=run.info.status,
        start_time=int(run.info.start_time or 0),
        metrics=dict(run.data.metrics),
        params=dict(params),
    )


def metric_history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    """(step, value) of one metric, sorted by step; the last value logged at a step wins."""
    points = {
        int(m.step): float(m.value)
        for m in sorted(client(uri).get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
    }
    return sorted(points.items())


def curves_frame(histories: Mapping[str, Sequence[tuple[int, float]]]) -> pd.DataFrame:
    """{run label: [(step, value)]} -> a frame indexed by step, one column per run."""
    columns = {label: pd.Series(dict(points), dtype="float64") for label, points in histories.items() if points}
    frame = pd.DataFrame(columns)
    frame.index.name = "step"
    return frame.sort_index()


def group_metric_keys(keys: Iterable[str]) -> dict[str, list[str]]:
    """Metric names grouped as the training-curves page shows them; unknown names go to `Other`."""
    groups: dict[str, list[str]] = {name: [] for name in (*CURVE_GROUPS, "Other")}
    for key in sorted(set(keys)):
        group = next(
            (
                name
                for name, prefixes in CURVE_GROUPS.items()
                if any(key == p or (key.startswith(p) and (p.endswith("/") or key[len(p)] == "/")) for p in prefixes)
            ),
            "Other",
        )
        groups[group].append(key)
    return {name: keys for name, keys in groups.items() if keys}


def step_of(name: str) -> int | None:
    """`step_000012.json` -> 12; other names -> None."""
    stem = Path(name).name
    if stem.startswith("step_") and stem.endswith(".json") and stem[5:-5].isdigit():
        return int(stem[5:-5])
    return None


def sample_steps(uri: str, run_id: str) -> list[int]:
    """Steps that have a `samples/step_NNNNNN.json` artifact in this run."""
    files = client(uri).list_artifacts(run_id, SAMPLES_DIR)
    return sorted(step for step in (step_of(f.path) for f in files) if step is not None)


def load_sample(uri: str, run_id: str, step: int) -> dict[str, Any]:
    """The advantage sample of one step, downloaded from the run's artifacts."""
    with tempfile.TemporaryDirectory(prefix="slca-sample-") as folder:
        path = client(uri).download_artifacts(run_id, f"{SAMPLES_DIR}/step_{step:06d}.json", folder)
        return json.loads(Path(path).read_text(encoding="utf-8"))


def disk_sample_runs(models: Path) -> dict[str, Path]:
    """{run name: samples folder} for `models/<run>/samples/` holding at least one step file."""
    if not models.is_dir():
        return {}
    return {
        folder.parent.name: folder
        for folder in sorted(models.glob(f"*/{SAMPLES_DIR}"))
        if any(step_of(p.name) is not None for p in folder.iterdir())
    }


def disk_sample_steps(folder: Path) -> list[int]:
    return sorted(step for step in (step_of(p.name) for p in folder.glob("step_*.json")) if step is not None)


def load_disk_sample(folder: Path, step: int) -> dict[str, Any]:
    return json.loads((folder / f"step_{step:06d}.json").read_text(encoding="utf-8"))


def token_kind(rollout: Mapping[str, Any], index: int) -> str:
    """`tool`, `summary` or `env` (tool-response tokens masked out of the loss)."""
    if rollout["tool_mask"][index]:
        return "tool"
    if rollout["summary_mask"][index]:
        return "summary"
    return "env"


def advantage_colour(value: float, scale: float) -> str:
    """CSS colour on a white-centred diverging map: red < 0 < blue, saturated at |value| = scale."""
    strength = min(1.0, abs(value) / scale) if scale > 0 and math.isfinite(value) else 0.0
    target = POSITIVE_RGB if value > 0 else NEGATIVE_RGB
    red, green, blue = (round(255 + (c - 255) * strength) for c in target)
    return f"#{red:02x}{green:02x}{blue:02x}"


def text_colour(value: float, scale: float) -> str:
    """White text on strong backgrounds, black elsewhere."""
    return "#ffffff" if scale > 0 and abs(value) / scale > 0.6 else "#111111"


TOKEN_STYLE = {
    "tool": "border-bottom:3px solid #e08214;",
    "summary": "border-bottom:3px dashed #542788;",
    "env": "background:#e6e6e6;color:#777777;font-style:italic;",
}
FLIP_STYLE = "outline:2px solid #111111;outline-offset:-1px;"  # sign differs between estimator and GRPO
# Shared token styles as one style sheet: a group is thousands of spans, and short spans paint faster.
TOKEN_CSS = (
    "<style>.slca-tok{padding:1px 0;margin:0 1px;white-space:pre-wrap;}"
    + "".join(f".slca-{kind}{{{style}}}" for kind, style in TOKEN_STYLE.items())
    + f".slca-flip{{{FLIP_STYLE}}}</style>"
)


def token_text(token: str) -> str:
    """Escaped token text with visible whitespace (newline as ↵ plus a break)."""
    escaped = html.escape(token).replace("$", "&#36;")
    return escaped.replace("\n", "↵<br>").replace("\t", "⇥") or "∅"


def tokens_html(rollout: Mapping[str, Any], key: str, scale: float, flips: Sequence[bool] = ()) -> str:
    """One line of HTML: a span per token, its background the advantage under `key`; `flips[i]` outlines token i.

    Segment and flip styles come from the classes (`TOKEN_CSS`); only the colours are inline.
    """
    spans = []
    for index, token in enumerate(rollout["tokens"]):
        kind = token_kind(rollout, index)
        flipped = index < len(flips) and flips[index]
        classes = f"slca-tok slca-{kind}" + (" slca-flip" if flipped else "")
        if kind == "env":
            spans.append(f'<span class="{classes}" title="environment (masked)">{token_text(token)}</span>')
            continue
        value = float(rollout[key][index])
        title = f"{kind} · A={value:+.4f}" + (" · sign differs from GRPO" if flipped else "")
        spans.append(
            f'<span class="{classes}" title="{title}" style="background:{advantage_colour(value, scale)};'
            f'color:{text_colour(value, scale)}">{token_text(token)}</span>'
        )
    return "".join(spans)


def legend_html(scale: float) -> str:
    """Colour and segment legend for the token view."""
    swatches = [(f"A = {value:+.2f}" if value else "A = 0", value) for value in (-scale, 0.0, scale)]
    parts = [
        f'<span style="background:{advantage_colour(v, scale)};color:{text_colour(v, scale)};padding:1px 6px;'
        f'margin-right:4px;border:1px solid #ccc;">{html.escape(t)}</span>'
        for t, v in swatches
    ]
    parts += [
        f'<span style="{TOKEN_STYLE["tool"]}margin-right:8px;">tool segment</span>',
        f'<span style="{TOKEN_STYLE["summary"]}margin-right:8px;">summary segment</span>',
        f'<span style="{TOKEN_STYLE["env"]}padding:1px 4px;">environment (masked)</span>',
    ]
    return '<div style="font-size:0.8rem;">' + "".join(parts) + "</div>"


def sign(value: float, eps: float = 1e-9) -> int:
    return 0 if abs(value) <= eps else (1 if value > 0 else -1)


def mean_std(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, tuple[float, float, int]]]:
    """[{"estimator", "metrics"}] -> {estimator: {metric: (mean, sample std, n)}} over finite values."""
    values: dict[str, dict[str, list[float]]] = {}
    for record in records:
        row = values.setdefault(str(record["estimator"]), {})
        for key, value in record["metrics"].items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                row.setdefault(key, []).append(float(value))
    return {
        estimator: {
            key: (statistics.fmean(v), statistics.stdev(v) if len(v) > 1 else 0.0, len(v))
            for key, v in sorted(row.items())
        }
        for estimator, row in values.items()
    }


def mean_std_frame(
    table: Mapping[str, Mapping[str, tuple[float, float, int]]], metrics: Sequence[str] | None = None, digits: int = 3
) -> pd.DataFrame:
    """Rows = estimators, columns = metrics, cells `mean ± std (n=k)`; `–` where a metric is missing."""
    if metrics is None:
        metrics = sorted(set().union(*(row.keys() for row in table.values()))) if table else []
    cells = {
        estimator: {
            metric: (
                f"{row[metric][0]:.{digits}f} ± {row[metric][1]:.{digits}f} (n={row[metric][2]})"
                if metric in row
                else "–"
            )
            for metric in metrics
        }
        for estimator, row in table.items()
    }
    frame = pd.DataFrame.from_dict(cells, orient="index", columns=list(metrics))
    frame.index.name = "estimator"
    return frame


def eval_records(runs: Iterable[RunRow], reports: Path) -> list[dict[str, Any]]:
    """One record per (estimator, seed): the newest evaluate run, else reports/eval/<run>.json."""
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r.start_time):
        records[(run.estimator, run.seed)] = {
            "estimator": run.estimator,
            "seed": run.seed,
            "source": "mlflow",
            "run_id": run.run_id,
            "metrics": dict(run.metrics),
        }
    for path in sorted(reports.glob("*.json")) if reports.is_dir() else []:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            key = (str(report["estimator"]), str(report["seed"]))
            metrics = dict(report["metrics"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not an evaluation report
        records.setdefault(
            key, {"estimator": key[0], "seed": key[1], "source": str(path), "run_id": "", "metrics": metrics}
        )
    return sorted(records.values(), key=lambda r: (r["estimator"], r["seed"]))


def ordered_eval_metrics(keys: Iterable[str]) -> list[str]:
    """Headline metrics of `slca compare` first, then the rest alphabetically."""
    from slca.eval.compare import HEADLINE

    present = set(keys)
    first = [key for key in HEADLINE if key in present]
    return first + sorted(present - set(first))


def calibration_from_metrics(metrics: Mapping[str, float]) -> dict[str, Any]:
    """A partial calibration report from the calibrate run's `search.*`/`heldout.*` metrics."""
    report: dict[str, Any] = {part: {} for part in CALIBRATION_PARTS}
    for key, value in metrics.items():
        part, _, name = key.partition(".")
        if part in CALIBRATION_PARTS and name:
            report[part][name] = float(value)
    return report


def load_calibration(report_path: Path, uri: str | None = None) -> tuple[dict[str, Any] | None, str]:
    """(report, where it came from): the report file, else the newest calibrate run's artifact or metrics."""
    if report_path.exists():
        from slca.runinfo import put_back, read_runinfo

        try:  # the latencies of that run live beside the report
            report = json.loads(report_path.read_text(encoding="utf-8"))
            return put_back(report, read_runinfo(report_path).get("latency") or {}), str(report_path)
        except (OSError, ValueError) as error:
            return None, f"{report_path} is unreadable ({error}); rerun `slca calibrate`"
    if uri is None:
        return None, f"no {report_path}"
    try:
        runs = list_runs(uri, "calibrate")
    except StoreError as error:
        return None, str(error)
    if not runs:
        return None, f"no {report_path} and no calibrate run in {uri}"
    run = runs[0]
    try:
        with tempfile.TemporaryDirectory(prefix="slca-calib-") as folder:
            path = client(uri).download_artifacts(run.run_id, "calibration.json", folder)
            return json.loads(Path(path).read_text(encoding="utf-8")), f"MLflow run {run.run_id}"
    except Exception:  # noqa: BLE001 - no artifact or no artifact store: fall back to the metrics
        return calibration_from_metrics(run.metrics), f"metrics of MLflow run {run.run_id}"


def calibration_frame(report: Mapping[str, Any]) -> pd.DataFrame:
    """Rows = calibration metrics, columns = search / held-out / params-knobs scores."""
    parts = [part for part in CALIBRATION_PARTS if isinstance(report.get(part), Mapping)]
    names = [name for name in CALIBRATION_METRICS if any(name in report[part] for part in parts)]
    frame = pd.DataFrame(
        {CALIBRATION_PARTS[part]: [report[part].get(name, float("nan")) for name in names] for part in parts},
        index=names,
    )
    frame.index.name = "metric"
    return frame


def calibration_by_kind(report: Mapping[str, Any]) -> pd.DataFrame:
    """Held-out agreement per perturbation kind (empty when the report has none)."""
    kinds = (report.get("heldout") or {}).get("by_kind") or {}
    frame = pd.DataFrame.from_dict(kinds, orient="index")
    frame.index.name = "kind"
    return frame


def calibration_grid(report: Mapping[str, Any]) -> pd.DataFrame:
    """One row per searched knob setting: its stage, knob values and numeric metrics."""
    rows = [
        {
            "stage": entry.get("stage"),
            **{f"knob:{k}": v for k, v in (entry.get("knobs") or {}).items()},
            **{k: v for k, v in (entry.get("metrics") or {}).items() if isinstance(v, (int, float))},
        }
        for entry in report.get("grid") or []
        if isinstance(entry, Mapping)
    ]
    return pd.DataFrame(rows)


COMPARE_METRICS = (
    "reward",
    "credit/misattribution_rate",
    "rewards/r_tool/mean",
    "rewards/r_sum/mean",
    "rewards/success",
)
KIND_SUCCESS_PREFIX = "indomain.success."


def default_comparison(runs: Sequence[RunRow], limit: int = 5) -> list[RunRow]:
    """The newest run of each estimator (runs come newest first), at most `limit`: e.g. slca-s0 vs grpo-s0."""
    chosen: dict[str, RunRow] = {}
    for run in runs:
        chosen.setdefault(run.estimator, run)
    return list(chosen.values())[:limit]


def newest_eval(train: RunRow, evaluations: Sequence[RunRow]) -> RunRow | None:
    """The newest evaluate run of the same estimator and seed as the train run."""
    matching = [e for e in evaluations if (e.estimator, e.seed) == (train.estimator, train.seed)]
    return max(matching, key=lambda e: e.start_time, default=None)


def kind_success_frame(runs: Sequence[RunRow], evaluations: Sequence[RunRow]) -> pd.DataFrame:
    """Rows = task kinds, columns = train run labels: in-domain success of the run's evaluation."""
    columns = {}
    for run in runs:
        evaluation = newest_eval(run, evaluations)
        if evaluation is not None:
            columns[run.label] = {
                key[len(KIND_SUCCESS_PREFIX) :]: value
                for key, value in evaluation.metrics.items()
                if key.startswith(KIND_SUCCESS_PREFIX)
            }
    frame = pd.DataFrame(columns).sort_index()
    frame.index.name = "kind"
    return frame


def final_values_frame(histories: Mapping[str, Mapping[str, Sequence[tuple[int, float]]]]) -> pd.DataFrame:
    """{metric: {run label: [(step, value)]}} -> rows = run labels, columns = metrics, the last logged value."""
    cells: dict[str, dict[str, float]] = {}
    for metric, by_run in histories.items():
        for label, points in by_run.items():
            cells.setdefault(label, {})[metric] = points[-1][1] if points else float("nan")
    frame = pd.DataFrame.from_dict(cells, orient="index")
    frame.index.name = "run"
    return frame

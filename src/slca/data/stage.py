"""The `synthesize` stage: synthesize the splits, validate them, then publish them atomically.

Every output is first written to a temporary sibling of its final path; the temporaries are read
back and validated with the great-expectations suite, and only when every split passes are they
renamed over data/{train,val,test}.jsonl, data/stats.json and the validation report. On any
failure the temporaries are removed and earlier outputs stay untouched. The run is logged to
MLflow (params, per-split/kind/domain counts, timings, the report and stats as artifacts).

    from slca.config import load_params
    summary = run_synthesize(load_params())
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from slca.config import DataParams, Params
from slca.data.expectations import (
    DataValidationError,
    raise_for_report,
    validate_splits,
)
from slca.data.synthesis import KINDS, SPLITS, required_kinds, synthesize
from slca.tools import DOMAINS


def dumps_row(row: dict) -> str:
    """Canonical JSON text of a row: sorted keys, fixed separators (byte-identical reruns)."""
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def dumps_doc(payload: object) -> str:
    return json.dumps(payload, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def split_path(out_dir: Path | str, split: str) -> Path:
    return Path(out_dir) / f"{split}.jsonl"


def read_jsonl(path: Path) -> list[dict]:
    """Rows of a JSONL file; a missing file or a bad line is a DataValidationError naming it."""
    if not path.is_file():
        raise DataValidationError(f"{path} is missing; run `slca synthesize` to create it")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise DataValidationError(f"{path}:{number}: not valid JSON ({error.msg})") from None
            if not isinstance(row, dict):
                raise DataValidationError(f"{path}:{number}: a task row must be a JSON object")
            rows.append(row)
    return rows


def compute_stats(rows_by_split: dict[str, list[dict]]) -> dict:
    """Counts per split: rows, per kind, per domain, and per kind×domain."""
    stats = {}
    for split, rows in rows_by_split.items():
        kinds = Counter(r["kind"] for r in rows)
        domains = Counter(r["domain"] for r in rows)
        pairs = Counter(f"{r['kind']}/{r['domain']}" for r in rows)
        stats[split] = {
            "rows": len(rows),
            "kind": {k: kinds[k] for k in KINDS},
            "domain": {d: domains[d] for d in DOMAINS},
            "kind_domain": dict(sorted(pairs.items())),
            "gold_calls": sum(len(c) for r in rows for c in r["gold_steps"]),
        }
    return stats


def validate_rows(rows_by_split: dict[str, list[dict]], params: DataParams | None = None) -> dict:
    """Run the suite with the knobs of `params` (defaults when None); returns the report."""
    params = params or DataParams()
    return validate_splits(
        rows_by_split,
        domains=DOMAINS,
        required_kinds=required_kinds(params.kind_mix.model_dump()),
        max_prompt_chars=params.max_prompt_chars,
    )


def validate_files(data_dir: Path | str = "data", params: DataParams | None = None) -> dict:
    """Validate stored splits; returns the report or raises DataValidationError listing failures."""
    rows = {split: read_jsonl(split_path(data_dir, split)) for split in SPLITS}
    report = validate_rows(rows, params)
    raise_for_report(report, where=str(data_dir))
    return report


class Staged:
    """Temporary siblings of the final paths; `publish` renames them all, `discard` removes them."""

    def __init__(self) -> None:
        self.pending: dict[Path, Path] = {}

    def write(self, final: Path, text: str) -> Path:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
            with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
            os.chmod(tmp, 0o644)  # mkstemp makes owner-only files; outputs are ordinary readable files
        except OSError as error:  # a full disk, a size limit, a read-only folder: keep nothing, name the real file
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            raise OSError(error.errno, error.strerror, str(final)) from None
        self.pending[final] = Path(tmp)
        return Path(tmp)

    def publish(self) -> None:
        for final, tmp in self.pending.items():
            os.replace(tmp, final)
        self.pending.clear()

    def discard(self) -> None:
        for tmp in self.pending.values():
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self.pending.clear()


def count_metrics(stats: dict) -> dict[str, float]:
    metrics = {}
    for split, s in stats.items():
        metrics[f"rows.{split}"] = s["rows"]
        metrics.update({f"rows.{split}.{kind}": n for kind, n in s["kind"].items()})
        metrics.update({f"rows.{split}.domain.{d}": n for d, n in s["domain"].items()})
    return metrics


def synthesize_and_publish(params: Params) -> dict:
    """Synthesize, stage, validate the staged files, publish; no MLflow. Returns the summary."""
    data = params.data
    started = time.perf_counter()
    rows = synthesize(data, params.project.seed)
    synth_s = time.perf_counter() - started
    staged = Staged()
    try:
        temps = {
            split: staged.write(split_path(data.out_dir, split), "".join(dumps_row(r) + "\n" for r in rows[split]))
            for split in SPLITS
        }
        stored = {split: read_jsonl(path) for split, path in temps.items()}  # validate the bytes to publish
        report = validate_rows(stored, data)
        gx_s = report.pop("seconds")
        stats = compute_stats(stored)
        staged.write(Path(data.out_dir) / "stats.json", dumps_doc(stats))
        staged.write(Path(data.report_path), dumps_doc(report))
        raise_for_report(report, where="synthesized data")
        staged.publish()
    except DataValidationError as error:
        error.report.pop("seconds", None)
        raise
    finally:
        staged.discard()
    n_rows = sum(len(r) for r in rows.values())
    return {
        "rows": {split: len(rows[split]) for split in SPLITS},
        "stats": stats,
        "report": report,
        "paths": [str(split_path(data.out_dir, s)) for s in SPLITS]
        + [str(Path(data.out_dir) / "stats.json"), data.report_path],
        "seconds": {"synthesize": round(synth_s, 3), "validate": round(gx_s, 3)},
        "rows_per_second": round(n_rows / max(synth_s, 1e-9), 1),
    }


def run_synthesize(params: Params) -> dict:
    """Stage entry point: synthesize → validate → publish, recorded as the MLflow `synthesize` run."""
    from slca import tracking

    with tracking.stage_run("synthesize", params, log_params=params.data.model_dump()):
        try:
            summary = synthesize_and_publish(params)
        except DataValidationError as error:
            if error.report:
                tracking.log_json(error.report, "data_validation.failed.json")
            raise
        tracking.log_metrics(count_metrics(summary["stats"]))
        tracking.log_metrics(
            {
                "synthesize_seconds": summary["seconds"]["synthesize"],
                "validate_seconds": summary["seconds"]["validate"],
                "rows_per_second": summary["rows_per_second"],
            }
        )
        tracking.log_json(summary["stats"], "stats.json")
        tracking.log_json(summary["report"], "data_validation.json")
    return compact(summary)


def compact(summary: dict) -> dict:
    """The few numbers worth printing: rows per split and kind, timings, validation outcome."""
    report = summary["report"]
    return {
        "rows": summary["rows"],
        "kinds": {s: v["kind"] for s, v in summary["stats"].items()},
        "seconds": summary["seconds"],
        "rows_per_second": summary["rows_per_second"],
        "validation": {
            "success": report["success"],
            "expectations": sum(v["evaluated"] for v in report["splits"].values()),
        },
        "outputs": summary["paths"],
    }

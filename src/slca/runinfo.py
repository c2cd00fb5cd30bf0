"""Facts that differ between two runs of the same stage: wall-clock figures and MLflow run ids.

They are kept beside a stage's output, never inside it, in `<parent>/.runinfo/<name>.json`
(`models/.runinfo/slca-s0.json` for `models/slca-s0`, `reports/eval/.runinfo/sft.json` for
`reports/eval/sft.json`). So every DVC-tracked output is bytes fixed by the params and the seed,
and `make run`, `dvc repro` and a fanned-out run write the same `dvc.lock`. MLflow still gets
every figure.

    update_runinfo(Path("models/slca-s0"), mlflow_run_id=run.info.run_id)
    read_runinfo(Path("models/slca-s0")).get("mlflow_run_id")
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from slca.tracking import write_atomic

FOLDER = ".runinfo"
#: per-step trainer figures measured off the clock or the machine (kept out of metrics_history.jsonl)
VOLATILE_STEP_METRICS = frozenset(
    {"step_time", "throughput/tokens_per_s", "rollout/tokens_per_s", "system/resident_gb", "system/peak_resident_gb"}
)


def runinfo_path(output: Path | str) -> Path:
    output = Path(output)
    return output.parent / FOLDER / f"{output.stem if output.suffix == '.json' else output.name}.json"


def read_runinfo(output: Path | str) -> dict[str, Any]:
    """The recorded facts of `output`'s last run ({} when none or unreadable)."""
    path = runinfo_path(output)
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def update_runinfo(output: Path | str, **fields: Any) -> Path:
    """Merge `fields` into `output`'s run facts (written atomically)."""
    path = runinfo_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    merged = {**read_runinfo(output), **fields}
    return write_atomic(path, json.dumps(merged, indent=2, sort_keys=True))


def clear_runinfo(output: Path | str) -> None:
    runinfo_path(output).unlink(missing_ok=True)


def split_volatile(values: Mapping[str, Any], keys: frozenset[str] | set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stable, volatile): `values` split by whether a key is in `keys`."""
    stable = {k: v for k, v in values.items() if k not in keys}
    return stable, {k: v for k, v in values.items() if k in keys}


def pop_keys(value: Any, keys: frozenset[str] | set[str], prefix: str = "") -> tuple[Any, dict[str, Any]]:
    """(value without `keys` at any depth, {dotted path: popped value}); lists are indexed by position."""
    popped: dict[str, Any] = {}
    if isinstance(value, Mapping):
        kept = {}
        for key, item in value.items():
            path = f"{prefix}{key}"
            if key in keys:
                popped[path] = item
                continue
            kept[key], inner = pop_keys(item, keys, path + ".")
            popped.update(inner)
        return kept, popped
    if isinstance(value, list):
        items = []
        for index, item in enumerate(value):
            stripped, inner = pop_keys(item, keys, f"{prefix}{index}.")
            items.append(stripped)
            popped.update(inner)
        return items, popped
    return value, popped


def put_back(value: Any, popped: Mapping[str, Any]) -> Any:
    """Undo `pop_keys` (in place where the path still exists); returns `value`."""
    for path, item in popped.items():
        node, *parts = [value, *path.split(".")]
        *parents, leaf = parts
        try:
            for part in parents:
                node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            continue
        if isinstance(node, dict):
            node[leaf] = item
    return value

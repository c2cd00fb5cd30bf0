"""MLflow helpers: one parent run per pipeline run, one nested run per stage.

The parent run id crosses process boundaries through the `SLCA_PARENT_RUN_ID` environment
variable: the pipeline (Prefect flow or `slca pipeline`) opens the parent and exports the id, and
every stage process (`dvc repro` → `slca <stage>`) opens its run as a child of it.

Tracking store: `MLFLOW_TRACKING_URI` if set, else `project.tracking_uri` from params.yaml, else
a SQLite file `mlflow.db` in the working directory. A SQLite store is created (schema migrations,
the experiment row) under an exclusive lock on `<file>.lock`, so any number of commands started
together on a new store all succeed.

    with stage_run("synthesize", params) as run:
        log_metrics({"rows": 3000})
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

PARENT_ENV = "SLCA_PARENT_RUN_ID"
# Set on a work pool's worker: the Prefect flow run of the item, tagged on the stage's MLflow run so
# the flow can end the runs of an item whose worker was lost.
ITEM_FLOW_RUN_ENV = "SLCA_ITEM_FLOW_RUN_ID"
ITEM_FLOW_RUN_TAG = "slca.item_flow_run"


class TrackingError(RuntimeError):
    """The tracking store cannot be used; the message names the URI and what to do."""


def resolve_tracking_uri(configured: str | None = None) -> str:
    """The tracking URI in force: environment, then params, then ./mlflow.db."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or configured
    if uri:
        return uri
    return f"sqlite:///{Path.cwd() / 'mlflow.db'}"


def unreachable_reason(base_url: str, timeout_s: float = 3.0) -> str | None:
    """Why `<base_url>/health` does not answer (None when it does); MLflow and Prefect both serve it."""
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/health", timeout=timeout_s) as response:
            response.read(16)
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        return str(getattr(error, "reason", error))
    return None


def check_reachable(uri: str, timeout_s: float = 3.0) -> None:
    """Fail fast with one line when an http(s) tracking server does not answer."""
    if not uri.startswith(("http://", "https://")):
        return
    reason = unreachable_reason(uri, timeout_s)
    if reason is not None:
        raise TrackingError(
            f"MLflow tracking server {uri} is unreachable ({reason}); start it or set "
            "MLFLOW_TRACKING_URI / project.tracking_uri to a reachable store"
        ) from None


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI (None for other stores or an in-memory database)."""
    if not uri.startswith("sqlite:///"):
        return None
    path = uri[len("sqlite:///") :].split("?", 1)[0]
    return None if path in ("", ":memory:") else Path(path)


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock while a SQLite store is created or migrated (no-op for other stores).

    MLflow creates a new SQLite store on first use; two processes doing so at once race on the schema
    migration ("alembic_version ... 0 found") and on the experiment row. The lock serialises that
    first use; once the store exists it costs one flock.
    """
    import fcntl

    path = sqlite_path(uri)
    if path is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - closed below
    except OSError as error:
        raise TrackingError(
            f"MLflow tracking store {uri}: cannot create {path.parent} ({error.strerror}); "
            "set MLFLOW_TRACKING_URI / project.tracking_uri to a writable place"
        ) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def configure(params: Any | None = None) -> str:
    """Point mlflow at the store in force and select the experiment; returns the URI."""
    import mlflow

    configured = getattr(getattr(params, "project", None), "tracking_uri", None)
    uri = resolve_tracking_uri(configured)
    check_reachable(uri)
    experiment = getattr(getattr(params, "project", None), "experiment", None) or "slca"
    with store_lock(uri):
        mlflow.set_tracking_uri(uri)
        mlflow.set_experiment(experiment)
    return uri


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested params → {"a.b.c": value}, lists rendered as JSON, for mlflow.log_params."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            flat[name] = json.dumps(value)
        else:
            flat[name] = value
    return flat


@contextlib.contextmanager
def pipeline_run(params: Any | None = None, name: str = "pipeline") -> Iterator[Any]:
    """Open the parent run and export its id for child processes."""
    import mlflow

    configure(params)
    previous = os.environ.get(PARENT_ENV)
    with mlflow.start_run(run_name=name) as run:
        os.environ[PARENT_ENV] = run.info.run_id
        try:
            yield run
        finally:
            if previous is None:
                os.environ.pop(PARENT_ENV, None)
            else:
                os.environ[PARENT_ENV] = previous


@contextlib.contextmanager
def stage_run(
    stage: str,
    params: Any | None = None,
    *,
    run_id: str | None = None,
    log_params: Mapping[str, Any] | None = None,
    extra_tags: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """Open the run of one stage, nested under the pipeline parent when there is one.

    `run_id` resumes an existing run (a resumed training run continues its own MLflow run); `extra_tags`
    are set on it (the model stages tag the precision they resolved: `slca.rollout.precision`).
    """
    import mlflow

    configure(params)
    parent = os.environ.get(PARENT_ENV)
    tags = {"slca.stage": stage}
    if parent:
        tags["mlflow.parentRunId"] = parent
    if os.environ.get(ITEM_FLOW_RUN_ENV):
        tags[ITEM_FLOW_RUN_TAG] = os.environ[ITEM_FLOW_RUN_ENV]
    tags.update(extra_tags or {})
    with mlflow.start_run(run_id=run_id, run_name=None if run_id else stage, tags=tags) as run:
        if log_params:
            mlflow.log_params(flatten(log_params))
        yield run


def kill_item_runs(flow_run_id: str) -> list[str]:
    """Mark KILLED the unfinished MLflow runs of an item's lost flow run; returns their ids."""
    import mlflow

    client = mlflow.MlflowClient()
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    found = (
        client.search_runs(
            experiments, (f"tags.`{ITEM_FLOW_RUN_TAG}` = '{flow_run_id}' and attributes.status = 'RUNNING'")
        )
        if experiments
        else []
    )
    for run in found:
        client.set_terminated(run.info.run_id, "KILLED")
    return [run.info.run_id for run in found]


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    import mlflow

    mlflow.log_metrics({key: float(value) for key, value in metrics.items()}, step=step)


def log_json(payload: Any, artifact_file: str) -> None:
    """Log a JSON-serialisable object as an artifact file of the active run."""
    import mlflow

    mlflow.log_text(json.dumps(payload, indent=2, sort_keys=True), artifact_file)


def write_atomic(path: Path | str, data: bytes | str) -> Path:
    """Write a file through a temporary sibling and a rename, so readers never see half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException as error:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        if isinstance(error, OSError) and (tmp is None or error.filename in (None, tmp)):
            raise OSError(error.errno, error.strerror, str(path)) from None  # name the file meant, not the temporary
        raise
    return path

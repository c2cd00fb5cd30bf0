"""MLflow helpers against a real SQLite store: parent/child runs across processes, errors."""

from __future__ import annotations

import os
import subprocess
import sys

import mlflow
import pytest

from slca.config import Params
from slca.tracking import (
    PARENT_ENV,
    TrackingError,
    check_reachable,
    flatten,
    log_metrics,
    pipeline_run,
    resolve_tracking_uri,
    stage_run,
    write_atomic,
)

CHILD = """
from slca.tracking import stage_run, log_metrics
with stage_run("child-stage", log_params={"a": {"b": 1}}):
    log_metrics({"rows": 42.0})
"""


def test_stage_run_in_another_process_nests_under_the_pipeline_parent(mlflow_store, tmp_path):
    with pipeline_run(Params()) as parent:
        assert os.environ[PARENT_ENV] == parent.info.run_id
        subprocess.run([sys.executable, "-c", CHILD], check=True, cwd=tmp_path, timeout=120)
    assert PARENT_ENV not in os.environ
    client = mlflow.MlflowClient(mlflow_store)
    experiment = client.get_experiment_by_name("slca")
    children = client.search_runs([experiment.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert len(children) == 1
    child = children[0]
    assert child.data.tags["slca.stage"] == "child-stage"
    assert child.data.metrics["rows"] == 42.0
    assert child.data.params["a.b"] == "1"
    assert child.info.status == "FINISHED"


def test_stage_run_resumes_an_existing_run(mlflow_store):
    with stage_run("train") as first:
        log_metrics({"loss": 1.0}, step=1)
    with stage_run("train", run_id=first.info.run_id) as second:
        log_metrics({"loss": 0.5}, step=2)
    assert second.info.run_id == first.info.run_id
    history = mlflow.MlflowClient(mlflow_store).get_metric_history(first.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(1, 1.0), (2, 0.5)]


def test_environment_uri_wins_over_params(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///from-env.db")
    assert resolve_tracking_uri("sqlite:///from-params.db") == "sqlite:///from-env.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert resolve_tracking_uri("sqlite:///from-params.db") == "sqlite:///from-params.db"
    assert resolve_tracking_uri(None).endswith("/mlflow.db")


def test_unreachable_server_is_one_clear_line():
    with pytest.raises(TrackingError) as info:
        check_reachable("http://127.0.0.1:9/", timeout_s=1.0)
    message = str(info.value)
    assert "http://127.0.0.1:9/ is unreachable" in message and "\n" not in message


def test_flatten_nests_with_dots_and_renders_lists():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": "x"}) == {"a.b": 1, "a.c": "[1, 2]", "d": "x"}


def test_write_atomic_leaves_no_temporary_files(tmp_path):
    target = write_atomic(tmp_path / "sub" / "out.json", '{"a": 1}')
    assert target.read_text() == '{"a": 1}'
    assert sorted(p.name for p in target.parent.iterdir()) == ["out.json"]

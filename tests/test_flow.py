"""The Prefect flow runs DVC stages for real under one MLflow parent run (ephemeral Prefect)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import mlflow
import pytest

from slca.config import Params, dump_params
from tests.conftest import REPO_ROOT

STAGE_SCRIPT = textwrap.dedent(
    """
    import sys, pathlib
    from slca.tracking import stage_run, log_metrics
    name, out = sys.argv[1], pathlib.Path(sys.argv[2])
    with stage_run(name):
        log_metrics({"ok": 1.0})
    out.write_text(name)
    """
)


@pytest.fixture(scope="module", autouse=True)
def stop_ephemeral_prefect():
    """Stop the ephemeral Prefect server while pytest still owns stdout (its atexit hook logs)."""
    yield
    from prefect.server.api.server import SubprocessASGIServer

    for server in list(SubprocessASGIServer._instances.values()):
        server.stop()


@pytest.fixture
def dvc_project(tmp_path, monkeypatch, mlflow_store):
    """A throwaway git+DVC project with two chained stages that open MLflow stage runs."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect-home"))
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "240")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "stage.py").write_text(STAGE_SCRIPT)
    (tmp_path / "params.yaml").write_text(dump_params(Params()))
    python = sys.executable
    (tmp_path / "dvc.yaml").write_text(
        textwrap.dedent(f"""
        stages:
          first:
            cmd: {python} stage.py first a.txt
            deps: [stage.py]
            outs: [a.txt]
          second:
            cmd: {python} stage.py second b.txt
            deps: [a.txt]
            outs: [b.txt]
        """)
    )
    subprocess.run(["git", "init", "-q"], check=True)
    subprocess.run([str(REPO_ROOT / ".venv/bin/dvc"), "init", "-q"], check=True)
    return tmp_path


def test_flow_runs_every_dvc_stage_nested_under_one_parent(dvc_project, mlflow_store):
    sys.path.insert(0, str(REPO_ROOT / "flows"))
    try:
        from pipeline import dvc_stages, slca_pipeline
    finally:
        sys.path.pop(0)
    assert dvc_stages() == ["first", "second"]
    assert slca_pipeline(params_path="params.yaml") == ["first", "second"]
    assert (dvc_project / "b.txt").read_text() == "second"
    assert (dvc_project / "dvc.lock").exists()

    client = mlflow.MlflowClient(mlflow_store)
    experiment = client.get_experiment_by_name("slca")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("mlflow.runName") == "pipeline"]
    assert len(parents) == 1
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert sorted(r.data.tags["slca.stage"] for r in children) == ["first", "second"]

    # Unchanged stages are skipped by DVC: a second flow run opens no new stage runs.
    slca_pipeline(params_path="params.yaml")
    stage_runs = [r for r in client.search_runs([experiment.experiment_id]) if "slca.stage" in r.data.tags]
    assert len(stage_runs) == 2


def test_flow_main_reports_a_failing_stage_in_one_line(dvc_project, capsys):
    (dvc_project / "dvc.yaml").write_text("stages:\n  broken:\n    cmd: exit 3\n")
    sys.path.insert(0, str(REPO_ROOT / "flows"))
    try:
        from pipeline import main
    finally:
        sys.path.pop(0)
    assert main(["--stages", "broken"]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("error: stage 'broken' failed with exit code")


def test_stage_output_is_split_on_carriage_returns_for_live_progress():
    import io

    from slca.orchestration import stream_lines as _stream_lines

    stream = io.BufferedReader(io.BytesIO(b"start\rbar 10%\rbar 100%\nlast line\n\ntail"))
    assert list(_stream_lines(stream)) == ["start", "bar 10%", "bar 100%", "last line", "tail"]

"""Commands started together on a new MLflow SQLite store all succeed (the store is created under a lock).

Without the lock, two processes creating the store at once race on its schema migration
("alembic_version ... 0 found") or on the experiment row; these tests start real processes at the same
moment on a store that does not exist yet.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import mlflow

from slca.config import DataParams, Params, ProjectParams, dump_params
from slca.tracking import sqlite_path, store_lock

REPO_ROOT = Path(__file__).resolve().parents[1]
SLCA = REPO_ROOT / ".venv" / "bin" / "slca"

PROBE = """
import os, sys, time
from pathlib import Path
go = Path(sys.argv[1])
while not go.exists():
    time.sleep(0.002)
from slca.tracking import log_metrics, stage_run
with stage_run("probe") as run:
    log_metrics({"worker": float(sys.argv[2])})
"""


def _env(uri: str) -> dict[str, str]:
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "OMP_NUM_THREADS": "1"}
    env.pop("SLCA_PARENT_RUN_ID", None)
    return env


def _runs(uri: str, stage: str) -> list:
    client = mlflow.tracking.MlflowClient(uri)
    experiment = client.get_experiment_by_name("slca")
    return client.search_runs([experiment.experiment_id], f"tags.`slca.stage` = '{stage}'")


def test_processes_started_at_once_on_a_new_store_all_log_their_run(tmp_path):
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    go = tmp_path / "go"
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", PROBE, str(go), str(k)],
            env=_env(uri),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for k in range(4)
    ]
    time.sleep(4.0)  # every worker has imported and is spinning on the start file
    go.touch()
    outputs = [worker.communicate(timeout=240)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0, 0], "\n".join(outputs)
    runs = _runs(uri, "probe")
    assert sorted(run.data.metrics["worker"] for run in runs) == [0.0, 1.0, 2.0, 3.0]


def test_two_slca_commands_started_together_on_a_new_store_both_exit_0(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    small = {"n_train": 90, "n_val": 40, "n_test": 40}
    commands = []
    for name in ("a", "b"):
        root = tmp_path / name
        root.mkdir()
        params = Params(
            project=ProjectParams(seed=5),
            data=DataParams(out_dir=str(root / "data"), report_path=str(root / "reports/data.json"), **small),
        )
        (root / "params.yaml").write_text(dump_params(params))
        commands.append((root, [str(SLCA), "synthesize", "--params", "params.yaml"]))
    started = [
        subprocess.Popen(command, cwd=root, env=_env(uri), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for root, command in commands
    ]
    outputs = [process.communicate(timeout=300)[0] for process in started]
    assert [process.returncode for process in started] == [0, 0], "\n".join(outputs)
    assert len(_runs(uri, "synthesize")) == 2
    assert (tmp_path / "a/data/train.jsonl").read_bytes() == (tmp_path / "b/data/train.jsonl").read_bytes()


def test_the_lock_is_only_taken_for_sqlite_files(tmp_path):
    assert sqlite_path(f"sqlite:///{tmp_path}/x/mlflow.db") == tmp_path / "x" / "mlflow.db"
    assert sqlite_path("sqlite:///:memory:") is None and sqlite_path("http://127.0.0.1:5000") is None
    with store_lock(f"sqlite:///{tmp_path}/x/mlflow.db"):
        assert (tmp_path / "x" / "mlflow.db.lock").exists()
    with store_lock("http://127.0.0.1:5000"):
        pass

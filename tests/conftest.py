"""Shared test fixtures: offline hygiene and an isolated MLflow store per test."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("MLFLOW_ENABLE_TELEMETRY", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch) -> str:
    """A fresh SQLite MLflow store for one test; returns its URI."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("SLCA_PARENT_RUN_ID", raising=False)
    return uri


def wait_for_file(path: Path, process: subprocess.Popen, timeout: float) -> bool:
    """True once `path` exists; False when `process` ends or time runs out first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if path.exists():
            return True
        time.sleep(0.02)
    return path.exists()

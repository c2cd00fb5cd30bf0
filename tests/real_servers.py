"""Real MLflow and Prefect servers for tests: free loopback ports, health waits, no orphans.

Each server runs in its own process group (a new session), so stopping it ends every process it
started (uvicorn workers, Prefect's services) — SIGTERM, then SIGKILL for what is left. A watchdog
process per group holds the read end of a pipe whose write end only the runner holds: when the runner
dies in any way (SIGKILL included), the pipe reaches end-of-file and the watchdog ends the group, so no
server outlives the test run.

    with Servers(tmp_dir).up() as servers:   # servers.env points MLflow and Prefect clients at them
        ...
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from tests.conftest import REPO_ROOT

VENV_BIN = REPO_ROOT / ".venv" / "bin"
QUIET = {
    "DO_NOT_TRACK": "1",
    "MLFLOW_ENABLE_TELEMETRY": "false",
    "GX_ANALYTICS_ENABLED": "False",
    "HF_HUB_OFFLINE": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "TOKENIZERS_PARALLELISM": "false",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_group(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    """End a process and everything in its process group; returns once none is left."""
    pgid = process.pid  # start_new_session: the leader's pid is the group id
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()  # reap the leader, or the group never looks empty
            if not _group_alive(pgid):
                return
            time.sleep(0.2)
    raise RuntimeError(f"process group {pgid} ({process.args!r}) survived SIGKILL")


WATCHDOG = """
import os, signal, sys, time
pgid = int(sys.argv[1])
sys.stdin.buffer.read()  # returns at end-of-file: the runner stopped the group itself, or died
for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 10.0)):
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        break
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            sys.exit(0)
        time.sleep(0.2)
"""


def watch_group(process: subprocess.Popen) -> tuple[subprocess.Popen, int]:
    """Start a watchdog that ends `process`'s group once this process is gone; returns it and the pipe's write end.

    The watchdog runs in its own session, so killing the runner's process group does not kill it; the
    write end is not inheritable, so only this process keeps the pipe open.
    """
    read, write = os.pipe()
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-c", WATCHDOG, str(process.pid)],
            stdin=read,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    finally:
        os.close(read)
    return watchdog, write


def release(watchdog: subprocess.Popen, write: int) -> None:
    """Close the pipe after a clean stop: the watchdog finds the group gone and exits (and is reaped)."""
    os.close(write)
    watchdog.wait(timeout=30)


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def wait_healthy(
    name: str, process: subprocess.Popen, health_url: str, log_path: Path, timeout_s: float = 180.0
) -> None:
    """Poll a health URL until it answers 200; fail with the log's tail if the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{_tail(log_path)}")
        with contextlib.suppress(OSError), urllib.request.urlopen(health_url, timeout=2) as response:
            if response.status == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} not healthy at {health_url} after {timeout_s:.0f} s:\n{_tail(log_path)}")
        time.sleep(0.5)


def start(
    command: list[str], env: Mapping[str, str], log_path: Path, stack: contextlib.ExitStack, cwd: Path | None = None
) -> subprocess.Popen:
    """Start a process in its own process group; the stack stops the whole group on exit."""
    log = stack.enter_context(open(log_path, "wb"))  # noqa: SIM115 - the stack closes it
    process = subprocess.Popen(
        command, env=dict(env), stdout=log, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=True
    )
    stack.callback(release, *watch_group(process))  # runs after stop_group
    stack.callback(stop_group, process)
    return process


class Servers:
    """A running MLflow server and Prefect server, and the environment that points at both."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mlflow_uri = f"http://127.0.0.1:{free_port()}"
        self.prefect_api = f"http://127.0.0.1:{free_port()}/api"
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PREFECT_", "MLFLOW_")) and key != "SLCA_PARENT_RUN_ID"
        }
        self.env = {
            **env,
            **QUIET,
            "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            "PREFECT_HOME": str(root / "prefect-home"),
            "PREFECT_API_URL": self.prefect_api,
            "MLFLOW_TRACKING_URI": self.mlflow_uri,
            "OMP_NUM_THREADS": "1",
            "PREFECT_WORKER_QUERY_SECONDS": "2",
            # no MLflow job consumers (7 processes of ~400 MB polling their queues): nothing here submits jobs
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }

    @contextlib.contextmanager
    def up(self) -> Iterator[Servers]:
        mlflow_port = self.mlflow_uri.rsplit(":", 1)[1]
        prefect_port = self.prefect_api.split(":")[-1].split("/")[0]
        artifacts = self.root / "mlflow-artifacts"
        mlflow_cmd = [
            str(VENV_BIN / "mlflow"),
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            mlflow_port,
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{self.root / 'mlflow.db'}",
            "--artifacts-destination",
            str(artifacts),
            "--serve-artifacts",
        ]
        prefect_cmd = [
            str(VENV_BIN / "prefect"),
            "server",
            "start",
            "--host",
            "127.0.0.1",
            "--port",
            prefect_port,
            "--no-ui",
            "--analytics-off",
        ]
        with contextlib.ExitStack() as stack:  # both start at once; each group is stopped on exit
            mlflow = start(mlflow_cmd, self.env, self.root / "mlflow-server.log", stack)
            prefect = start(prefect_cmd, self.env, self.root / "prefect-server.log", stack)
            wait_healthy("mlflow server", mlflow, f"{self.mlflow_uri}/health", self.root / "mlflow-server.log")
            wait_healthy("prefect server", prefect, f"{self.prefect_api}/health", self.root / "prefect-server.log")
            yield self

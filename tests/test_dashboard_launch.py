"""`slca dashboard`: the streamlit command it builds, and a real launch that must bind loopback only."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from slca import dashboard_data as data
from slca.cli import app
from tests.conftest import REPO_ROOT

START_TIMEOUT_S = 90


def flag(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_streamlit_config_binds_loopback_for_a_plain_streamlit_run() -> None:
    config = tomllib.loads((REPO_ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["address"] == "127.0.0.1"


def test_launch_command_binds_loopback_by_default() -> None:
    command = data.launch_command()
    assert command[:4] == [sys.executable, "-m", "streamlit", "run"]
    assert Path(command[4]) == REPO_ROOT / "dashboards" / "app.py" and Path(command[4]).is_file()
    assert flag(command, "--server.address") == "127.0.0.1" and flag(command, "--server.port") == "8501"
    assert flag(data.launch_command("0.0.0.0", 9000), "--server.address") == "0.0.0.0"


def test_launch_env_fixes_the_store_and_the_folder(tmp_path) -> None:
    env = data.launch_env(None, tmp_path, {"PATH": "/bin"})
    assert env == {
        "PATH": "/bin",
        "SLCA_PROJECT_DIR": str(tmp_path),
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }
    inherited = data.launch_env(None, tmp_path, {"MLFLOW_TRACKING_URI": "http://mlflow:5000"})
    assert inherited["MLFLOW_TRACKING_URI"] == "http://mlflow:5000"
    assert data.launch_env("sqlite:///x.db", tmp_path, inherited)["MLFLOW_TRACKING_URI"] == "sqlite:///x.db"


def test_cli_hands_the_process_to_streamlit_with_the_launch_settings(tmp_path, monkeypatch) -> None:
    launched = []
    monkeypatch.setattr(os, "execve", lambda path, argv, env: launched.append((path, argv, env)))
    result = CliRunner().invoke(app, ["dashboard", "--project-dir", str(tmp_path), "--tracking-uri", "sqlite:///s.db"])
    assert result.exit_code == 0, result.output
    ((path, argv, env),) = launched
    assert path == sys.executable and argv == data.launch_command("127.0.0.1", 8501)
    assert env["SLCA_PROJECT_DIR"] == str(tmp_path) and env["MLFLOW_TRACKING_URI"] == "sqlite:///s.db"
    assert result.output.strip() == "dashboard: http://127.0.0.1:8501 (tracking sqlite:///s.db)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening_addresses(port: int) -> set[str]:
    """Local addresses of TCP sockets in LISTEN state on `port`, from /proc/net/tcp{,6}."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:
                raw = bytes.fromhex(address)
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # little-endian words
                found.add(socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, words))
    return found


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads the socket table of Linux")
def test_real_launch_listens_on_loopback_only(tmp_path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "slca.cli", "dashboard", "--project-dir", str(tmp_path), "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not listening_addresses(port) and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert server.poll() is None, server.stdout.read().decode()
        assert listening_addresses(port) == {"127.0.0.1"}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()

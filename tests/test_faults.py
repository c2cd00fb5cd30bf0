"""Faults in the middle of work, with a real `slca` process: a disk that fills up, a read-only output folder.

A full disk is simulated with the file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): every write past
the limit fails with EFBIG, as a write to a full disk fails with ENOSPC, and it works the same way
for root. A read-only folder is a read-only bind mount in a private mount namespace of the stage
process (`unshare --mount`; permission bits do not stop root), or the folder's mode for other users.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
from pathlib import Path

import pytest

from slca.config import DataParams, Params, ProjectParams, dump_params
from tests.conftest import REPO_ROOT

SLCA = REPO_ROOT / ".venv" / "bin" / "slca"


def write_params(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    params = Params(
        project=ProjectParams(seed=5),
        data=DataParams(out_dir="data", report_path="reports/data_validation.json", n_train=1500, n_val=40, n_test=40),
    )
    (root / "params.yaml").write_text(dump_params(params))


def synthesize(
    root: Path, store: str, file_size_limit: int | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    env = {**os.environ, "MLFLOW_TRACKING_URI": store, "OMP_NUM_THREADS": "1"}
    env.pop("SLCA_PARENT_RUN_ID", None)
    return subprocess.run(
        [*prefix, str(SLCA), "synthesize", "--params", "params.yaml"],
        cwd=root,
        env=env,
        text=True,
        capture_output=True,
        timeout=600,
        preexec_fn=limit if file_size_limit else None,
        check=False,
    )


def files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for folder in ("data", "reports")
        if (root / folder).exists()
        for p in sorted((root / folder).rglob("*"))
        if p.is_file()
    }


def test_a_disk_full_during_synthesize_fails_in_one_line_keeps_nothing_and_the_rerun_recovers(tmp_path):
    store_file = tmp_path / "mlflow.db"
    store = f"sqlite:///{store_file}"
    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    write_params(clean)
    write_params(faulty)
    done = synthesize(clean, store)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = files(clean)
    assert len(reference["data/train.jsonl"]) > 3_000_000  # bigger than the limit below
    # room for the tracking store's own writes, not for the training split
    limit = store_file.stat().st_size + 1_000_000
    failed = synthesize(faulty, store, file_size_limit=limit)
    assert failed.returncode == 2
    lines = failed.stderr.strip().splitlines()
    assert lines[-1] == (
        "error: cannot write data/train.jsonl: File too large; free space or make the folder "
        "writable and rerun (nothing half-written was kept)"
    ), failed.stderr[-2000:]
    assert "Traceback" not in failed.stderr
    assert files(faulty) == {}, "a half-written or unvalidated output was left behind"
    rerun = synthesize(faulty, store)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert files(faulty) == reference


# run the command with "$1" bind-mounted read-only in a mount namespace of its own (nothing leaks out)
READ_ONLY_MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def read_only(folder: Path) -> tuple[str, ...]:
    """A command prefix under which `folder` is read-only (root: a private read-only bind mount)."""
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return ()
    prefix = ("unshare", "--mount", "--propagation", "private", "sh", "-c", READ_ONLY_MOUNT, "sh", str(folder))
    probe = subprocess.run([*prefix, "touch", str(folder / "probe")], capture_output=True, text=True, check=False)
    if probe.returncode == 0 or "Read-only file system" not in probe.stderr:
        pytest.skip(f"cannot make a read-only folder here (root without mount namespaces): {probe.stderr.strip()}")
    return prefix


def test_a_read_only_output_folder_fails_in_one_line_keeps_nothing_and_the_rerun_recovers(tmp_path):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    clean, faulty = tmp_path / "clean", tmp_path / "faulty"
    write_params(clean)
    write_params(faulty)
    done = synthesize(clean, store)
    assert done.returncode == 0, done.stderr[-2000:]
    failed = synthesize(faulty, store, prefix=read_only(faulty / "data"))
    assert failed.returncode == 2
    assert failed.stderr.strip().splitlines()[-1] == (
        "error: cannot write data/train.jsonl: "
        + ("Read-only file system" if os.geteuid() == 0 else "Permission denied")
        + "; free space or make the folder writable and rerun (nothing half-written was kept)"
    ), failed.stderr[-2000:]
    assert "Traceback" not in failed.stderr
    assert files(faulty) == {}, "a half-written or unvalidated output was left behind"
    (faulty / "data").chmod(0o755)
    rerun = synthesize(faulty, store)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert files(faulty) == files(clean)

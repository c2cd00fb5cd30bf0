"""DVC stage items as units of work, for the Prefect flow (`flows/pipeline.py`).

A matrix stage (`train`, `evaluate`) expands into items (`train@slca-0`, `train@grpo-0`, …) that
`dvc stage list` names; every other stage is one item. Each item is checked with `dvc status`
first, so an unchanged item is skipped without starting its command, and a rerun after a failure
resumes at the first item that is not up to date.

Three ways to run an item:
- `repro_item`: `dvc repro --single-item <item>` (the default; one item at a time, DVC's own lock);
- `run_item_command` + `commit_item`: the item's command run directly, then `dvc commit` records
  it in dvc.lock exactly as `dvc repro` would. Independent items of one matrix stage can run side
  by side this way; every DVC call is serialised (`DVC_LOCK`), so DVC's repository lock is never
  contended;
- on a work pool's worker, in that worker's own checkout (`pipeline.item_deployment`): the flow
  pushes what the item needs to the DVC remote, the worker (`run_item_in_workspace`) takes the
  flow's dvc.lock and params.yaml, pulls the item's inputs, runs `dvc repro --single-item`, pushes
  the outputs and reports the item's lock entry; the flow (`adopt_item`) pulls those outputs and
  records them with `dvc commit`, so its dvc.lock is what a sequential run writes.

    items = stage_items()                       # {"train": ["train@slca-0", ...], ...}
    if not is_up_to_date("train@slca-0"): repro_item("train@slca-0", log)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from slca.tracking import unreachable_reason, write_atomic

# One DVC command at a time from this process: items running side by side only share the lock here.
DVC_LOCK = threading.Lock()
DVC_NOISE = re.compile(r"^(ERROR: failed to reproduce|Running stage|> |Updating lock file|Generating lock file)")


class StageFailed(RuntimeError):
    """A DVC stage item (or a DVC command) exited non-zero; the message is one line."""


class ServerUnreachable(RuntimeError):
    """A server the pipeline needs does not answer; the message names its URL."""


def dvc_executable() -> str:
    beside_python = Path(sys.executable).with_name("dvc")
    return str(beside_python) if beside_python.exists() else (shutil.which("dvc") or "dvc")


def stage_env() -> dict[str, str]:
    """The environment of stage commands: ours, with this interpreter's bin/ first on PATH.

    A worker started as `.venv/bin/prefect worker start` has no activated venv, yet the stage
    commands (`slca …`) must resolve to the same installation.
    """
    env = os.environ.copy()
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _dvc(*args: str) -> subprocess.CompletedProcess[str]:
    with DVC_LOCK:
        return subprocess.run([dvc_executable(), *args], capture_output=True, text=True, env=stage_env(), check=False)


def _one_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def stage_items() -> dict[str, list[str]]:
    """Top-level stage → its items, both in dvc.yaml order (file order is the DAG order)."""
    listed = _dvc("stage", "list", "--name-only")
    if listed.returncode != 0:
        raise StageFailed(f"dvc.yaml: cannot list the stages ({_one_line(listed.stderr + listed.stdout)})")
    frozen = _frozen_stages()
    items: dict[str, list[str]] = {}
    for name in listed.stdout.split():
        stage = name.split("@", 1)[0]
        if stage not in frozen:
            items.setdefault(stage, []).append(name)
    return items


def _frozen_stages() -> set[str]:
    """Stages dvc.yaml marks `frozen: true` (run once by hand, their outputs committed): never items."""
    with contextlib.suppress(OSError, yaml.YAMLError):
        stages = (yaml.safe_load(Path("dvc.yaml").read_text(encoding="utf-8")) or {}).get("stages") or {}
        return {name for name, stage in stages.items() if isinstance(stage, dict) and stage.get("frozen")}
    return set()


def expand(selected: list[str] | None, items: dict[str, list[str]]) -> list[list[str]]:
    """Requested stages (top-level names or single items) → groups of items, in DAG order."""
    if not selected:
        return list(items.values())
    known = {item for group in items.values() for item in group}
    unknown = [name for name in selected if name not in items and name not in known]
    if unknown:
        raise StageFailed(f"dvc.yaml has no stage {unknown[0]!r} (stages: {', '.join(items)})")
    return [items.get(name, [name]) for name in selected]


def is_up_to_date(item: str) -> bool:
    """True when `dvc status` reports nothing changed for this item (deps, params, outs)."""
    status = _dvc("status", "--json", item)
    if status.returncode != 0:
        raise StageFailed(f"dvc status {item}: {_one_line(status.stderr + status.stdout)}")
    return not json.loads(status.stdout or "{}").get(item)


def stream_lines(stream: Any) -> Iterator[str]:
    """Non-empty lines of a byte stream, ended by \n or \r, as soon as each is complete."""
    pending = b""
    while chunk := stream.read1(4096):
        parts = re.split(rb"[\r\n]", pending + chunk)
        pending = parts.pop()
        yield from (part.decode("utf-8", "replace") for part in parts if part.strip())
    if pending.strip():
        yield pending.decode("utf-8", "replace")


def _run_streamed(item: str, command: list[str] | str, log: Callable[[str], None], cwd: str | None = None) -> None:
    """Run a command, logging each output line live; a failure names the item and its last error line."""
    tail: deque[str] = deque(maxlen=20)
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=stage_env(),
        cwd=cwd,
        shell=isinstance(command, str),
    ) as process:
        assert process.stdout is not None
        for line in stream_lines(process.stdout):
            log(line)
            tail.append(line.strip())
        code = process.wait()
    if code != 0:
        own = [line for line in tail if not DVC_NOISE.match(line)]
        reason = (own or list(tail) or [""])[-1]
        raise StageFailed(f"stage {item!r} failed with exit code {code}" + (f": {reason}" if reason else ""))


def repro_item(item: str, log: Callable[[str], None], force: bool = False) -> None:
    """`dvc repro --single-item <item>` (holds DVC's lock for the whole run)."""
    command = [dvc_executable(), "repro", "--single-item", item] + (["--force"] if force else [])
    log("running " + " ".join(command))
    with DVC_LOCK:
        _run_streamed(item, command, log)


def run_item_command(item: str, log: Callable[[str], None]) -> None:
    """Run an item's own command outside DVC, as `dvc repro` would (shell, wdir, outs cleared)."""
    from dvc.repo import Repo

    with DVC_LOCK, Repo(os.getcwd()) as repo:
        (stage,) = repo.stage.collect(item)
        command, wdir = stage.cmd, stage.wdir
        cleared = [Path(out.fs_path) for out in stage.outs if not out.persist]
    for path in cleared:  # dvc repro removes non-persistent outputs before running the command
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    log(f"running {command!r} (outside dvc repro; committed after)")
    _run_streamed(item, command, log, cwd=wdir)


def commit_item(item: str) -> None:
    """Record an item that ran outside `dvc repro` in dvc.lock and the cache."""
    committed = _dvc("commit", "--force", item)
    if committed.returncode != 0:
        raise StageFailed(f"dvc commit {item}: {_one_line(committed.stderr + committed.stdout)}")


def default_remote() -> str | None:
    """Name of the default DVC remote (`core.remote`), or None when there is none."""
    found = _dvc("config", "core.remote")
    name = found.stdout.strip() if found.returncode == 0 else ""
    return name or None


def push() -> str:
    """`dvc push` to the default remote; returns DVC's summary line."""
    pushed = _dvc("push")
    if pushed.returncode != 0:
        raise StageFailed(f"dvc push: {_one_line(pushed.stderr + pushed.stdout)}")
    return _one_line(pushed.stdout) or "pushed"


def check_prefect_api(url: str | None, timeout_s: float = 3.0) -> None:
    """Fail fast with one line when a configured Prefect API does not answer its health check."""
    if not url:
        return
    reason = unreachable_reason(url, timeout_s)
    if reason is not None:
        raise ServerUnreachable(
            f"Prefect API {url} is unreachable ({reason}); start `prefect server start` or unset "
            "PREFECT_API_URL to run on an ephemeral server"
        )


# ---- items on a work pool's workers --------------------------------------------------------------

WORKSPACE_ENV = "SLCA_WORKSPACE"


def enter_workspace(**_: Any) -> dict[str, str]:
    """Prefect pull step of the `items` deployment: work in this worker's checkout (`$SLCA_WORKSPACE`).

    Each worker has its own checkout of the same commit; the DVC remote and the MLflow server are
    what the workers share.
    """
    folder = os.environ.get(WORKSPACE_ENV, "")
    if not folder:
        raise StageFailed(
            f"{WORKSPACE_ENV} is not set: start the worker as `{WORKSPACE_ENV}=/path/to/checkout "
            "prefect worker start --pool slca-items`"
        )
    path = Path(folder).expanduser().resolve()
    if not (path / "dvc.yaml").is_file():
        raise StageFailed(f"{WORKSPACE_ENV}={folder} has no dvc.yaml: point it at a checkout of the project")
    os.chdir(path)
    return {"directory": str(path)}


def git_head(folder: Path | str = ".") -> str | None:
    """The checkout's commit (None outside git or before the first commit)."""
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def run_item_in_workspace(
    item: str,
    lock_text: str,
    params_text: str,
    log: Callable[[str], None],
    force: bool = False,
    head: str | None = None,
) -> dict[str, Any]:
    """Worker side: run one item in this checkout with the flow's dvc.lock and params; returns its lock entry."""
    import yaml

    own = git_head()
    if head and own and own != head:
        raise StageFailed(
            f"stage {item!r}: this worker's checkout is at {own[:12]}, the flow's at {head[:12]}; "
            "check out the same commit"
        )
    write_atomic(Path("params.yaml"), params_text)
    if lock_text:
        write_atomic(Path("dvc.lock"), lock_text)
    pulled = _dvc("pull", "--with-deps", "--allow-missing", item)
    if pulled.returncode != 0:
        raise StageFailed(f"stage {item!r}: dvc pull of its inputs failed: {_one_line(pulled.stderr + pulled.stdout)}")
    repro_item(item, log, force=force)
    pushed = _dvc("push", item)
    if pushed.returncode != 0:
        raise StageFailed(f"stage {item!r}: dvc push of its outputs failed: {_one_line(pushed.stderr + pushed.stdout)}")
    stages = (yaml.safe_load(Path("dvc.lock").read_text(encoding="utf-8")) or {}).get("stages") or {}
    if item not in stages:
        raise StageFailed(f"stage {item!r}: ran, but dvc.lock has no entry for it")
    return stages[item]


def adopt_item(item: str, entry: dict[str, Any]) -> None:
    """Flow side: take an item a worker ran — its lock entry, its outputs from the remote — and commit it."""
    import yaml

    with DVC_LOCK:
        path = Path("dvc.lock")
        lock = (yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None) or {}
        lock.setdefault("schema", "2.0")
        lock.setdefault("stages", {})[item] = entry
        write_atomic(path, yaml.safe_dump(lock, sort_keys=False))
    pulled = _dvc("pull", item)
    if pulled.returncode != 0:
        raise StageFailed(
            f"stage {item!r}: dvc pull of the worker's outputs failed: {_one_line(pulled.stderr + pulled.stdout)}"
        )
    commit_item(item)


def check_shared_tracking(uri: str) -> None:
    """Items on other machines need a tracking server they can all reach, not a local file store."""
    if not uri.startswith(("http://", "https://", "databricks")):
        raise StageFailed(
            f"pipeline.item_deployment needs an MLflow server the workers share; the tracking URI "
            f"is {uri} (set MLFLOW_TRACKING_URI or project.tracking_uri to the server)"
        )

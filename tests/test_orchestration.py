"""The Prefect flow against a real MLflow server and a real Prefect server, on a tiny pipeline.

One session starts `mlflow server` (SQLite, served artifacts) and `prefect server start` on free
loopback ports; a copy of the repo's pipeline files runs the flow end to end with tiny params
(`python flows/pipeline.py`, as `make run` does). Everything is asserted through the servers' APIs:
task runs, MLflow runs and artifacts fetched back through the server, the markdown artifact, the
deployment commands of docs/orchestration.md run by a process worker, matrix fan-out, skip/resume, the DVC
remote, and one-line failures on closed ports.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import mlflow
import pytest
import yaml

from slca.config import dump_params, parse_params
from tests.conftest import REPO_ROOT, json_written, wait_for_file
from tests.real_servers import Servers, free_port, start, stop_group

PIPELINE_FILES = ["dvc.yaml", "prefect.yaml", ".dvcignore", ".dvc/config", "flows", "src", "vendor/bfcl", "adapters"]
TINY = {
    "data": {"n_train": 60, "n_val": 40, "n_test": 20},
    "calibration": {"n_calls": 20, "perturbations_per_call": 1},
    "audit": {"per_kind": 1, "min_oracle_success": 0.5},
    "policy": {
        "tiny": {
            "hidden_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "intermediate_size": 64,
            "vocab_size": 600,
            "max_position_embeddings": 4096,
            "tokenizer_tasks": 40,
        }
    },
    "sft": {"max_steps": 3, "n_examples": 10, "max_length": 4096, "threads": 1},
    "train": {
        "max_steps": 2,
        "num_generations": 2,
        "prompts_per_step": 1,
        "max_completion_length": 12,
        "max_tool_turns": 1,
        "checkpoint_every": 1,
        "sample_every": 1,
        "sample_rollouts": 2,
    },
    "eval": {"n_test": 2, "bfcl": {"categories": ["simple_python"], "limit": 1}, "tau2": {"enabled": False}},
    "pipeline": {"max_parallel_items": 1, "push": True},
}
ITEMS = [
    "synthesize",
    "calibrate",
    "reward-audit",
    "base",
    "sft",
    "train@slca-0",
    "train@grpo-0",
    "evaluate@slca-0",
    "evaluate@grpo-0",
    "evaluate-sft",
    "compare",
]
TRAIN_OUTS = ["models/slca-s0", "models/grpo-s0"]

# ---- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")  # stopped after this module's tests: idle, they would still poll through the rest
def servers(tmp_path_factory):
    with Servers(tmp_path_factory.mktemp("servers")).up() as running:
        yield running


def copy_pipeline(target: Path, params: dict[str, Any]) -> Path:
    """The repo's pipeline files (as git tracks them) in a fresh git work tree, with these params."""
    tracked = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *PIPELINE_FILES],
            cwd=REPO_ROOT,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, tracked):
        if (REPO_ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, target / name)
    (target / "params.yaml").write_text(dump_params(parse_params(params)))
    # a clone carries the frozen stages' lock entries (their committed outputs' hashes), not the rest
    stages = yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text())["stages"]
    lock = yaml.safe_load((REPO_ROOT / "dvc.lock").read_text())
    frozen = {name: entry for name, entry in lock["stages"].items() if stages.get(name, {}).get("frozen")}
    (target / "dvc.lock").write_text(yaml.safe_dump({"schema": lock["schema"], "stages": frozen}, sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=target, check=True)
    return target


class FlowRun:
    def __init__(self, done: subprocess.CompletedProcess[str], seconds: float) -> None:
        self.returncode, self.stdout, self.stderr, self.seconds = done.returncode, done.stdout, done.stderr, seconds
        output = done.stdout + done.stderr
        self.name = re.search(r"Beginning flow run '([^']+)'", output).group(1)
        parent = re.search(r"MLflow parent run (\w+)", output)
        self.parent_run_id = parent.group(1) if parent else None
        summary = re.search(r"stages run: (.*); skipped", output)
        self.ran = [] if summary is None or summary.group(1) == "none" else summary.group(1).split(", ")


def run_flow(project: Path, env: dict[str, str], *args: str, timeout: float = 900) -> FlowRun:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "flows/pipeline.py", *args],
        cwd=project,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    return FlowRun(done, time.monotonic() - started)


IMPORT_AUDIT = REPO_ROOT / "tests" / "scripts" / "import_audit"


def audited(env: dict[str, str], record: Path) -> dict[str, str]:
    """`env` with the import audit on: each stage command appends the slca files it used to `record`."""
    return {**env, "PYTHONPATH": str(IMPORT_AUDIT), "SLCA_IMPORT_AUDIT": str(record)}


@pytest.fixture(scope="module")
def pipeline(servers, tmp_path_factory):
    """The tiny pipeline run once by the flow against both servers (the default remote is pushed to),
    with the import audit on (`imports.jsonl` beside the project)."""
    project = copy_pipeline(tmp_path_factory.mktemp("orchestration") / "project", TINY)
    first = run_flow(project, audited(servers.env, project.parent / "imports.jsonl"))
    assert first.returncode == 0, first.stderr[-3000:]
    return project, first


class PrefectApi:
    def __init__(self, url: str) -> None:
        self.client = httpx.Client(base_url=url.rstrip("/") + "/", timeout=30)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = self.client.post(path, json=body)
        response.raise_for_status()
        return response.json()

    def flow_run(self, name: str) -> dict[str, Any]:
        (found,) = self.post("flow_runs/filter", {"flow_runs": {"name": {"any_": [name]}}})
        return found

    def task_runs(self, flow_run_id: str) -> list[dict[str, Any]]:
        return self.post("task_runs/filter", {"flow_runs": {"id": {"any_": [flow_run_id]}}})


@pytest.fixture(scope="module")
def prefect_api(servers):
    return PrefectApi(servers.prefect_api)


# ---- 1. real servers, end to end -----------------------------------------------------------------


def test_flow_run_completes_with_one_task_run_per_stage_item(pipeline, prefect_api):
    _, first = pipeline
    assert first.ran == ITEMS
    flow_run = prefect_api.flow_run(first.name)
    assert flow_run["state"]["type"] == "COMPLETED"
    tasks = prefect_api.task_runs(flow_run["id"])
    assert sorted(task["name"] for task in tasks) == sorted(ITEMS)
    assert {task["state"]["type"] for task in tasks} == {"COMPLETED"}


def test_mlflow_parent_run_nests_every_stage_with_params_metrics_and_artifacts(pipeline, servers, tmp_path):
    project, first = pipeline
    client = mlflow.MlflowClient(servers.mlflow_uri)
    parent = client.get_run(first.parent_run_id)
    assert parent.info.artifact_uri.startswith("mlflow-artifacts:")  # artifacts go through the server
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{first.parent_run_id}'"
    )
    stages = sorted(run.data.tags["slca.stage"] for run in children)
    assert stages == sorted(
        [
            "synthesize",
            "calibrate",
            "reward_audit",
            "base",
            "sft",
            "train",
            "train",
            "evaluate",
            "evaluate",
            "evaluate",
            "compare",
        ]
    )
    by_stage = {(run.data.tags["slca.stage"], run.data.params.get("estimator")): run for run in children}
    assert by_stage[("sft", None)].data.params["sft.max_steps"] == "3"
    assert by_stage[("synthesize", None)].data.params["n_train"] == "60"
    train = by_stage[("train", "slca")]
    assert train.data.params["train.max_steps"] == "2" and train.data.metrics
    assert by_stage[("evaluate", "grpo")].data.metrics

    sample = mlflow.artifacts.download_artifacts(
        run_id=train.info.run_id,
        artifact_path="samples/step_000001.json",
        tracking_uri=servers.mlflow_uri,
        dst_path=str(tmp_path / "s"),
    )
    assert Path(sample).read_bytes() == (project / "models/slca-s0/samples/step_000001.json").read_bytes()
    json.loads(Path(sample).read_text())
    table = (project / "reports/comparison.md").read_bytes()
    for run_id in (first.parent_run_id, by_stage[("compare", None)].info.run_id):
        fetched = mlflow.artifacts.download_artifacts(
            run_id=run_id,
            artifact_path="comparison/comparison.md",
            tracking_uri=servers.mlflow_uri,
            dst_path=str(tmp_path / run_id),
        )
        assert Path(fetched).read_bytes() == table


def test_comparison_table_is_a_markdown_artifact_of_the_flow_run(pipeline, prefect_api):
    project, first = pipeline
    flow_run = prefect_api.flow_run(first.name)
    artifacts = prefect_api.post("artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [flow_run["id"]]}}})
    (table,) = [artifact for artifact in artifacts if artifact["key"] == "slca-comparison"]
    assert table["type"] == "markdown"
    assert table["data"] == (project / "reports/comparison.md").read_text(encoding="utf-8")


# ---- 4. skip and resume --------------------------------------------------------------------------


def test_a_rerun_with_nothing_changed_skips_every_stage_within_a_minute(pipeline, servers, prefect_api):
    project, _ = pipeline
    lock = (project / "dvc.lock").read_bytes()
    again = run_flow(project, servers.env)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.ran == [] and f"skipped (up to date): {', '.join(ITEMS)}" in again.stdout + again.stderr
    assert again.seconds < 60, f"a no-op rerun took {again.seconds:.0f} s"
    assert (project / "dvc.lock").read_bytes() == lock
    assert prefect_api.flow_run(again.name)["state"]["type"] == "COMPLETED"


def test_dvc_repro_writes_the_same_lock_as_the_flow(pipeline, servers, tmp_path):
    # `make run` (the flow) and a plain `dvc repro` on a fresh copy: outputs are bytes fixed by params and
    # seed (timings and MLflow run ids live in .runinfo/, outside them), so every hash agrees.
    project, _ = pipeline
    plain = copy_pipeline(tmp_path / "plain", TINY)
    done = subprocess.run(
        [str(REPO_ROOT / ".venv/bin/dvc"), "repro"],
        cwd=plain,
        env=servers.env,
        text=True,
        capture_output=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert lock_hashes(plain) == lock_hashes(project), differing(lock_hashes(plain), lock_hashes(project))
    assert json.loads((plain / "models/.runinfo/slca-s0.json").read_text())["mlflow_run_id"]
    assert "seconds" in json.loads((plain / "reports/eval/.runinfo/slca-s0.json").read_text())


def test_every_stage_lists_the_slca_code_it_ran_among_its_deps(pipeline, servers, tmp_path):
    # What each stage command of the flow's run imported or opened from the slca package must lie in one
    # of its dvc.yaml deps, or editing it would leave the stage "up to date". Excluded: what importing the
    # command line alone loads (its wiring, the params model), and where a run is logged (tracking, run facts).
    project, _ = pipeline
    wiring = tmp_path / "cli.jsonl"
    subprocess.run(
        [sys.executable, "-c", "import slca.cli"], env={**audited(servers.env, wiring), "DVC_STAGE": "cli"}, check=True
    )
    (cli,) = [json.loads(line)["files"] for line in wiring.read_text().splitlines()]
    cli += ["src/slca/tracking.py", "src/slca/runinfo.py"]
    used = [json.loads(line) for line in (project.parent / "imports.jsonl").read_text().splitlines()]
    assert sorted(record["stage"] for record in used) == sorted(ITEMS)
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    uncovered = {}
    for record in used:
        deps = [dep.rstrip("/") for dep in stages[record["stage"].split("@")[0]]["deps"]]
        missing = [
            path
            for path in record["files"]
            if path not in cli and not any(path == dep or path.startswith(dep + "/") for dep in deps)
        ]
        if missing:
            uncovered[record["stage"]] = missing
    assert not uncovered, uncovered


STAGE_SCRIPT = textwrap.dedent("""
    import sys, pathlib
    from slca.tracking import stage_run
    name, out = sys.argv[1], pathlib.Path(sys.argv[2])
    if pathlib.Path(f"FAIL_{name}").exists():
        sys.exit(f"{name}: the input it needs is broken")
    with stage_run(name):
        pass
    out.write_text(name)
    """)


def test_a_failing_stage_fails_the_flow_in_one_line_and_the_rerun_resumes_there(servers, prefect_api, tmp_path):
    (tmp_path / "stage.py").write_text(STAGE_SCRIPT)
    (tmp_path / "params.yaml").write_text(dump_params(parse_params({"pipeline": {"push": False}})))
    chain = {"first": ("stage.py", "a.txt"), "second": ("a.txt", "b.txt"), "third": ("b.txt", "c.txt")}
    (tmp_path / "dvc.yaml").write_text(
        yaml.safe_dump(
            {
                "stages": {
                    name: {"cmd": f"{sys.executable} stage.py {name} {out}", "deps": [dep], "outs": [out]}
                    for name, (dep, out) in chain.items()
                }
            },
            sort_keys=False,
        )
    )
    (tmp_path / "flows").mkdir()
    shutil.copy2(REPO_ROOT / "flows/pipeline.py", tmp_path / "flows/pipeline.py")
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([str(REPO_ROOT / ".venv/bin/dvc"), "init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "FAIL_second").touch()

    failed = run_flow(tmp_path, servers.env)
    assert failed.returncode == 2
    assert re.fullmatch(
        r"error: stage 'second' failed with exit code \d+: second: the input it needs is broken",
        failed.stderr.strip().splitlines()[-1],
    )
    assert prefect_api.flow_run(failed.name)["state"]["type"] == "FAILED"
    assert (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()

    (tmp_path / "FAIL_second").unlink()
    resumed = run_flow(tmp_path, servers.env)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert resumed.ran == ["second", "third"]
    assert (tmp_path / "c.txt").read_text() == "third"


def test_the_flow_killed_mid_train_resumes_on_rerun_to_the_uninterrupted_lock(pipeline, servers, tmp_path):
    # SIGKILL to the flow's whole process group (the flow, `dvc repro`, `slca train`) once the train item
    # has saved its first checkpoint; the rerun resumes from it and every hash in dvc.lock is the
    # uninterrupted run's, so the evaluation downstream is found up to date.
    project, _ = pipeline
    killed = tmp_path / "killed"
    shutil.copytree(project, killed, symlinks=True)
    shutil.rmtree(killed / "models/slca-s0")
    checkpoint = killed / "models/slca-s0/checkpoints/checkpoint-1/trainer_state.json"
    with open(tmp_path / "killed-flow.log", "wb") as log:
        flow = subprocess.Popen(
            [sys.executable, "flows/pipeline.py"],
            cwd=killed,
            env=servers.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            reached = wait_for_file(checkpoint, flow, 600, json_written)
        finally:
            os.killpg(flow.pid, signal.SIGKILL)
            stop_group(flow)  # returns once nothing of the group is left
    assert reached, (tmp_path / "killed-flow.log").read_text()[-3000:]
    assert not (killed / "models/slca-s0/metrics.json").exists(), "the train item ended before the kill"

    rerun = run_flow(killed, servers.env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert rerun.ran == ["train@slca-0"]  # evaluate@slca-0: same model bytes, so up to date
    assert json.loads((killed / "models/.runinfo/slca-s0.json").read_text())["resumed_from"] == "checkpoint-1"
    assert lock_hashes(killed) == lock_hashes(project), differing(lock_hashes(killed), lock_hashes(project))


# ---- 6. DVC remote -------------------------------------------------------------------------------


def test_pushed_outputs_pull_back_byte_identical(pipeline):
    project, first = pipeline
    assert "dvc push to local:" in first.stdout + first.stderr
    remote = project.parent / "slca-dvc-remote"
    assert (remote / "files" / "md5").is_dir()  # ../../slca-dvc-remote from .dvc/: beside the work tree
    clone = project.with_name("pulled")
    shutil.copytree(project, clone, symlinks=True)
    cached = ["data/train.jsonl", "data/val.jsonl", "data/test.jsonl", "models"]

    def digest(root: Path) -> dict[str, str]:
        files = [
            p
            for name in cached
            for p in ([root / name] if (root / name).is_file() else sorted((root / name).rglob("*")))
            # DVC's git bookkeeping and the run facts beside the outputs (.runinfo/) are not outputs
            if p.is_file() and p.name != ".gitignore" and ".runinfo" not in p.parts
        ]
        return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}

    before = digest(clone)
    assert any(name.startswith("models/sft/") for name in before) and "data/train.jsonl" in before
    shutil.rmtree(clone / ".dvc/cache")
    for name in cached:
        shutil.rmtree(clone / name) if (clone / name).is_dir() else (clone / name).unlink()
    subprocess.run([str(REPO_ROOT / ".venv/bin/dvc"), "pull", "-q"], cwd=clone, check=True)
    assert digest(clone) == before


# ---- 2. a deployment that runs (docs/orchestration.md's commands) --------------------------------


def documented_scheduling_commands() -> str:
    """The first bash block after "### Scheduled runs" in docs/orchestration.md."""
    page = (REPO_ROOT / "docs" / "orchestration.md").read_text(encoding="utf-8")
    section = page[page.index("### Scheduled runs") :]
    return section[section.index("```bash") + len("```bash") : section.index("```", section.index("```bash") + 7)]


def test_documented_commands_deploy_nightly_and_a_process_worker_completes_a_triggered_run(
    pipeline, servers, prefect_api
):
    project, _ = pipeline
    deployed = project.with_name("deployed")
    shutil.copytree(project, deployed, symlinks=True)
    commands = documented_scheduling_commands()
    lines = [line for line in commands.splitlines() if "prefect server start" not in line]
    script = "set -euo pipefail\n" + "\n".join(lines).replace("http://127.0.0.1:4200/api", servers.prefect_api)
    assert "prefect worker start --pool local &" in script and "--watch" in script
    log = deployed / "documented-commands.log"
    with ExitStack() as stack:
        shell = start(["bash", "-c", script], servers.env, log, stack, cwd=deployed)
        try:
            code = shell.wait(timeout=420)
        finally:
            stop_group(shell)  # the worker it started in the background goes with it
    assert code == 0, log.read_text()[-3000:]

    deployment = prefect_api.client.get("deployments/name/slca-pipeline/nightly").json()
    (schedule,) = deployment["schedules"]
    assert schedule["schedule"]["cron"] == "0 3 * * *" and schedule["schedule"]["timezone"] == "UTC"
    assert deployment["work_pool_name"] == "local"
    runs = prefect_api.post(
        "flow_runs/filter",
        {
            "deployments": {"id": {"any_": [deployment["id"]]}},
            "flow_runs": {"state": {"type": {"any_": ["COMPLETED"]}}},
        },
    )
    (triggered,) = runs
    assert triggered["parameters"]["stages"] == ["synthesize"] and triggered["parameters"]["force"] is True
    assert [task["name"] for task in prefect_api.task_runs(triggered["id"])] == ["synthesize"]
    assert (deployed / "data/train.jsonl").read_bytes() == (project / "data/train.jsonl").read_bytes()


# ---- 3. matrix fan-out ---------------------------------------------------------------------------


def lock_hashes(project: Path) -> dict[str, Any]:
    """dvc.lock as data: per stage item, its command, params and the hash of every dep and out."""
    return yaml.safe_load((project / "dvc.lock").read_text())["stages"]


def differing(first: dict[str, Any], second: dict[str, Any]) -> list[str]:
    """`stage: path` of every dep or out whose hash differs between two locks (for a readable failure)."""
    out = []
    for name in sorted(set(first) | set(second)):
        entries = [
            {d["path"]: d.get("md5") for kind in ("deps", "outs") for d in lock.get(name, {}).get(kind, [])}
            for lock in (first, second)
        ]
        out += [
            f"{name}: {path}"
            for path in sorted(set(entries[0]) | set(entries[1]))
            if entries[0].get(path) != entries[1].get(path)
        ]
        if first.get(name, {}).get("params") != second.get(name, {}).get("params"):
            out.append(f"{name}: params")
    return out


def dvc(project: Path, *args: str) -> str:
    return subprocess.run(
        [str(REPO_ROOT / ".venv/bin/dvc"), *args], cwd=project, text=True, capture_output=True, check=True
    ).stdout


def head_to_redo(project: Path, head: Path, params: dict[str, Any], items: list[str]) -> Path:
    """A copy of the finished run's checkout with these params and these items to redo: their outputs and
    lock entries gone (with the entry left, a worker would pull the old outputs instead of running)."""
    shutil.copytree(project, head, symlinks=True)
    (head / "params.yaml").write_text(dump_params(parse_params(params)))
    lock = yaml.safe_load((head / "dvc.lock").read_text())
    for item in items:
        for out in lock["stages"].pop(item)["outs"]:
            path = head / out["path"]
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    (head / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    return head


def deploy_items(checkout: Path, env: dict[str, str]) -> None:
    """The `slca-items` process pool and the `items` deployment of prefect.yaml (both idempotent)."""
    deploy = "prefect work-pool create slca-items --type process --overwrite && prefect --no-prompt deploy --name items"
    done = subprocess.run(
        ["bash", "-c", deploy], cwd=checkout, env=env, text=True, capture_output=True, timeout=180, check=False
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def test_matrix_items_spread_over_a_work_pools_workers_each_in_its_own_checkout(
    pipeline, servers, prefect_api, tmp_path
):
    project, _ = pipeline
    params = {**TINY, "pipeline": {"max_parallel_items": 2, "push": False, "item_deployment": "slca-item/items"}}
    matrix = ["train@slca-0", "train@grpo-0", "evaluate@slca-0", "evaluate@grpo-0"]
    head = head_to_redo(project, tmp_path / "head", params, matrix)  # the stages before run in the flow's checkout
    workers = [copy_pipeline(tmp_path / f"worker{n}", params) for n in (1, 2)]
    for folder in (head, *workers):  # one remote that every checkout shares
        dvc(folder, "remote", "add", "--local", "-d", "-f", "shared", str(tmp_path / "shared-remote"))
    deploy_items(head, servers.env)
    with ExitStack() as stack:
        for folder in workers:
            start(
                ["prefect", "worker", "start", "--pool", "slca-items", "--limit", "1"],
                {**servers.env, "SLCA_WORKSPACE": str(folder)},
                folder / "worker.log",
                stack,
                cwd=folder,
            )
        run = run_flow(head, servers.env)
    assert run.returncode == 0, run.stderr[-3000:] + "".join((w / "worker.log").read_text()[-1500:] for w in workers)
    assert run.ran == matrix  # compare finds the same reports and is up to date

    deployment = prefect_api.client.get("deployments/name/slca-item/items").json()
    item_runs = prefect_api.post("flow_runs/filter", {"deployments": {"id": {"any_": [deployment["id"]]}}})
    assert sorted(r["parameters"]["item"] for r in item_runs) == sorted(matrix)
    assert {r["state"]["type"] for r in item_runs} == {"COMPLETED"}
    # each item's lock entry is an artifact of its flow run, naming the checkout it ran in: the two
    # train items (sent together, limit 1 per worker) ran one on each worker
    artifacts = prefect_api.post("artifacts/filter", {"flow_runs": {"id": {"any_": [r["id"] for r in item_runs]}}})
    where = {a["flow_run_id"]: a["description"].rsplit(" ", 1)[-1] for a in artifacts}
    placed = {r["parameters"]["item"]: where[r["id"]] for r in item_runs}
    assert {placed["train@slca-0"], placed["train@grpo-0"]} == {str(folder) for folder in workers}, placed

    # the flow's checkout holds the outputs, committed: the lock is the sequential run's
    assert dvc(head, "status", "--json").strip() == "{}"
    assert lock_hashes(head) == lock_hashes(project), differing(lock_hashes(head), lock_hashes(project))
    client = mlflow.MlflowClient(servers.mlflow_uri)
    children = client.search_runs(
        [e.experiment_id for e in client.search_experiments()], f"tags.mlflow.parentRunId = '{run.parent_run_id}'"
    )
    assert sorted(r.data.params.get("estimator") for r in children if r.data.tags.get("slca.stage") == "train") == [
        "grpo",
        "slca",
    ]  # the workers' runs nest under the flow's parent run


def kill_machine(workspace: Path) -> int:
    """SIGKILL every process of one worker's "machine": the worker, the item's flow run, dvc, the stage."""
    import psutil

    victims = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get("SLCA_WORKSPACE") == str(workspace):
                victims.append(process)
    for process in victims:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(victims, timeout=30)
    return len(victims)


def test_a_worker_killed_mid_item_is_declared_lost_and_the_item_retried_on_another(
    pipeline, servers, prefect_api, tmp_path
):
    project, _ = pipeline
    params = {
        **TINY,
        "pipeline": {
            "max_parallel_items": 1,
            "push": False,
            "item_deployment": "slca-item/items",
            "item_heartbeat_s": 1,
            "item_lost_after_s": 20,
        },
    }
    head = head_to_redo(project, tmp_path / "head", params, ["train@slca-0"])
    doomed, spare = (copy_pipeline(tmp_path / name, params) for name in ("doomed", "spare"))
    for folder in (head, doomed, spare):
        dvc(folder, "remote", "add", "--local", "-d", "-f", "shared", str(tmp_path / "shared-remote"))
    deploy_items(head, servers.env)
    worker = ["prefect", "worker", "start", "--pool", "slca-items", "--limit", "1"]
    with ExitStack() as stack:
        start(worker, {**servers.env, "SLCA_WORKSPACE": str(doomed)}, tmp_path / "doomed.log", stack, cwd=doomed)
        flow = start(
            [sys.executable, "flows/pipeline.py", "--stages", "train"],
            servers.env,
            tmp_path / "flow.log",
            stack,
            cwd=head,
        )
        mid_item = doomed / "models/slca-s0/checkpoints/checkpoint-1/trainer_state.json"
        assert wait_for_file(mid_item, flow, 600), (tmp_path / "flow.log").read_text()[-3000:]
        assert kill_machine(doomed) >= 3  # worker, flow run, dvc repro, slca train
        lost_at = time.monotonic()
        start(worker, {**servers.env, "SLCA_WORKSPACE": str(spare)}, tmp_path / "spare.log", stack, cwd=spare)
        code = flow.wait(timeout=600)
        log = (tmp_path / "flow.log").read_text()
    assert code == 0, log[-3000:]
    assert not (doomed / "models/slca-s0/metrics.json").exists()
    (lost,) = [line for line in log.splitlines() if "lost on a worker" in line]
    said = re.search(
        (
            r"stage 'train@slca-0' lost on a worker \(flow run [\w-]+\): its worker sent no heartbeat "
            r"for (\d+) s; marked Crashed, 1 MLflow run\(s\) KILLED"
        ),
        lost,
    )
    assert said and 20 <= int(said.group(1)) < 60, lost
    assert time.monotonic() - lost_at < 400

    deployment = prefect_api.client.get("deployments/name/slca-item/items").json()
    item_runs = prefect_api.post(
        "flow_runs/filter", {"deployments": {"id": {"any_": [deployment["id"]]}}, "sort": "START_TIME_ASC"}
    )
    mine = [r for r in item_runs if r["parameters"].get("heartbeat_s") == 1]
    assert [(r["parameters"]["item"], r["state"]["type"]) for r in mine] == [
        ("train@slca-0", "CRASHED"),
        ("train@slca-0", "COMPLETED"),
    ]
    client = mlflow.MlflowClient(servers.mlflow_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    tagged = {r["id"]: client.search_runs(experiments, f"tags.`slca.item_flow_run` = '{r['id']}'") for r in mine}
    assert [[run.info.status for run in tagged[r["id"]]] for r in mine] == [["KILLED"], ["FINISHED"]]
    assert dvc(head, "status", "--json").strip() == "{}"
    assert lock_hashes(head) == lock_hashes(project), differing(lock_hashes(head), lock_hashes(project))


def test_matrix_items_fan_out_side_by_side_and_commit_the_sequential_lock(pipeline, servers, prefect_api):
    # Last to use the project: it retrains there, so paths recorded in the outputs stay the same.
    fanned, _ = pipeline
    sequential = fanned.with_name("sequential")
    shutil.copytree(fanned, sequential, symlinks=True)
    params = yaml.safe_load((fanned / "params.yaml").read_text())
    params["pipeline"]["max_parallel_items"] = 2
    (fanned / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for out in TRAIN_OUTS:
        shutil.rmtree(fanned / out)

    run = run_flow(fanned, servers.env, "--stages", "train")
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.ran == ["train@slca-0", "train@grpo-0"]
    spans = {
        task["name"]: (datetime.fromisoformat(task["start_time"]), datetime.fromisoformat(task["end_time"]))
        for task in prefect_api.task_runs(prefect_api.flow_run(run.name)["id"])
    }
    first, second = spans["train@slca-0"], spans["train@grpo-0"]
    assert second[0] < first[1] and first[0] < second[1], "the two train items did not overlap"
    assert (
        subprocess.run(
            [str(REPO_ROOT / ".venv/bin/dvc"), "status", "--json", *spans],
            cwd=fanned,
            text=True,
            capture_output=True,
            check=True,
        ).stdout.strip()
        == "{}"
    )
    assert lock_hashes(fanned) == lock_hashes(sequential), differing(lock_hashes(fanned), lock_hashes(sequential))


# ---- 7. unreachable servers ----------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["PREFECT_API_URL", "MLFLOW_TRACKING_URI"])
def test_an_unreachable_server_fails_in_seconds_naming_its_url(variable, tmp_path):
    closed = f"http://127.0.0.1:{free_port()}" + ("/api" if variable == "PREFECT_API_URL" else "")
    env = {key: value for key, value in Servers(tmp_path).env.items() if key != "PREFECT_API_URL"}
    env.update({"MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", variable: closed})
    (tmp_path / "params.yaml").write_text(dump_params(parse_params({})))
    # A fresh process, as a user starts it; the clock starts once the imports are done.
    timed = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from pipeline import main; "
        "started = time.monotonic(); code = main([]); print(f'{time.monotonic() - started:.1f}'); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", timed, str(REPO_ROOT / "flows")],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert float(done.stdout.strip()) < 5
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and closed in line and "unreachable" in line


def test_stopping_a_server_ends_its_whole_process_group(tmp_path):
    with ExitStack() as stack:
        # a leader that ignores SIGTERM and a background child: both must be gone afterwards
        shell = start(
            ["bash", "-c", "trap '' TERM; sleep 300 & wait"], {"PATH": "/usr/bin:/bin"}, tmp_path / "group.log", stack
        )
        time.sleep(0.5)
        started = time.monotonic()
        stop_group(shell, grace_s=1.0)
        assert time.monotonic() - started < 5
    with pytest.raises(ProcessLookupError):
        os.killpg(shell.pid, 0)

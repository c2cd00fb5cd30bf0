"""Interrupted and changed train runs: the run dir's own state decides resume or a clean fresh start.

A fake trainer stands in for SLCA-GRPO (the real one is covered by test_train_stage.py): it
writes a checkpoint every 2 steps and a history line per step, and can be "killed" mid-run.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import mlflow
import pytest
from grpo_fixtures import small_raw

from slca.config import Params
from slca.runinfo import read_runinfo
from slca.train import train_stage


class Killed(Exception):
    """The fake trainer's stand-in for a SIGKILL."""


class FakeTrainer:
    """Records where it resumed from; steps write history lines and even steps a checkpoint."""

    def __init__(self, folder: Path, max_steps: int, kill_at: int | None) -> None:
        self.folder, self.max_steps, self.kill_at = folder, max_steps, kill_at
        self.state = SimpleNamespace(global_step=0)
        self.processing_class = SimpleNamespace(save_pretrained=self._save_tokenizer)
        self.resumed_from: str | None = None

    def train(self, resume_from_checkpoint: str | None = None) -> SimpleNamespace:
        self.resumed_from = resume_from_checkpoint
        start = int(resume_from_checkpoint.split("-")[-1]) if resume_from_checkpoint else 0
        for step in range(start + 1, self.max_steps + 1):
            with (self.folder / "metrics_history.jsonl").open("a") as handle:
                handle.write(json.dumps({"step": step, "reward": float(step)}) + "\n")
            if step % 2 == 0:
                checkpoint = self.folder / "checkpoints" / f"checkpoint-{step}"
                checkpoint.mkdir(parents=True, exist_ok=True)
                (checkpoint / "trainer_state.json").write_text("{}")
            if step == self.kill_at:
                raise Killed
            self.state.global_step = step
        return SimpleNamespace(metrics={"train_runtime": 0.1})

    def save_model(self, path: str) -> None:
        (Path(path) / "model.safetensors").write_text("new weights")

    def _save_tokenizer(self, path: str) -> None:
        (Path(path) / "tokenizer.json").write_text("{}")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "sft").mkdir()
    (tmp_path / "sft" / "model.safetensors").write_text("sft weights")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text('{"id": "t0"}\n')
    return tmp_path


class Trainers(list):
    """Every fake trainer built, in order; `kill_next` kills the next one at that step."""

    kill_next: int | None = None


@pytest.fixture
def trainers(monkeypatch) -> Trainers:
    built = Trainers()

    def build(params, estimator, seed, folder, callbacks, sample_sink):
        built.append(FakeTrainer(folder, params.train.max_steps, built.kill_next))
        return built[-1]

    monkeypatch.setattr(train_stage, "build_trainer", build)
    return built


def params_of(root: Path, *, lr: float = 1e-3, lora: bool = False) -> Params:
    raw = small_raw(root, max_steps=3, learning_rate=lr)
    raw["policy"]["lora"] = {"enabled": lora}
    raw["simulator"] = {"calibrated_knobs": None}
    return Params.model_validate(raw)


def killed_run(params: Params, trainers: Trainers) -> str:
    """Run until the fake kill at step 3 (checkpoint-2 on disk); the MLflow run is left RUNNING, as by SIGKILL."""
    trainers.kill_next = 3
    with pytest.raises(Killed):
        train_stage.run_train(params, "grpo", 0)
    trainers.kill_next = None
    run_id = read_runinfo(train_stage.run_dir(params, "grpo", 0))["mlflow_run_id"]
    mlflow.tracking.MlflowClient().update_run(run_id, status="RUNNING")
    return run_id


def test_a_killed_fresh_start_leaves_nothing_of_the_finished_run(root, trainers, mlflow_store):
    params = params_of(root)
    folder = train_stage.run_dir(params, "grpo", 0)
    folder.mkdir(parents=True)
    for name in (
        "metrics.json",
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "adapter_config.json",
        "adapter_model.safetensors",
    ):
        (folder / name).write_text("{}")  # a finished earlier run, LoRA on
    killed_run(params, trainers)
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoints", "metrics_history.jsonl", "run_identity.json"]


def test_a_killed_run_resumes_under_the_same_params(root, trainers, mlflow_store):
    params = params_of(root)
    killed = killed_run(params, trainers)
    summary = train_stage.run_train(params, "grpo", 0)
    folder = train_stage.run_dir(params, "grpo", 0)
    assert trainers[-1].resumed_from == str(folder / "checkpoints" / "checkpoint-2")
    assert summary["resumed_from"] == "checkpoint-2" and summary["global_step"] == 3
    assert [json.loads(line)["step"] for line in (folder / "metrics_history.jsonl").read_text().splitlines()] == [
        1,
        2,
        3,
    ]
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert run.info.run_id == killed and run.info.status == "FINISHED"


@pytest.mark.parametrize("change", ["train.learning_rate", "policy.lora.enabled", "sft_checkpoint.sha256"])
def test_a_killed_run_starts_fresh_under_changed_params(root, trainers, mlflow_store, capsys, change):
    killed = killed_run(params_of(root), trainers)
    if change == "sft_checkpoint.sha256":
        (root / "sft" / "model.safetensors").write_text("another sft")
    params = params_of(root, lr=5e-4 if change == "train.learning_rate" else 1e-3, lora=change == "policy.lora.enabled")
    summary = train_stage.run_train(params, "grpo", 0)
    assert trainers[-1].resumed_from is None and summary["resumed_from"] is None
    logged = [line for line in capsys.readouterr().err.splitlines() if "starting fresh" in line]
    assert len(logged) == 1 and change in logged[0] and "checkpoint-2" in logged[0]
    client = mlflow.tracking.MlflowClient()
    assert client.get_run(killed).info.status == "KILLED"
    new = client.get_run(read_runinfo(train_stage.run_dir(params, "grpo", 0))["mlflow_run_id"])
    assert new.info.run_id != killed and float(new.data.params["train.learning_rate"]) == params.train.learning_rate


def test_resume_follows_the_run_dir_not_the_tracking_store(root, trainers, mlflow_store, tmp_path, monkeypatch):
    params = params_of(root)
    killed_run(params, trainers)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'other.db'}")
    summary = train_stage.run_train(params, "grpo", 0)
    assert summary["resumed_from"] == "checkpoint-2" and summary["global_step"] == 3
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert run.info.status == "FINISHED" and float(run.data.params["train.learning_rate"]) == 1e-3


def test_a_resume_survives_a_torn_history_line(root, trainers, mlflow_store):
    params = params_of(root)
    killed_run(params, trainers)
    history = train_stage.run_dir(params, "grpo", 0) / "metrics_history.jsonl"
    with history.open("a") as handle:
        handle.write('{"step": 4, "rew')  # the disk filled up mid-line
    summary = train_stage.run_train(params, "grpo", 0)
    assert summary["resumed_from"] == "checkpoint-2"
    assert [json.loads(line)["step"] for line in history.read_text().splitlines()] == [1, 2, 3]


def test_trim_history_drops_only_a_torn_last_line(tmp_path):
    history = tmp_path / "metrics_history.jsonl"
    rows = "".join(json.dumps({"step": s}) + "\n" for s in (1, 2, 3))
    history.write_text(rows + '{"step": 4, "lo')
    train_stage.trim_history(history, 2)
    assert history.read_text().splitlines() == ['{"step": 1}', '{"step": 2}']
    history.write_text('{"step": 1}\n{"step": 2, "lo\n{"step": 3}\n')
    with pytest.raises(RuntimeError, match=rf"^{history}: line 2 is not JSON"):
        train_stage.trim_history(history, 3)

"""The `train` stage: every estimator trains and logs to MLflow; a SIGKILLed run resumes to the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mlflow
import pytest
import torch
import yaml
from grpo_fixtures import (
    ScriptedTurns,
    make_policy,
    small_params,
    small_raw,
    synthetic_tasks,
    write_tasks,
)
from safetensors.torch import load_file

from slca import dashboard_data, dashboard_groups
from slca.config import dump_params, load_params
from slca.runinfo import read_runinfo
from slca.train import START_CACHE_ENV, val_curve
from slca.train.grpo import SLCAGRPOTrainer
from slca.train.train_stage import run_train
from slca.train.val_curve import ValidationCurve, adapters_are_zero
from tests.conftest import json_written, wait_for_file

REPO = Path(__file__).resolve().parents[1]
LOGGED = [
    "reward",
    "rewards/r_tool/mean",
    "rewards/r_sum/mean",
    "rewards/penalty_rate",
    *[f"rewards/components/{c}" for c in ("fmt", "name", "key", "value", "parallel")],
    "credit/misattribution_rate",
    "credit/contamination",
    "credit/adv_tool_mean",
    "credit/adv_summary_mean",
    "loss",
    "kl",
    "rollout/tool_calls_per_rollout",
    "rollout/redundant_call_rate",
    "rollout/tokens_per_s",
    "system/resident_gb",
    "system/peak_resident_gb",
    "batch/padded_length",
    "batch/padded_tokens",
    "batch/loss_passes",
    "throughput/tokens_per_s",
    "rollout/success",
    "rollout/reward.single",
    "rollout/success.single",
    "rewards/success",
    "rewards/baselines/call_accuracy",
    "rewards/baselines/rltr",
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("train")
    tasks = synthetic_tasks(12)
    write_tasks(root, tasks)
    make_policy(root / "sft", tasks)
    return root


def _scripted(self, *args, **kwargs):
    if not hasattr(self, "_scripted_turns"):
        self._scripted_turns = ScriptedTurns(self)
    return self._scripted_turns(*args, **kwargs)


def _runs(estimator: str) -> list:
    return mlflow.search_runs(
        search_all_experiments=True, output_format="list", filter_string=f"tags.`slca.estimator` = '{estimator}'"
    )


def test_each_estimator_trains_and_logs_to_mlflow(workspace, mlflow_store, monkeypatch):
    monkeypatch.setattr(SLCAGRPOTrainer, "_generate_single_turn", _scripted)
    # a loss budget under one row: every step's loss runs in one pass a row (slca.loss_passes)
    params = small_params(workspace, max_steps=3, sample_every=2, num_generations=2, loss_pass_tokens=1)
    start_weights = load_file(str(workspace / "sft" / "model.safetensors"))
    mlflow.set_tracking_uri(mlflow_store)
    for estimator in ("slca", "grpo", "gdpo", "toolpo", "rltr"):
        summary = run_train(params, estimator, seed=1)
        folder = workspace / "models" / f"{estimator}-s1"
        assert summary["global_step"] == 3 and summary["resumed_from"] is None
        weights = load_file(str(folder / "model.safetensors"))
        moved = sum(float((weights[k] - start_weights[k]).abs().max()) for k in start_weights)
        assert moved > 0, f"{estimator}: weights did not change"
        assert (folder / "tokenizer.json").exists() and (folder / "metrics.json").exists()
        assert len((folder / "metrics_history.jsonl").read_text().splitlines()) == 3
        assert not (folder / "checkpoints").exists()  # removed once the run finished
        (run,) = _runs(estimator)
        assert run.info.status == "FINISHED" and run.info.run_name == f"train-{estimator}-s1"
        assert run.data.tags["slca.precision.cpu_bf16"] == "False"  # the tiny policy pins fp32
        assert run.data.tags["slca.precision.generation_dtype"] == "float32"
        client = mlflow.tracking.MlflowClient()
        for key in LOGGED:
            steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
            assert steps and max(steps) == 3, f"{estimator}: {key} logged at {steps}"
        resident, peak = (
            {m.step: m.value for m in client.get_metric_history(run.info.run_id, f"system/{k}")}
            for k in ("resident_gb", "peak_resident_gb")
        )
        length, tokens = (
            {m.step: m.value for m in client.get_metric_history(run.info.run_id, f"batch/{k}")}
            for k in ("padded_length", "padded_tokens")
        )
        assert all(length[step] > 0 and tokens[step] % length[step] == 0 for step in length), (length, tokens)
        passes = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "batch/loss_passes")}
        assert all(passes[step] == tokens[step] / length[step] for step in passes), (passes, tokens, length)
        # each step's high-water mark is at least what it held after its rollouts
        assert all(peak[step] >= resident[step] > 0 for step in resident), (
            resident,
            peak,
        )  # the step's high-water mark
        logged = client.get_run(run.info.run_id).data.metrics
        assert any(key.startswith("credit/segbias/tool_mean.") for key in logged), estimator
        samples = {a.path for a in client.list_artifacts(run.info.run_id, "samples")}
        assert samples == {"samples/step_000000.json", "samples/step_000002.json"}
        sample = json.loads((folder / "samples" / "step_000002.json").read_text())
        first = sample["rollouts"][0]
        lengths = {
            len(first[k])
            for k in (
                "completion_ids",
                "tokens",
                "response_mask",
                "tool_mask",
                "summary_mask",
                "advantages",
                "advantages_grpo",
            )
        }
        assert sample["estimator"] == estimator and len(lengths) == 1
    calls = client.get_metric_history(_runs("slca")[0].info.run_id, "rollout/tool_calls_per_rollout")
    assert max(m.value for m in calls) > 0
    # the dashboard lists every estimator's run and shows the gdpo run's token advantages like the others
    train_runs = dashboard_data.list_runs(mlflow_store, "train")
    assert {run.estimator for run in train_runs} == {"slca", "grpo", "gdpo", "toolpo", "rltr"}
    assert {run.estimator for run in dashboard_data.default_comparison(train_runs)} == {
        "slca",
        "grpo",
        "gdpo",
        "toolpo",
        "rltr",
    }
    (gdpo,) = [run for run in train_runs if run.estimator == "gdpo"]
    shown = dashboard_data.load_sample(mlflow_store, gdpo.run_id, 2)
    assert shown["estimator"] == "gdpo" and shown["rollouts"]
    html = dashboard_groups.group_html(dashboard_groups.sample_groups(shown, 2)[0], ["advantages"], 1.0, "gdpo")
    assert 'data-view="estimator"' in html


def test_resume_after_sigkill_continues_the_same_run(workspace, mlflow_store, tmp_path):
    raw = small_raw(workspace, max_steps=4, checkpoint_every=2, num_generations=2, max_completion_length=12)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(raw))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "MLFLOW_TRACKING_URI": mlflow_store}
    command = [
        sys.executable,
        "-m",
        "slca.train.train_stage",
        "--params",
        str(params_file),
        "--estimator",
        "grpo",
        "--seed",
        "3",
    ]
    folder = workspace / "models" / "grpo-s3"
    first = subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert wait_for_file(folder / "checkpoints" / "checkpoint-2" / "trainer_state.json", first, 90, json_written), (
            first.stderr.read().decode()[-2000:] if first.poll() is not None else "no checkpoint in time"
        )
    finally:
        first.kill()  # SIGKILL
        first.wait()
    assert first.returncode == -9 and not (folder / "metrics.json").exists()
    mlflow.set_tracking_uri(mlflow_store)
    (killed,) = _runs("grpo")
    assert killed.info.status == "RUNNING"
    done = subprocess.run(command, check=False, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((folder / "metrics.json").read_text())
    assert summary["global_step"] == 4 and "resumed_from" not in summary and "train_runtime_s" not in summary
    facts = read_runinfo(folder)  # what differs between runs lives beside the run dir
    assert facts["resumed_from"] == "checkpoint-2" and facts["mlflow_run_id"] == killed.info.run_id
    (run,) = _runs("grpo")
    assert run.info.run_id == killed.info.run_id and run.info.status == "FINISHED"
    history = mlflow.tracking.MlflowClient().get_metric_history(run.info.run_id, "loss")
    assert {m.step for m in history} == {1, 2, 3, 4}
    steps = [json.loads(line)["step"] for line in (folder / "metrics_history.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
    assert torch.load(folder / "training_args.bin", weights_only=False).max_steps == 4


def test_history_helpers(tmp_path):
    from slca.train.train_stage import latest_checkpoint, reward_curve, trim_history

    history = tmp_path / "metrics_history.jsonl"
    history.write_text("".join(json.dumps({"step": s, "reward": float(s)}) + "\n" for s in range(1, 7)))
    trim_history(history, 4)
    assert [json.loads(line)["step"] for line in history.read_text().splitlines()] == [1, 2, 3, 4]
    assert reward_curve(history, window=2) == {"reward_first": 1.5, "reward_last": 3.5}
    for step, complete in ((2, True), (4, True), (6, False)):  # checkpoint-6 was cut mid-write
        (tmp_path / "ck" / f"checkpoint-{step}").mkdir(parents=True)
        if complete:
            (tmp_path / "ck" / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    assert latest_checkpoint(tmp_path / "ck").name == "checkpoint-4"
    # killed while its trainer state was being written: the file exists but is cut short
    (tmp_path / "ck" / "checkpoint-6" / "trainer_state.json").write_text('{"global_step": 6, "log_hi')
    assert latest_checkpoint(tmp_path / "ck").name == "checkpoint-4"
    (tmp_path / "ck" / "checkpoint-6" / "trainer_state.json").write_text('{"global_step": 6}')
    assert latest_checkpoint(tmp_path / "ck").name == "checkpoint-6"
    assert latest_checkpoint(tmp_path / "missing") is None


def test_learning_curve_is_logged_at_step_0_every_k_and_the_last(workspace, mlflow_store, monkeypatch):
    monkeypatch.setattr(SLCAGRPOTrainer, "_generate_single_turn", _scripted)
    val = workspace / "data" / "val.jsonl"
    val.write_text((workspace / "data" / "train.jsonl").read_text())
    params = small_params(
        workspace,
        max_steps=3,
        num_generations=2,
        max_completion_length=24,
        val_every=2,
        val_tasks=3,
        out_dir=str(workspace / "curve-models"),
    )
    mlflow.set_tracking_uri(mlflow_store)
    run_train(params, "slca", seed=0)
    rows = [
        json.loads(line)
        for line in (workspace / "curve-models" / "slca-s0" / "metrics_history.jsonl").read_text().splitlines()
    ]
    curve = {row["step"]: row for row in rows if "val/success" in row}
    assert sorted(curve) == [0, 2, 3]
    assert all(0.0 <= row["val/name_f1"] <= 1.0 for row in curve.values())
    assert "loss" in curve[2] and "reward" in curve[2]  # joined the step's own log line
    assert len([row for row in rows if row["step"] == 2]) == 1
    client = mlflow.tracking.MlflowClient()
    (run,) = [r for r in _runs("slca") if r.info.run_name == "train-slca-s0"]
    assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "val/success")) == [0, 2, 3]
    # the segment-normalisation bias is logged per real task kind, never lumped into "other"
    bias_kinds = {key.rsplit(".", 1)[1] for row in rows for key in row if key.startswith("credit/segbias/")}
    task_kinds = {json.loads(line)["kind"] for line in (workspace / "data" / "train.jsonl").read_text().splitlines()}
    assert bias_kinds and bias_kinds <= task_kinds, (bias_kinds, task_kinds)


def test_step_0_validation_is_evaluated_once_per_sft_start(workspace, mlflow_store, monkeypatch, tmp_path):
    """With the start cache set, runs from one SFT start that differ only in RL knobs share step 0's numbers."""
    monkeypatch.setattr(SLCAGRPOTrainer, "_generate_single_turn", _scripted)
    monkeypatch.setenv(START_CACHE_ENV, str(tmp_path / "cache"))
    val = workspace / "data" / "val.jsonl"
    val.write_text((workspace / "data" / "train.jsonl").read_text())
    evaluated: list[int] = []
    evaluate = ValidationCurve.evaluate
    monkeypatch.setattr(ValidationCurve, "evaluate", lambda self, step: evaluated.append(step) or evaluate(self, step))
    mlflow.set_tracking_uri(mlflow_store)

    def curve(name: str, estimator: str, **train) -> dict[int, dict]:
        knobs = {"max_steps": 1, "num_generations": 2, "max_completion_length": 24, "val_every": 1, "val_tasks": 3}
        params = small_params(workspace, **{**knobs, **train, "out_dir": str(tmp_path / name)})
        run_train(params, estimator, seed=0)
        rows = (tmp_path / name / f"{estimator}-s0" / "metrics_history.jsonl").read_text().splitlines()
        return {row["step"]: row for row in map(json.loads, rows) if "val/success" in row}

    first = curve("a", "slca")
    second = curve("b", "grpo", learning_rate=1e-2)  # another estimator and lr: the same start
    assert evaluated == [0, 1, 1]  # step 0 once, each run's last step its own
    assert (first[0]["val/start_cached"], second[0]["val/start_cached"]) == (0.0, 1.0)
    shared = [k for k in first[0] if k.startswith("val/") and k != "val/start_cached"]
    assert len(shared) >= 5 and all(first[0][k] == second[0][k] for k in shared)
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1
    curve("c", "slca", max_tool_turns=1)  # a knob the evaluation reads: its own entry
    assert evaluated == [0, 1, 1, 0, 1]
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2
    # edited evaluation code (an error text, a reward) under the same params: step 0 is evaluated again
    monkeypatch.setattr(val_curve, "evaluation_code_digest", lambda: "edited")
    curve("d", "slca")
    assert evaluated == [0, 1, 1, 0, 1, 0, 1]
    assert len(list((tmp_path / "cache").glob("*.json"))) == 3


def test_adapters_are_zero_only_while_every_lora_b_is():
    from peft import LoraConfig, inject_adapter_in_model

    model = inject_adapter_in_model(
        LoraConfig(r=2, target_modules=["q_proj"]), torch.nn.ModuleDict({"q_proj": torch.nn.Linear(4, 4)})
    )
    assert adapters_are_zero(model)
    next(p for name, p in model.named_parameters() if "lora_B" in name).data[0, 0] = 1e-3
    assert not adapters_are_zero(model)


def test_gdpo_is_a_dvc_matrix_item_whose_command_trains_from_the_slca_cli(workspace, mlflow_store, tmp_path):
    """params.yaml lists gdpo → dvc.yaml's matrix has train@gdpo-0, and its command runs as written."""
    from dvc.repo import Repo

    raw = small_raw(
        workspace,
        max_steps=2,
        num_generations=2,
        max_completion_length=12,
        estimators=["slca", "gdpo"],
        seeds=[0],
        out_dir=str(tmp_path / "models"),
    )
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(raw))
    full = dump_params(load_params(tmp_path / "params.yaml"))  # dvc.yaml reads sections raw leaves out
    (tmp_path / "params.yaml").write_text(full)
    (tmp_path / "dvc.yaml").write_text((REPO / "dvc.yaml").read_text())
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run([str(Path(sys.executable).with_name("dvc")), "init", "-q"], cwd=tmp_path, check=True)
    (stage,) = [s for s in Repo(str(tmp_path)).index.stages if s.name == "train@gdpo-0"]
    assert stage.cmd == "slca train --estimator gdpo --seed 0"
    words = stage.cmd.split()
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_store}
    done = subprocess.run(
        [str(Path(sys.executable).with_name(words[0])), *words[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "models" / "gdpo-s0" / "metrics.json").read_text())
    assert summary["estimator"] == "gdpo" and summary["global_step"] == 2

"""Run facts beside the outputs (`slca.runinfo`), and the guards of running items on workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slca import orchestration
from slca.runinfo import (
    clear_runinfo,
    read_runinfo,
    runinfo_path,
    split_volatile,
    update_runinfo,
)


def test_runinfo_lives_beside_the_output_never_inside_it(tmp_path):
    model = tmp_path / "models" / "slca-s0"
    report = tmp_path / "reports" / "eval" / "slca-s0.json"
    assert runinfo_path(model) == tmp_path / "models" / ".runinfo" / "slca-s0.json"
    assert runinfo_path(report) == tmp_path / "reports" / "eval" / ".runinfo" / "slca-s0.json"
    model.mkdir(parents=True)
    update_runinfo(model, mlflow_run_id="abc")
    update_runinfo(model, train_runtime_s=1.5)
    assert read_runinfo(model) == {"mlflow_run_id": "abc", "train_runtime_s": 1.5}
    assert list(model.iterdir()) == []
    clear_runinfo(model)
    assert read_runinfo(model) == {}


def test_unreadable_runinfo_reads_as_empty(tmp_path):
    output = tmp_path / "models" / "grpo-s0"
    runinfo_path(output).parent.mkdir(parents=True)
    runinfo_path(output).write_text("{torn")
    assert read_runinfo(output) == {}
    runinfo_path(output).write_text("[1, 2]")
    assert read_runinfo(output) == {}


def test_split_volatile_keeps_the_stable_part_apart():
    stable, volatile = split_volatile({"loss": 1.0, "step_time": 0.3, "reward": 0.5}, {"step_time"})
    assert stable == {"loss": 1.0, "reward": 0.5} and volatile == {"step_time": 0.3}


def test_sft_metrics_file_holds_no_wall_clock_figures(tmp_path):
    from slca.train.sft import SFT_VOLATILE, save_atomically

    class Saved:
        def save_pretrained(self, folder):
            (Path(folder) / "weights").write_text("w")

    metrics = {"sft_steps": 3, "sft_seconds": 9.1, "sft_train_seconds": 8.0, "sft_assistant_tokens_per_s": 12.0}
    save_atomically(Saved(), Saved(), tmp_path / "sft", metrics)
    assert json.loads((tmp_path / "sft" / "sft_metrics.json").read_text()) == {"sft_steps": 3}
    assert read_runinfo(tmp_path / "sft") == {key: metrics[key] for key in SFT_VOLATILE}


@pytest.mark.parametrize("uri", ["sqlite:///mlflow.db", "file:///tmp/mlruns", "/tmp/mlruns"])
def test_items_on_workers_refuse_a_tracking_store_they_cannot_share(uri):
    with pytest.raises(orchestration.StageFailed) as caught:
        orchestration.check_shared_tracking(uri)
    assert "\n" not in str(caught.value) and uri in str(caught.value)
    orchestration.check_shared_tracking("http://127.0.0.1:5000")


def test_a_worker_without_a_workspace_fails_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv(orchestration.WORKSPACE_ENV, raising=False)
    with pytest.raises(orchestration.StageFailed, match="SLCA_WORKSPACE is not set"):
        orchestration.enter_workspace()
    monkeypatch.setenv(orchestration.WORKSPACE_ENV, str(tmp_path))
    with pytest.raises(orchestration.StageFailed, match=r"has no dvc\.yaml"):
        orchestration.enter_workspace()
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.chdir(Path(__file__).parent)
    assert orchestration.enter_workspace() == {"directory": str(tmp_path.resolve())}
    assert Path.cwd() == tmp_path.resolve()


def test_pop_keys_and_put_back_round_trip_at_any_depth():
    from slca.runinfo import pop_keys, put_back

    report = {
        "heldout": {"latency_us": 3.0, "f1": 1.0},
        "grid": [{"metrics": {"latency_us": 2.0, "f1": 0.5}}],
        "latency_us": 1.0,
    }
    stable, popped = pop_keys(report, {"latency_us"})
    assert stable == {"heldout": {"f1": 1.0}, "grid": [{"metrics": {"f1": 0.5}}]}
    assert popped == {"heldout.latency_us": 3.0, "grid.0.metrics.latency_us": 2.0, "latency_us": 1.0}
    assert put_back(json.loads(json.dumps(stable)), popped) == report

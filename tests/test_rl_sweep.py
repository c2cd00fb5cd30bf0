"""The RL sweep: run params, reading RL − SFT off a run's history, choosing and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slca.config import Params
from slca.train.rl_sweep import choose, curve_ends, exit_outcome, markdown, precision_label, run_params


def test_run_params_validate_at_step_0_and_the_end_in_their_own_folder(tmp_path):
    params = run_params(
        Params(), "g8", {"train.num_generations": 8, "train.max_steps": 94, "sweep.estimator": "grpo"}, tmp_path, 100
    )
    assert params.train.num_generations == 8 and params.train.max_steps == 94
    assert params.train.val_every == 94 and params.train.val_tasks == 100
    assert params.train.out_dir == str(tmp_path / "g8")
    with pytest.raises(ValueError, match=r"train\.nope"):
        run_params(Params(), "bad", {"train.nope": 1}, tmp_path, 10)


def _history(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_curve_ends_reads_the_start_and_the_last_evaluation(tmp_path):
    history = _history(
        tmp_path / "h.jsonl",
        [
            {"step": 0, "val/success": 0.1, "val/name_f1": 0.5},
            {"step": 1, "reward": 0.2},
            {"step": 10, "val/success": 0.3, "val/name_f1": 0.4, "reward": 0.5},
        ],
    )
    start, end, step = curve_ends(history)
    assert start == {"success": 0.1, "name_f1": 0.5} and end == {"success": 0.3, "name_f1": 0.4} and step == 10
    with pytest.raises(ValueError, match="needs validation at step 0"):
        curve_ends(_history(tmp_path / "bad.jsonl", [{"step": 5, "val/success": 0.1}]))


def _record(name: str, success: float, process: float, minutes: float, estimator: str = "slca") -> dict:
    start = {"success": 0.1, "process": 0.5}
    return {
        "name": name,
        "estimator": estimator,
        "minutes": minutes,
        "threads": 1,
        "n_val": 100,
        "steps": 188,
        "rollouts": 1504,
        "setting": {"lr": 2e-4, "β": 0.0, "G": 4, "P": 2, "T": 1.0, "turns": 2, "steps": 188},
        "start": start,
        "end": {"success": 0.1 + success, "process": 0.5 + process},
        "delta": {"success": success, "process": process},
        "reward_first": 0.3,
        "reward_last": 0.4,
    }


def test_choose_takes_the_largest_success_gain_then_process_then_speed():
    rows = [_record("a", 0.02, 0.0, 5), _record("b", 0.02, 0.01, 9), _record("c", -0.01, 0.2, 1)]
    assert choose(rows)["name"] == "b"
    assert choose([_record("a", 0.0, 0.0, 5), _record("b", 0.0, 0.0, 3)])["name"] == "b"
    assert choose([]) is None


def test_markdown_states_the_start_each_gain_and_the_choice():
    text = markdown(
        [_record("base", 0.02, -0.01, 9.5), _record("grpo-base", 0.0, 0.0, 9.0, "grpo")],
        "cmd",
        {"base": "a note"},
        chosen="base",
    )
    assert "| base, grpo-base | 100 | 0.100 | 0.500 |" in text
    assert (  # a row recorded before its turn budget was spelled out shows "—" there
        "| base (chosen) | slca | 0.0002 | 0.0 | 4 | 2 | 1.0 | 2 | — | 188 | — | 1504 | 9.5 (1) "
        "| 0.300 → 0.400 | +0.020 | -0.010 |" in text
    )
    assert "step-0 evaluation is identical" in text and "- **base**: a note" in text
    assert "No configuration has been run yet." in markdown([], "cmd")


def test_rows_from_different_step_0_evaluations_each_show_their_own():
    moved = _record("len192", 0.05, 0.0, 30.0)
    moved["start"] = {"success": 0.2, "process": 0.6}
    moved["setting"] = {**moved["setting"], "len": 192}
    text = markdown([_record("base", 0.02, -0.01, 9.5), moved], "cmd")
    assert "| base | 100 | 0.100 | 0.500 |" in text and "| len192 | 100 | 0.200 | 0.600 |" in text
    assert "| 2 | 192 | 188 |" in text
    assert "step-0 evaluations are 2 different ones" in text and "identical" not in text
    marked = markdown([_record("base", 0.02, -0.01, 9.5), moved], "cmd", chosen="len192", superseded=("base",))
    assert "| base (superseded) |" in marked and "| len192 (chosen) |" in marked
    assert "Rows marked superseded ran before a change to what a rollout sees" in marked
    assert "superseded" not in text


def test_minutes_of_a_row_whose_start_was_cached_are_marked():
    cached = {**_record("lr1e-4", 0.01, 0.0, 20.0), "start_cached": True}
    text = markdown([_record("lr1e-5", 0.0, 0.0, 24.0), cached], "cmd")
    assert "| 24.0 (1) |" in text and "| 20.0* (1) |" in text
    assert "Minutes marked * leave out the step-0 evaluation" in text
    assert "Minutes marked" not in markdown([_record("lr1e-5", 0.0, 0.0, 24.0)], "cmd")


def test_a_row_process_exit_is_named_and_a_kill_names_its_signal():
    assert exit_outcome(0) == "ok"
    assert exit_outcome(1) == "failed (exit 1)"
    assert exit_outcome(-9).startswith("killed by SIGKILL (the kernel's OOM killer?")
    assert exit_outcome(-15) == "killed by SIGTERM"


def test_a_configuration_that_ran_without_a_result_keeps_its_note_in_the_report():
    notes = {"base": "ran alone.", "t0.7": "killed by the OOM killer after step 33."}
    text = markdown([_record("base", 0.02, -0.01, 9.5)], "cmd", notes, title="a regime")
    assert "- **base**: ran alone." in text
    assert "- **t0.7** (no result): killed by the OOM killer after step 33." in text


def test_a_row_names_the_precision_it_trained_in():
    resolved = {"cpu_bf16": True, "generation_dtype": "bfloat16", "native_bf16": False, "machine": "x86_64"}
    assert precision_label({"precision": resolved}) == "bf16 (emulated)"
    assert precision_label({"precision": {**resolved, "native_bf16": True}}) == "bf16"
    assert precision_label({"precision": {**resolved, "cpu_bf16": False}}) == "fp32"
    # rows recorded before the resolved precision was kept read their pinned override, or say nothing
    assert precision_label({"overrides": {"policy.cpu_bf16": True}}) == "bf16"
    assert precision_label({"overrides": {"policy.cpu_bf16": False}}) == "fp32"
    assert precision_label({"overrides": {}}) == "—"
    row = {**_record("fp32-row", 0.01, 0.0, 20.0), "precision": {**resolved, "cpu_bf16": False}}
    assert "| 188 | fp32 | 1504 | 20.0 (1) |" in markdown([row], "cmd")


def test_rows_without_a_recorded_precision_are_explained():
    old = _record("old", 0.01, 0.0, 20.0)
    text = markdown([old], "cmd", unrecorded_precision="they ran in bf16")
    assert "| 188 | — | 1504 |" in text
    assert "Precision — : the row ran before rows recorded their precision; they ran in bf16." in text
    recorded = {**old, "precision": {"cpu_bf16": False}}
    assert "Precision —" not in markdown([recorded], "cmd", unrecorded_precision="they ran in bf16")

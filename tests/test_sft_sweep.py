"""SFT sweep helpers: overrides, the report table and plot (the sweep itself is a long run)."""

from __future__ import annotations

import pytest

from slca.config import Params
from slca.train.sweep import apply_overrides, markdown, plot


def test_overrides_apply_dotted_keys_and_revalidate():
    params = apply_overrides(Params(), {"policy.tiny.vocab_size": 8192, "sft.max_length": 2048})
    assert params.policy.tiny.vocab_size == 8192 and params.sft.max_length == 2048
    with pytest.raises(ValueError, match="no key 'vocab'"):
        apply_overrides(Params(), {"policy.tiny.vocab": 1})
    with pytest.raises(ValueError, match="no section 'nope'"):
        apply_overrides(Params(), {"nope.x": 1})
    with pytest.raises(ValueError):
        apply_overrides(Params(), {"sft.max_steps": 0})  # validated again: ge=1


def test_report_lists_every_configuration(tmp_path):
    results = [
        {
            "name": name,
            "overrides": {"sft.max_steps": steps},
            "sft_minutes": minutes,
            "sft": {"sft_examples": 990, "sft_dropped_too_long": 10, "sft_final_loss": 1.5},
            "val": {
                "success": s,
                "name_f1": 0.5,
                "arg_match": 0.2,
                "well_formed_calls": 0.9,
                "process": 0.6,
                "no_call_accuracy": 1.0,
            },
        }
        for name, steps, minutes, s in (("a", 700, 2.5, 0.0), ("b", 2000, 7.0, 0.25))
    ]
    text = markdown(results, "python scripts/sft_sweep.py")
    assert "| a | — | 2.5 | 0.00 M | ? | 990 (10) | 1.500 | 0.000 | 0.500 | 0.200 | — | — | 0.900 |" in text
    assert "| b | max_steps=2000 | 7.0 |" in text and "python scripts/sft_sweep.py" in text
    assert plot(results, tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_rows_are_grouped_by_prompt_format_each_against_its_own_first_row(tmp_path):
    val = {
        "success": 0.0,
        "name_f1": 0.5,
        "arg_match": 0.2,
        "well_formed_calls": 0.9,
        "process": 0.6,
        "no_call_accuracy": 1.0,
    }
    sft = {"sft_examples": 10, "sft_dropped_too_long": 0, "sft_final_loss": 1.0}
    results = [
        {"name": "json-a", "overrides": {"sft.max_steps": 700}, "sft_minutes": 2.0, "sft": sft, "val": val},
        {
            "name": "c-a",
            "prompts": "slca_compact",
            "overrides": {"sft.max_steps": 2000},
            "sft_minutes": 3.0,
            "sft": sft,
            "val": {**val, "arg_match_seen": 0.4, "arg_match_heldout": 0.125},
        },
        {
            "name": "c-b",
            "prompts": "slca_compact",
            "overrides": {"sft.max_steps": 4000},
            "sft_minutes": 6.0,
            "sft": sft,
            "val": {**val, "arg_match_seen": 0.5, "arg_match_heldout": 0.25},
        },
    ]
    text = markdown(results, "cmd")
    json_at, compact_at = text.index("## Tools as JSON schemas"), text.index("## Compact tools")
    assert json_at < text.index("| json-a |") < compact_at < text.index("| c-a | — |")
    assert "| c-b | max_steps=4000 | 6.0 |" in text  # compared with c-a, not with json-a
    assert "| 0.400 | 0.125 |" in text and "| 0.500 | 0.250 |" in text
    assert plot(results, tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_a_run_with_curve_points_gets_its_own_table_and_line(tmp_path):
    val = {
        "success": 0.1,
        "name_f1": 0.5,
        "arg_match": 0.2,
        "well_formed_calls": 0.9,
        "process": 0.6,
        "no_call_accuracy": 1.0,
    }
    results = [
        {
            "name": "long",
            "overrides": {"sft.max_steps": 900, "sweep.eval_at": [300, 600]},
            "sft_minutes": 9.0,
            "sft": {"sft_examples": 10, "sft_dropped_too_long": 0, "sft_final_loss": 1.0},
            "val": val,
            "curve": [
                {"step": 300, "sft_minutes": 3.0, "val": {**val, "name_f1": 0.2}},
                {"step": 600, "sft_minutes": 6.0, "val": {**val, "name_f1": 0.4}},
                {"step": 900, "sft_minutes": 9.0, "val": val},
            ],
        }
    ]
    text = markdown(results, "cmd", {"long": "shared the cores", "absent": "never shown"})
    assert "- long: shared the cores" in text and "never shown" not in text
    assert "Notes:" not in markdown(results, "cmd")
    assert "## Along one run: long" in text
    assert "| 300 | 3.0 | 0.100 | 0.200 | 0.200 | — | — |" in text and "| 900 | 9.0 | 0.100 | 0.500 |" in text
    assert plot(results, tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


def test_curve_points_are_taken_at_the_asked_steps_with_evaluation_time_left_out(tmp_path, monkeypatch):
    import time
    from types import SimpleNamespace

    from slca.rollout import evaluation as indomain
    from slca.train.sweep import CurvePoints

    calls = []

    def fake_evaluate(model, tokenizer, tasks, params, seen_values=None):
        calls.append(params.eval.n_test)
        time.sleep(0.05)
        return {"metrics": {"name_f1": 0.5}}

    monkeypatch.setattr(indomain, "evaluate_policy", fake_evaluate)
    model = SimpleNamespace(training=True, eval=lambda: None, train=lambda mode=True: None)
    curve = CurvePoints([2, 4], [{}, {}, {}], Params())
    curve.on_train_begin(None, None, None)
    for step in range(1, 7):
        curve.on_step_end(
            None, SimpleNamespace(global_step=step, max_steps=4), None, model=model, processing_class=None
        )
    assert [p["step"] for p in curve.points] == [2] and calls == [3]  # step 4 is the run's final evaluation
    assert curve.eval_seconds >= 0.05 and curve.points[0]["sft_minutes"] < 0.05 / 60
    assert curve.points[0]["val"]["name_f1"] == 0.5

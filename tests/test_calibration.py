"""Calibration: perturbations do what they say, metrics are exact, and the stage end to end tunes
deliberately wrong knobs back, meets the held-out targets and writes report, plot and MLflow run."""

from __future__ import annotations

import json

import pytest

from slca.config import CalibrationParams, DataParams, Params, SimulatorParams
from slca.data.synthesis import synthesize
from slca.simulator import load_calibrated_knobs
from slca.simulator.calibration import check_search_knobs, run_calibrate, split_items
from slca.simulator.calibration_metrics import (
    Outcome,
    error_agreement,
    leaves,
    value_agreement,
)
from slca.simulator.calibration_set import PERTURBATIONS, build_items, read_rows
from slca.simulator.specs import toolset
from slca.simulator.types import ToolResult
from slca.tools import World, execute
from slca.tools.examples import example_calls

EXPECTED_CLASS = {
    "missing_required": "missing_required",
    "extra_argument": "unexpected_argument",
    "wrong_type": "type",
    "numeric_string": "type",
    "enum_case": "enum",
    "out_of_enum": "enum",
    "out_of_range": "range",
    "bad_format": "format",
    "wrong_tool": "unknown_tool",
}


def test_every_perturbation_is_rejected_by_the_real_executor_with_its_class():
    import random

    specs = toolset(None)
    seen = set()
    for name, arguments in example_calls(World(7)):
        for kind, perturb in PERTURBATIONS.items():
            changed = perturb(
                {"name": name, "arguments": json.loads(json.dumps(arguments))}, specs[name], random.Random(0)
            )
            if changed is None:
                continue
            result = execute(World(7), changed["name"], changed["arguments"])
            assert (result.ok, result.error_class) == (False, EXPECTED_CLASS[kind]), (kind, changed)
            seen.add(kind)
    assert seen == set(PERTURBATIONS)


@pytest.fixture(scope="module")
def val_rows():
    return synthesize(DataParams(n_train=10, n_val=60, n_test=10), seed=0)["val"]


def test_items_cover_gold_and_every_kind_and_split_by_row(val_rows):
    items = build_items(val_rows, n_calls=40, perturbations_per_call=2, seed=0)
    kinds = [item.kind for item in items]
    assert kinds.count("gold") == 40 and set(kinds) == {"gold", *PERTURBATIONS}
    assert items == build_items(val_rows, n_calls=40, perturbations_per_call=2, seed=0)  # deterministic
    search, heldout = split_items(items, 0.5, seed=0)
    assert len(search) + len(heldout) == len(items) and search and heldout
    assert not {i.row_id for i in search} & {i.row_id for i in heldout}


def test_error_agreement_counts():
    ok, bad = ToolResult(True, {}), ToolResult(False, None, "x", "type")
    other = ToolResult(False, None, "y", "enum")
    real = [Outcome(r, None, 1.0) for r in (bad, bad, bad, ok, ok)]
    sim = [Outcome(s, None, 1.0) for s in (bad, other, ok, bad, ok)]
    metrics = error_agreement(real, sim)
    assert metrics["error_precision"] == pytest.approx(2 / 3) and metrics["error_recall"] == pytest.approx(2 / 3)
    assert metrics["error_f1"] == pytest.approx(2 / 3) and metrics["error_class_agreement"] == 0.5


def test_value_agreement_by_leaf():
    assert leaves({"a": {"b": [1, {"c": "x"}]}}) == {"a.b[0]": 1, "a.b[1].c": "x"}
    real = [Outcome(ToolResult(True, {"city": "Lima", "t": 19.0, "sky": "fog", "n": [1, 2]}), None, 0)]
    sim = [Outcome(ToolResult(True, {"city": "lima ", "t": 19, "sky": "sun", "n": [1]}), None, 0)]
    assert value_agreement(real, sim) == pytest.approx(3 / 5)


def test_missing_data_and_unknown_knob_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="run `slca synthesize` first"):
        read_rows(tmp_path / "val.jsonl")
    with pytest.raises(ValueError, match="unknown knobs \\['colour'\\]"):
        check_search_knobs(["check_ranges", "colour"])


def test_calibrate_stage_end_to_end(val_rows, tmp_path, mlflow_store):
    data = tmp_path / "data"
    data.mkdir()
    (data / "val.jsonl").write_text("".join(json.dumps(row) + "\n" for row in val_rows))
    wrong = SimulatorParams(
        coerce_numeric_strings=True,
        strict_extra_arguments=False,
        case_insensitive_enums=True,
        echo_arguments=False,
        calibrated_knobs=None,
    )
    calibration = CalibrationParams(
        n_calls=50,
        perturbations_per_call=2,
        report_path=str(tmp_path / "reports/calibration.json"),
        plot_path=str(tmp_path / "reports/calibration.png"),
        search_knobs=[
            "strict_extra_arguments",
            "coerce_numeric_strings",
            "case_insensitive_enums",
            "check_formats",
            "check_ranges",
            "echo_arguments",
        ],
    )
    params = Params(data=DataParams(out_dir=str(data)), simulator=wrong, calibration=calibration)

    report = run_calibrate(params, progress=False)

    chosen = report["knobs"]
    assert (chosen["coerce_numeric_strings"], chosen["strict_extra_arguments"]) == (False, True)
    assert (chosen["case_insensitive_enums"], chosen["echo_arguments"]) == (False, True)
    assert report["heldout"]["error_f1"] >= 0.99 and report["heldout"]["conformance"] == 1.0
    assert report["targets"]["error_f1"]["met"] and report["targets"]["conformance"]["met"]
    assert report["params_heldout"]["error_f1"] < report["heldout"]["error_f1"]
    assert report["heldout"]["value_agreement"] > report["params_heldout"]["value_agreement"]
    assert report["heldout"]["consistency"] == 1.0 and report["heldout"]["latency_us"] > 0
    assert len(report["grid"]) == 32 + 2 and report["sizes"]["gold"] == 50

    saved = json.loads((tmp_path / "reports/calibration.json").read_text())
    assert saved["knobs"] == chosen
    # wall-clock latencies live beside the report, so the DVC-tracked file is fixed by the seed
    assert "latency_us" not in saved["heldout"] and "latency_us" not in json.dumps(saved)
    from slca.dashboard_data import load_calibration

    loaded, _ = load_calibration(tmp_path / "reports/calibration.json")
    assert loaded["heldout"]["latency_us"] == report["heldout"]["latency_us"]
    assert (tmp_path / "reports/calibration.png").read_bytes()[:4] == b"\x89PNG"
    assert load_calibrated_knobs(tmp_path / "reports/calibration.json", params) == chosen

    import mlflow

    runs = mlflow.search_runs(search_all_experiments=True, filter_string="tags.`slca.stage` = 'calibrate'")
    assert len(runs) == 1
    assert runs.iloc[0]["metrics.heldout.error_f1"] == pytest.approx(report["heldout"]["error_f1"])

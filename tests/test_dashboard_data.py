"""Units of `slca.dashboard_data`: token colours, HTML, segment summaries, tables, file fallbacks."""

from __future__ import annotations

import json
import math

import pytest
from dashboard_fixtures import (
    ENV,
    SUMMARY,
    TOOL,
    calibration_report,
    rollout,
    sample,
    write_project,
)

from slca import dashboard_data as data


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def test_advantage_colour_maps_sign_to_hue_and_magnitude_to_saturation():
    assert data.advantage_colour(0.0, 1.0) == "#ffffff"
    red, green, blue = rgb(data.advantage_colour(-1.0, 1.0))
    assert (red, green, blue) == data.NEGATIVE_RGB and red > blue
    assert rgb(data.advantage_colour(2.0, 1.0)) == data.POSITIVE_RGB  # saturates beyond the scale
    half = rgb(data.advantage_colour(0.5, 1.0))
    assert half == tuple(round(255 + (c - 255) * 0.5) for c in data.POSITIVE_RGB)
    assert half[2] > half[0]  # positive leans blue
    assert data.advantage_colour(float("nan"), 1.0) == "#ffffff"


def test_token_kinds_follow_the_segment_masks():
    row = rollout("p", 0.8, -1.2, -0.5, 1.0, 0.1)
    kinds = [data.token_kind(row, i) for i in range(len(row["tokens"]))]
    assert kinds == ["tool"] * len(TOOL) + ["env"] * len(ENV) + ["summary"] * len(SUMMARY)


def test_tokens_html_escapes_tokens_and_colours_learned_tokens_only():
    row = rollout("p", 0.8, -1.2, -0.5, 1.0, 0.1)
    scale = 1.2
    page = data.tokens_html(row, "advantages", scale)
    assert "&lt;tool_call&gt;" in page and "<tool_call>" not in page
    assert " &amp; cloudy" in page and "&quot;get_weather&quot;" in page
    assert page.count('class="slca-tok slca-tool"') == len(TOOL)
    assert page.count('class="slca-tok slca-env"') == len(ENV)
    assert page.count('class="slca-tok slca-summary"') == len(SUMMARY)
    assert f"background:{data.advantage_colour(0.8, 1.2)}" in page  # tool tokens: positive
    assert f"background:{data.advantage_colour(-1.2, 1.2)}" in page  # summary tokens: saturated red
    assert 'title="environment (masked)"' in page
    assert "\n" not in page  # one line, so markdown keeps it as a single HTML block
    assert "slca-flip" not in page and data.FLIP_STYLE not in page
    flips = [False] * len(TOOL) + [False] * len(ENV) + [True] + [False] * (len(SUMMARY) - 1)
    outlined = data.tokens_html(row, "advantages", scale, flips)
    assert (
        outlined.count("slca-tok slca-summary slca-flip") == 1 and f".slca-flip{{{data.FLIP_STYLE}}}" in data.TOKEN_CSS
    )
    assert "summary · A=-1.2000 · sign differs from GRPO" in outlined


def test_token_text_shows_whitespace_and_escapes_dollars():
    assert data.token_text("a\nb") == "a↵<br>b"
    assert data.token_text("$x$") == "&#36;x&#36;"
    assert data.token_text("") == "∅"


def test_mean_std_table_over_seeds():
    records = [
        {"estimator": "slca", "metrics": {"indomain.success": 0.6, "x": float("nan")}},
        {"estimator": "slca", "metrics": {"indomain.success": 0.5}},
        {"estimator": "grpo", "metrics": {"indomain.success": 0.3, "bfcl.acc": 0.2}},
    ]
    table = data.mean_std(records)
    mean, std, n = table["slca"]["indomain.success"]
    assert (mean, n) == (pytest.approx(0.55), 2) and std == pytest.approx(math.sqrt(0.005))
    assert table["grpo"]["indomain.success"] == (0.3, 0.0, 1)
    assert "x" not in table["slca"]
    frame = data.mean_std_frame(table, ["indomain.success", "bfcl.acc"])
    assert frame.loc["slca", "indomain.success"] == "0.550 ± 0.071 (n=2)"
    assert frame.loc["slca", "bfcl.acc"] == "–"
    assert frame.loc["grpo", "bfcl.acc"] == "0.200 ± 0.000 (n=1)"


def test_group_metric_keys():
    groups = data.group_metric_keys(
        [
            "reward",
            "rewards/r_tool/mean",
            "rewards/components/fmt",
            "credit/contamination",
            "kl",
            "reward_std",
            "rewards/r_toolx",
        ]
    )
    assert groups["Rewards"] == ["reward", "reward_std", "rewards/r_tool/mean"]
    assert groups["Reward components"] == ["rewards/components/fmt"]
    assert groups["Credit diagnostics"] == ["credit/contamination"]
    assert groups["Other"] == ["kl", "rewards/r_toolx"]


def test_curves_frame_aligns_steps_across_runs():
    frame = data.curves_frame({"a": [(1, 0.1), (2, 0.2)], "b": [(2, 0.5), (3, 0.7)], "c": []})
    assert list(frame.index) == [1, 2, 3] and list(frame.columns) == ["a", "b"]
    assert frame.loc[2, "b"] == 0.5 and math.isnan(frame.loc[3, "a"])


def test_disk_samples_and_eval_reports(tmp_path):
    folder = tmp_path / "models" / "slca-s0" / "samples"
    folder.mkdir(parents=True)
    (folder / "step_000004.json").write_text(json.dumps(sample(4)), encoding="utf-8")
    (folder / "notes.txt").write_text("x", encoding="utf-8")
    (tmp_path / "models" / "sft").mkdir()
    assert data.disk_sample_runs(tmp_path / "models") == {"slca-s0": folder}
    assert data.disk_sample_steps(folder) == [4]
    assert data.load_disk_sample(folder, 4)["rollouts"][2]["prompt_id"] == "weather-002"
    write_project(tmp_path)
    (tmp_path / "reports" / "eval" / "broken.json").write_text("{", encoding="utf-8")
    mlflow_run = data.RunRow("abc", "evaluate", "evaluate", "toolpo", "0", "FINISHED", 5, {"indomain.success": 0.9})
    records = data.eval_records([mlflow_run], tmp_path / "reports" / "eval")
    assert [(r["estimator"], r["source"]) for r in records] == [("toolpo", "mlflow")]  # the store wins
    records = data.eval_records([], tmp_path / "reports" / "eval")
    assert records[0]["metrics"] == {"indomain.success": 0.45} and records[0]["source"].endswith("toolpo-s0.json")


def test_calibration_table_and_fallback_to_metrics(tmp_path):
    write_project(tmp_path)
    paths = data.project_paths(tmp_path)
    report, source = data.load_calibration(paths.calibration_json)
    assert report == calibration_report() and source == str(paths.calibration_json)
    frame = data.calibration_frame(report)
    assert frame.loc["error_f1", "tuned, held out"] == pytest.approx(0.934)
    assert frame.loc["latency_us", "params knobs, held out"] == pytest.approx(42.5)
    assert data.calibration_by_kind(report).loc["missing_required", "verdict_agreement"] == 0.875
    grid = data.calibration_grid(report)
    assert grid.to_dict("records") == [
        {"stage": 1, "knob:check_ranges": True, "error_f1": 0.97},
        {"stage": 1, "knob:check_ranges": False, "error_f1": 0.9},
    ]
    partial = data.calibration_from_metrics({"heldout.error_f1": 0.9, "search.conformance": 1.0, "grid/x": 3})
    assert partial["heldout"] == {"error_f1": 0.9} and partial["search"] == {"conformance": 1.0}
    assert data.load_calibration(tmp_path / "none.json")[0] is None


def test_project_paths_read_params_yaml(tmp_path):
    (tmp_path / "params.yaml").write_text("train:\n  out_dir: runs\neval:\n  out_dir: out/eval\n", encoding="utf-8")
    paths = data.project_paths(tmp_path)
    assert paths.models == tmp_path / "runs" and paths.eval_dir == tmp_path / "out" / "eval"
    assert paths.comparison_md == tmp_path / "out" / "comparison.md"
    assert paths.calibration_json == tmp_path / "reports" / "calibration.json"


def test_missing_sqlite_store_is_one_clear_line(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert data.tracking_uri("") == data.DEFAULT_URI
    assert data.tracking_uri(" sqlite:///x.db ") == "sqlite:///x.db"
    uri = f"sqlite:///{tmp_path / 'absent.db'}"
    with pytest.raises(data.StoreError, match=r"no tracking store at .*absent\.db: run `make run` first"):
        data.list_runs(uri, "train")
    assert not (tmp_path / "absent.db").exists()  # reading never creates a store


def test_run_comparison_frames_match_evaluations_to_train_runs():
    def run(stage, estimator, seed, start, metrics=None):
        return data.RunRow(
            f"{estimator}{seed}{start}", "r", stage, estimator, str(seed), "FINISHED", start, metrics or {}
        )

    train = [run("train", "slca", 0, 9), run("train", "grpo", 0, 8), run("train", "slca", 1, 7)]
    assert [r.run_id for r in data.default_comparison(train)] == ["slca09", "grpo08"]
    assert [r.run_id for r in data.default_comparison(train, limit=1)] == ["slca09"]
    evaluations = [
        run("evaluate", "slca", 0, 1, {"indomain.success.single": 0.2}),
        run(
            "evaluate",
            "slca",
            0,
            5,
            {"indomain.success.single": 0.6, "indomain.success.parallel": 0.4, "indomain.success": 0.5},
        ),
        run("evaluate", "grpo", 0, 3, {"indomain.success.single": 0.3}),
    ]
    frame = data.kind_success_frame(train, evaluations)
    slca, grpo = train[0].label, train[1].label
    assert list(frame.columns) == [slca, grpo] and list(frame.index) == ["parallel", "single"]
    assert frame.loc["single", slca] == 0.6 and frame.loc["single", grpo] == 0.3  # the newest evaluation wins
    assert math.isnan(frame.loc["parallel", grpo])
    assert data.kind_success_frame(train[2:], evaluations).empty  # slca-s1 has no evaluation
    finals = data.final_values_frame({"reward": {"a": [(1, 0.1), (2, 0.4)], "b": []}, "kl": {"a": [(2, 0.01)]}})
    assert finals.loc["a", "reward"] == 0.4 and finals.loc["a", "kl"] == 0.01
    assert math.isnan(finals.loc["b", "reward"])

"""The compare stage on hand-made evaluation reports and histories (real files, real MLflow)."""

from __future__ import annotations

import json

import mlflow
import pytest

from slca.config import Params, parse_params
from slca.eval.compare import (
    CompareError,
    markdown_table,
    mean_std,
    run_compare,
    summarise,
)


def test_mean_std_uses_the_sample_std():
    assert mean_std([1.0, 3.0]) == (2.0, pytest.approx(1.4142135, rel=1e-6))
    assert mean_std([5.0]) == (5.0, 0.0)


def test_summarise_and_table_cells():
    table = summarise(
        {"slca": [{"indomain.success": 0.8}, {"indomain.success": 0.6}], "grpo": [{"indomain.success": 0.5}]}
    )
    assert table["slca"]["indomain.success"] == (pytest.approx(0.7), pytest.approx(0.1414213, rel=1e-5), 2)
    text = markdown_table(table, ["indomain.success"])
    assert "| Success | 0.700 ± 0.141 (n=2) | 0.500 ± 0.000 (n=1) |" in text


def _params(tmp_path) -> Params:
    return parse_params(
        {
            "train": {"out_dir": str(tmp_path / "models"), "estimators": ["slca", "grpo"], "seeds": [0, 1]},
            "eval": {"out_dir": str(tmp_path / "reports" / "eval")},
        }
    )


def test_run_compare_writes_markdown_plots_and_logs(tmp_path, mlflow_store):
    params = _params(tmp_path)
    for estimator, base in (("slca", 0.8), ("grpo", 0.6)):
        for seed in (0, 1):
            report = tmp_path / "reports" / "eval" / f"{estimator}-s{seed}.json"
            report.parent.mkdir(parents=True, exist_ok=True)
            metrics = {"indomain.success": base + 0.1 * seed, "bfcl.overall_accuracy_non_live": base / 2}
            report.write_text(json.dumps({"metrics": metrics}))
            history = tmp_path / "models" / f"{estimator}-s{seed}" / "metrics_history.jsonl"
            history.parent.mkdir(parents=True, exist_ok=True)
            history.write_text("".join(json.dumps({"step": s, "reward": base * s / 3}) + "\n" for s in (1, 2, 3)))
    sft = tmp_path / "reports" / "eval" / "sft.json"
    sft.write_text(json.dumps({"metrics": {"indomain.success": 0.3, "bfcl.overall_accuracy_non_live": 0.1}}))
    table = run_compare(params)
    assert list(table) == ["sft", "slca", "grpo"]  # the SFT starting point comes first
    assert table["sft"]["indomain.success"] == [0.3, 0.0, 1]
    assert table["slca"]["indomain.success"][0] == pytest.approx(0.85)
    assert table["grpo"]["indomain.success"][0] == pytest.approx(0.65)
    markdown = (tmp_path / "reports" / "comparison.md").read_text()
    assert "| metric | sft | slca | grpo |" in markdown
    assert "| Success | 0.300 ± 0.000 (n=1) | 0.850 ± 0.071 (n=2) | 0.650 ± 0.071 (n=2) |" in markdown
    for png in ("comparison.png", "training_curves.png"):
        assert (tmp_path / "reports" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    client = mlflow.MlflowClient(mlflow_store)
    run = client.search_runs([client.get_experiment_by_name("slca").experiment_id])[0]
    assert run.data.tags["slca.stage"] == "compare"
    assert run.data.metrics["slca.indomain.success"] == pytest.approx(0.85)
    names = {a.path for a in client.list_artifacts(run.info.run_id, "comparison")}
    assert names == {"comparison/comparison.md", "comparison/comparison.png", "comparison/training_curves.png"}


def test_run_compare_without_reports_names_what_is_missing(tmp_path, mlflow_store):
    with pytest.raises(CompareError, match=r"no evaluation reports found \(expected e\.g\. .*slca-s0\.json\)"):
        run_compare(_params(tmp_path))


def test_moving_average_is_trailing():
    from slca.eval.compare import moving_average

    assert moving_average([1.0, 3.0, 5.0, 7.0], 2) == [1.0, 2.0, 4.0, 6.0]

"""The evaluate stage end to end on a tiny (untrained) policy: in-domain, BFCL, tau2, MLflow."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import pytest

from slca.config import parse_params
from slca.data.synthesis import synthesize
from slca.eval.stage import EvaluationError, run_evaluate
from slca.train.policy import build_tiny_model, corpus_texts, train_tokenizer


@pytest.fixture(scope="module")
def eval_setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalstage")
    params = parse_params(
        {
            "data": {"out_dir": str(root / "data"), "n_train": 60, "n_val": 30, "n_test": 30},
            "policy": {
                "tiny": {
                    "hidden_size": 32,
                    "num_hidden_layers": 1,
                    "num_attention_heads": 2,
                    "num_key_value_heads": 1,
                    "intermediate_size": 64,
                    "vocab_size": 600,
                }
            },
            "train": {"out_dir": str(root / "models"), "max_completion_length": 12, "max_tool_turns": 1},
            "sft": {"out_dir": str(root / "models" / "sft")},
            "eval": {
                "out_dir": str(root / "reports" / "eval"),
                "n_test": 4,
                "bfcl": {"categories": ["simple_python", "irrelevance"], "limit": 2},
                "tau2": {"enabled": True, "domain": "mock", "max_steps": 4, "task_ids": None},
            },
        }
    )
    splits = synthesize(params.data, seed=0)
    (root / "data").mkdir()
    for split, rows in splits.items():
        (root / "data" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tokenizer = train_tokenizer(corpus_texts(splits["train"]), params.policy.tiny.vocab_size, 0)
    model = build_tiny_model(params.policy.tiny, tokenizer, 0)
    for run in (root / "models" / "slca-s0", Path(params.sft.out_dir)):
        model.save_pretrained(run)
        tokenizer.save_pretrained(run)
    (root / "models" / "slca-s0" / "metrics.json").write_text("{}")  # a finished training run
    return params


def test_evaluate_writes_one_report_and_logs_it(eval_setup, mlflow_store):
    report = run_evaluate(eval_setup, "slca", 0)
    saved = json.loads((Path(eval_setup.eval.out_dir) / "slca-s0.json").read_text())
    assert saved["run"] == "slca-s0" and saved["estimator"] == "slca"
    metrics = saved["metrics"]
    assert metrics["indomain.n"] == 4.0
    assert 0.0 <= metrics["indomain.success"] <= 1.0
    # gold argument values split by whether the train split holds them (a kind absent from these tasks has no key)
    values = saved["indomain"]["metrics"]
    assert values.get("values_seen", 0.0) + values.get("values_heldout", 0.0) > 0
    assert any(0.0 <= metrics.get(f"indomain.arg_match_{kind}", -1) <= 1.0 for kind in ("seen", "heldout"))
    assert set(saved["bfcl"]["accuracy"]) == {"simple_python", "irrelevance"}
    # only the summary entries whose categories ran: the overall mean would count the four not run as 0
    assert metrics["bfcl.python_simple_ast_non_live"] == saved["bfcl"]["accuracy"]["simple_python"]
    assert metrics["bfcl.irrelevance_non_live"] == saved["bfcl"]["accuracy"]["irrelevance"]
    assert "bfcl.overall_accuracy_non_live" not in metrics and "bfcl.simple_ast_non_live" not in metrics
    assert "overall_accuracy_non_live" in saved["bfcl"]["aggregate"]  # the report keeps the leaderboard's summary
    assert "tau2.pass_hat_1" in metrics and 0.0 <= metrics["tau2.pass_hat_1"] <= 1.0
    assert report["metrics"] == metrics
    client = mlflow.MlflowClient(mlflow_store)
    run = client.search_runs([client.get_experiment_by_name("slca").experiment_id])[0]
    assert run.data.tags["slca.stage"] == "evaluate"
    assert run.data.metrics["indomain.n"] == 4.0
    assert run.data.params["estimator"] == "slca"


def test_evaluate_names_a_missing_run(eval_setup, mlflow_store):
    with pytest.raises(EvaluationError, match=r"models/grpo-s3 does not exist; run `slca train --estimator grpo"):
        run_evaluate(eval_setup, "grpo", 3)


def test_the_sft_policy_is_evaluated_like_a_run(eval_setup, mlflow_store):
    report = run_evaluate(eval_setup, "sft", 0)
    saved = json.loads((Path(eval_setup.eval.out_dir) / "sft.json").read_text())
    assert saved["run"] == "sft" and saved["estimator"] == "sft" and saved["metrics"] == report["metrics"]
    assert saved["metrics"]["indomain.n"] == 4.0 and "indomain.well_formed_calls" in saved["metrics"]


def test_evaluate_refuses_a_run_that_did_not_finish(eval_setup, mlflow_store):
    models = Path(eval_setup.train.out_dir)
    shutil.copytree(models / "slca-s0", models / "slca-s1", ignore=shutil.ignore_patterns("metrics.json"))
    with pytest.raises(
        EvaluationError,
        match=(
            r"models/slca-s1 holds no finished run \(metrics.json missing: "
            r"killed or still running\); run `slca train --estimator slca --seed 1`"
        ),
    ):
        run_evaluate(eval_setup, "slca", 1)
    assert not (Path(eval_setup.eval.out_dir) / "slca-s1.json").exists()


def test_the_report_is_written_before_tracking_fails(eval_setup, mlflow_store, monkeypatch):
    import slca.eval.indomain
    import slca.eval.stage

    def tracking_down(*args, **kwargs):
        raise ConnectionError("tracking server went away")

    models = Path(eval_setup.train.out_dir)
    shutil.copytree(models / "slca-s0", models / "grpo-s2")
    monkeypatch.setattr(slca.eval.indomain, "evaluate_policy", lambda *a, **k: {"metrics": {"n": 4, "success": 0.5}})
    monkeypatch.setattr(
        slca.eval.stage, "evaluate_bfcl", lambda *a: {"accuracy": {"irrelevance": 1.0}, "aggregate": {}, "verdicts": []}
    )
    monkeypatch.setattr(slca.eval.stage, "evaluate_tau2_bench", lambda *a: None)
    monkeypatch.setattr(slca.eval.stage, "log_metrics", tracking_down)
    with pytest.raises(ConnectionError):
        run_evaluate(eval_setup, "grpo", 2)
    saved = json.loads((Path(eval_setup.eval.out_dir) / "grpo-s2.json").read_text())
    assert saved["metrics"] == {"indomain.n": 4.0, "indomain.success": 0.5, "bfcl.irrelevance": 1.0}

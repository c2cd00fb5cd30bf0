"""Data validation: the great-expectations suite catches each defect class; the stage publishes atomically."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import mlflow
import pytest

from slca.config import DataParams, Params, ProjectParams
from slca.data import DataValidationError, run_synthesize, validate_files
from slca.data import stage as stage_module
from slca.data.stage import validate_rows
from slca.data.synthesis import synthesize

SMALL = {"n_train": 90, "n_val": 40, "n_test": 40}
OUTPUTS = ("data/train.jsonl", "data/val.jsonl", "data/test.jsonl", "data/stats.json", "reports/data_validation.json")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One SQLite MLflow store for the module (creating its tables is the slow part)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.delenv("SLCA_PARENT_RUN_ID", raising=False)
        yield uri


def params_in(root: Path, seed: int = 5) -> Params:
    data = DataParams(out_dir=str(root / "data"), report_path=str(root / "reports/data_validation.json"), **SMALL)
    return Params(project=ProjectParams(seed=seed), data=data)


def digests(root: Path) -> dict[str, str]:
    return {name: hashlib.sha256((root / name).read_bytes()).hexdigest() for name in OUTPUTS}


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def corrupt(rows: dict[str, list[dict]]) -> dict[str, str]:
    """Inject one defect of each class; returns defect -> the row id it lives in."""
    train, val, test = rows["train"], rows["val"], rows["test"]
    train[1]["id"] = train[0]["id"]
    unoffered = next(r for r in train[2:] if r["kind"] == "single")
    unoffered["gold_steps"][0][0]["name"] = "delete_event" if unoffered["domain"] != "calendar" else "book_flight"
    typed = next(
        r
        for r in train[2:]
        if r["kind"] == "multiple"
        and r is not unoffered
        and any(isinstance(v, str) for v in r["gold_steps"][0][0]["arguments"].values())
    )
    arguments = typed["gold_steps"][0][0]["arguments"]
    arguments[next(k for k, v in arguments.items() if isinstance(v, str))] = 12345
    rows["val"] = [r for r in val if r["kind"] != "no_call"]
    long_row = rows["val"][0]
    long_row["messages"][1]["content"] += " please" * 2000
    leaky = test[0]
    leaky["template_id"] = train[5]["template_id"]
    entity_leak = next(r for r in test[1:] if r["entities"])
    entity_leak["entities"] = sorted(entity_leak["entities"] + [e for r in train for e in r["entities"]][:1])
    return {
        "duplicate": train[0]["id"],
        "unoffered": unoffered["id"],
        "typed": typed["id"],
        "long": long_row["id"],
        "template_leak": leaky["id"],
        "entity_leak": entity_leak["id"],
    }


@pytest.fixture(scope="module")
def clean_rows() -> dict[str, list[dict]]:
    return synthesize(DataParams(**SMALL), seed=5)


def test_clean_splits_pass_every_expectation(clean_rows):
    report = validate_rows(clean_rows, DataParams(**SMALL))
    assert report["success"] is True
    for split, outcome in report["splits"].items():
        assert outcome["failed"] == 0 and outcome["evaluated"] >= 15, split
        assert outcome["rows"] == SMALL[f"n_{split}"]


def test_each_defect_class_fails_with_its_expectation_and_row_id(clean_rows):
    rows = copy.deepcopy(clean_rows)
    where = corrupt(rows)
    report = validate_rows(rows, DataParams(**SMALL))
    assert report["success"] is False
    with pytest.raises(DataValidationError) as caught:
        stage_module.raise_for_report(report)
    lines = str(caught.value).splitlines()

    def line(prefix: str, column: str) -> str:
        hits = [x for x in lines if x.strip().startswith(prefix) and f"column '{column}'" in x]
        assert hits, f"no failure line for {prefix} {column} in:\n" + "\n".join(lines)
        return hits[0]

    assert where["duplicate"] in line("train: expect_column_values_to_be_unique", "id")
    assert where["duplicate"] in line("train: expect_column_values_to_be_in_set", "id_unique_across_splits")
    assert where["unoffered"] in line("train: expect_column_values_to_be_in_set", "gold_calls_offered")
    assert where["typed"] in line("train: expect_column_values_to_be_in_set", "gold_args_valid")
    assert "['no_call']" in line("val: expect_column_distinct_values_to_contain_set", "kind")
    assert where["long"] in line("val: expect_column_value_lengths_to_be_between", "prompt")
    assert where["template_leak"] in line("test: expect_column_values_to_be_in_set", "template_not_leaked")
    assert where["entity_leak"] in line("test: expect_column_values_to_be_in_set", "entities_not_leaked")
    assert not any(x.strip().startswith("val: expect_column_values_to_be_unique") for x in lines)


def test_stage_publishes_deterministic_outputs_and_logs_to_mlflow(store, tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    summary = run_synthesize(params_in(first))
    stage_module.synthesize_and_publish(params_in(second))  # the same publishing path, without MLflow
    assert digests(first) == digests(second)
    assert summary["rows"] == {"train": 90, "val": 40, "test": 40}
    assert leftovers(first) == sorted(OUTPUTS)
    stats = json.loads((first / "data/stats.json").read_text())
    assert stats["val"]["rows"] == 40 and sum(stats["val"]["kind"].values()) == 40
    assert json.loads((first / "reports/data_validation.json").read_text())["success"] is True
    assert validate_files(first / "data", params_in(first).data)["success"] is True
    client = mlflow.MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("slca").experiment_id], "tags.`slca.stage` = 'synthesize'")
    assert len(runs) >= 1
    run = runs[0]
    assert (
        run.data.metrics["rows.train"] == 90 and run.data.metrics["rows.val.no_call"] == stats["val"]["kind"]["no_call"]
    )
    assert run.data.params["n_train"] == "90" and run.data.params["kind_mix.single"] == "0.3"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"stats.json", "data_validation.json"} <= artifacts


def test_invalid_data_leaves_no_outputs_and_keeps_previous_ones(store, tmp_path, monkeypatch, clean_rows):
    kept = tmp_path / "kept"
    stage_module.synthesize_and_publish(params_in(kept))
    before = digests(kept)
    broken = copy.deepcopy(clean_rows)
    broken["train"][1]["id"] = broken["train"][0]["id"]
    monkeypatch.setattr(stage_module, "synthesize", lambda params, seed: copy.deepcopy(broken))
    for root, entry in ((tmp_path / "fresh", run_synthesize), (kept, stage_module.synthesize_and_publish)):
        with pytest.raises(DataValidationError, match=f"column 'id'.*{broken['train'][0]['id']}"):
            entry(params_in(root))
    assert leftovers(tmp_path / "fresh") == []
    assert digests(kept) == before and leftovers(kept) == sorted(OUTPUTS)


def test_validate_files_reports_missing_and_malformed_files(tmp_path):
    with pytest.raises(DataValidationError, match=r"train\.jsonl is missing"):
        validate_files(tmp_path)
    for split in ("train", "val", "test"):
        (tmp_path / f"{split}.jsonl").write_text('{"id": "x"}\n')
    (tmp_path / "val.jsonl").write_text('{"id": "x"}\nnot json\n')
    with pytest.raises(DataValidationError, match=r"val\.jsonl:2: not valid JSON"):
        validate_files(tmp_path)

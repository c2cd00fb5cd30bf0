"""scripts/seen_heldout_probe.py: RL − SFT on validation beside the committed test evaluations."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_probe():
    spec = importlib.util.spec_from_file_location("seen_heldout_probe", ROOT / "scripts" / "seen_heldout_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def episodes(prefix: str, successes: list[float]) -> list[dict]:
    return [
        {"task_id": f"{prefix}-{i:05d}", "success": value, "needs_call": 1.0, "called": 1.0}
        for i, value in enumerate(successes)
    ]


def write(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload), encoding="utf-8")


def probe_result(name: str, successes: list[float], commit: str) -> dict:
    return {
        "model": name,
        "tasks": len(successes),
        "seconds": 90.0,
        "commit": commit,
        "metrics": {"success": sum(successes) / len(successes)},
        "episodes": episodes("val", successes),
    }


def test_the_report_pairs_each_policy_with_the_sft_start_on_validation_and_on_test(tmp_path):
    probe = load_probe()
    results, experiment = tmp_path / "results", tmp_path / "experiment"
    # validation: 50 tasks; the first 40 are the learning curves' sample
    start_val = [0.0] * 50
    rl_val = [1.0] * 20 + [0.0] * 20 + [1.0] * 10  # +0.6 overall, +0.5 on the first 40
    write(results / "main__sft.json", probe_result("main/sft", start_val, "aaa1111"))
    write(results / "abstain-baseline__slca-s2.json", probe_result("abstain-baseline/slca-s2", rl_val, "bbb2222"))
    # test: the experiment's committed reports, +0.25 on 4 tasks
    write(experiment / "main" / "eval" / "sft.json", {"indomain": {"episodes": episodes("test", [1, 0, 0, 0])}})
    write(
        experiment / "abstain-baseline" / "eval" / "slca-s2.json",
        {"indomain": {"episodes": episodes("test", [1, 1, 0, 0])}},
    )
    history = experiment / "abstain-baseline" / "history" / "slca-s2.jsonl"
    history.parent.mkdir(parents=True)
    points = [{"step": 0, "val/success": 0.5}, {"step": 1, "loss": 0.1}, {"step": 50, "val/success": 0.625}]
    history.write_text("".join(json.dumps(point) + "\n" for point in points))
    text = probe.report(results, experiment)
    row = next(line for line in text.splitlines() if line.startswith("| abstain-baseline/slca-s2 |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[1] == "50" and cells[2] == "0.000 → 0.600"
    assert cells[3].startswith("+0.600 [")
    assert cells[4].startswith("+0.500 [")
    assert cells[5] == "+0.125"
    assert cells[6] == "4" and cells[7] == "0.250 → 0.500" and cells[8].startswith("+0.250 [")
    assert cells[9] == "1.5"
    assert "main/sft |" not in text  # the start is the reference, not a row
    assert "`aaa1111`, `bbb2222`" in text


def test_a_policy_without_a_committed_test_evaluation_is_refused_by_name(tmp_path):
    probe = load_probe()
    results, experiment = tmp_path / "results", tmp_path / "experiment"
    write(results / "main__sft.json", probe_result("main/sft", [0.0, 1.0], "aaa1111"))
    write(results / "main__slca-s9.json", probe_result("main/slca-s9", [1.0, 1.0], "aaa1111"))
    write(experiment / "main" / "eval" / "sft.json", {"indomain": {"episodes": episodes("test", [1, 0])}})
    with pytest.raises(SystemExit, match="main/slca-s9 has no committed test evaluation"):
        probe.report(results, experiment)


def test_model_names_must_be_setting_slash_run():
    probe = load_probe()
    assert probe.result_path("main/sft", Path("r")) == Path("r") / "main__sft.json"
    for bad in ("sft", "main/", "/sft", "a/b/c"):
        with pytest.raises(SystemExit, match="<setting>/<run>"):
            probe.result_path(bad)

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


def test_a_checkpoint_row_has_no_test_cells_and_is_set_beside_its_runs_last_step(tmp_path):
    probe = load_probe()
    results, experiment = tmp_path / "results", tmp_path / "experiment"
    write(results / "main__sft.json", probe_result("main/sft", [0.0] * 10, "aaa1111"))
    # step 50 gets 4 of 10 validation tasks, the run's last step 7 of them: +0.3 between them
    write(results / "budget__slca-s0@50.json", probe_result("budget/slca-s0@50", [1.0] * 4 + [0.0] * 6, "ccc3333"))
    write(results / "budget__slca-s0.json", probe_result("budget/slca-s0", [1.0] * 7 + [0.0] * 3, "ccc3333"))
    write(experiment / "main" / "eval" / "sft.json", {"indomain": {"episodes": episodes("test", [1, 0])}})
    write(experiment / "budget" / "eval" / "slca-s0.json", {"indomain": {"episodes": episodes("test", [1, 1])}})
    history = experiment / "budget" / "history" / "slca-s0.jsonl"
    history.parent.mkdir(parents=True)
    points = [{"step": 0, "val/success": 0.5}, {"step": 50, "val/success": 0.6}, {"step": 100, "val/success": 0.8}]
    history.write_text("".join(json.dumps(point) + "\n" for point in points))
    text = probe.report(results, experiment)
    table, _, pairs = text.partition("One run at two points")
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines() if line.startswith("| budget/")}
    early = [cell.strip() for cell in rows["budget/slca-s0@50"].strip("|").split("|")]
    assert early[2] == "0.000 → 0.400" and early[5] == "+0.100"  # the curve read at the checkpoint's step
    assert early[6:9] == ["—", "—", "— (a checkpoint: not evaluated on test)"]
    last = [cell.strip() for cell in rows["budget/slca-s0"].strip("|").split("|")]
    assert last[5] == "+0.300" and last[6] == "2" and last[8].startswith("+0.500 [")
    pair = next(line for line in pairs.splitlines() if line.startswith("| budget/slca-s0 | 50 |"))
    cells = [cell.strip() for cell in pair.strip("|").split("|")]
    assert cells[2] == "10" and cells[3] == "0.400 → 0.700" and cells[4].startswith("+0.300 [")


def test_checkpoint_names_and_a_checkpoint_that_is_not_an_adapter(tmp_path):
    probe = load_probe()
    assert probe.result_path("b/slca-s0@50", Path("r")) == Path("r") / "b__slca-s0@50.json"
    assert probe.parse_name("b/slca-s0@50") == ("b", "slca-s0", 50)
    with pytest.raises(SystemExit, match="<setting>/<run>@<step>"):
        probe.result_path("b/slca-s0@last")
    (tmp_path / "config.json").write_text("{}")  # a saved policy, not a LoRA checkpoint
    with pytest.raises(SystemExit, match=r"is not a LoRA checkpoint .* but b/slca-s0@50 names a step"):
        probe.evaluate("b/slca-s0@50", tmp_path, ROOT / "reports/experiment/main/params.yaml", 4)


def test_a_checkpoint_is_merged_into_its_base_as_the_run_end_merges_it(smollm2_dir, tmp_path):
    """A LoRA adapter saved on SmolLM2 (its B matrices moved off zero) loads merged: no LoRA layer left, and
    the same logits as the adapter applied on top."""
    import torch

    from slca.config import load_params
    from slca.train.policy import load_policy

    probe = load_probe()
    params = load_params(ROOT / "reports/experiment/main/params.yaml")
    model, tokenizer = load_policy(smollm2_dir, params)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "lora_B" in name:
                weight.normal_(0, 0.02)
    checkpoint = tmp_path / "checkpoint-50"
    model.save_pretrained(checkpoint)
    tokenizer.save_pretrained(checkpoint)
    merged, _ = probe.load_merged(checkpoint, params)
    assert not any("lora" in name for name, _ in merged.named_parameters())
    ids = tokenizer("Find the weather in Paris.", return_tensors="pt").input_ids
    with torch.no_grad():
        expected = model.eval()(ids).logits
        got = merged(ids).logits
        with model.disable_adapter():
            base = model(ids).logits
    assert (expected - base).abs().max() > 1e-3  # the adapter changes the output
    assert torch.allclose(got, expected, atol=1e-4)

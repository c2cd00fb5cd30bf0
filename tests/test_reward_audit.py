"""The reward audit, grounded simulation and the baselines' reward inputs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from slca.config import DataParams, Params
from slca.data.synthesis import synthesize
from slca.eval.reward_audit import (
    AuditFailed,
    audit,
    audit_tokenizer,
    run_reward_audit,
    sample_tasks,
)
from slca.rewards.baselines import call_accuracy, rltr_reward
from slca.rewards.parsing import parse_tool_calls
from slca.rollout import run_episodes, training_env
from slca.rollout.grounding import GroundedSession
from slca.rollout.scripted import CORRUPTIONS, ScriptedTurnGenerator, oracle_turn
from slca.simulator import SimulatorSession


@pytest.fixture(scope="module")
def val_rows():
    return synthesize(DataParams(n_train=10, n_val=120, n_test=10), seed=0)["val"]


@pytest.fixture(scope="module")
def audit_tasks(val_rows):
    return sample_tasks(val_rows, 6, seed=0)


@pytest.fixture(scope="module")
def tokenizer(audit_tasks):
    return audit_tokenizer(audit_tasks, Params())


def _params(tmp_path, **simulator) -> Params:
    return Params.model_validate(
        {
            "data": {"out_dir": str(tmp_path / "data")},
            "simulator": {"calibrated_knobs": None, **simulator},
            "audit": {"per_kind": 6, "report_path": str(tmp_path / "reports" / "reward_audit.json")},
        }
    )


def _write_val(tmp_path, rows):
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "val.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_sample_covers_every_kind(audit_tasks):
    kinds = [t["kind"] for t in audit_tasks]
    assert {k: kinds.count(k) for k in set(kinds)} == dict.fromkeys(
        ["no_call", "single", "parallel", "multiple", "multi_step"], 6
    )


def test_audit_stage_passes_on_default_params(val_rows, tmp_path, mlflow_store):
    _write_val(tmp_path, val_rows)
    report = run_reward_audit(_params(tmp_path))
    assert report["passed"] and report["failures"] == []
    for path in ("train", "eval"):
        cases = report["paths"][path]
        assert cases["oracle"]["success"] == 1.0 and cases["oracle"]["r_tool"] == 1.0
        for corruption in CORRUPTIONS:
            entry = cases[corruption.name]
            assert entry["n"] > 0 and entry["gap"] > 0, (path, corruption.name)
            if corruption.segment == "summary":
                assert entry["r_tool_changed"] == 0.0 and entry["r_tool"] == 1.0
    assert cases["no_call_when_needed"]["r_sum"] == -0.5  # the paper's penalty rule is kept
    assert cases["vacuous_summary"]["r_sum"] == 0.0
    saved = json.loads((tmp_path / "reports" / "reward_audit.json").read_text())
    assert saved["passed"] is True and saved["paths"]["train"]["oracle"]["n"] == 30

    import mlflow

    runs = mlflow.search_runs(search_all_experiments=True, filter_string="tags.`slca.stage` = 'reward_audit'")
    assert len(runs) == 1 and runs.iloc[0]["metrics.audit/passed"] == 1.0
    assert runs.iloc[0]["metrics.audit/train/oracle/success"] == 1.0


def test_ungrounded_simulation_fails_the_audit_from_the_cli(val_rows, tmp_path, mlflow_store):
    """Without grounding a correct multi-step policy cannot reach R_tool = 1: the stage says so."""
    _write_val(tmp_path, val_rows)
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(_params(tmp_path, grounded=False).model_dump(mode="json")))
    done = subprocess.run(
        [sys.executable, "-m", "slca.cli", "reward-audit", "--params", str(params_file)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "train: the oracle's R_tool is below 1 on multi_step" in errors[0]
    report = json.loads((tmp_path / "reports" / "reward_audit.json").read_text())
    assert report["paths"]["eval"]["oracle"]["success"] == 1.0
    assert report["paths"]["train"]["oracle"]["per_kind"]["multi_step"]["r_tool"] < 1.0


class IgnoresSummary:
    def score(self, summary, tool_responses, reference, request):
        return 0.9


def test_a_judge_blind_to_the_summary_is_caught(audit_tasks, tokenizer, tmp_path):
    report = audit(_params(tmp_path), audit_tasks, tokenizer, judge=IgnoresSummary())
    assert not report["passed"]
    failed = " ".join(report["failures"])
    # the shared guard still zeroes replies that state no requested fact; an added unseen fact needs the judge
    assert "train: unseen_fact_summary" in failed and "eval: unseen_fact_summary" in failed
    assert "vacuous_summary" not in failed
    with pytest.raises(AuditFailed):
        raise AuditFailed(report["failures"][0])


def test_oracle_copies_what_it_observed_and_grounding_keeps_the_world_consistent(audit_tasks, tokenizer, tmp_path):
    def computed_by_the_first_call(task):  # a value only the first response holds (an ungrounded sim invents another)
        request = task["messages"][-1]["content"]
        values = task["gold_steps"][1][0]["arguments"].values()
        return any(isinstance(v, float) and not v.is_integer() and str(v) not in request for v in values)

    chain = next(t for t in audit_tasks if t["kind"] == "multi_step" and computed_by_the_first_call(t))
    for grounded, expect_gold in ((True, True), (False, False)):
        params = _params(tmp_path, grounded=grounded)
        episode = run_episodes(
            ScriptedTurnGenerator(tokenizer, oracle_turn),
            [chain],
            env_factory=training_env(params),
            max_turns=2,
            max_new_tokens=4096,
        )[0]
        second = json.loads(episode.calls[1][0])
        gold = chain["gold_steps"][1][0]
        assert (second["arguments"] == gold["arguments"]) is expect_gold, (grounded, second, gold)


def test_grounded_session_answers_gold_calls_from_the_record():
    task = {
        "tools": [],
        "gold_steps": [[{"name": "get_x", "arguments": {"city": "Lima", "days": 2}}]],
        "gold_responses": [[{"value": 19}]],
    }

    class Inner:
        def __init__(self):
            self.calls = []

        def call(self, body):
            self.calls.append(body)
            return "synthesised"

    inner = Inner()
    session = GroundedSession(task, inner)
    hit = session.call('{"name": "get_x", "arguments": {"days": "2", "city": " lima "}}')
    assert hit.content == {"value": 19} and hit.to_message() == '{"value": 19}' and inner.calls == []
    assert session.call('{"name": "get_x", "arguments": {"city": "Lima"}}') == "synthesised"
    assert session.call('{"name": "get_x", "arguments": {"city": "Lima", "days": 3}}') == "synthesised"
    assert session.call("not json") == "synthesised" and len(inner.calls) == 3
    real = SimulatorSession([], "schema")
    assert GroundedSession({"gold_steps": []}, real).call('{"name": "nope", "arguments": {}}').ok is False


CALL = '<tool_call>\n{"name": "get_x", "arguments": {"city": "Lima"}}\n</tool_call>'
WRONG = '<tool_call>\n{"name": "get_x", "arguments": {"city": "Cusco"}}\n</tool_call>'


def _parsed(turns):
    return [parse_tool_calls(turn, ["get_x"]) for turn in turns]


def test_toolpo_call_accuracy_by_hand():
    gold = [[{"name": "get_x", "arguments": {"city": "Lima"}}, {"name": "get_x", "arguments": {"city": "Puno"}}]]
    assert call_accuracy(_parsed([CALL]), gold) == 0.5
    assert call_accuracy(_parsed([CALL + CALL]), gold) == 0.5  # a gold call counts once
    assert call_accuracy(_parsed([WRONG]), gold) == 0.0
    assert call_accuracy(_parsed(["Nothing to call."]), []) == 1.0
    assert call_accuracy(_parsed([CALL]), []) == 0.0


def test_rltr_reward_by_hand():
    settings = {"threshold": 0.9, "repeat_penalty": 0.25, "invalid_penalty": 0.5}
    good = rltr_reward(_parsed([CALL, "Done."]), 1.0, 0, **settings)
    assert good == {"rltr": 1.0, "rltr_comp": 1.0, "rltr_repeat": -0.0, "rltr_error": -0.0, "rltr_format_ok": 1.0}
    repeated = rltr_reward(_parsed([CALL, CALL, WRONG]), 0.95, 1, **settings)
    assert repeated["rltr"] == pytest.approx(1.0 - 0.25 - 0.5)  # one consecutive repeat, one rejected call
    below = rltr_reward(_parsed([WRONG]), 0.5, 0, **settings)
    assert below["rltr"] == 0.0
    broken = rltr_reward(_parsed(['<tool_call>{"name": "get_x"', "ok"]), 0.0, 0, **settings)
    assert broken["rltr"] == -1.0 and broken["rltr_format_ok"] == 0.0


@pytest.mark.timeout(30)  # the old search counted up by one: ~10**12 steps here
def test_a_contradicting_number_is_found_beside_numbers_too_big_for_six_digits():
    """Fact tokens keep 6 significant digits; a 19-digit factorial must not trap the search for an absent one."""
    from types import SimpleNamespace

    from slca.rewards.facts import fact_tokens
    from slca.rollout.scripted import _absent_number

    big = 2432902008176640000  # 20!
    episode = SimpleNamespace(tool_responses=[f'{{"factorial": {big}}}'], task={"messages": [{"content": "20!"}]})
    value = _absent_number(episode, big + 11)
    assert fact_tokens(value)[0] != fact_tokens(str(big))[0] and int(value) > big

"""The headline experiment: spec parsing, job planning and resume, paired bootstrap, the report."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml

from slca.config import Params
from slca.eval.experiment_report import (
    collect,
    compute_line,
    load_eval,
    paired_bootstrap,
    paired_difference,
    steps_to_threshold,
    write_experiment_report,
)
from slca.experiment import (
    ExperimentError,
    attempt_path,
    build_groups,
    fits_budget,
    is_done,
    job_hash,
    jobs_for,
    read_spec,
    run_job,
)
from slca.rollout.precision import cpu_model, precision_summary
from slca.runinfo import update_runinfo

REPO = Path(__file__).resolve().parents[1]

KINDS = ("single", "parallel", "no_call")


def test_paired_bootstrap_recovers_a_constant_shift_and_brackets_noise():
    rng = np.random.default_rng(0)
    base = rng.random((3, 200))
    mean, low, high = paired_bootstrap(base + 0.1, base)
    assert mean == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1)
    noisy = base + rng.normal(0.0, 0.3, size=base.shape)
    mean, low, high = paired_bootstrap(noisy, base)
    assert low < mean < high and low < 0.0 < high  # pure noise: the interval contains 0
    mean, low, high = paired_bootstrap(noisy + 0.2, base)
    assert low > 0.0


def test_steps_to_threshold():
    history = [{"step": 0, "v": 0.1}, {"step": 10, "v": 0.12}, {"step": 20, "v": 0.2}]
    assert steps_to_threshold(history, "v", 0.15) == 20
    assert steps_to_threshold(history, "v", 0.5) is None


def write_spec(tmp_path: Path, **extra) -> Path:
    spec = {
        "name": "exp",
        "lanes": 2,
        "overrides": {"train.estimators": ["slca", "grpo"], "train.seeds": [0, 1], "train.val_every": 5},
        "ablations": [{"name": "noisy", "overrides": {"rewards.summary_noise": 0.3}}],
        **extra,
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_groups_share_one_sft_checkpoint_and_keep_their_runs_apart(tmp_path):
    spec_path = write_spec(tmp_path)
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    main, noisy = groups
    assert main.params.sft.out_dir == noisy.params.sft.out_dir
    assert main.params.train.out_dir != noisy.params.train.out_dir
    assert main.params.eval.out_dir != noisy.params.eval.out_dir
    assert noisy.params.rewards.summary_noise == 0.3 and main.params.rewards.summary_noise == 0.0
    upstream, runs = jobs_for(groups, tmp_path / "stamps")
    assert [job.name for job in upstream] == ["data", "sft"]
    assert [command[1] for command in upstream[1].commands] == ["base", "sft"]  # a fresh clone converts the base
    assert runs[0].name == "evaluate-sft"  # needs only the checkpoint: it runs in a lane beside the RL jobs
    assert len(runs) == 1 + 2 * 2 * 2
    assert runs[1].commands[0][:5] == ["slca", "train", "--estimator", "slca", "--seed"]


def test_dvc_exp_commands_reproduce_each_groups_params_through_dvcs_own_override_parser(tmp_path):
    import shlex

    from dvc.utils.hydra import apply_overrides

    from slca.config import dump_params, load_params
    from slca.experiment import LAYOUT_KEYS, dvc_exp_commands

    spec_path = write_spec(tmp_path)
    base = Params()
    groups = build_groups(read_spec(spec_path), base, tmp_path, str(spec_path))
    commands = dvc_exp_commands(groups, base, "exp")
    assert [shlex.split(c)[:5] for c in commands] == [["dvc", "exp", "run", "--name", f"exp-{g.name}"] for g in groups]
    for group, command in zip(groups, commands, strict=True):
        words = shlex.split(command)
        sets = [words[i + 1] for i, word in enumerate(words) if word == "-S"]
        params_file = tmp_path / f"{group.name}.yaml"
        params_file.write_text(dump_params(base))
        apply_overrides(str(params_file), sets)
        layout = {key: _lookup_dotted(base, key) for key in LAYOUT_KEYS}
        expected = group.params.model_dump(mode="json")
        for key, value in layout.items():
            section, leaf = key.split(".")
            expected[section][leaf] = value
        assert load_params(params_file).model_dump(mode="json") == expected


def _lookup_dotted(params: Params, dotted: str):
    section, leaf = dotted.split(".")
    return getattr(getattr(params, section), leaf)


def test_a_changed_setting_reruns_only_the_jobs_it_affects(tmp_path):
    spec_path = write_spec(tmp_path)
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    upstream, runs = jobs_for(groups, tmp_path / "stamps")
    for job in upstream + runs:
        job.stamp.parent.mkdir(parents=True, exist_ok=True)
        job.stamp.write_text(json.dumps({"hash": job_hash(job)}))
        for output in job.outputs:
            output.parent.mkdir(parents=True, exist_ok=True)
            output.touch()
    changed = write_spec(
        tmp_path,
        overrides={
            "train.estimators": ["slca", "grpo"],
            "train.seeds": [0, 1],
            "train.val_every": 5,
            "train.learning_rate": 1e-3,
        },
    )
    upstream2, runs2 = jobs_for(build_groups(read_spec(changed), Params(), tmp_path, str(changed)), tmp_path / "stamps")
    assert all(is_done(job) for job in upstream2)  # data and SFT do not depend on train.*
    assert runs2[0].name == "evaluate-sft" and is_done(runs2[0])  # nor does the SFT start's evaluation
    assert not any(is_done(job) for job in runs2[1:])


def test_a_seed_added_to_a_group_runs_only_the_new_seed_and_legacy_stamps_stay_done(tmp_path):
    """A run's hash leaves out the group's lists of estimators and seeds (its commands name its own), so
    growing them makes only the new runs pending; a stamp written under the rule before (the whole train
    section hashed) that matches the params it ran with is upgraded in place and stays done."""
    spec_path = write_spec(tmp_path, overrides={"train.estimators": ["slca"], "train.seeds": [0]}, ablations=[])
    _, runs = jobs_for(build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path)), tmp_path / "stamps")
    (job,) = [run for run in runs if run.name == "main/slca-s0"]
    job.stamp.parent.mkdir(parents=True, exist_ok=True)
    legacy = {"hash": job_hash(job, legacy=True), "seconds": 12.0}
    assert legacy["hash"] != job_hash(job)
    job.stamp.write_text(json.dumps(legacy, sort_keys=True) + "\n")
    for output in job.outputs:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.touch()
    assert is_done(job)
    assert json.loads(job.stamp.read_text()) == {"hash": job_hash(job), "seconds": 12.0}  # upgraded, kept whole
    grown = write_spec(tmp_path, overrides={"train.estimators": ["slca", "grpo"], "train.seeds": [0, 1]}, ablations=[])
    _, runs2 = jobs_for(build_groups(read_spec(grown), Params(), tmp_path, str(grown)), tmp_path / "stamps")
    pending = [run.name for run in runs2 if run.name != "evaluate-sft" and not is_done(run)]
    assert pending == ["main/grpo-s0", "main/slca-s1", "main/grpo-s1"]
    # a legacy stamp whose params changed since (another learning rate) is stale under both rules
    job.stamp.write_text(json.dumps(legacy, sort_keys=True) + "\n")
    other_lr = {"train.estimators": ["slca"], "train.seeds": [0], "train.learning_rate": 1e-3}
    changed = write_spec(tmp_path, overrides=other_lr, ablations=[])
    _, runs3 = jobs_for(build_groups(read_spec(changed), Params(), tmp_path, str(changed)), tmp_path / "stamps")
    (job3,) = [run for run in runs3 if run.name == "main/slca-s0"]
    assert not is_done(job3) and json.loads(job3.stamp.read_text()) == legacy


def test_an_evaluation_dtype_that_changes_nothing_leaves_landed_runs_done(tmp_path):
    """`eval.generation_dtype` came after the experiment's first stamps: where it names what evaluation did
    before it (`policy`, or the policy's own generation dtype) a job's hash is the one those stamps hold, so
    landed runs stay done; another dtype makes the runs (and the SFT start's evaluation) pending."""
    import hashlib

    from slca.experiment import _lookup

    def before_the_key(job):  # the hash rule as it was, over params without the key
        raw = job.params.model_dump(mode="json")
        raw["project"] = {k: v for k, v in raw["project"].items() if k != "experiment"}
        raw["eval"].pop("generation_dtype")
        for dotted in job.exempt:
            section, _, leaf = dotted.rpartition(".")
            _lookup(raw, section).pop(leaf, None)
        deps = {key: _lookup(raw, key) for key in job.deps}
        return hashlib.sha256(json.dumps([job.commands, deps], sort_keys=True).encode()).hexdigest()[:16]

    pinned = {"train.estimators": ["slca"], "train.seeds": [0], "policy.generation_dtype": "float32"}
    for eval_dtype, same in [("policy", True), ("float32", True), ("bfloat16", False), ("auto", False)]:
        spec_path = write_spec(tmp_path, overrides={**pinned, "eval.generation_dtype": eval_dtype}, ablations=[])
        groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
        _, runs = jobs_for(groups, tmp_path / "stamps")
        for job in runs:  # evaluate-sft and main/slca-s0
            assert (job_hash(job) == before_the_key(job)) is same, (eval_dtype, job.name)


def test_a_fresh_clone_resumes_from_committed_stamps_reports_and_history_copies(tmp_path):
    """Stamps, evaluation reports and history copies are what a session commits; models/ is local."""
    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    upstream, runs = jobs_for(groups, tmp_path / "stamps")
    job = runs[1]
    assert job.name == "main/slca-s0"
    folder, kept = job.history
    folder.mkdir(parents=True)
    rows = [{"step": 0, "val/success": 0.25}, {"step": 5, "val/success": 0.5}]
    (folder / "metrics_history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    update_runinfo(folder, mlflow_run_id="abc123")
    job.commands = []  # the train and evaluate commands stand done; the driver's own bookkeeping runs
    run_job(job, tmp_path / "logs", {"OMP_NUM_THREADS": "1"}, lanes=2)
    stamp = json.loads(job.stamp.read_text())
    assert stamp["lanes"] == 2 and stamp["threads"] == 1 and stamp["hash"] == job_hash(job)
    assert kept.read_text() == (folder / "metrics_history.jsonl").read_text()
    assert not is_done(job)  # no evaluation report yet: a stamp alone is not a finished run
    fake_eval(Path(groups[0].params.eval.out_dir) / "slca-s0.json", "slca", 0, [1.0, 0.0])
    assert is_done(job)
    for path in sorted(folder.rglob("*"), reverse=True):  # a fresh clone: no models/
        path.unlink() if path.is_file() else path.rmdir()
    assert is_done(job)
    assert not is_done(upstream[1])  # the SFT checkpoint is local: it is made again
    (history,) = collect(groups[0].params)["runs"]["slca"]
    assert [row["val/success"] for row in history["history"]] == [0.25, 0.5]
    assert json.loads(kept.with_suffix(".runinfo.json").read_text())["mlflow_run_id"] == "abc123"
    assert "sft_start" not in stamp  # no SFT checkpoint here to read
    line = compute_line([stamp, {"seconds": 60.0, "lanes": 1}, {"seconds": 30.0}])
    assert "job-minutes in all; 1 of 3 jobs ran alone (one lane), 1 side by side in lanes, 1 unrecorded" in line
    assert "SFT start" not in line
    assert "one SFT start (checkpoint digest `ab`)" in compute_line([{"sft_start": "ab"}, {"sft_start": "ab"}])
    assert "**The jobs read 2 different SFT starts**" in compute_line([{"sft_start": "ab"}, {"sft_start": "cd"}])
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO, check=True)
    assert stamp["commit"] == head.stdout.strip() and isinstance(stamp["src_modified"], bool)  # the code it ran
    assert "Code: commit `a1`." in compute_line([{"commit": "a1"}, {"commit": "a1"}])
    two = compute_line([{"commit": "a1"}, {"commit": "b2", "src_modified": True}])
    assert "Code: commits `a1`, `b2`, 1 job(s) with uncommitted changes under src/." in two
    # the precision `auto` resolved to on the machine that ran it, and a report that says when it differed
    assert stamp["precision"] == precision_summary(job.params.policy, job.params)
    assert "in every recorded job" in compute_line([stamp, stamp])
    native = {"cpu_bf16": True, "generation_dtype": "bfloat16", "native_bf16": True}
    emulated = {"cpu_bf16": False, "generation_dtype": "float32", "native_bf16": False}
    mixed = compute_line([{"precision": native}, {"precision": emulated}, {"precision": emulated}])
    assert (
        "**Precision differed between jobs**: 1 × bf16 autocast training, bfloat16 generation (native bf16); "
        "2 × fp32 training, float32 generation." in mixed
    )
    assert "Machines differed: 1 job(s) on a CPU with bf16 instructions, 2 on one without" in mixed
    # fp32 on CPUs with and without bf16 instructions: one precision, two kinds of machine
    native_fp32 = {"cpu_bf16": False, "generation_dtype": "float32", "native_bf16": True}
    fp32_both = compute_line([{"precision": native_fp32}, {"precision": emulated}])
    assert "Precision: fp32 training, float32 generation in every recorded job." in fp32_both
    assert "Precision differed" not in fp32_both
    assert "Machines differed: 1 job(s) on a CPU with bf16 instructions, 1 on one without" in fp32_both
    assert "Machines differed" not in compute_line([{"precision": emulated}, {"precision": emulated}])
    # the processor it ran on, counted per processor in the report (earlier stamps without one apart)
    assert stamp["cpu"] == cpu_model()
    xeon, epyc = (
        "Intel(R) Xeon(R) Processor (family 6, model 207)",
        "AMD EPYC 9R14 96-Core Processor (family 25, model 17)",
    )
    counted = compute_line([{"cpu": xeon}, {"cpu": epyc}, {"cpu": xeon}, {}])
    assert f"Processors: 1 × {epyc}; 2 × {xeon}; not recorded: 1 earlier job(s)." in counted
    assert compute_line([{"cpu": xeon}]).endswith(f"Processors: 1 × {xeon}.")
    assert "Processors" not in compute_line([{"precision": emulated}])


def test_a_job_stopped_mid_run_is_continued_and_its_stamp_adds_the_attempts(tmp_path, monkeypatch):
    """A session that ends inside a run leaves a marker, a log and the run's checkpoints; the next call's
    attempt continues them (the train stage resumes) and the stamp counts both attempts' time and lanes."""
    import os

    import slca.experiment as experiment

    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    stamps, logs = tmp_path / "stamps", tmp_path / "logs"
    _, runs = jobs_for(groups, stamps)
    job = runs[1]
    folder, _ = job.history
    state = folder / "checkpoints" / "checkpoint-3" / "trainer_state.json"
    state.parent.mkdir(parents=True)
    (folder / "metrics_history.jsonl").write_text(json.dumps({"step": 3}) + "\n")
    log = logs / "main__slca-s0.log"
    exit_codes: list[int] = []

    def command(exe, stdout, stderr, env):  # the job's train/evaluate commands, standing in for `slca ...`
        assert json.loads(attempt_path(job).read_text())["hash"] == job_hash(job)  # marked while it runs
        stdout.write(f"{exe[3]} ran\n")
        return exit_codes.pop(0)

    monkeypatch.setattr(experiment.subprocess, "call", command)

    def attempt(exit_code: int, lanes: int, ran_s: float | None = None) -> dict:
        exit_codes[:] = [exit_code, 0]
        if exit_code:  # stopped inside train: no stamp, a marker and a log whose last line came `ran_s` in
            with pytest.raises(ExperimentError, match="failed at `slca train"):
                run_job(job, logs, {"OMP_NUM_THREADS": "1"}, lanes=lanes)
            started = json.loads(attempt_path(job).read_text())["started"]
            os.utime(log, (started + ran_s, started + ran_s))
            assert not job.stamp.exists()
            return {}
        run_job(job, logs, {"OMP_NUM_THREADS": "1"}, lanes=lanes)
        assert not attempt_path(job).exists()
        return json.loads(job.stamp.read_text())

    attempt(1, lanes=2, ran_s=300.0)
    first = log.read_text()
    assert json.loads(attempt_path(job).read_text())["attempts"] == 1
    # without a written trainer state there is nothing to continue: the job would start over
    assert experiment.earlier_attempt(job, logs)["seconds"] == pytest.approx(300.0, abs=0.1)
    assert not experiment.resumable(job)
    state.write_text("{}")
    assert experiment.resumable(job)
    # the budget plans only what is left: a run planned at 1000 s with 300 s run fits 700 s
    done = runs[2]
    done.stamp.parent.mkdir(parents=True, exist_ok=True)
    done.stamp.write_text(json.dumps({"hash": job_hash(done), "seconds": 1000.0}))
    assert fits_budget(job, stamps, 0.0, 700.0 / 60) and not fits_budget(job, stamps, 1.0, 700.0 / 60)
    assert not fits_budget(runs[3], stamps, 0.0, 700.0 / 60)  # another run: planned at 1000 s
    # attempt 2, alone: the train command continued checkpoint-3 (as `slca train` records it)
    update_runinfo(folder, resumed_from="checkpoint-3")
    stamp = attempt(0, lanes=1)
    assert stamp["attempts"] == 2 and stamp["resumed_from"] == "checkpoint-3"
    assert stamp["earlier_attempts_seconds"] == pytest.approx(300.0, abs=0.1)
    assert 300.0 <= stamp["seconds"] < 330.0 and stamp["lanes"] == 2  # not alone: attempt 1 had a neighbour
    text = log.read_text()
    assert text.startswith(first) and "# attempt 2: continues 1 earlier attempt(s) (300 s)" in text
    # two stopped attempts, then one that continues: all three add up
    attempt(1, lanes=1, ran_s=100.0)
    attempt(1, lanes=1, ran_s=40.0)
    stamp = attempt(0, lanes=1)
    assert stamp["attempts"] == 3 and stamp["earlier_attempts_seconds"] == pytest.approx(140.0, abs=0.1)
    assert stamp["lanes"] == 1
    # a checkpoint, but the train command started over (other params in the run dir): set apart, not added
    attempt(1, lanes=1, ran_s=50.0)
    update_runinfo(folder, resumed_from=None)
    stamp = attempt(0, lanes=1)
    assert "attempts" not in stamp and stamp["discarded_seconds"] == pytest.approx(50.0, abs=0.1)
    assert stamp["seconds"] < 30.0
    # stopped during the evaluation: the run folder holds the finished run under the identity the train command
    # would record now, so the next attempt skips training and counts the stopped attempt's time
    from slca.train.train_stage import identity_hash, run_identity

    attempt(1, lanes=1, ran_s=90.0)
    (folder / "metrics.json").write_text("{}")
    identity = folder / "run_identity.json"
    identity.write_text(json.dumps({"sha256": identity_hash(run_identity(job.params, "slca", 0))}))
    assert experiment.trained(job) and not experiment.resumable(job)
    exit_codes[:] = [0]  # one command runs: the evaluation
    run_job(job, logs, {"OMP_NUM_THREADS": "1"}, lanes=1)
    stamp = json.loads(job.stamp.read_text())
    assert stamp["attempts"] == 2 and stamp["resumed_from"] == "finished training" and stamp["seconds"] >= 90.0
    assert "# skipped: an earlier attempt finished this run" in log.read_text().splitlines()[-3]
    assert log.read_text().splitlines()[-1] == "evaluate ran" and exit_codes == []
    identity.write_text(json.dumps({"sha256": identity_hash(run_identity(job.params, "grpo", 0))}))
    assert not experiment.trained(job)  # another run's identity: the train command runs (and starts over)
    (folder / "metrics.json").unlink()
    # no checkpoint left (a fresh machine): nothing earlier is read and the log starts anew
    shutil.rmtree(folder / "checkpoints")
    attempt(1, lanes=1, ran_s=20.0)
    stamp = attempt(0, lanes=1)
    assert "attempts" not in stamp and "discarded_seconds" not in stamp
    assert "# attempt" not in log.read_text()
    line = compute_line([{"seconds": 600.0, "attempts": 2}, {"seconds": 60.0, "discarded_seconds": 120.0}, {}])
    assert "1 job(s) ran in 2 or more attempts" in line and "2.0 job-minutes of stopped attempts" in line


def test_a_budget_starts_only_jobs_that_finished_jobs_say_will_fit(tmp_path):
    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    _, runs = jobs_for(groups, tmp_path / "stamps")
    evaluate_sft, slca_s0, grpo_s0 = runs[0], runs[1], runs[2]
    assert fits_budget(slca_s0, tmp_path / "stamps", 10_000.0, 1.0)  # nothing finished yet: no estimate, it starts
    assert fits_budget(slca_s0, tmp_path / "stamps", 10_000.0, None)  # no budget
    for job, seconds in ((evaluate_sft, 600.0), (slca_s0, 2400.0)):
        job.stamp.parent.mkdir(parents=True, exist_ok=True)
        job.stamp.write_text(json.dumps({"hash": job_hash(job), "seconds": seconds}))
    # a run is planned at the longest finished run of any estimator; the SFT evaluation at its own time
    assert fits_budget(grpo_s0, tmp_path / "stamps", 1200.0, 60.0)  # 20 + 40 min ends at the budget
    assert not fits_budget(grpo_s0, tmp_path / "stamps", 1201.0, 60.0)
    assert fits_budget(evaluate_sft, tmp_path / "stamps", 3000.0, 60.0)  # 50 + 10 min
    assert not fits_budget(evaluate_sft, tmp_path / "stamps", 3001.0, 60.0)


def test_a_budget_plans_from_runs_on_the_same_kind_of_cpu(tmp_path, monkeypatch):
    """A run that took longer on a CPU of another kind (with or without bf16 instructions) does not shrink
    the plan on this one; with none from this kind yet, every finished run counts."""
    import slca.experiment as experiment

    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    _, runs = jobs_for(groups, tmp_path / "stamps")
    slca_s0, grpo_s0 = runs[1], runs[2]
    for job, seconds, native in ((slca_s0, 2400.0, False), (grpo_s0, 4000.0, True)):
        job.stamp.parent.mkdir(parents=True, exist_ok=True)
        job.stamp.write_text(json.dumps({"seconds": seconds, "precision": {"native_bf16": native}}))
    stamps = tmp_path / "stamps"
    monkeypatch.setattr(experiment, "native_bf16", lambda: False)
    assert experiment.expected_seconds(runs[3], stamps) == 2400.0
    monkeypatch.setattr(experiment, "native_bf16", lambda: True)
    assert experiment.expected_seconds(runs[3], stamps) == 4000.0
    grpo_s0.stamp.unlink()  # no run from this kind of CPU: the others' plan it
    assert experiment.expected_seconds(runs[3], stamps) == 2400.0


def test_a_budget_plans_from_runs_on_this_processor_first(tmp_path, monkeypatch):
    """Two CPUs of one kind (both with bf16 instructions) ran a run 40 and 68 minutes: the plan on the
    faster one reads its own runs; on a processor no stamp names, the kind's runs plan it as before."""
    import slca.experiment as experiment

    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    _, runs = jobs_for(groups, tmp_path / "stamps")
    fast, slow = "Intel(R) Xeon(R) Processor (family 6, model 207)", "AMD EPYC 7R13 Processor (family 25, model 1)"
    for job, seconds, cpu in ((runs[1], 2400.0, fast), (runs[2], 4100.0, slow), (runs[3], 2000.0, None)):
        job.stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp = {"seconds": seconds, "precision": {"native_bf16": True}} | ({"cpu": cpu} if cpu else {})
        job.stamp.write_text(json.dumps(stamp))
    stamps = tmp_path / "stamps"
    monkeypatch.setattr(experiment, "native_bf16", lambda: True)
    monkeypatch.setattr(experiment, "cpu_model", lambda: fast)
    assert experiment.expected_seconds(runs[4], stamps) == 2400.0
    monkeypatch.setattr(experiment, "cpu_model", lambda: slow)
    assert experiment.expected_seconds(runs[4], stamps) == 4100.0
    monkeypatch.setattr(experiment, "cpu_model", lambda: "Arm Neoverse-V2")  # no stamp from it: the kind plans
    assert experiment.expected_seconds(runs[4], stamps) == 4100.0


def test_a_profile_sets_the_regime_the_overrides_apply_to(tmp_path):
    """`profile: tiny` rebuilds a previous regime's params from today's SmolLM2 params.yaml, and the
    report's configuration names the policy of each regime."""
    from slca.config import apply_profile
    from slca.eval.experiment_report import configuration

    smol = apply_profile(Params(), "smollm2")
    spec_path = write_spec(tmp_path, profile="tiny")
    tiny_main = build_groups(read_spec(spec_path), smol, tmp_path, str(spec_path))[0].params
    smol_main = build_groups(read_spec(write_spec(tmp_path)), smol, tmp_path, str(spec_path))[0].params
    assert tiny_main.policy.base_gguf is None and tiny_main.policy.lora.enabled is False
    assert smol_main.policy.base_gguf and smol_main.train.estimators == tiny_main.train.estimators == ["slca", "grpo"]
    assert "embedded tiny Qwen2" in configuration(tiny_main)[0]
    described = configuration(smol_main)[0]
    assert "SmolLM2-135M-Instruct" in described and "adapters/smollm2-sft" in described


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("overrides: {train.nope: 1}", "no key 'nope'"),
        ("overrides: {nosuch.key: 1}", "no section 'nosuch'"),
        ("bogus: 1", "unknown keys"),
        ("overrides: [", "not valid YAML"),
        ("overrides: {train.max_steps: 0}", "validation error"),
        ("profile: nosuch", "profile 'nosuch' not found"),
    ],
)
def test_a_malformed_spec_is_named(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ExperimentError, match=message):
        build_groups(read_spec(path), Params(), tmp_path, str(path))


def fake_eval(path: Path, estimator: str, seed: int, success: list[float]) -> None:
    episodes = [
        {
            "task_id": f"t{i}",
            "kind": KINDS[i % 3],
            "success": s,
            "process": s,
            "name_f1": s,
            "arg_match": s,
            "r_sum": s,
            "calls": 1.0,
            "redundant_calls": 0.0,
            "needs_call": float(KINDS[i % 3] != "no_call"),
            "called": float(KINDS[i % 3] != "no_call"),
        }
        for i, s in enumerate(success)
    ]
    mean = sum(success) / len(success)
    report = {
        "run": f"{estimator}-s{seed}",
        "indomain": {
            "metrics": {
                "success": mean,
                "process": mean,
                "name_f1": mean,
                "arg_match": mean,
                "r_sum": mean,
                "no_call_accuracy": 0.0,
                "calls": 1.0,
                "redundant_calls": 0.0,
            },
            "per_kind": {k: {"success": mean} for k in KINDS},
            "episodes": episodes,
        },
        "bfcl": {"accuracy": {"irrelevance": 0.5}, "aggregate": {"overall_accuracy_non_live": 0.1}},
        "tau2": {"metrics": {"pass_hat_1": 0.0}},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report))


def test_report_holds_every_estimator_the_sft_row_intervals_and_curves(tmp_path, mlflow_store):
    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    params = groups[0].params
    rng = np.random.default_rng(1)
    for estimator, shift in (("slca", 0.3), ("grpo", 0.0)):
        for seed in (0, 1):
            fake_eval(
                Path(params.eval.out_dir) / f"{estimator}-s{seed}.json",
                estimator,
                seed,
                [float(rng.random() < 0.3 + shift) for _ in range(90)],
            )
            run = Path(params.train.out_dir) / f"{estimator}-s{seed}"
            run.mkdir(parents=True, exist_ok=True)
            rows = [
                {
                    "step": s,
                    "val/success": 0.1 + shift * s / 10,
                    "rewards/r_tool/mean": 0.5,
                    "credit/misattribution_rate": 0.2,
                }
                for s in (0, 5, 10)
            ]
            (run / "metrics_history.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{torn")
    fake_eval(Path(params.eval.out_dir) / "sft.json", "sft", 0, [0.0] * 90)
    numbers = write_experiment_report(groups, tmp_path / "reports" / "exp.md")
    text = (tmp_path / "reports" / "exp.md").read_text()
    assert "| SFT (start) | 1 |" in text and "| slca | 2 |" in text and "| grpo | 2 |" in text
    assert numbers["paired"]["grpo.success"]["low"] > 0  # a 0.3 shift over 180 pairs is resolved
    assert "vs grpo: Success +" in text and "SLCA is better" in text
    assert "**Yes: SLCA's Success is above every baseline's" in text
    assert numbers["curves"]["slca"]["steps_to_threshold"] == 5
    assert numbers["curves"]["grpo"]["steps_to_threshold"] is None
    assert (tmp_path / "reports" / "exp" / "summary.png").stat().st_size > 0
    assert (tmp_path / "reports" / "exp" / "curves.png").stat().st_size > 0
    assert "| slca-s0 | — | missing |" in text  # no run dir marker: said so, not invented
    # what RL added over the all-zero SFT start, read off the same episodes
    assert "| estimator − SFT start |" in text
    assert numbers["vs_start"]["slca.success"]["low"] > 0.4
    assert abs(numbers["vs_start"]["grpo.success"]["mean"] - 0.3) < 0.1
    assert "The interval excludes 0 for slca, grpo." in text
    assert "slca reached the validation threshold at step 5" in text


def test_findings_say_when_rl_did_not_move_the_policy(tmp_path, mlflow_store):
    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    params = groups[0].params
    same = [1.0, 0.0, 0.0] * 30
    for estimator in ("slca", "grpo"):
        for seed in (0, 1):
            fake_eval(Path(params.eval.out_dir) / f"{estimator}-s{seed}.json", estimator, seed, same)
    fake_eval(Path(params.eval.out_dir) / "sft.json", "sft", 0, same)
    numbers = write_experiment_report(groups, tmp_path / "reports" / "exp.md")
    text = (tmp_path / "reports" / "exp.md").read_text()
    assert numbers["vs_start"]["slca.success"] == {"mean": 0.0, "low": 0.0, "high": 0.0}
    assert "No estimator's Success separates from the SFT start" in text
    assert "**No, not at this budget: no SLCA − baseline Success interval excludes 0.**" in text
    assert "no estimator reached the validation threshold" in text


def test_an_slca_only_ablation_is_paired_with_the_main_grpo_runs(tmp_path, mlflow_store):
    spec_path = write_spec(
        tmp_path,
        ablations=[
            {"name": "variant", "label": "abstainers in the tool baseline", "overrides": {"train.estimators": ["slca"]}}
        ],
    )
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    rng = np.random.default_rng(2)
    for group, runs in ((groups[0], (("slca", 0.0), ("grpo", 0.0))), (groups[1], (("slca", 0.4),))):
        for estimator, shift in runs:
            for seed in (0, 1):
                fake_eval(
                    Path(group.params.eval.out_dir) / f"{estimator}-s{seed}.json",
                    estimator,
                    seed,
                    [float(rng.random() < 0.3 + shift) for _ in range(90)],
                )
    numbers = write_experiment_report(groups, tmp_path / "reports" / "exp.md")
    text = (tmp_path / "reports" / "exp.md").read_text()
    assert "| abstainers in the tool baseline |" in text
    assert numbers["ablations"]["variant"]["grpo.success"]["low"] > 0
    main = numbers["ablations"]["main"]["grpo.success"]
    assert main["low"] < 0 < main["high"]


def test_a_stopped_experiment_is_reported_as_incomplete(tmp_path, mlflow_store):
    spec_path = write_spec(tmp_path, ablations=[])
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    params = groups[0].params
    for estimator, seed in (("slca", 0), ("grpo", 0), ("slca", 1)):
        fake_eval(Path(params.eval.out_dir) / f"{estimator}-s{seed}.json", estimator, seed, [1.0, 0.0] * 30)
    write_experiment_report(groups, tmp_path / "reports" / "exp.md")
    text = (tmp_path / "reports" / "exp.md").read_text()
    assert "**Incomplete: 1 planned run(s)" in text and "grpo-s1" in text
    assert "| slca | 2 |" in text and "| grpo | 1 |" in text


def test_only_names_an_existing_group(tmp_path):
    from slca.experiment import run_experiment

    spec_path = write_spec(tmp_path)
    (tmp_path / "params.yaml").write_text("{}")
    with pytest.raises(ExperimentError, match=r"no group named \['nope'\]"):
        run_experiment(spec_path, tmp_path / "params.yaml", only=["nope"], root=tmp_path)


def test_the_noise_curve_pairs_slca_with_gdpo_and_grpo_at_each_sigma_and_the_bias_table_reads_histories(
    tmp_path, mlflow_store
):
    """Main setting σ = 0 (slca, grpo, gdpo) and two noise settings; SLCA's lead grows with σ by construction.
    Histories log the segment bias on no_call only for slca (a lone caller's bonus) and 0 for gdpo."""
    spec_path = write_spec(
        tmp_path,
        overrides={"train.estimators": ["slca", "grpo", "gdpo"], "train.seeds": [0, 1]},
        ablations=[
            {
                "name": f"noise-{s}",
                "label": f"σ = {s}",
                "overrides": {"rewards.summary_noise": s, "train.estimators": ["slca", "gdpo", "grpo"]},
            }
            for s in (0.3, 0.6)
        ],
    )
    groups = build_groups(read_spec(spec_path), Params(), tmp_path, str(spec_path))
    rng = np.random.default_rng(3)
    lead = {"main": 0.0, "noise-0.3": 0.15, "noise-0.6": 0.35}
    for group in groups:
        for estimator in ("slca", "grpo", "gdpo"):
            for seed in (0, 1):
                shift = lead[group.name] if estimator == "slca" else 0.0
                fake_eval(
                    Path(group.params.eval.out_dir) / f"{estimator}-s{seed}.json",
                    estimator,
                    seed,
                    [float(rng.random() < 0.3 + shift) for _ in range(120)],
                )
                run = Path(group.params.train.out_dir) / f"{estimator}-s{seed}"
                run.mkdir(parents=True, exist_ok=True)
                bonus = 1.5 if estimator == "slca" else 0.0
                rows = [
                    {
                        "step": s,
                        "credit/segbias/tool_mean.no_call": bonus,
                        "credit/segbias/tool_abs.no_call": bonus,
                        "credit/segbias/summary_mean.multi_step": -0.2,
                    }
                    for s in (1, 2)
                ]
                (run / "metrics_history.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    start_success = [float(rng.random() < 0.3) for _ in range(120)]
    fake_eval(Path(groups[0].params.eval.out_dir) / "sft.json", "sft", 0, start_success)
    numbers = write_experiment_report(groups, tmp_path / "reports" / "exp.md")
    text = (tmp_path / "reports" / "exp.md").read_text()
    assert text.startswith("# Exp: SLCA-GRPO against GRPO and GDPO")
    assert "## Judge noise" in text and (tmp_path / "reports" / "exp" / "noise.png").stat().st_size > 0
    assert sorted(numbers["noise"]) == [0.0, 0.3, 0.6]
    gaps = [numbers["noise"][s]["slca-gdpo"] for s in (0.0, 0.3, 0.6)]
    assert gaps[0] < gaps[1] < gaps[2] and abs(gaps[0]) < 0.1
    assert numbers["ablations"]["noise-0.6"]["grpo.success"]["low"] > 0
    point = numbers["noise"][0.6]
    assert point["slca-grpo_low"] > 0 and point["slca-grpo_low"] < point["slca-grpo"] < point["slca-grpo_high"]
    assert point["slca_runs"] == 2 and point["slca_std"] > 0
    assert "| 0.3 | σ = 0.3 | 2/2/2 | " in text
    # the R_sum table beside it: the same pairing on the clean judge's summary reward, per σ
    noise_eval = Path(groups[2].params.eval.out_dir)
    reports = {e: [load_eval(noise_eval / f"{e}-s{seed}.json") for seed in (0, 1)] for e in ("slca", "gdpo")}
    r_sum_gap = paired_difference(reports["slca"], reports["gdpo"], "r_sum")
    assert point["slca-gdpo_r_sum"] == pytest.approx(r_sum_gap["mean"])
    assert point["slca-gdpo_r_sum_low"] == pytest.approx(r_sum_gap["low"]) and r_sum_gap["low"] > 0
    mean_r_sum = np.mean([r["summary"]["r_sum"] for r in collect(groups[2].params)["runs"]["slca"]])
    assert point["slca_r_sum"] == pytest.approx(mean_r_sum)
    r_sum_row = next(line for line in text.splitlines() if line.startswith("| 0.6 | 2/2/2 | "))
    cells = [cell.strip() for cell in r_sum_row.strip("|").split("|")]
    assert cells[2] == f"{mean_r_sum:.3f}"
    assert cells[5] == f"{r_sum_gap['mean']:+.3f} [{r_sum_gap['low']:+.3f}, {r_sum_gap['high']:+.3f}]"
    # each setting's SLCA against the main SLCA, seed with seed: σ 0.6's built-in lead of 0.35 shows
    main_slca = [load_eval(Path(groups[0].params.eval.out_dir) / f"slca-s{seed}.json") for seed in (0, 1)]
    own_gap = paired_difference(reports["slca"], main_slca, "success")
    assert numbers["vs_main_slca"]["noise-0.6"]["success"] == pytest.approx(own_gap) and own_gap["low"] > 0.2
    assert numbers["vs_main_slca"]["noise-0.6"]["seeds"] == [0, 1] and "main" not in numbers["vs_main_slca"]
    own_row = next(line for line in text.splitlines() if line.startswith("| σ = 0.6 | 0, 1 | "))
    assert own_row.split(" | ")[2] == f"{own_gap['mean']:+.3f} [{own_gap['low']:+.3f}, {own_gap['high']:+.3f}]"
    # the setting's SLCA against the SFT start the main group evaluated (every run of the setting, the start
    # repeated for each): σ 0.6's built-in lead shows there too, and the cell names its runs
    start = load_eval(Path(groups[0].params.eval.out_dir) / "sft.json")
    start_gap = paired_difference(reports["slca"], [start], "success")
    assert numbers["vs_main_slca"]["noise-0.6"]["start_success"] == pytest.approx(start_gap)
    assert start_gap["low"] > 0.1 and numbers["vs_main_slca"]["noise-0.6"]["start_seeds"] == [0, 1]
    gap_cell = f"{start_gap['mean']:+.3f} [{start_gap['low']:+.3f}, {start_gap['high']:+.3f}] (2)"
    assert own_row.rstrip(" |").endswith(gap_cell)
    # a cell with unequal run counts (GRPO seed 1 not landed): the difference pairs seed 0 with seed 0 only
    (noise_eval / "grpo-s1.json").unlink()
    numbers = write_experiment_report(groups, tmp_path / "reports" / "exp.md")
    text = (tmp_path / "reports" / "exp.md").read_text()
    assert "| 0.6 | σ = 0.6 | 2/2/1 | " in text and "uses only the seeds both ran" in text
    seed0 = paired_difference(
        [load_eval(noise_eval / "slca-s0.json")], [load_eval(noise_eval / "grpo-s0.json")], "success"
    )["mean"]
    point = numbers["noise"][0.6]
    assert point["slca-grpo"] == pytest.approx(seed0)
    assert point["slca-grpo"] != pytest.approx(point["slca"] - point["grpo"])
    # a σ cell still missing its GRPO runs (the ablations land a few runs a session): counted, not filled in
    (noise_eval / "grpo-s0.json").unlink()
    numbers = write_experiment_report(groups, tmp_path / "reports" / "exp.md")
    text = (tmp_path / "reports" / "exp.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 0.6 | σ = 0.6 |"))
    assert "| 2/2/0 |" in row and row.endswith("| — |") and math.isnan(numbers["noise"][0.6]["slca-grpo"])
    assert numbers["noise"][0.6]["slca-gdpo_low"] > 0
    # numbers.json is strict JSON: the empty cell is null, not Python's bare NaN

    def refuse(constant: str) -> float:
        raise ValueError(f"numbers.json holds {constant}")

    written = json.loads((tmp_path / "reports" / "exp" / "numbers.json").read_text(), parse_constant=refuse)
    assert written["noise"]["0.6"]["slca-grpo"] is None and written["noise"]["0.6"]["slca_runs"] == 2
    assert "SLCA − GDPO Success per setting:" in text
    assert "## Segment-normalisation bias" in text
    assert numbers["segbias"]["main.slca"]["tool_mean.no_call"] == 1.5
    assert numbers["segbias"]["main.gdpo"]["tool_mean.no_call"] == 0.0
    assert numbers["segbias"]["main.slca"]["summary_mean.multi_step"] == -0.2
    assert "noise-0.3.slca" in numbers["segbias"] and "noise-0.3.gdpo" not in numbers["segbias"]
    assert "| main | slca | — | 1.500 | -0.200 | — | 0.000 |" in text


def test_every_committed_numbers_json_is_strict_json():
    def refuse(constant: str) -> float:
        raise ValueError(f"holds a bare {constant}")

    committed = sorted(REPO.glob("reports/*/numbers.json"))
    assert {path.parent.name for path in committed} >= {"experiment", "previous_tiny"}
    for path in committed:
        json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def test_the_headline_spec_trains_smollm2_five_estimators_400_rollouts_each_on_150_test_tasks(tmp_path):
    from slca.config import load_params

    repo = Path(__file__).resolve().parents[1]
    spec = repo / "experiments" / "headline.yaml"
    groups = build_groups(read_spec(spec), load_params(repo / "params.yaml"), tmp_path, str(spec))
    main = groups[0].params
    assert main.policy.base_gguf and "SmolLM2" in main.policy.base_gguf and main.sft.init_adapter
    assert main.train.estimators == ["slca", "grpo", "gdpo", "toolpo", "rltr"] and len(main.train.seeds) >= 3
    assert main.eval.n_test >= 150 and main.eval.tau2.enabled and len(main.eval.bfcl.categories) == 7
    for group in groups:
        train = group.params.train
        assert train.max_steps * train.prompts_per_step * train.num_generations >= 400, group.name
        assert group.params.eval.n_test >= 150, group.name
    # the noise curve: the main setting and the groups that change only σ (not the variant, not the budget)
    noise = {g.params.rewards.summary_noise: g.params.train for g in groups if g.name.startswith(("main", "judge-"))}
    assert set(noise) == {0.0, 0.3, 0.6}
    for sigma, train in noise.items():
        assert {"slca", "gdpo", "grpo"} <= set(train.estimators) and len(train.seeds) >= 2, sigma


def _dotted(tree: dict, prefix: str = "") -> dict:
    out: dict = {}
    for key, value in tree.items():
        if isinstance(value, dict) and key != "tiny":
            out.update(_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.slow
def test_make_experiment_runs_every_job_for_real_then_resumes_without_rerunning(tmp_path, mlflow_store, monkeypatch):
    """The driver end to end on the tiny policy: data → base → SFT → the SFT start's evaluation → one
    train→evaluate run, each through the real `slca` commands; stamps, kept history and report land where
    they are committed, and a second call (a resumed session) runs nothing."""
    from slca.experiment import run_experiment
    from tests.test_orchestration import TINY

    overrides = _dotted({k: v for k, v in TINY.items() if k != "pipeline"})
    overrides.update(
        {
            "train.estimators": ["slca"],
            "train.seeds": [0],
            "train.val_every": 1,
            "train.val_tasks": 2,
            "eval.bfcl.categories": ["irrelevance"],
            "project.tracking_uri": mlflow_store,
        }
    )
    spec = {"name": "exp", "profile": "tiny", "lanes": 1, "report": "reports/exp.md", "overrides": overrides}
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(spec))
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    monkeypatch.chdir(tmp_path)  # the jobs run in the working directory, as `make experiment` does in the checkout
    monkeypatch.setenv("SLCA_VAL_START_CACHE", str(tmp_path / "val_start"))

    run_experiment(Path("exp.yaml"), Path("params.yaml"))
    stamps = {
        p.relative_to(tmp_path / "reports/exp/stamps").as_posix(): json.loads(p.read_text())
        for p in (tmp_path / "reports/exp/stamps").rglob("*.json")
    }
    assert sorted(stamps) == ["data.json", "evaluate-sft.json", "main/slca-s0.json", "sft.json"]
    assert all(s["lanes"] == 1 and s["seconds"] > 0 and s["commit"] for s in stamps.values())
    assert stamps["main/slca-s0.json"]["sft_start"] == stamps["evaluate-sft.json"]["sft_start"]
    main = tmp_path / "reports/exp/main"
    report = json.loads((main / "eval/slca-s0.json").read_text())
    assert report["estimator"] == "slca" and report["metrics"]["indomain.n"] == 2.0
    history = [json.loads(line) for line in (main / "history/slca-s0.jsonl").read_text().splitlines()]
    assert [row["step"] for row in history if "val/success" in row] == [0, 1, 2]
    assert (main / "eval/sft.json").exists() and (tmp_path / "reports/exp.md").exists()
    assert "4 of 4 jobs ran alone (one lane)" in (tmp_path / "reports/exp.md").read_text()

    logs = {p: p.stat().st_mtime_ns for p in (tmp_path / "reports/exp/logs").glob("*.log")}
    run_experiment(Path("exp.yaml"), Path("params.yaml"))  # a resumed session: every job is done
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "reports/exp/logs").glob("*.log")} == logs
    assert json.loads((tmp_path / "reports/exp/stamps/main/slca-s0.json").read_text()) == stamps["main/slca-s0.json"]

    # a session with too little time left: the run (planned at its finished time) is left for the next call
    (tmp_path / "reports/exp/main/eval/slca-s0.json").unlink()
    numbers = run_experiment(Path("exp.yaml"), Path("params.yaml"), budget_minutes=0.01)
    assert numbers["deferred"] == ["main/slca-s0"]
    assert numbers["verdict_lines"] == ["no report yet: the experiment has no slca runs to compare against"]
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "reports/exp/logs").glob("*.log")} == logs

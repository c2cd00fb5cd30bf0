"""The headline experiment: every estimator from one SFT checkpoint, several seeds, one report.

An experiment file (`experiments/headline.yaml`) names overrides of `params.yaml` and the
ablations; this driver turns it into one params file per group, runs the pipeline's own stage
commands (`slca synthesize`, `calibrate`, `sft`, `train`, `evaluate`, each a finished MLflow run)
and writes `reports/experiment.md`. Independent train→evaluate jobs run side by side in
`lanes` processes (one torch thread each), which on 2 cores beats one job on two threads.
A finished job leaves a stamp with the hash of its params (and its seconds, threads and lanes);
a rerun skips a job whose stamp matches and whose outputs are there, so an interrupted experiment
resumes where it stopped and a changed setting reruns exactly what it affects. The stamps, the
evaluation reports and a copy of each run's training history (`reports/<name>/<group>/history/`)
are small and meant to be committed as items land: a fresh clone then reruns only the upstream
jobs (data, SFT: their outputs are local) and the runs that have no committed report.

    slca experiment                        # = make experiment
    slca experiment --report-only          # rebuild the report from finished runs
    slca experiment --dvc-exp              # the same groups as `dvc exp run` commands
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from slca.config import Params, ParamsError, apply_profile, load_params, with_overrides
from slca.rollout.precision import cpu_model, native_bf16, precision_summary
from slca.tracking import write_atomic


class ExperimentError(RuntimeError):
    """A malformed experiment file or a failed job; the message names the file or the job's log."""


@dataclass(frozen=True)
class Group:
    """One set of runs sharing params: the main comparison or one ablation setting."""

    name: str
    params: Params
    params_path: Path
    label: str = ""


@dataclass
class Job:
    name: str
    commands: list[list[str]]
    params: Params
    stamp: Path
    deps: list[str] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)  # all present, with a matching stamp: done
    history: tuple[Path, Path] | None = None  # (the run's folder, where its history copy is kept)
    # dotted keys inside `deps` the job does not depend on: a run's commands name its own estimator and seed,
    # so a group's lists of them can grow without making its landed runs stale
    exempt: tuple[str, ...] = ()


#: the keys a train -> evaluate run's hash leaves out (its estimator and seed are in its commands)
RUN_EXEMPT = ("train.estimators", "train.seeds")


def apply_overrides(params: Params, overrides: Mapping[str, Any], source: str) -> Params:
    try:
        return with_overrides(params, overrides, f"{source}: override")
    except ValidationError as error:
        raise ExperimentError(
            f"{source}: {str(error).splitlines()[0]}: {str(error).splitlines()[-1].strip()}"
        ) from None
    except ParamsError as error:
        raise ExperimentError(str(error)) from None


def params_hash(params: Params) -> str:
    return hashlib.sha256(json.dumps(params.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:16]


def read_spec(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ExperimentError(f"{path} not found: give an experiment file (see experiments/headline.yaml)")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ExperimentError(f"{path}: not valid YAML ({str(error).splitlines()[0]})") from None
    unknown = sorted(
        set(spec)
        - {"name", "profile", "lanes", "overrides", "ablations", "report", "threshold_gain", "notes", "discussion"}
    )
    if unknown:
        raise ExperimentError(f"{path}: unknown keys {unknown}")
    return spec


def build_groups(spec: Mapping[str, Any], base: Params, root: Path, source: str) -> list[Group]:
    """The main group and one group per ablation, each with its own out dirs and params file."""
    name = spec.get("name", "experiment")
    if spec.get("profile"):  # the regime the overrides apply to (e.g. `tiny` for the previous experiment)
        try:
            base = apply_profile(base, str(spec["profile"]))
        except ParamsError as error:
            raise ExperimentError(f"{source}: {error}") from None
    main = apply_overrides(base, spec.get("overrides") or {}, source)
    groups = []
    settings = [("main", {}, "main")]
    for ablation in spec.get("ablations") or []:
        if not isinstance(ablation, Mapping) or "name" not in ablation:
            raise ExperimentError(f"{source}: every ablation needs a name and overrides")
        settings.append((str(ablation["name"]), dict(ablation.get("overrides") or {}), ablation.get("label", "")))
    for group, overrides, label in settings:
        params = apply_overrides(main, overrides, f"{source} ({group})")
        params = apply_overrides(
            params,
            {  # one SFT checkpoint for every group: the runs differ only in RL
                "project.experiment": f"{name}-{group}",
                "sft.out_dir": str(root / "models" / name / "sft"),
                "train.out_dir": str(root / "models" / name / group),
                "eval.out_dir": str(root / "reports" / name / group / "eval"),
            },
            source,
        )
        groups.append(Group(group, params, root / "reports" / name / group / "params.yaml", label or group))
    return groups


#: keys the driver sets per group for its own layout; under `dvc exp` each experiment has its own ref
LAYOUT_KEYS = ("sft.out_dir", "train.out_dir", "eval.out_dir")


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_leaves(item, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: value}


def dvc_exp_commands(groups: Sequence[Group], base: Params, name: str) -> list[str]:
    """One `dvc exp run` per group: the same experiment as DVC experiments over dvc.yaml's stages.

    Each `-S` is a params.yaml key the group changes (layout keys aside: DVC keeps every experiment's
    outputs under its own ref); `dvc exp show` then tabulates them.
    """
    import shlex

    before = _leaves(base.model_dump(mode="json"))
    commands = []
    for group in groups:
        after = _leaves(group.params.model_dump(mode="json"))
        changed = {key: value for key, value in after.items() if before.get(key) != value and key not in LAYOUT_KEYS}
        sets = " ".join("-S " + shlex.quote(f"{key}={json.dumps(value)}") for key, value in sorted(changed.items()))
        commands.append(f"dvc exp run --name {shlex.quote(f'{name}-{group.name}')} {sets}".rstrip())
    return commands


def write_params(group: Group) -> None:
    group.params_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = group.params_path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(group.params.model_dump(mode="json"), sort_keys=False))
    tmp.replace(group.params_path)


def jobs_for(groups: Sequence[Group], stamps: Path) -> tuple[list[Job], list[Job]]:
    """(sequential upstream jobs: data, SFT; independent jobs run in lanes: the SFT start's evaluation,
    then train→evaluate per group × seed × estimator) of the experiment."""
    main = groups[0]
    p = ["--params", str(main.params_path)]
    upstream = [
        Job(
            "data",
            [["slca", "synthesize", *p], ["slca", "calibrate", *p], ["slca", "reward-audit", *p]],
            main.params,
            stamps / "data.json",
            ["data", "simulator", "calibration", "audit", "rewards", "project"],
            [Path(main.params.data.out_dir) / f"{split}.jsonl" for split in ("train", "val", "test")],
        ),
        Job(
            "sft",
            # the pretrained base (converted from its installed package; the tiny policy needs none), then SFT
            [["slca", "base", *p], ["slca", "sft", *p]],
            main.params,
            stamps / "sft.json",
            ["data", "policy", "sft", "project"],
            [Path(main.params.sft.out_dir) / "config.json"],
        ),
    ]
    # the SFT start's evaluation needs only the checkpoint: it takes the first lane beside the runs
    runs = [
        Job(
            "evaluate-sft",
            [["slca", "evaluate", "--estimator", "sft", *p]],
            main.params,
            stamps / "evaluate-sft.json",
            [
                "data",
                "policy",
                "sft",
                "eval",
                "rewards",
                "train.max_completion_length",
                "train.max_tool_turns",
                "train.temperature",
            ],
            [Path(main.params.eval.out_dir) / "sft.json"],
        ),
    ]
    for group in groups:
        gp = ["--params", str(group.params_path)]
        # seed-major: every estimator's seed 0 first, so a stopped experiment is still balanced
        for seed in group.params.train.seeds:
            for estimator in group.params.train.estimators:
                run = f"{estimator}-s{seed}"
                runs.append(
                    Job(
                        f"{group.name}/{run}",
                        [
                            ["slca", "train", "--estimator", estimator, "--seed", str(seed), *gp],
                            ["slca", "evaluate", "--estimator", estimator, "--seed", str(seed), *gp],
                        ],
                        group.params,
                        stamps / group.name / f"{run}.json",
                        ["data", "policy", "sft", "train", "credit", "rewards", "simulator", "eval", "project"],
                        [Path(group.params.eval.out_dir) / f"{run}.json", history_copy(group.params, run)],
                        (Path(group.params.train.out_dir) / run, history_copy(group.params, run)),
                        RUN_EXEMPT,
                    )
                )
    return upstream, runs


def _lookup(raw: Mapping[str, Any], dotted: str) -> Any:
    for key in dotted.split("."):
        raw = raw[key]
    return raw


def drop_keys_that_change_nothing(raw: dict[str, Any]) -> None:
    """Leave out of dumped params the keys added after stamps were first written, where their value does what
    every job did before the key existed, so adding one leaves the landed runs done:
    `eval.generation_dtype` naming `policy` or the same dtype as `policy.generation_dtype` (evaluation
    generated in `policy.generation_dtype` before it)."""
    evaluation, policy = raw.get("eval") or {}, raw.get("policy") or {}
    if evaluation.get("generation_dtype") in ("policy", policy.get("generation_dtype")):
        evaluation.pop("generation_dtype", None)


def job_hash(job: Job, legacy: bool = False) -> str:
    """Hash of a job's commands and of the params sections (or dotted keys) it depends on, less its `exempt`
    keys and the keys that change nothing (`drop_keys_that_change_nothing`). `legacy`: the rule stamps were
    written under before `exempt` existed (nothing exempt left out)."""
    raw = job.params.model_dump(mode="json")
    raw["project"] = {k: v for k, v in raw["project"].items() if k != "experiment"}  # the MLflow name only
    drop_keys_that_change_nothing(raw)
    if not legacy:
        for dotted in job.exempt:
            section, _, leaf = dotted.rpartition(".")
            _lookup(raw, section).pop(leaf, None)
    deps = {key: _lookup(raw, key) for key in job.deps}
    return hashlib.sha256(json.dumps([job.commands, deps], sort_keys=True).encode()).hexdigest()[:16]


def history_copy(params: Params, run: str) -> Path:
    """Where a run's training history is kept beside its evaluation report (committed with it)."""
    return Path(params.eval.out_dir).parent / "history" / f"{run}.jsonl"


def is_done(job: Job) -> bool:
    """Its stamp matches what it depends on now and its outputs exist. A stamp written under the legacy rule
    that matches the job's legacy hash (the params it ran with, unchanged) is rewritten under the current rule,
    so a later change to an exempt key leaves it done."""
    if not job.stamp.exists():
        return False
    stamp = json.loads(job.stamp.read_text())
    current = job_hash(job)
    if stamp.get("hash") != current:
        if not job.exempt or stamp.get("hash") != job_hash(job, legacy=True):
            return False
        write_atomic(job.stamp, json.dumps({**stamp, "hash": current}, sort_keys=True) + "\n")
    return all(path.exists() for path in job.outputs)


def keep_history(job: Job) -> None:
    """Copy a finished run's metrics_history.jsonl, with its MLflow run id, to the committed report folder."""
    if job.history is None:
        return
    from slca.runinfo import read_runinfo

    folder, target = job.history
    source = folder / "metrics_history.jsonl"
    if not source.exists():
        raise ExperimentError(f"job {job.name} finished without a training history at {source}")
    target.parent.mkdir(parents=True, exist_ok=True)
    run_id = str(read_runinfo(folder).get("mlflow_run_id", ""))
    tmp = target.with_suffix(".tmp")
    tmp.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    tmp.replace(target)
    target.with_suffix(".runinfo.json").write_text(json.dumps({"mlflow_run_id": run_id}) + "\n", encoding="utf-8")


def code_version() -> dict[str, Any]:
    """The commit a job ran at and whether src/ differed from it: an experiment spans sessions, and its
    finished jobs are not rerun when the code moves on (their stamps hash params, not code)."""
    package = Path(__file__).resolve().parent  # the code that runs: the checkout of an editable install

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(package), *args], capture_output=True, text=True, check=True).stdout

    try:
        return {
            "commit": git("rev-parse", "--short", "HEAD").strip(),
            "src_modified": bool(git("status", "--porcelain", ".")),
        }
    except (OSError, subprocess.CalledProcessError):
        return {}  # installed from a wheel: no checkout to name


def expected_seconds(job: Job, stamps: Path) -> float | None:
    """What a job is planned to take: the longest finished job of its kind in the stamps (any group's
    train→evaluate run for a run, the same job otherwise), counting only the jobs that ran on this processor
    where any did, else those on the same kind of CPU (with or without bf16 instructions) where any did, else
    all; None before one has finished."""
    is_run = "/" in job.name
    here_bf16, here_cpu = native_bf16(), cpu_model()
    seen: list[float] = []
    same_kind: list[float] = []
    same_cpu: list[float] = []
    for path in stamps.rglob("*.json"):
        name = path.relative_to(stamps).with_suffix("").as_posix()
        if ("/" in name) == is_run and (is_run or name == job.name):
            stamp = json.loads(path.read_text())
            seconds = stamp.get("seconds")
            if seconds:
                seen.append(float(seconds))
                precision = stamp.get("precision")
                if isinstance(precision, dict) and precision.get("native_bf16") == here_bf16:
                    same_kind.append(float(seconds))
                if stamp.get("cpu") == here_cpu:
                    same_cpu.append(float(seconds))
    pool = same_cpu or same_kind or seen
    return max(pool) if pool else None


def fits_budget(job: Job, stamps: Path, elapsed_s: float, budget_minutes: float | None) -> bool:
    """Whether to start a job `elapsed_s` into a call with `budget_minutes`: one that would not finish in it
    is left for the next call (a job stopped by the end of a session goes on from its checkpoint only on a
    machine that still has its models/); a job that goes on is planned at what its earlier attempts left."""
    if budget_minutes is None:
        return True
    expected = expected_seconds(job, stamps)
    if expected is None:
        return True
    earlier = earlier_attempt(job, stamps.parent / "logs")
    if earlier and (resumable(job) or trained(job)):  # what an earlier attempt ran is not run again
        expected = max(0.0, expected - float(earlier["seconds"]))
    return elapsed_s + expected <= budget_minutes * 60


def attempt_path(job: Job) -> Path:
    """The marker a job leaves while it runs (not a stamp: `*.json` files under stamps/ are finished jobs)."""
    return job.stamp.with_name(job.stamp.stem + ".attempt")


def job_log(job: Job, logs: Path) -> Path:
    return logs / f"{job.name.replace('/', '__')}.log"


def earlier_attempt(job: Job, logs: Path) -> dict[str, Any] | None:
    """What earlier attempts of this job under its current params ran before they were stopped (the end of a
    session, a kill): {"attempts", "seconds", "lanes"}, the last attempt's time read as its marker's start to
    its log's last write (a run's log takes a progress line a step); None when there was none."""
    try:
        marker = json.loads(attempt_path(job).read_text(encoding="utf-8"))
        last_write = job_log(job, logs).stat().st_mtime
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict) or marker.get("hash") != job_hash(job):
        return None
    ran = max(0.0, last_write - float(marker.get("started", last_write)))
    return {
        "attempts": int(marker.get("attempts", 1)),
        "seconds": round(float(marker.get("earlier_seconds", 0.0)) + ran, 1),
        "lanes": int(marker.get("lanes", 1)),
    }


def resumable(job: Job) -> bool:
    """Whether the job's train command will continue from a checkpoint rather than start over: the train
    stage's own test (`latest_checkpoint`, no finished run) less its params check, which the marker's hash made."""
    if job.history is None:
        return False
    from slca.train.train_stage import CHECKPOINTS, METRICS_FILE, latest_checkpoint

    folder = job.history[0]
    return not (folder / METRICS_FILE).exists() and latest_checkpoint(folder / CHECKPOINTS) is not None


def trained(job: Job) -> bool:
    """Whether the job's run folder already holds its finished training run (an earlier attempt stopped
    during the evaluation): `metrics.json` written under the identity its train command would record now.
    The train command would empty such a folder and train again; the driver skips it instead."""
    from slca.train.train_stage import METRICS_FILE, identity_hash, run_identity, stored_identity

    train = next((command for command in job.commands if command[1:2] == ["train"]), None)
    if job.history is None or train is None or not (job.history[0] / METRICS_FILE).exists():
        return False

    try:
        estimator, seed = train[train.index("--estimator") + 1], int(train[train.index("--seed") + 1])
        current = identity_hash(run_identity(job.params, estimator, seed))
    except (OSError, ValueError, IndexError):
        return False
    return stored_identity(job.history[0]).get("sha256") == current


def run_job(job: Job, logs: Path, env: Mapping[str, str], lanes: int = 1) -> float:
    """Run a job's commands in order; raises ExperimentError naming its log on failure."""
    logs.mkdir(parents=True, exist_ok=True)
    log = job_log(job, logs)
    done_training = trained(job)
    # read before this attempt writes the log; only a job that goes on from where they stopped counts them
    earlier = earlier_attempt(job, logs) if done_training or resumable(job) else None
    started = time.perf_counter()
    version = code_version()  # the code this job runs, read before it runs (a commit may land meanwhile)
    job.stamp.unlink(missing_ok=True)
    job.stamp.parent.mkdir(parents=True, exist_ok=True)
    marker = {
        "hash": job_hash(job),
        "started": time.time(),
        "attempts": (earlier["attempts"] if earlier else 0) + 1,
        "earlier_seconds": earlier["seconds"] if earlier else 0.0,
        "lanes": max(lanes, earlier["lanes"] if earlier else 0),
    }
    write_atomic(attempt_path(job), json.dumps(marker, sort_keys=True) + "\n")
    with log.open("a" if earlier else "w") as handle:
        if earlier:
            handle.write(
                f"# attempt {marker['attempts']}: continues {earlier['attempts']} earlier attempt(s) "
                f"({earlier['seconds']:.0f} s) stopped before the job finished\n"
            )
        for command in job.commands:
            if done_training and command[1:2] == ["train"]:
                handle.write(f"$ {' '.join(command)}  # skipped: an earlier attempt finished this run\n")
                continue
            handle.write(f"$ {' '.join(command)}\n")
            handle.flush()
            exe = [sys.executable, "-m", "slca.cli", *command[1:]]
            if subprocess.call(exe, stdout=handle, stderr=subprocess.STDOUT, env=dict(env)) != 0:
                tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
                raise ExperimentError(f"job {job.name} failed at `{' '.join(command)}`: {tail[0]} (log: {log})")
    seconds = time.perf_counter() - started
    keep_history(job)
    stamp: dict[str, Any] = {
        "hash": job_hash(job),
        "seconds": round(seconds, 1),
        "threads": int(env.get("OMP_NUM_THREADS", "0") or 0),
        "lanes": lanes,  # 1: the driver ran nothing beside it
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if earlier:
        from slca.runinfo import read_runinfo

        assert job.history is not None  # an earlier attempt is read only for a run with a folder
        resumed = "finished training" if done_training else read_runinfo(job.history[0]).get("resumed_from")
        if resumed:  # the train command continued the earlier attempts' checkpoint: their time is this job's
            seconds += float(earlier["seconds"])
            stamp.update(
                seconds=round(seconds, 1),
                lanes=marker["lanes"],
                attempts=marker["attempts"],
                resumed_from=resumed,
                earlier_attempts_seconds=earlier["seconds"],
            )
        else:  # it started over: the earlier attempts' time bought nothing this job's outputs use
            stamp["discarded_seconds"] = earlier["seconds"]
    stamp.update(version)
    stamp["precision"] = precision_summary(job.params.policy, job.params)  # what this machine ran `auto` precision as
    stamp["cpu"] = cpu_model()  # job-minutes compare between jobs on one processor
    start = Path(job.params.sft.out_dir)
    if job.name not in ("data", "sft") and start.is_dir():  # the SFT start it read: one per experiment
        from slca.train.val_curve import checkpoint_digest

        stamp["sft_start"] = checkpoint_digest(start)[:16]
    job.stamp.write_text(json.dumps(stamp, sort_keys=True) + "\n")
    attempt_path(job).unlink(missing_ok=True)
    return seconds


def run_experiment(
    spec_path: Path,
    params_path: Path = Path("params.yaml"),
    *,
    lanes: int | None = None,
    report_only: bool = False,
    only: Sequence[str] = (),
    root: Path = Path("."),
    dvc_exp: bool = False,
    budget_minutes: float | None = None,
) -> dict[str, Any]:
    """Run every job not already done (of the `only` groups, if given), then write the report.

    `dvc_exp`: run nothing; return the groups as `dvc exp run` commands (`dvc_exp_commands`).
    `budget_minutes`: start no job expected to end after this many minutes from the call's start
    (`fits_budget`); those left are named in the result's `deferred` and run by the next call.
    """
    from rich.progress import Progress

    from slca.eval.experiment_report import ExperimentReportError, write_experiment_report

    spec = read_spec(spec_path)
    groups = build_groups(spec, load_params(params_path), root, str(spec_path))
    name = spec.get("name", "experiment")
    if dvc_exp:
        return {"dvc_exp_commands": dvc_exp_commands(groups, load_params(params_path), name)}
    stamps, logs = root / "reports" / name / "stamps", root / "reports" / name / "logs"
    for group in groups:
        write_params(group)
    upstream, runs = jobs_for(groups, stamps)
    unknown = sorted(set(only) - {group.name for group in groups})
    if unknown:
        raise ExperimentError(f"{spec_path}: no group named {unknown}; groups: {[g.name for g in groups]}")
    if only:
        runs = [job for job in runs if "/" not in job.name or job.name.split("/", 1)[0] in set(only)]
    timings: dict[str, float] = {}
    deferred: list[str] = []
    began = time.perf_counter()
    if not report_only:
        lanes = int(lanes or spec.get("lanes", 2))
        from slca.train import START_CACHE_ENV

        # the runs of a group share their SFT start: its step-0 validation is evaluated once (val_curve)
        cache = {START_CACHE_ENV: os.environ.get(START_CACHE_ENV, str((root / "models" / "val_start").resolve()))}
        alone = {**os.environ, **cache, "OMP_NUM_THREADS": str(max(1, os.cpu_count() or 1))}
        shared = {**os.environ, **cache, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
        todo = [job for job in upstream + runs if not is_done(job)]
        with Progress() as progress:
            bar = progress.add_task(f"{name}: {len(todo)} of {len(upstream) + len(runs)} jobs to run", total=len(todo))
            for job in upstream:
                if job in todo:
                    timings[job.name] = run_job(job, logs, alone)
                    progress.advance(bar)
            pending = [job for job in runs if job in todo]
            side_by_side = min(lanes, len(pending))

            def one(job: Job) -> None:
                if not fits_budget(job, stamps, time.perf_counter() - began, budget_minutes):
                    deferred.append(job.name)
                    progress.advance(bar)
                    return
                env = shared if side_by_side > 1 else alone
                timings[job.name] = run_job(job, logs, env, side_by_side)
                progress.advance(bar)

            with ThreadPoolExecutor(max(1, lanes)) as pool:
                futures = [pool.submit(one, job) for job in pending]
            failures = [str(f.exception()) for f in futures if f.exception() is not None]
            if failures:
                raise ExperimentError(f"{len(failures)} job(s) failed; first: {failures[0]}")
    report_path = root / spec.get("report", f"reports/{name}.md")
    try:
        numbers = write_experiment_report(
            groups,
            report_path,
            threshold_gain=float(spec.get("threshold_gain", 0.05)),
            timings=timings,
            stamps=stamps,
            notes=list(spec.get("notes") or []),
            discussion=list(spec.get("discussion") or []),
        )
    except ExperimentReportError as exc:
        if not deferred:
            raise
        numbers = {"verdict_lines": [f"no report yet: {exc}"]}  # the budget left every run for later
    if deferred:
        numbers["deferred"] = deferred
    return numbers

"""The `train` stage: SLCA-GRPO (or a baseline estimator) from the SFT policy, tracked in MLflow.

`run_train(params, estimator, seed)` loads the warmed-up policy from `params.sft.out_dir`,
trains `params.train.max_steps` optimizer steps on `<data.out_dir>/train.jsonl` and writes
`<train.out_dir>/<estimator>-s<seed>/`: the final model and tokenizer, `metrics.json`,
`metrics_history.jsonl` (one line per step) and `samples/step_NNNNNN.json` (rollouts with their
tokens, segment masks and advantages under the estimator and under GRPO).

Checkpoints go to `<run dir>/checkpoints` every `train.checkpoint_every` steps (the last 2 are
kept; every one, and after the run, with `train.keep_checkpoints`). A run that was killed resumes
from its last checkpoint when started again under the same
params (`run_identity.json`, written when the run starts, records them), continuing the same
MLflow run when the store still has it (its id is kept in `models/.runinfo/<run>.json`). Any other
start (a finished run, changed params, no checkpoint) empties the run dir first. `metrics.json` is
written last, atomically: it marks a finished run, and evaluation accepts no run without it.

    python -m slca.train.train_stage --params params.yaml --estimator slca --seed 0
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from slca.config import Params, load_params
from slca.rollout.chat import budget_shortfall
from slca.rollout.memory import peak_resident_bytes, reset_peak_resident
from slca.rollout.precision import precision_tags
from slca.runinfo import (
    VOLATILE_STEP_METRICS,
    read_runinfo,
    split_volatile,
    update_runinfo,
)
from slca.tracking import flatten, log_json, stage_run, write_atomic

HISTORY_FILE = "metrics_history.jsonl"
METRICS_FILE = "metrics.json"
CHECKPOINTS = "checkpoints"
IDENTITY_FILE = "run_identity.json"
# train knobs that do not change what a run computes, only where it goes and what is kept or sampled
IDENTITY_EXEMPT = (
    "out_dir",
    "estimators",
    "seeds",
    "checkpoint_every",
    "keep_checkpoints",
    "sample_every",
    "sample_rollouts",
)


def run_dir(params: Params, estimator: str, seed: int) -> Path:
    return Path(params.train.out_dir) / f"{estimator}-s{seed}"


def _state_written(checkpoint: Path) -> bool:
    """Its trainer state exists and parses: a kill while the file was being written leaves it cut short."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return True


def latest_checkpoint(checkpoints: Path) -> Path | None:
    """The newest complete checkpoint (its trainer state written whole), or None."""
    done = [p for p in checkpoints.glob("checkpoint-*") if _state_written(p)]
    done = [p for p in done if p.name.split("-")[-1].isdigit()]
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def numeric(logs: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of a TRL log line."""
    return {
        k: float(v)
        for k, v in logs.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
    }


class StepLogger(TrainerCallback):
    """Per-step metrics to MLflow and to `metrics_history.jsonl`; adds training tokens/s and the step's peak
    resident size (`system/peak_resident_gb`: rollouts and update; slca.rollout.memory)."""

    def __init__(self, history: Path) -> None:
        self.history = history
        self.last_tokens: float | None = None
        self.peak_reset = False

    def on_step_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.peak_reset = reset_peak_resident()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        import mlflow

        metrics = numeric(logs)
        tokens = metrics.get("num_tokens")
        if tokens is not None and self.last_tokens is not None and metrics.get("step_time", 0) > 0:
            metrics["throughput/tokens_per_s"] = (tokens - self.last_tokens) / metrics["step_time"]
        self.last_tokens = tokens
        if self.peak_reset:
            metrics["system/peak_resident_gb"] = peak_resident_bytes() / 2**30
        step = int(state.global_step)
        mlflow.log_metrics(metrics, step=step)
        stable, _ = split_volatile(metrics, VOLATILE_STEP_METRICS)  # wall-clock figures go to MLflow only
        with self.history.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, **stable}, sort_keys=True) + "\n")


class QuietProgress(ProgressCallback):
    """The tqdm bar without dumping every log dict on the console."""

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        return None


class SampleWriter:
    """Writes each advantage sample to `samples/` and logs it as an MLflow artifact."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def __call__(self, step: int, payload: dict[str, Any]) -> None:
        import mlflow

        path = write_atomic(self.folder / f"step_{step:06d}.json", json.dumps(payload, separators=(",", ":")))
        mlflow.log_artifact(str(path), artifact_path="samples")


class RunStateError(RuntimeError):
    """A run dir's files cannot be used to resume; the message names the file and what to do."""


def history_rows(history: Path) -> list[dict[str, Any]]:
    """The rows of `metrics_history.jsonl`, dropping a torn last line (a write cut short by a kill or full disk)."""
    lines = [(n, line) for n, line in enumerate(history.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    rows = []
    for index, (number, line) in enumerate(lines):
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            if index == len(lines) - 1:
                print(f"train: {history}: dropped a torn last line {number}", file=sys.stderr)
                break
            raise RunStateError(
                f"{history}: line {number} is not JSON ({error.msg}); delete that line "
                "or the run dir to start the run over"
            ) from None
    return rows


def trim_history(history: Path, last_step: int) -> None:
    """Drop lines logged after the checkpoint a run resumes from (they are logged again)."""
    if not history.exists():
        return
    kept = [row for row in history_rows(history) if row.get("step", 0) <= last_step]
    write_atomic(history, "".join(json.dumps(row, sort_keys=True) + "\n" for row in kept))


def previous_run_id(folder: Path) -> str | None:
    """The MLflow run of an unfinished earlier attempt, when the tracking store still has it."""
    run_id = read_runinfo(folder).get("mlflow_run_id")
    if not isinstance(run_id, str) or not run_id or (folder / METRICS_FILE).exists():
        return None
    import mlflow

    try:
        mlflow.tracking.MlflowClient().get_run(run_id)
    except Exception:  # noqa: BLE001 - another store or a deleted run: start a new one
        return None
    return run_id


def files_digest(paths: list[Path]) -> str:
    """sha256 over the names and bytes of the files in `paths` (a missing file counts as its name only)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode("utf-8") + b"\0")
        if path.is_file():
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def run_identity(params: Params, estimator: str, seed: int) -> dict[str, Any]:
    """Everything that decides what a run computes; a killed run resumes only under the same identity.

    In it: the estimator and seed; `train` except `IDENTITY_EXEMPT` (where runs go, which runs the
    stage trains, what is checkpointed, kept or sampled); `policy` (model, tiny shape, LoRA);
    `credit`, `rewards` and `simulator` with the calibrated simulator knobs in force; the bytes of
    the SFT checkpoint's top-level files and of `train.jsonl` (so a new SFT or new data is a new
    run). Left out: `project` (where it is logged), `eval`, and the `data`/`sft` knobs, whose
    effect is already in those bytes.
    """
    from slca.simulator.knobs import load_calibrated_knobs

    calibrated = params.simulator.calibrated_knobs
    sft = Path(params.sft.out_dir)
    return {
        "estimator": estimator,
        "seed": seed,
        "train": {k: v for k, v in params.train.model_dump(mode="json").items() if k not in IDENTITY_EXEMPT},
        "policy": params.policy.model_dump(mode="json"),
        "credit": params.credit.model_dump(mode="json"),
        "rewards": params.rewards.model_dump(mode="json"),
        "simulator": params.simulator.model_dump(mode="json"),
        "simulator_knobs": load_calibrated_knobs(calibrated, params.simulator) if calibrated else None,
        "sft_checkpoint": {
            "path": str(sft),  # as configured: the same run in another checkout is the same run
            "sha256": files_digest(sorted(p for p in sft.glob("[!.]*") if p.is_file())),
        },
        "train_data_sha256": files_digest([Path(params.data.out_dir) / "train.jsonl"]),
    }


def identity_hash(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).hexdigest()


def stored_identity(folder: Path) -> dict[str, Any]:
    """The identity a run dir was started under ({} when none was recorded or it is unreadable)."""
    try:
        return json.loads((folder / IDENTITY_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The dotted keys whose values differ between two identities."""
    before, after = flatten(old), flatten(new)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def resume_point(folder: Path, identity: dict[str, Any]) -> Path | None:
    """The checkpoint to resume: the run dir's own, of an unfinished run under the same identity; else None."""
    checkpoint = latest_checkpoint(folder / CHECKPOINTS)
    if checkpoint is None or (folder / METRICS_FILE).exists():
        return None
    stored = stored_identity(folder)
    if stored.get("sha256") != identity_hash(identity):
        changed = changed_keys(stored.get("identity", {}), identity) if stored else ["no identity recorded"]
        print(
            (
                f"train: {folder} holds {checkpoint.name} of a run with other params "
                f"({', '.join(changed[:6])}); starting fresh"
            ),
            file=sys.stderr,
        )
        return None
    print(f"train: resuming {folder} from {checkpoint.name}", file=sys.stderr)
    return checkpoint


def fresh_start(folder: Path, identity: dict[str, Any]) -> None:
    """Empty the run dir (an earlier run's model, adapter, checkpoints) and record the new run's identity."""
    stale = previous_run_id(folder)
    if stale:
        import mlflow

        client = mlflow.tracking.MlflowClient()
        if client.get_run(stale).info.status == "RUNNING":
            client.set_terminated(stale, "KILLED")  # the abandoned attempt is not continued
    for path in folder.iterdir():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    payload = {"sha256": identity_hash(identity), "identity": identity}
    write_atomic(folder / IDENTITY_FILE, json.dumps(payload, indent=2, sort_keys=True))


def reward_curve(history: Path, window: int = 3) -> dict[str, float]:
    """Mean reward over the first and last `window` steps of the run."""
    rows = history_rows(history)
    rewards = [row["reward"] for row in sorted(rows, key=lambda r: r["step"]) if "reward" in row]
    if not rewards:
        return {}
    head, tail = rewards[:window], rewards[-window:]
    return {"reward_first": sum(head) / len(head), "reward_last": sum(tail) / len(tail)}


def load_train_tasks(params: Params) -> list[dict[str, Any]]:
    from slca.train.policy import read_tasks

    return read_tasks(Path(params.data.out_dir) / "train.jsonl")


def build_trainer(params: Params, estimator: str, seed: int, folder: Path, callbacks: list, sample_sink: Any) -> Any:
    """The SLCA-GRPO trainer on the SFT policy, checkpointing under `folder/checkpoints`."""
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy

    args = grpo_config(params, estimator, seed, str(folder / CHECKPOINTS))
    model, tokenizer = load_policy(params.sft.out_dir, params)
    curve = None
    if params.train.val_every > 0:  # the learning curve: greedy validation Success every k steps
        from slca.train.policy import read_tasks
        from slca.train.val_curve import ValidationCurve

        curve = ValidationCurve(
            read_tasks(Path(params.data.out_dir) / "val.jsonl", limit=params.train.val_tasks), params
        )
        callbacks = [curve, *callbacks]  # first, so its numbers join the step's log line before it is written
    tasks = load_train_tasks(params)
    shortfall = budget_shortfall(tasks, tokenizer, params.train.max_completion_length)
    if shortfall:  # the run goes on (a user may cut on purpose); a silent cut reads as a policy that cannot call
        warnings.warn(shortfall, stacklevel=1)
    trainer = SLCAGRPOTrainer(
        model,
        params=params,
        estimator=estimator,
        args=args,
        train_dataset=task_dataset(tasks),
        processing_class=tokenizer,
        sample_sink=sample_sink,
        callbacks=callbacks,
    )
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(QuietProgress())
    if curve is not None:
        curve.attach(trainer)
    return trainer


def save_policy(trainer: Any, folder: Path) -> None:
    """The trained policy into the run dir; LoRA adapters merged into their base, so the dir loads on its own
    from any working directory (an adapter would name its base by the relative path it was loaded from)."""
    accelerator = getattr(trainer, "accelerator", None)
    model = accelerator.unwrap_model(trainer.model) if accelerator is not None else getattr(trainer, "model", None)
    if not hasattr(model, "merge_and_unload"):
        trainer.save_model(str(folder))
        return
    if accelerator is None or accelerator.is_main_process:
        model.merge_and_unload().save_pretrained(str(folder))


def run_train(params: Params, estimator: str, seed: int) -> dict[str, Any]:
    """Train one (estimator, seed) run, resuming an interrupted one; returns its summary metrics."""
    import mlflow

    from slca.tracking import configure

    folder = run_dir(params, estimator, seed)
    folder.mkdir(parents=True, exist_ok=True)
    configure(params)
    identity = run_identity(params, estimator, seed)
    checkpoint = resume_point(folder, identity)
    # Under `accelerate launch` every process runs this; only rank 0 talks to MLflow and writes files.
    main_process = int(os.environ.get("RANK", "0")) == 0
    if main_process and checkpoint is None:
        fresh_start(folder, identity)
    if main_process and checkpoint is not None:
        trim_history(folder / HISTORY_FILE, int(checkpoint.name.split("-")[-1]))
    run_id = previous_run_id(folder) if checkpoint else None
    logged = {
        "estimator": estimator,
        "seed": seed,
        "train": params.train.model_dump(mode="json"),
        "credit": params.credit.model_dump(mode="json"),
        "run_identity": identity_hash(identity),
    }
    tracking = (
        stage_run(
            "train",
            params,
            run_id=run_id,
            log_params=None if run_id else logged,
            extra_tags=precision_tags(params.policy, params),
        )
        if main_process
        else contextlib.nullcontext()
    )
    with tracking as run:
        if main_process:
            update_runinfo(folder, mlflow_run_id=run.info.run_id)
            mlflow.set_tags(
                {"mlflow.runName": f"train-{estimator}-s{seed}", "slca.estimator": estimator, "slca.seed": str(seed)}
            )
        trainer = build_trainer(
            params,
            estimator,
            seed,
            folder,
            [StepLogger(folder / HISTORY_FILE)],
            SampleWriter(folder / "samples") if main_process else None,
        )
        result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        save_policy(trainer, folder)
        summary = {
            "estimator": estimator,
            "seed": seed,
            "global_step": int(trainer.state.global_step),
            "resumed_from": checkpoint.name if checkpoint else None,
            "train_runtime_s": float(result.metrics.get("train_runtime", 0.0)),
            **reward_curve(folder / HISTORY_FILE),
        }
        if main_process:
            trainer.processing_class.save_pretrained(str(folder))
            mlflow.log_metrics(
                {k: float(v) for k, v in summary.items() if isinstance(v, (int, float)) and k not in ("seed",)}
            )
            log_json(summary, "train_metrics.json")
            if not params.train.keep_checkpoints:
                shutil.rmtree(folder / CHECKPOINTS, ignore_errors=True)
            # the run dir holds what the params fix; how long it took and whether it resumed live beside it
            stable, volatile = split_volatile(summary, {"train_runtime_s", "resumed_from"})
            update_runinfo(folder, **volatile)
            write_atomic(folder / METRICS_FILE, json.dumps(stable, indent=2, sort_keys=True))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train one SLCA-GRPO run (estimator × seed).")
    parser.add_argument("--params", default="params.yaml", help="params.yaml to read")
    parser.add_argument("--estimator", required=True, help="advantage estimator: slca, grpo, gdpo, toolpo, rltr")
    parser.add_argument("--seed", type=int, default=0, help="seed of this run")
    args = parser.parse_args(argv)
    summary = run_train(load_params(args.params), args.estimator, args.seed)
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `train` stage: SLCA-GRPO (or a baseline estimator) from the SFT policy, tracked in MLflow.

`run_train(params, estimator, seed)` loads the warmed-up policy from `params.sft.out_dir`,
trains `params.train.max_steps` optimizer steps on `<data.out_dir>/train.jsonl` and writes
`<train.out_dir>/<estimator>-s<seed>/`: the final model and tokenizer, `metrics.json`,
`metrics_history.jsonl` (one line per step) and `samples/step_NNNNNN.json` (rollouts with their
tokens, segment masks and advantages under the estimator and under GRPO).

Checkpoints go to `<run dir>/checkpoints` every `train.checkpoint_every` steps (the last 2 are
kept). A run that was killed resumes from its last checkpoint when started again, continuing the
same MLflow run (its id is stored in `<run dir>/mlflow_run_id`); the run ends FINISHED once the
last step is done.

    python -m slca.train.train_stage --params params.yaml --estimator slca --seed 0
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ProgressCallback

from slca.config import Params, load_params
from slca.tracking import log_json, stage_run, write_atomic

RUN_ID_FILE = "mlflow_run_id"
HISTORY_FILE = "metrics_history.jsonl"
METRICS_FILE = "metrics.json"
CHECKPOINTS = "checkpoints"


def run_dir(params: Params, estimator: str, seed: int) -> Path:
    return Path(params.train.out_dir) / f"{estimator}-s{seed}"


def latest_checkpoint(checkpoints: Path) -> Path | None:
    """The newest complete checkpoint (its trainer state written), or None."""
    done = [p for p in checkpoints.glob("checkpoint-*") if (p / "trainer_state.json").exists()]
    done = [p for p in done if p.name.split("-")[-1].isdigit()]
    return max(done, key=lambda p: int(p.name.split("-")[-1]), default=None)


def numeric(logs: dict[str, Any]) -> dict[str, float]:
    """The finite numbers of a TRL log line."""
    return {k: float(v) for k, v in logs.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))}


class StepLogger(TrainerCallback):
    """Per-step metrics to MLflow and to `metrics_history.jsonl`; adds training tokens/s."""

    def __init__(self, history: Path) -> None:
        self.history = history
        self.last_tokens: float | None = None

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return
        import mlflow

        metrics = numeric(logs)
        tokens = metrics.get("num_tokens")
        if tokens is not None and self.last_tokens is not None and metrics.get("step_time", 0) > 0:
            metrics["throughput/tokens_per_s"] = (tokens - self.last_tokens) / metrics["step_time"]
        self.last_tokens = tokens
        step = int(state.global_step)
        mlflow.log_metrics(metrics, step=step)
        with self.history.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"step": step, **metrics}, sort_keys=True) + "\n")


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


def trim_history(history: Path, last_step: int) -> None:
    """Drop lines logged after the checkpoint a run resumes from (they are logged again)."""
    if not history.exists():
        return
    kept = [line for line in history.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= last_step]
    write_atomic(history, "".join(line + "\n" for line in kept))


def previous_run_id(folder: Path) -> str | None:
    """The MLflow run of an unfinished earlier attempt, when the tracking store still has it."""
    path = folder / RUN_ID_FILE
    if not path.exists() or (folder / METRICS_FILE).exists():
        return None
    import mlflow

    run_id = path.read_text(encoding="utf-8").strip()
    try:
        mlflow.tracking.MlflowClient().get_run(run_id)
    except Exception:  # noqa: BLE001 - another store or a deleted run: start a new one
        return None
    return run_id


def fresh_start(folder: Path) -> None:
    """Remove what a finished earlier run left, so a new run does not mix with it."""
    for name in (CHECKPOINTS, "samples"):
        shutil.rmtree(folder / name, ignore_errors=True)
    for name in (HISTORY_FILE, METRICS_FILE, RUN_ID_FILE):
        (folder / name).unlink(missing_ok=True)


def reward_curve(history: Path, window: int = 3) -> dict[str, float]:
    """Mean reward over the first and last `window` steps of the run."""
    rows = [json.loads(line) for line in history.read_text(encoding="utf-8").splitlines() if line.strip()]
    rewards = [row["reward"] for row in sorted(rows, key=lambda r: r["step"]) if "reward" in row]
    if not rewards:
        return {}
    head, tail = rewards[:window], rewards[-window:]
    return {"reward_first": sum(head) / len(head), "reward_last": sum(tail) / len(tail)}


def load_train_tasks(params: Params) -> list[dict[str, Any]]:
    from slca.train.policy import read_tasks

    return read_tasks(Path(params.data.out_dir) / "train.jsonl")


def build_trainer(params: Params, estimator: str, seed: int, folder: Path, callbacks: list,
                  sample_sink: Any) -> Any:
    """The SLCA-GRPO trainer on the SFT policy, checkpointing under `folder/checkpoints`."""
    from slca.train.grpo import SLCAGRPOTrainer, grpo_config, task_dataset
    from slca.train.policy import load_policy

    args = grpo_config(params, estimator, seed, str(folder / CHECKPOINTS))
    model, tokenizer = load_policy(params.sft.out_dir, params)
    trainer = SLCAGRPOTrainer(model, params=params, estimator=estimator, args=args,
                              train_dataset=task_dataset(load_train_tasks(params)), processing_class=tokenizer,
                              sample_sink=sample_sink, callbacks=callbacks)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(QuietProgress())
    return trainer


def run_train(params: Params, estimator: str, seed: int) -> dict[str, Any]:
    """Train one (estimator, seed) run, resuming an interrupted one; returns its summary metrics."""
    import mlflow

    folder = run_dir(params, estimator, seed)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / METRICS_FILE).exists():
        fresh_start(folder)
    from slca.tracking import configure

    configure(params)
    run_id = previous_run_id(folder)
    checkpoint = latest_checkpoint(folder / CHECKPOINTS) if run_id else None
    trim_history(folder / HISTORY_FILE, int(checkpoint.name.split("-")[-1]) if checkpoint else 0)
    logged = {"estimator": estimator, "seed": seed, "train": params.train.model_dump(mode="json"),
              "credit": params.credit.model_dump(mode="json")}
    # Under `accelerate launch` every process runs this; only rank 0 talks to MLflow and writes files.
    main_process = int(os.environ.get("RANK", "0")) == 0
    tracking = (stage_run("train", params, run_id=run_id, log_params=None if run_id else logged)
                if main_process else contextlib.nullcontext())
    with tracking as run:
        if main_process:
            write_atomic(folder / RUN_ID_FILE, run.info.run_id)
            mlflow.set_tags({"mlflow.runName": f"train-{estimator}-s{seed}", "slca.estimator": estimator,
                             "slca.seed": str(seed)})
        trainer = build_trainer(params, estimator, seed, folder, [StepLogger(folder / HISTORY_FILE)],
                                SampleWriter(folder / "samples") if main_process else None)
        result = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        trainer.save_model(str(folder))
        summary = {"estimator": estimator, "seed": seed, "global_step": int(trainer.state.global_step),
                   "resumed_from": checkpoint.name if checkpoint else None,
                   "train_runtime_s": float(result.metrics.get("train_runtime", 0.0)),
                   **reward_curve(folder / HISTORY_FILE)}
        if main_process:
            trainer.processing_class.save_pretrained(str(folder))
            mlflow.log_metrics({k: float(v) for k, v in summary.items()
                                if isinstance(v, (int, float)) and k not in ("seed",)})
            log_json(summary, "train_metrics.json")
            if not params.train.keep_checkpoints:
                shutil.rmtree(folder / CHECKPOINTS, ignore_errors=True)
            write_atomic(folder / METRICS_FILE, json.dumps(summary, indent=2, sort_keys=True))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train one SLCA-GRPO run (estimator × seed).")
    parser.add_argument("--params", default="params.yaml", help="params.yaml to read")
    parser.add_argument("--estimator", required=True, help="advantage estimator: slca, grpo, toolpo, rltr")
    parser.add_argument("--seed", type=int, default=0, help="seed of this run")
    args = parser.parse_args(argv)
    summary = run_train(load_params(args.params), args.estimator, args.seed)
    print(json.dumps(summary, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

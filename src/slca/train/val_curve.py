"""Learning curves: greedy Success on a fixed validation sample every k optimizer steps.

The same in-domain evaluation as the evaluate stage (real executors, greedy), on the first
`train.val_tasks` tasks of `<data.out_dir>/val.jsonl`, before the first step and then every
`train.val_every` steps and at the last step. The numbers join that step's log line (the callback
must come before the step logger), so they land in MLflow and `metrics_history.jsonl` beside the
training metrics, as `val/<metric>`; the step-0 point is a log line of its own.

    curve = ValidationCurve(val_tasks, params)
    trainer = SLCAGRPOTrainer(..., callbacks=[curve, step_logger]); curve.attach(trainer)

The step-0 point is the SFT start itself (RL adds a LoRA whose B matrices are zero), the same for
every estimator, seed and RL setting that trains from that start. With `SLCA_VAL_START_CACHE` set
to a folder (the RL sweep and the experiment driver set it), it is computed once and read back:
keyed by the SFT checkpoint's bytes, the tasks, the evaluation's source and every param it reads, and used only
when the live policy's adapters are verifiably zero.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from slca.train import START_CACHE_ENV

CURVE_METRICS = ("success", "name_f1", "arg_match", "process", "r_sum", "no_call_accuracy")
#: train.* knobs the evaluation reads (the rest only shape the RL that follows step 0)
EVAL_TRAIN_KEYS = ("max_tool_turns", "max_completion_length")


def checkpoint_digest(folder: str | Path) -> str:
    """sha256 over a checkpoint folder's files (names and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


#: packages whose code decides a step-0 validation's numbers (prompts, generation, executors, rewards)
EVAL_PACKAGES = ("rollout", "simulator", "tools", "rewards", "data", "eval")


@functools.cache
def evaluation_code_digest() -> str:
    """sha256 over the source of EVAL_PACKAGES: an edited error text or reward must not read an old entry."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in EVAL_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def start_key(params: Any, tasks: Sequence[Mapping[str, Any]], checkpoint: str) -> str:
    """The cache key of a step-0 validation: checkpoint, tasks, the evaluation's code, and every param but the
    RL-only train knobs."""
    raw = params.model_dump(mode="json")
    train = raw.pop("train")
    raw["train"] = {key: train[key] for key in EVAL_TRAIN_KEYS}
    blob = json.dumps([checkpoint, list(tasks), raw, evaluation_code_digest()], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def adapters_are_zero(model: Any) -> bool:
    """True when every LoRA B matrix is zero, i.e. the model computes exactly its base (the SFT start)."""
    return all(not bool(p.detach().any()) for name, p in model.named_parameters() if "lora_B" in name)


def evaluate_live(
    model: Any,
    tokenizer: Any,
    tasks: Sequence[Mapping[str, Any]],
    params: Any,
    seen_values: frozenset[str] | None = None,
) -> dict[str, Any]:
    """In-domain metrics of a policy in training, greedy, on these tasks; its train/eval mode is restored."""
    from slca.rollout.evaluation import evaluate_policy

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            result = evaluate_policy(
                model,
                tokenizer,
                list(tasks),
                params.model_copy(update={"eval": params.eval.model_copy(update={"n_test": len(tasks), "pass_k": 1})}),
                seen_values=seen_values,
            )
    finally:
        model.train(was_training)
    return result["metrics"]


class ValidationCurve(TrainerCallback):
    """Evaluates the live policy on a fixed validation sample at steps 0, k, 2k, ... and the last."""

    def __init__(self, tasks: Sequence[Mapping[str, Any]], params: Any) -> None:
        self.tasks, self.params = list(tasks), params
        self.every = int(params.train.val_every)
        self.trainer: Any = None
        self.done: set[int] = set()
        self.pending: dict[str, float] = {}

    def attach(self, trainer: Any) -> None:
        self.trainer = trainer

    def evaluate(self, step: int) -> dict[str, float]:
        metrics = evaluate_live(self.trainer.model, self.trainer.processing_class, self.tasks, self.params)
        return {f"val/{name}": float(metrics[name]) for name in CURVE_METRICS if name in metrics}

    def evaluate_start(self) -> dict[str, float]:
        """Step 0: read from the start cache when one is set and valid for this model, else evaluated (and stored).

        The numbers carry `val/start_cached` (1.0 when read back), so a run's wall time can be read right.
        """
        folder, start = os.environ.get(START_CACHE_ENV, ""), self.params.sft.out_dir
        if not folder or not start or not Path(start).is_dir() or not adapters_are_zero(self.trainer.model):
            return {**self.evaluate(0), "val/start_cached": 0.0}
        key = start_key(self.params, self.tasks, checkpoint_digest(start))
        path = Path(folder) / f"{key}.json"
        if path.is_file():
            cached = json.loads(path.read_text(encoding="utf-8"))
            return {**{name: float(value) for name, value in cached.items()}, "val/start_cached": 1.0}
        values = self.evaluate(0)
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(f".{os.getpid()}.part")  # side-by-side runs may race: whole files only
        part.write_text(json.dumps(values, sort_keys=True), encoding="utf-8")
        part.replace(path)
        return {**values, "val/start_cached": 0.0}

    def _due(self, state: Any, last: bool = False) -> bool:
        step = int(state.global_step)
        if self.trainer is None or self.every <= 0 or not self.tasks or step in self.done:
            return False
        if step % self.every and not last:
            return False
        self.done.add(step)
        return bool(state.is_world_process_zero)  # generation needs no collective: the other ranks go on

    def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self._due(state):  # nothing is accumulated yet, so TRL's log adds no training metrics here
            step = int(state.global_step)
            self.trainer.log(self.evaluate_start() if step == 0 else self.evaluate(step))

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self._due(state, last=state.global_step >= state.max_steps):
            self.pending = self.evaluate(int(state.global_step))

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if self.pending and logs is not None and "train_runtime" not in logs:
            logs.update(self.pending)
            self.pending = {}

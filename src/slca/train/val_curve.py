"""Learning curves: greedy Success on a fixed validation sample every k optimizer steps.

The same in-domain evaluation as the evaluate stage (real executors, greedy), on the first
`train.val_tasks` tasks of `<data.out_dir>/val.jsonl`, before the first step and then every
`train.val_every` steps and at the last step. The numbers join that step's log line (the callback
must come before the step logger), so they land in MLflow and `metrics_history.jsonl` beside the
training metrics, as `val/<metric>`; the step-0 point is a log line of its own.

    curve = ValidationCurve(val_tasks, params)
    trainer = SLCAGRPOTrainer(..., callbacks=[curve, step_logger]); curve.attach(trainer)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers import TrainerCallback

CURVE_METRICS = ("success", "name_f1", "arg_match", "process", "r_sum", "no_call_accuracy")


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
            self.trainer.log(self.evaluate(int(state.global_step)))

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self._due(state, last=state.global_step >= state.max_steps):
            self.pending = self.evaluate(int(state.global_step))

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if self.pending and logs is not None and "train_runtime" not in logs:
            logs.update(self.pending)
            self.pending = {}

"""SLCA-GRPO trainer: the drop-in `slca.trl.SegmentGRPOTrainer` fed by slca's own rollouts.

Everything but the advantages is TRL's: generation (plain `generate`, vLLM colocate or server),
the clipped surrogate and its loss variants, the KL term to the reference, accelerate/DeepSpeed,
checkpoints and resume. Rollouts are multi-turn against the tool simulator (the rollout engine
`slca.rollout` driven by `slca.train.grpo_rollout`, passed as TRL's `rollout_func`); tool-response
tokens come back as `env_mask`, which TRL applies as its `tool_mask`, so they never reach the loss.

The advantages are `SegmentGRPOTrainer`'s (the class any TRL user can drop in): after TRL has
generated and scored a batch, its 1-D trajectory advantages are replaced with
`slca.credit.compute_advantages(estimator, ...)` on the segments of the response mask (tool segment
= all learned runs but the last, summary = the last run), with the credit diagnostics of the active
estimator against GRPO logged alongside. This subclass only supplies the rows: HierR's segment
rewards, the no-call penalty and the baselines' rewards from the rollout engine's scores, and logs
the reward components and the segment-normalisation bias per task kind.

Each step also logs `simulator/fallback_rate` (llm backend only) and `judge/failure_rate`, and the
run stops with one line when either passes its budget (`simulator.llm_fallback_budget`,
`rewards.judge_failure_budget`): rewards computed from fallbacks and zeros are not worth training on.

    config = grpo_config(params, "slca", seed=0, output_dir="models/slca-s0/checkpoints")
    trainer = SLCAGRPOTrainer(model, params=params, estimator="slca", args=config,
                              train_dataset=task_dataset(tasks), processing_class=tokenizer)
    trainer.train()
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from slca.credit import get_estimator
from slca.credit.diagnostics import bias_by_kind, segment_normalisation_bias
from slca.rollout.chat_format import apply_stop_ids, chat_format
from slca.rollout.precision import train_bf16
from slca.simulator import SimulatorSession
from slca.simulator.endpoint import FailureBudgetExceeded
from slca.train.grpo_rollout import run_multiturn
from slca.train.judge_noise import training_judge
from slca.trl import SampleSink, SegmentGRPOTrainer

SCORE_COLUMNS = (
    "r_tool",
    "r_sum",
    "penalty",
    "fmt",
    "name",
    "key",
    "value",
    "parallel",
    "call_accuracy",
    "rltr",
    "rltr_comp",
    "rltr_repeat",
    "rltr_error",
    "rltr_format_ok",
    "success",
)


def task_dataset(tasks: Sequence[Mapping[str, Any]]) -> Dataset:
    """TRL dataset: the conversational prompt plus the whole task row as JSON (ragged fields)."""
    rows = [{"prompt": [dict(m) for m in task["messages"]], "task_json": json.dumps(task)} for task in tasks]
    return Dataset.from_list(rows)


def on_gpu() -> bool:
    return torch.cuda.is_available()


def grpo_config(
    params: Any,
    estimator: str,
    seed: int,
    output_dir: str,
    *,
    max_steps: int | None = None,
    save: bool = True,
    **overrides: Any,
) -> GRPOConfig:
    """GRPOConfig from `params.train`: one optimizer step per generated batch of P×G rollouts.

    `save=False` turns checkpoints off (smoke runs, benchmarks); `overrides` are GRPOConfig fields.
    """
    get_estimator(estimator)  # unknown names fail before any model is loaded
    train = params.train
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rollouts = train.prompts_per_step * train.num_generations
    if rollouts % world:
        raise ValueError(
            f"train.prompts_per_step × train.num_generations = {rollouts} is not divisible by the {world} processes"
        )
    gpu = on_gpu()
    vllm: dict[str, Any] = {}
    if train.use_vllm:
        vllm = {
            "use_vllm": True,
            "vllm_mode": train.vllm_mode,
            "vllm_gpu_memory_utilization": train.vllm_gpu_memory_utilization,
        }
        if train.vllm_server_base_url:
            vllm["vllm_server_base_url"] = train.vllm_server_base_url
    fields: dict[str, Any] = {
        "output_dir": output_dir,
        "max_steps": max_steps if max_steps is not None else train.max_steps,
        "per_device_train_batch_size": rollouts // world,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": 1,
        "num_iterations": 1,
        "num_generations": train.num_generations,
        "learning_rate": train.learning_rate,
        "lr_scheduler_type": "constant",
        "beta": train.beta,
        "epsilon": train.epsilon,
        "loss_type": train.loss_type,
        "max_completion_length": train.max_completion_length,
        "max_tool_calling_iterations": train.max_tool_turns,
        "temperature": train.temperature,
        "seed": seed,
        "data_seed": seed,
        "save_strategy": "steps" if save else "no",
        "save_steps": train.checkpoint_every,
        # the newest 2 are enough to resume; a run that keeps its checkpoints (to evaluate steps along it) keeps all
        "save_total_limit": None if train.keep_checkpoints else 2,
        "logging_steps": 1,
        "report_to": "none",
        "use_cpu": not gpu,
        "bf16": train_bf16(params.policy.cpu_bf16),
        "gradient_checkpointing": gpu and train.gradient_checkpointing,
        "remove_unused_columns": False,
        "dataloader_num_workers": 0,
        "log_completions": False,
    }
    fields.update(vllm)
    fields.update(overrides)
    return GRPOConfig(**fields)


def failure_windows(params: Any, judge: Any) -> dict[str, Any]:
    """metric name -> FailureWindow of the simulator backend the training episodes use, and of the judge."""
    backend = SimulatorSession([], params.simulator.backend, params).backend  # the process-wide shared one
    windows = {
        "simulator/fallback_rate": getattr(backend, "fallbacks", None),
        "judge/failure_rate": getattr(judge, "failures", None),
    }
    return {name: window for name, window in windows.items() if window is not None}


def _slca_reward(key: str) -> Callable[..., list[float]]:
    """A TRL reward function reading one HierR score computed during the rollout."""

    def reward(prompts: list, completions: list, slca_scores: list[dict[str, float]], **_: Any) -> list[float]:
        return [score[key] for score in slca_scores]

    reward.__name__ = key
    return reward


class SLCAGRPOTrainer(SegmentGRPOTrainer):
    """`SegmentGRPOTrainer` fed by slca's rollout engine, rewards and tasks."""

    def __init__(
        self,
        model: Any,
        *,
        params: Any,
        estimator: str,
        args: GRPOConfig,
        train_dataset: Dataset,
        processing_class: Any,
        sample_sink: SampleSink | None = None,
        callbacks: list | None = None,
        peft_config: Any = None,
    ) -> None:
        get_estimator(estimator)
        self.slca_params = params
        self.judge = training_judge(params, args.seed)  # noisy when rewards.summary_noise > 0
        self.failure_windows = failure_windows(params, self.judge)
        self._current_tasks: list[dict[str, Any]] = []
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        apply_stop_ids(base, chat_format(processing_class, base))  # TRL reads its stop set from here
        credit = params.credit
        super().__init__(
            model,
            [_slca_reward("r_tool"), _slca_reward("r_sum")],
            args,
            tool_reward="r_tool",
            summary_reward="r_sum",
            estimator=estimator,
            scale_std=credit.scale_std,
            segment_weights=(credit.tool_weight, credit.summary_weight),
            abstain_in_tool_baseline=credit.abstain_in_tool_baseline,
            truncated_tool_call_as_tool=credit.truncated_tool_call_as_tool,
            sample_sink=sample_sink,
            sample_every=params.train.sample_every,
            sample_rollouts=params.train.sample_rollouts,
            share_prompt=params.train.share_prompt,
            loss_pass_tokens=params.train.loss_pass_tokens,
            train_dataset=train_dataset,
            processing_class=processing_class,
            callbacks=callbacks,
            peft_config=peft_config,
            rollout_func=self._rollout,
        )

    def _rollout(self, prompts: list, trainer: GRPOTrainer) -> dict[str, Any]:
        payload = run_multiturn(self, self._current_tasks, self.slca_params, self.judge)
        self._episode_batch = {"scores": payload["slca_scores"], "tail": payload["slca_tail_tool_call"]}
        mode = "train" if self.model.training else "eval"
        for name, value in payload.pop("slca_stats").items():
            self._metrics[mode][name].append(value)
        for name, window in self.failure_windows.items():
            self._metrics[mode][name].append(window.step_rate())
        self._check_failure_budgets()
        return payload

    def _check_failure_budgets(self) -> None:
        """Stop every process together when any process's simulator or judge is over its budget."""
        problems = [p for p in (w.problem() for w in self.failure_windows.values()) if p]
        if self.accelerator.num_processes > 1:  # a process that stopped alone would hang the others
            flag = torch.tensor([len(problems)], device=self.accelerator.device)
            if int(self.accelerator.gather(flag).sum()) > 0 and not problems:
                problems = ["another training process is over its failure budget (its error names it)"]
        if problems:
            raise FailureBudgetExceeded(problems[0])

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        self._current_tasks = [json.loads(row["task_json"]) for row in inputs]
        return super()._generate_and_score_completions(inputs)

    def _segment_rows(self, output: dict[str, Any]) -> dict[str, Any]:
        """HierR's segment rewards, the no-call penalty and the baselines' rewards of every process's rows."""
        device = output["completion_ids"].device
        scores = self._episode_batch["scores"]
        # float64 end to end: the credit core's group statistics guard against near-tied totals
        columns = {
            key: torch.tensor([s[key] for s in scores], dtype=torch.float64, device=device) for key in SCORE_COLUMNS
        }
        tail = torch.tensor(self._episode_batch["tail"], dtype=torch.bool, device=device)
        rows = {key: self._gather_rows(value) for key, value in columns.items()}
        return {
            "scores": rows,
            "r_tool": rows["r_tool"],
            "r_sum": rows["r_sum"],
            "penalty": rows["penalty"].bool(),
            "penalty_value": self.slca_params.rewards.no_call_penalty,
            "extra": {"call_accuracy": rows["call_accuracy"], "rltr_reward": rows["rltr"]},
            "tail": self._gather_rows(tail.long()).bool(),
        }

    def _after_credit(self, output: dict[str, Any], rows: dict[str, Any]) -> None:
        credit, scores = self.last_credit, rows["scores"]
        metrics = self._metrics["train" if self.model.training else "eval"]
        for name in ("fmt", "name", "key", "value", "parallel"):
            metrics[f"rewards/components/{name}"].append(float(scores[name].mean()))
        for name in ("call_accuracy", "rltr", "rltr_comp", "rltr_repeat", "rltr_error", "rltr_format_ok"):
            metrics[f"rewards/baselines/{name}"].append(float(scores[name].mean()))
        metrics["rewards/success"].append(float(scores["success"].mean()))
        metrics["rewards/penalty_rate"].append(float(credit["penalty"].float().mean()))
        self._log_segment_bias(
            scores, credit["tool_mask"], credit["summary_mask"], credit["group_ids"], credit["penalty"]
        )

    def _row_kinds(self) -> list[str]:
        """Every process's rows' task kinds, in row order (gathered as indices of a fixed vocabulary)."""
        vocabulary = [*sorted(self.slca_params.data.kind_mix.model_dump()), "other"]
        local = [task.get("kind") for task in self._current_tasks]
        index = torch.tensor(
            [vocabulary.index(k) if k in vocabulary else len(vocabulary) - 1 for k in local],
            device=self.accelerator.device,
        )
        return [vocabulary[int(i)] for i in self._gather_rows(index).tolist()]

    def _log_segment_bias(
        self,
        rows: dict[str, torch.Tensor],
        tool_mask: torch.Tensor,
        summary_mask: torch.Tensor,
        group_ids: torch.Tensor,
        penalty: torch.Tensor,
    ) -> None:
        """Per task kind: what normalising a segment only over the members that have it gives them
        (`credit/segbias/*`, see `slca.credit.diagnostics.segment_normalisation_bias`)."""
        bias = segment_normalisation_bias(
            rows["r_tool"],
            rows["r_sum"],
            tool_mask,
            summary_mask,
            group_ids,
            penalty=penalty,
            scale_std=self.slca_params.credit.scale_std,
        )
        metrics = self._metrics["train" if self.model.training else "eval"]
        for name, value in bias_by_kind(bias, self._row_kinds()).items():
            metrics[f"credit/{name}"].append(value)

    def _sample_head(self, row: int) -> dict[str, Any]:
        task = self._current_tasks[row]
        return {"prompt_id": task.get("id"), "kind": task.get("kind"), "domain": task.get("domain")}

    def _sample_tail(self, row: int, at: int) -> dict[str, Any]:
        return {key: round(float(value), 4) for key, value in self._episode_batch["scores"][row].items()}

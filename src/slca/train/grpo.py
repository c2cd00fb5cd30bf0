"""SLCA-GRPO trainer: TRL's GRPOTrainer with segment-locked (B, T) advantages.

Everything but the advantages is TRL's: generation (plain `generate`, vLLM colocate or server),
the clipped surrogate and its loss variants, the KL term to the reference, accelerate/DeepSpeed,
checkpoints and resume. Rollouts are multi-turn against the tool simulator
(the rollout engine `slca.rollout` driven by `slca.train.grpo_rollout`, passed as TRL's `rollout_func`); tool-response tokens come back as
`env_mask`, which TRL applies as its `tool_mask`, so they never reach the loss.

After TRL has generated and scored a batch, `_generate_and_score_completions` replaces its 1-D
trajectory advantages with `slca.credit.compute_advantages(estimator, ...)` on the segments of
the response mask (tool segment = all learned runs but the last, summary = the last run), with
the credit diagnostics of the active estimator against GRPO logged alongside.

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

from slca.credit import (
    compute_advantages,
    credit_diagnostics,
    get_estimator,
    segment_masks,
)
from slca.credit.diagnostics import bias_by_kind, segment_normalisation_bias
from slca.rollout.chat_format import apply_stop_ids, chat_format
from slca.simulator import SimulatorSession
from slca.simulator.endpoint import FailureBudgetExceeded
from slca.train.grpo_rollout import run_multiturn
from slca.train.judge_noise import training_judge

SampleSink = Callable[[int, dict[str, Any]], None]
SCORE_COLUMNS = ("r_tool", "r_sum", "penalty", "fmt", "name", "key", "value", "parallel", "call_accuracy",
                 "rltr", "rltr_comp", "rltr_repeat", "rltr_error", "rltr_format_ok", "success")


def task_dataset(tasks: Sequence[Mapping[str, Any]]) -> Dataset:
    """TRL dataset: the conversational prompt plus the whole task row as JSON (ragged fields)."""
    rows = [{"prompt": [dict(m) for m in task["messages"]], "task_json": json.dumps(task)} for task in tasks]
    return Dataset.from_list(rows)


def on_gpu() -> bool:
    return torch.cuda.is_available()


def grpo_config(params: Any, estimator: str, seed: int, output_dir: str, *, max_steps: int | None = None,
                save: bool = True, **overrides: Any) -> GRPOConfig:
    """GRPOConfig from `params.train`: one optimizer step per generated batch of P×G rollouts.

    `save=False` turns checkpoints off (smoke runs, benchmarks); `overrides` are GRPOConfig fields.
    """
    get_estimator(estimator)  # unknown names fail before any model is loaded
    train = params.train
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rollouts = train.prompts_per_step * train.num_generations
    if rollouts % world:
        raise ValueError(f"train.prompts_per_step × train.num_generations = {rollouts} is not divisible by "
                         f"the {world} processes")
    gpu = on_gpu()
    vllm: dict[str, Any] = {}
    if train.use_vllm:
        vllm = {"use_vllm": True, "vllm_mode": train.vllm_mode,
                "vllm_gpu_memory_utilization": train.vllm_gpu_memory_utilization}
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
        "save_total_limit": 2,
        "logging_steps": 1,
        "report_to": "none",
        "use_cpu": not gpu,
        "bf16": gpu and torch.cuda.is_bf16_supported(),
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
    windows = {"simulator/fallback_rate": getattr(backend, "fallbacks", None),
               "judge/failure_rate": getattr(judge, "failures", None)}
    return {name: window for name, window in windows.items() if window is not None}


def _slca_reward(key: str) -> Callable[..., list[float]]:
    """A TRL reward function reading one HierR score computed during the rollout."""

    def reward(prompts: list, completions: list, slca_scores: list[dict[str, float]], **_: Any) -> list[float]:
        return [score[key] for score in slca_scores]

    reward.__name__ = key
    return reward


class SLCAGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose advantages come from `slca.credit.compute_advantages(estimator, ...)`."""

    def __init__(self, model: Any, *, params: Any, estimator: str, args: GRPOConfig, train_dataset: Dataset,
                 processing_class: Any, sample_sink: SampleSink | None = None, callbacks: list | None = None,
                 peft_config: Any = None) -> None:
        get_estimator(estimator)
        self.slca_params = params
        self.estimator = estimator
        self.sample_sink = sample_sink
        self.judge = training_judge(params, args.seed)  # noisy when rewards.summary_noise > 0
        self.failure_windows = failure_windows(params, self.judge)
        self.last_credit: dict[str, Any] = {}
        self._current_tasks: list[dict[str, Any]] = []
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        apply_stop_ids(base, chat_format(processing_class, base))  # TRL reads its stop set from here
        super().__init__(
            model=model,
            reward_funcs=[_slca_reward("r_tool"), _slca_reward("r_sum")],
            args=args,
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
        output = super()._generate_and_score_completions(inputs)
        output["advantages"] = self._segment_advantages(output)
        return output

    def _gather_rows(self, values: torch.Tensor) -> torch.Tensor:
        """All processes' rows in process order (the order TRL groups rollouts in)."""
        if self.accelerator.num_processes == 1:
            return values
        if values.dim() == 2:
            values = self.accelerator.pad_across_processes(values, dim=1, pad_index=0)
        return self.accelerator.gather(values)

    def _segment_advantages(self, output: dict[str, Any]) -> torch.Tensor:
        """(B, T) advantages of the active estimator for this process's rows."""
        credit = self.slca_params.credit
        device = output["completion_ids"].device
        local_mask = output["completion_mask"]
        if "tool_mask" in output:
            local_mask = local_mask * output["tool_mask"]
        scores = self._episode_batch["scores"]
        # float64 end to end: the credit core's group statistics guard against near-tied totals
        columns = {key: torch.tensor([s[key] for s in scores], dtype=torch.float64, device=device)
                   for key in SCORE_COLUMNS}
        tail = torch.tensor(self._episode_batch["tail"], dtype=torch.bool, device=device)
        rows = {key: self._gather_rows(value) for key, value in columns.items()}
        response_mask = self._gather_rows(local_mask)
        tail_all = self._gather_rows(tail.long()).bool()
        tool_mask, summary_mask = segment_masks(response_mask, last_run_has_tool_call=tail_all,
                                                truncated_tool_call_as_tool=credit.truncated_tool_call_as_tool)
        generations = self.num_generations if self.model.training else self.num_generations_eval
        group_ids = torch.arange(response_mask.size(0), device=device) // generations
        penalty = rows["penalty"].bool()
        kwargs = {"scale_std": credit.scale_std, "weights": (credit.tool_weight, credit.summary_weight),
                  "penalty": penalty, "penalty_value": self.slca_params.rewards.no_call_penalty,
                  "extra": {"call_accuracy": rows["call_accuracy"], "rltr_reward": rows["rltr"]}}
        advantages = compute_advantages(self.estimator, rows["r_tool"], rows["r_sum"], tool_mask, summary_mask,
                                        group_ids, abstain_in_tool_baseline=credit.abstain_in_tool_baseline, **kwargs)
        grpo = advantages if self.estimator == "grpo" else compute_advantages(
            "grpo", rows["r_tool"], rows["r_sum"], tool_mask, summary_mask, group_ids, **kwargs)
        self._log_credit(advantages, grpo, rows, tool_mask, summary_mask, group_ids, penalty)
        self._log_segment_bias(rows, tool_mask, summary_mask, group_ids, penalty)
        self.last_credit = {"advantages": advantages, "grpo": grpo, "response_mask": response_mask,
                            "tool_mask": tool_mask, "summary_mask": summary_mask, "group_ids": group_ids,
                            "r_tool": rows["r_tool"], "r_sum": rows["r_sum"], "penalty": penalty,
                            "extra": kwargs["extra"]}
        if self.sample_sink is not None and self.model.training and self._is_sample_step():
            self.sample_sink(self.state.global_step, self._sample(output, scores))
        start = self.accelerator.process_index * local_mask.size(0)
        return advantages[start:start + local_mask.size(0), : local_mask.size(1)]

    def _is_sample_step(self) -> bool:
        every = self.slca_params.train.sample_every
        return self.accelerator.is_main_process and self.state.global_step % every == 0

    def _log_credit(self, advantages: torch.Tensor, grpo: torch.Tensor, rows: dict[str, torch.Tensor],
                    tool_mask: torch.Tensor, summary_mask: torch.Tensor, group_ids: torch.Tensor,
                    penalty: torch.Tensor) -> None:
        mode = "train" if self.model.training else "eval"
        metrics = self._metrics[mode]
        diagnostics = credit_diagnostics(advantages, grpo, None, rows["r_tool"], rows["r_sum"], tool_mask,
                                         summary_mask, group_ids, penalty=penalty,
                                         scale_std=self.slca_params.credit.scale_std)
        for name, value in diagnostics.items():
            metrics[f"credit/{name}"].append(value)
        for name in ("fmt", "name", "key", "value", "parallel"):
            metrics[f"rewards/components/{name}"].append(float(rows[name].mean()))
        for name in ("call_accuracy", "rltr", "rltr_comp", "rltr_repeat", "rltr_error", "rltr_format_ok"):
            metrics[f"rewards/baselines/{name}"].append(float(rows[name].mean()))
        metrics["rewards/success"].append(float(rows["success"].mean()))
        metrics["rewards/penalty_rate"].append(float(penalty.float().mean()))
        metrics["credit/tool_tokens_frac"].append(
            float(tool_mask.sum() / (tool_mask.sum() + summary_mask.sum()).clamp(min=1)))

    def _row_kinds(self) -> list[str]:
        """Every process's rows' task kinds, in row order (gathered as indices of a fixed vocabulary)."""
        vocabulary = [*sorted(self.slca_params.data.kind_mix), "other"]
        local = [task.get("kind") for task in self._current_tasks]
        index = torch.tensor([vocabulary.index(k) if k in vocabulary else len(vocabulary) - 1 for k in local],
                             device=self.accelerator.device)
        return [vocabulary[int(i)] for i in self._gather_rows(index).tolist()]

    def _log_segment_bias(self, rows: dict[str, torch.Tensor], tool_mask: torch.Tensor,
                          summary_mask: torch.Tensor, group_ids: torch.Tensor, penalty: torch.Tensor) -> None:
        """Per task kind: what normalising a segment only over the members that have it gives them
        (`credit/segbias/*`, see `slca.credit.diagnostics.segment_normalisation_bias`)."""
        bias = segment_normalisation_bias(rows["r_tool"], rows["r_sum"], tool_mask, summary_mask, group_ids,
                                          penalty=penalty, scale_std=self.slca_params.credit.scale_std)
        metrics = self._metrics["train" if self.model.training else "eval"]
        for name, value in bias_by_kind(bias, self._row_kinds()).items():
            metrics[f"credit/{name}"].append(value)

    def _sample(self, output: dict[str, Any], scores: list[dict[str, float]]) -> dict[str, Any]:
        """Compact JSON of a few local rollouts: tokens, masks, advantages (active and GRPO)."""
        credit, tokenizer = self.last_credit, self.processing_class
        count = min(self.slca_params.train.sample_rollouts, output["completion_ids"].size(0))
        rollouts = []
        for row in range(count):
            length = int(output["completion_mask"][row].sum())
            ids = output["completion_ids"][row, :length].tolist()
            task = self._current_tasks[row]
            rollouts.append({
                "prompt_id": task.get("id"), "kind": task.get("kind"), "domain": task.get("domain"),
                "group": int(credit["group_ids"][row]), "sample_idx": row,
                "completion_ids": ids,
                "tokens": [tokenizer.decode([token], skip_special_tokens=False) for token in ids],
                "response_mask": credit["response_mask"][row, :length].int().tolist(),
                "tool_mask": credit["tool_mask"][row, :length].int().tolist(),
                "summary_mask": credit["summary_mask"][row, :length].int().tolist(),
                "advantages": [round(v, 4) for v in credit["advantages"][row, :length].tolist()],
                "advantages_grpo": [round(v, 4) for v in credit["grpo"][row, :length].tolist()],
                **{key: round(float(value), 4) for key, value in scores[row].items()},
            })
        return {"step": self.state.global_step, "estimator": self.estimator, "rollouts": rollouts}

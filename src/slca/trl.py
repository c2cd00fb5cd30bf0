"""Segment-locked advantages for any TRL `GRPOTrainer` run: a drop-in subclass.

`SegmentGRPOTrainer` is TRL's `GRPOTrainer` (same config, same generation back ends, tools,
`environment_factory`, loss variants, logging, checkpoints) with one change: the per-sequence
advantage TRL computes is replaced by a per-token (B, T) advantage from `slca.credit`. The user
names which of their reward functions scores the **tool segment** and which the **summary
segment**; segments come from TRL's `tool_mask` and the completion's structure:

- the model's own tokens are the runs of `completion_mask * tool_mask` (tool output is masked);
- the **tool segment** is every run but the last (the assistant turns that called tools);
- the **summary segment** is the last run, unless that turn still holds a tool call (the rollout
  hit `max_tool_calling_iterations` or its length limit): then it has no summary.

Every estimator of the registry is selectable (`grpo | gdpo | slca | toolpo | rltr`); `slca`
normalises each segment's reward within its group and routes each advantage only to its own
tokens. TRL's loss already accepts (B, T) advantages, so nothing else changes.

    from slca.trl import SegmentGRPOTrainer

    trainer = SegmentGRPOTrainer(
        model, reward_funcs=[tool_reward, answer_reward], args=GRPOConfig(...),
        train_dataset=dataset, processing_class=tokenizer, environment_factory=MyEnv,
        tool_reward="tool_reward", summary_reward="answer_reward", estimator="slca")
    trainer.train()

Rewards are named as TRL names them: a function's `__name__`, a reward model's id, or the
environment class's name for its `get_reward`. `toolpo` and `rltr` read one more reward each
(`extra_rewards={"call_accuracy": ..., "rltr_reward": ...}`). `trainer.last_credit` holds the last
batch's advantages and masks; `sample_sink(step, sample)` receives per-token samples in the
format `slca dashboard` shows (see `samples_folder_sink`). The loss forward runs each group's shared
prompt once (`slca.shared_prefix`; `share_prompt=False` gives TRL's own forward); `loss_pass_tokens=N`
runs a larger loss batch in passes of at most N padded tokens with the same gradient (`slca.loss_passes`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

import torch
from trl import GRPOTrainer

from slca.credit import (
    compute_advantages,
    credit_diagnostics,
    get_estimator,
    segment_masks,
)
from slca.loss_passes import SPLITTABLE_LOSSES, pass_weight, plan_passes, take_rows
from slca.shared_prefix import shared_prefix_logps
from slca.tracking import write_atomic

SampleSink = Callable[[int, dict[str, Any]], None]
RewardRef = str | int
#: the one extra reward each baseline estimator reads (`extra_rewards=` names the reward function)
EXTRA_REWARDS = {"toolpo": "call_accuracy", "rltr": "rltr_reward"}


def samples_folder_sink(folder: str | Path) -> SampleSink:
    """A sample sink writing `<folder>/step_NNNNNN.json`, the files `slca dashboard --project-dir` lists
    when `folder` is `<project>/models/<run>/samples`."""
    target = Path(folder)

    def sink(step: int, sample: dict[str, Any]) -> None:
        write_atomic(target / f"step_{step:06d}.json", json.dumps(sample))

    return sink


def ensure_tool_call_parser(processing_class: Any) -> None:
    """Give a tokenizer whose template writes Qwen-style `<tool_call>` JSON blocks TRL's parser for them,
    when it has none (TRL needs one to run tools; it only recognises templates it ships)."""
    tokenizer = getattr(processing_class, "tokenizer", processing_class)
    if getattr(tokenizer, "response_template", None) or getattr(tokenizer, "response_schema", None):
        return
    from trl.chat_template_utils import add_response_schema, qwen3_template

    try:
        add_response_schema(tokenizer)
        return
    except ValueError:
        pass
    from slca.rollout.chat_format import chat_format

    fmt = chat_format(tokenizer)
    if (fmt.call_open, fmt.call_close) != ("<tool_call>", "</tool_call>"):
        raise ValueError(
            f"the tokenizer's chat template writes tool calls as {fmt.call_open}…{fmt.call_close}, which "
            "TRL cannot parse; set `tokenizer.response_template` to a parser for that format"
        )
    tokenizer.response_template = qwen3_template


class SegmentGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose advantages are `slca.credit.compute_advantages(estimator, ...)` per token."""

    def __init__(
        self,
        model: Any,
        reward_funcs: Any = None,
        args: Any = None,
        *,
        tool_reward: RewardRef | None = None,
        summary_reward: RewardRef | None = None,
        estimator: str = "slca",
        scale_std: bool = True,
        segment_weights: tuple[float, float] = (1.0, 1.0),
        abstain_in_tool_baseline: bool = False,
        truncated_tool_call_as_tool: bool = False,
        extra_rewards: Mapping[str, RewardRef] | None = None,
        sample_sink: SampleSink | None = None,
        sample_every: int = 1,
        sample_rollouts: int = 4,
        share_prompt: bool = True,
        loss_pass_tokens: int | None = None,
        **kwargs: Any,
    ) -> None:
        get_estimator(estimator)  # an unknown name fails before any model work
        self.estimator = estimator
        self.scale_std = scale_std
        self.segment_weights = tuple(segment_weights)
        self.abstain_in_tool_baseline = abstain_in_tool_baseline
        self.truncated_tool_call_as_tool = truncated_tool_call_as_tool
        self.sample_sink = sample_sink
        self.sample_every = max(1, int(sample_every))
        self.sample_rollouts = sample_rollouts
        self.share_prompt = share_prompt
        if loss_pass_tokens is not None and loss_pass_tokens < 1:
            raise ValueError(f"loss_pass_tokens must be a positive number of tokens or None, got {loss_pass_tokens}")
        self.loss_pass_tokens = loss_pass_tokens
        self.last_credit: dict[str, Any] = {}
        self._reward_refs = {"tool": tool_reward, "summary": summary_reward, **dict(extra_rewards or {})}
        self._stash: dict[str, Any] = {}
        if kwargs.get("tools") or kwargs.get("environment_factory"):
            ensure_tool_call_parser(kwargs.get("processing_class"))
        super().__init__(model, reward_funcs, args, **kwargs)
        self._reward_index = {
            key: self._resolve_reward(key, ref)
            for key, ref in self._reward_refs.items()
            if ref is not None or key in ("tool", "summary")
        }
        needed = EXTRA_REWARDS.get(estimator)
        reads_reward_functions = type(self)._segment_rows is SegmentGRPOTrainer._segment_rows
        if needed and self._reward_refs.get(needed) is None and reads_reward_functions:
            raise ValueError(
                f"the {estimator!r} estimator reads one more reward: pass "
                f"extra_rewards={{{needed!r}: <reward name or index>}}; rewards are "
                f"{list(self.reward_func_names)}"
            )

    # ---- which reward scores which segment -------------------------------------------------------

    def _resolve_reward(self, key: str, ref: RewardRef | None) -> int | None:
        """The column of TRL's rewards_per_func holding reward `ref` (None: the segment-rows hook provides it)."""
        names = list(self.reward_func_names)
        if ref is None:
            if type(self)._segment_rows is SegmentGRPOTrainer._segment_rows:
                raise ValueError(
                    f"SegmentGRPOTrainer needs {key}_reward=: the reward function (name or index) that "
                    f"scores the {key} segment; rewards are {names}"
                )
            return None
        if isinstance(ref, int) and not isinstance(ref, bool):
            if not 0 <= ref < len(names):
                raise ValueError(f"{key} reward index {ref} is out of range: rewards are {names}")
            return ref
        if ref not in names:
            raise ValueError(f"{key} reward {ref!r} is not one of the trainer's rewards {names}")
        return names.index(ref)

    # ---- TRL hooks ----------------------------------------------------------------------------------

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> torch.Tensor:
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._stash = {"rewards": rewards, "completions": completions}  # rewards gathered over processes
        return rewards

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        # group statistics run in float64; the loss gets them in the dtype of TRL's own advantages (float32)
        output["advantages"] = self._segment_advantages(output).to(output["advantages"].dtype)
        # the loss batch's padded size: its activations (and an RL step's peak memory) grow with rows x length
        prompt, completion = output.get("prompt_ids"), output.get("completion_ids")
        if isinstance(prompt, torch.Tensor) and isinstance(completion, torch.Tensor):
            metrics = self._metrics["train" if self._training() else "eval"]
            metrics["batch/padded_length"].append(float(prompt.size(1) + completion.size(1)))
            metrics["batch/padded_tokens"].append(float(completion.size(0) * (prompt.size(1) + completion.size(1))))
        return output

    def compute_loss(
        self, model: Any, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> torch.Tensor:
        """TRL's loss, in passes of at most `loss_pass_tokens` padded tokens when the batch is larger
        (`slca.loss_passes`): every pass but the last is back-propagated here, the last is returned for the
        Trainer's own backward, with the earlier passes' (detached) losses added so the logged loss is the
        step's. The gradient is the one-pass gradient up to floating-point order; the peak memory is one pass's."""
        passes = self._loss_passes(inputs) if not return_outputs else None
        if self.loss_pass_tokens is not None and self._training():
            self._metrics["train"]["batch/loss_passes"].append(float(len(passes) if passes else 1))
        if passes is None:
            return super().compute_loss(
                model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch
            )
        done = None
        for rows in passes[:-1]:
            part = take_rows(inputs, rows)
            loss = super().compute_loss(model, part) * pass_weight(self.loss_type, part, inputs)
            self.accelerator.backward(loss)
            done = loss.detach() if done is None else done + loss.detach()
        part = take_rows(inputs, passes[-1])
        last = super().compute_loss(model, part) * pass_weight(self.loss_type, part, inputs)
        return last if done is None else last + done

    def _loss_passes(self, inputs: dict[str, Any]) -> list[torch.Tensor] | None:
        """The passes of this training batch, or None to run it whole: no budget, a batch within it, or a
        setup whose loss a split would change (several processes or DeepSpeed, gradient accumulation, a loss
        normalised per window, an entropy quantile over the batch, an auxiliary loss, images)."""
        budget = self.loss_pass_tokens
        if budget is None or not self._training():
            return None
        rows, width = inputs["completion_ids"].size(0), inputs["prompt_ids"].size(1) + inputs["completion_ids"].size(1)
        if rows * width <= budget:
            return None
        if (
            self.accelerator.num_processes != 1
            or self.accelerator.distributed_type.value == "DEEPSPEED"
            or self.args.gradient_accumulation_steps != 1
            or self.args.n_gpu > 1
            or self.loss_type not in SPLITTABLE_LOSSES
            or self.top_entropy_quantile < 1.0
            or self.aux_loss_enabled
            or any(key in inputs for key in ("pixel_values", "image_grid_thw", "num_images", "token_type_ids"))
        ):
            return None
        passes = plan_passes(inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_mask"], budget)
        return passes if len(passes) > 1 else None

    def _get_per_token_logps_and_entropies(
        self,
        model: Any,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        logits_to_keep: int,
        batch_size: int | None = None,
        compute_entropy: bool = False,
        compute_aux_loss: bool = False,
        **extra: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """TRL's loss forward, with each group's shared prompt run once (`slca.shared_prefix`) on one process
        for text-only models; TRL's own forward otherwise (several processes, images, MoE aux loss)."""
        if (
            self.share_prompt
            and not compute_aux_loss
            and self.accelerator.num_processes == 1
            and all(value is None for value in extra.values())
        ):
            chunk = batch_size or input_ids.size(0)
            logps, entropies = [], []
            for start in range(0, input_ids.size(0), chunk):
                part = shared_prefix_logps(
                    model,
                    input_ids[start : start + chunk],
                    attention_mask[start : start + chunk],
                    logits_to_keep,
                    compute_entropy=compute_entropy,
                    autocast=self.accelerator.autocast,
                )
                if part is None:
                    break
                logps.append(part[0])
                if part[1] is not None:
                    entropies.append(part[1])
            else:
                return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None
        return super()._get_per_token_logps_and_entropies(
            model,
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size=batch_size,
            compute_entropy=compute_entropy,
            compute_aux_loss=compute_aux_loss,
            **extra,
        )

    # ---- advantages ---------------------------------------------------------------------------------

    def _gather_rows(self, values: torch.Tensor) -> torch.Tensor:
        """All processes' rows in process order (the order TRL groups rollouts in)."""
        if self.accelerator.num_processes == 1:
            return values
        if values.dim() == 2:
            values = self.accelerator.pad_across_processes(values, dim=1, pad_index=0)
        return self.accelerator.gather(values)

    def _segment_rows(self, output: dict[str, Any]) -> dict[str, Any]:
        """Every process's rows: r_tool and r_sum (float64), penalty (bool or None), extra rewards and whether
        the last turn still holds a tool call. This default reads the user's reward functions."""
        rewards = self._stash["rewards"].to(torch.float64).nan_to_num(0.0)
        column = {key: rewards[:, index] for key, index in self._reward_index.items() if index is not None}
        completions = self._stash.get("completions") or []
        tail = torch.tensor(
            [_ends_in_tool_call(c) for c in completions] or [False] * output["completion_ids"].size(0),
            dtype=torch.long,
            device=output["completion_ids"].device,
        )
        return {
            "r_tool": column["tool"],
            "r_sum": column["summary"],
            "penalty": None,
            "extra": {key: value for key, value in column.items() if key not in ("tool", "summary")},
            "tail": self._gather_rows(tail).bool(),
        }

    def _segment_advantages(self, output: dict[str, Any]) -> torch.Tensor:
        """(B, T) advantages of the active estimator for this process's rows."""
        device = output["completion_ids"].device
        local_mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            local_mask = local_mask * output["tool_mask"]
        rows = self._segment_rows(output)
        response_mask = self._gather_rows(local_mask)
        tool_mask, summary_mask = segment_masks(
            response_mask,
            last_run_has_tool_call=rows["tail"],
            truncated_tool_call_as_tool=self.truncated_tool_call_as_tool,
        )
        generations = self.num_generations if self._training() else self.num_generations_eval
        assert generations is not None  # TRL falls back to num_generations
        group_ids = torch.arange(response_mask.size(0), device=device) // generations
        kwargs = {
            "scale_std": self.scale_std,
            "weights": self.segment_weights,
            "penalty": rows["penalty"],
            "extra": rows["extra"],
            **({"penalty_value": rows["penalty_value"]} if "penalty_value" in rows else {}),
        }
        advantages = compute_advantages(
            self.estimator,
            rows["r_tool"],
            rows["r_sum"],
            tool_mask,
            summary_mask,
            group_ids,
            abstain_in_tool_baseline=self.abstain_in_tool_baseline,
            **kwargs,
        )
        grpo = (
            advantages
            if self.estimator == "grpo"
            else compute_advantages("grpo", rows["r_tool"], rows["r_sum"], tool_mask, summary_mask, group_ids, **kwargs)
        )
        penalty = rows["penalty"] if rows["penalty"] is not None else torch.zeros_like(rows["r_tool"], dtype=torch.bool)
        self._log_credit(advantages, grpo, rows, tool_mask, summary_mask, group_ids, penalty)
        self.last_credit = {
            "advantages": advantages,
            "grpo": grpo,
            "response_mask": response_mask,
            "tool_mask": tool_mask,
            "summary_mask": summary_mask,
            "group_ids": group_ids,
            "r_tool": rows["r_tool"],
            "r_sum": rows["r_sum"],
            "penalty": penalty,
            "extra": rows["extra"],
        }
        self._after_credit(output, rows)
        if self.sample_sink is not None and self._training() and self._is_sample_step():
            self.sample_sink(self.state.global_step, self._sample(output))
        start = self.accelerator.process_index * local_mask.size(0)
        return advantages[start : start + local_mask.size(0), : local_mask.size(1)]

    def _after_credit(self, output: dict[str, Any], rows: dict[str, Any]) -> None:
        """Hook after each batch's advantages (`self.last_credit` is set): extra logging in subclasses."""

    # ---- logging ------------------------------------------------------------------------------------

    def _training(self) -> bool:
        """Whether the model is in training mode (TRL types `self.model` as optional; it is set here)."""
        assert self.model is not None
        return self.model.training

    def _is_sample_step(self) -> bool:
        return self.accelerator.is_main_process and self.state.global_step % self.sample_every == 0

    def _log_credit(
        self,
        advantages: torch.Tensor,
        grpo: torch.Tensor,
        rows: dict[str, Any],
        tool_mask: torch.Tensor,
        summary_mask: torch.Tensor,
        group_ids: torch.Tensor,
        penalty: torch.Tensor,
    ) -> None:
        metrics = self._metrics["train" if self._training() else "eval"]
        diagnostics = credit_diagnostics(
            advantages,
            grpo,
            None,
            rows["r_tool"],
            rows["r_sum"],
            tool_mask,
            summary_mask,
            group_ids,
            penalty=penalty,
            scale_std=self.scale_std,
        )
        for name, value in diagnostics.items():
            metrics[f"credit/{name}"].append(value)
        metrics["credit/tool_tokens_frac"].append(
            float(tool_mask.sum() / (tool_mask.sum() + summary_mask.sum()).clamp(min=1))
        )

    def _sample_head(self, row: int) -> dict[str, Any]:
        """Fields a sample rollout starts with (the task it came from, in subclasses); `row` is local."""
        return {}

    def _sample_tail(self, row: int, at: int) -> dict[str, Any]:
        """Fields a sample rollout ends with: its segment rewards (`at` is its row among all processes')."""
        return {
            "r_tool": round(float(self.last_credit["r_tool"][at]), 4),
            "r_sum": round(float(self.last_credit["r_sum"][at]), 4),
        }

    def _sample(self, output: dict[str, Any]) -> dict[str, Any]:
        """Compact JSON of a few local rollouts: tokens, masks, advantages (active and GRPO)."""
        credit = self.last_credit
        tokenizer: Any = getattr(self.processing_class, "tokenizer", self.processing_class)  # a processor wraps one
        local_rows = output["completion_ids"].size(0)
        start = self.accelerator.process_index * local_rows
        rollouts = []
        for row in range(min(self.sample_rollouts, local_rows)):
            length = int(output["completion_mask"][row].sum())
            ids = output["completion_ids"][row, :length].tolist()
            at = start + row
            rollouts.append(
                {
                    **self._sample_head(row),
                    "group": int(credit["group_ids"][at]),
                    "sample_idx": row,
                    "completion_ids": ids,
                    "tokens": [tokenizer.decode([token], skip_special_tokens=False) for token in ids],
                    "response_mask": credit["response_mask"][at, :length].int().tolist(),
                    "tool_mask": credit["tool_mask"][at, :length].int().tolist(),
                    "summary_mask": credit["summary_mask"][at, :length].int().tolist(),
                    "advantages": [round(v, 4) for v in credit["advantages"][at, :length].tolist()],
                    "advantages_grpo": [round(v, 4) for v in credit["grpo"][at, :length].tolist()],
                    **self._sample_tail(row, at),
                }
            )
        return {"step": self.state.global_step, "estimator": self.estimator, "rollouts": rollouts}


def _ends_in_tool_call(completion: Any) -> bool:
    """Whether a conversational completion's last assistant message still holds tool calls."""
    if not isinstance(completion, list):
        return False
    assistant = [m for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    return bool(assistant and assistant[-1].get("tool_calls"))


__all__ = ["SegmentGRPOTrainer", "ensure_tool_call_parser", "samples_folder_sink"]

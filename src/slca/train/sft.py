"""SFT warm-up (stage `sft`): teach the policy the tool-calling format on gold trajectories.

Each train task becomes one dialogue — system+user, the gold calls as assistant `<tool_call>`
turns, the real gold responses as tool messages, then the gold summary (or, for a no-call task, a
plain "no tool can help" answer). The loss covers assistant tokens only: the mask comes from the
`{% generation %}` markers of the policy's chat template (TRL's training variant when the template
has none; `slca.rollout.chat_format` refuses a template whose end of turn would not be trained), so
prompt and tool-response tokens never enter the loss. TRL's `SFTTrainer` runs the steps; loss per step and
the final metrics go to MLflow; the model and tokenizer are written atomically to
`params.sft.out_dir`.

    slca sft            # or: python -c "from slca.train.sft import run_sft; ..."
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import SFTConfig, SFTTrainer

from slca.rollout.chat import gold_conversation
from slca.rollout.chat_format import chat_format, render
from slca.rollout.precision import precision_tags, train_bf16
from slca.runinfo import split_volatile, update_runinfo
from slca.tracking import log_json, log_metrics, stage_run
from slca.train.augment import augment_tasks, rename_tasks
from slca.train.policy import (
    PolicyError,
    count_parameters,
    load_policy,
    read_tasks,
    select_by_kind,
    tokenizer_for_tasks,
)


def training_template(tokenizer: Any) -> str:
    """The tokenizer's chat template with `{% generation %}` markers (assistant-only loss), its end of
    turn inside the trained span (`ChatFormat.training_template`)."""
    return chat_format(tokenizer).training_template


def sft_example(task: Mapping[str, Any], tokenizer: Any, template: str) -> dict[str, list[int]]:
    """Token ids of a task's gold dialogue and its assistant mask (1 = trained token)."""
    encoded = render(
        tokenizer,
        gold_conversation(task),
        task.get("tools"),
        chat_template=template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    return {"input_ids": list(encoded["input_ids"]), "assistant_masks": list(encoded["assistant_masks"])}


def build_sft_dataset(tasks: Sequence[Mapping[str, Any]], tokenizer: Any, max_length: int) -> tuple[Dataset, int]:
    """Tokenized examples that fit in `max_length` (longer ones are dropped, not cut), and the drop count."""
    template = training_template(tokenizer)
    rows = [sft_example(task, tokenizer, template) for task in tasks]
    kept = [row for row in rows if len(row["input_ids"]) <= max_length and any(row["assistant_masks"])]
    if not kept:
        raise ValueError(f"no SFT example fits sft.max_length={max_length}; raise it")
    return Dataset.from_list(kept), len(rows) - len(kept)


def _tracking_active() -> bool:
    import mlflow

    return mlflow.active_run() is not None


class MlflowLossCallback(TrainerCallback):
    """Log the trainer's loss / learning rate per step to the active MLflow run."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        logs = logs or {}
        metrics = {
            f"sft/{key}": float(value)
            for key, value in logs.items()
            if value is not None and key in ("loss", "learning_rate", "grad_norm", "mean_token_accuracy")
        }
        if "loss" in logs:
            self.losses.append(float(logs["loss"]))
        if metrics and _tracking_active():
            with contextlib.suppress(Exception):  # tracking trouble must not stop training
                log_metrics(metrics, step=state.global_step)


def cpu_thread_count(params: Any) -> int:
    """`sft.threads`, capped at the cores present. Alone on 2 cores, 2 threads train 1.6x faster in wall time
    than 1 (measured: 80 steps in 14.7 s vs 24.0 s); runs sharing the cores (the sweep) use 1 each."""
    return max(1, min(params.sft.threads, os.cpu_count() or 1))


@contextlib.contextmanager
def cpu_threads(n: int) -> Iterator[None]:
    """Run the block with `n` torch intra-op threads on CPU (no-op on GPU), restoring the old count."""
    previous = torch.get_num_threads()
    if not torch.cuda.is_available():
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def warmup_steps(max_steps: int) -> int:
    """A short linear warm-up: 5% of the steps, at most 10 (batch 1 needs many updates, not a long ramp)."""
    return max(1, min(10, max_steps // 20))


def sft_config(params: Any, output_dir: str) -> SFTConfig:
    sft = params.sft
    return SFTConfig(
        output_dir=output_dir,
        max_steps=sft.max_steps,
        per_device_train_batch_size=sft.batch_size,
        learning_rate=sft.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=warmup_steps(sft.max_steps),
        weight_decay=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        # fp32 master weights (policy.dtype float32) with bf16 autocast on CUDA, and on CPU with policy.cpu_bf16
        bf16=train_bf16(params.policy.cpu_bf16),
        gradient_checkpointing=False,
        max_length=sft.max_length,
        seed=params.project.seed,
        data_seed=params.project.seed,
        dataloader_num_workers=0,
        dataset_num_proc=None,
        disable_tqdm=False,
    )


#: wall-clock figures of an SFT run: logged to MLflow and kept in `.runinfo`, not in the model dir
SFT_VOLATILE = frozenset({"sft_seconds", "sft_train_seconds", "sft_assistant_tokens_per_s"})


def save_atomically(model: Any, tokenizer: Any, out_dir: Path, metrics: Mapping[str, Any]) -> None:
    """Write model + tokenizer to a temporary sibling, then swap it into place."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        if hasattr(model, "merge_and_unload"):  # a LoRA policy is saved merged, loadable on its own
            model = model.merge_and_unload()
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        stable, volatile = split_volatile(metrics, SFT_VOLATILE)  # timings beside the model, not in it
        (staging / "sft_metrics.json").write_text(json.dumps(stable, indent=2, sort_keys=True))
        old = out_dir.with_name(f".{out_dir.name}.old")
        if out_dir.exists():
            shutil.rmtree(old, ignore_errors=True)
            out_dir.rename(old)
        staging.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
        update_runinfo(out_dir, **volatile)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


ADAPTER_INFO = "slca_adapter.json"


def _adapter_source(params: Any) -> str:
    """What an adapter was trained on: the base's GGUF spec when there is one, else the model path."""
    return params.policy.base_gguf or str(params.policy.model_path)


def start_from_adapter(params: Any) -> tuple[Any, Any, dict[str, Any]]:
    """(PEFT model, tokenizer, the adapter's record): `policy.model_path` with `sft.init_adapter` on it."""
    from peft import PeftModel

    folder = Path(params.sft.init_adapter)
    info_path = folder / ADAPTER_INFO
    if params.policy.model_path is None:
        raise PolicyError("sft.init_adapter needs a pretrained policy.model_path to put the adapter on")
    if not info_path.exists():
        raise PolicyError(f"sft.init_adapter {folder}: no {ADAPTER_INFO} (write adapters with `slca sft-adapter`)")
    info = json.loads(info_path.read_text(encoding="utf-8"))
    if info.get("base") != _adapter_source(params) or info.get("chat_template") != params.policy.chat_template:
        raise PolicyError(
            f"sft.init_adapter {folder} was trained on {info.get('base')!r} with template "
            f"{info.get('chat_template')!r}, not on {_adapter_source(params)!r} with "
            f"{params.policy.chat_template!r}"
        )
    plain = params.model_copy(
        update={
            "policy": params.policy.model_copy(
                update={"lora": params.policy.lora.model_copy(update={"enabled": False})}
            )
        }
    )
    model, tokenizer = load_policy(None, plain)
    return PeftModel.from_pretrained(model, folder, is_trainable=True), tokenizer, info


def train_sft(params: Any, tasks: Sequence[Mapping[str, Any]], callbacks: Sequence[Any] = ()) -> tuple[Any, Any, dict]:
    """Build tokenizer + policy and run the warm-up; returns (model, tokenizer, metrics).

    With `sft.init_adapter` the policy starts from that adapter; `sft.max_steps` 0 then trains nothing."""
    seed = params.project.seed
    started = time.perf_counter()
    tokenizer, adapter = None, None
    if params.sft.init_adapter is not None:
        model, tokenizer, adapter = start_from_adapter(params)
    else:
        if params.policy.model_path is None:
            tokenizer = tokenizer_for_tasks(tasks, params)
        model, tokenizer = load_policy(None, params, tokenizer=tokenizer)
    chosen = rename_tasks(
        augment_tasks(
            select_by_kind(tasks, params.sft.n_examples, seed, params.sft.kind_shares), params.sft.copy_augment, seed
        ),
        params.sft.rename_tools,
        seed,
    )
    dataset, dropped = build_sft_dataset(chosen, tokenizer, params.sft.max_length)
    loss_log = MlflowLossCallback()
    if params.sft.max_steps == 0:
        return (
            model,
            tokenizer,
            {
                "sft_steps": 0,
                "sft_examples": 0,
                "policy_parameters": count_parameters(model),
                "vocab_size": len(tokenizer),
                "sft_seconds": round(time.perf_counter() - started, 2),
                "init_adapter": adapter,
            },
        )
    with tempfile.TemporaryDirectory(prefix="slca-sft-") as scratch, cpu_threads(cpu_thread_count(params)):
        trainer = SFTTrainer(
            model=model,
            args=sft_config(params, scratch),
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[loss_log, *callbacks],
        )
        train_started = time.perf_counter()
        result = trainer.train()
        train_seconds = time.perf_counter() - train_started
    assistant = [sum(row) for row in dataset["assistant_masks"]]
    per_example = sum(assistant) / len(assistant)
    seen = int(result.global_step) * params.sft.batch_size
    losses = loss_log.losses
    tail = losses[-max(1, len(losses) // 10) :] if losses else [float("nan")]
    metrics = {
        "sft_seconds": round(time.perf_counter() - started, 2),
        "sft_steps": int(result.global_step),
        "sft_examples": len(dataset),
        "sft_dropped_too_long": dropped,
        "sft_first_loss": losses[0] if losses else float("nan"),
        "sft_final_loss": sum(tail) / len(tail),
        "sft_train_loss": float(result.training_loss),
        "sft_train_seconds": round(train_seconds, 2),
        "sft_assistant_tokens_per_example": round(per_example, 2),
        "sft_tokens_per_example": round(sum(len(row) for row in dataset["input_ids"]) / len(dataset), 2),
        # trained (loss-bearing) tokens per second of the optimisation itself
        "sft_assistant_tokens_per_s": round(seen * per_example / train_seconds, 1) if train_seconds > 0 else 0.0,
        "policy_parameters": count_parameters(model),
        "vocab_size": len(tokenizer),
    }
    if adapter is not None:
        metrics["init_adapter"] = adapter
    return trainer.model, tokenizer, metrics


def save_adapter(model: Any, params: Any, out_dir: Path, metrics: Mapping[str, Any]) -> Path:
    """The LoRA weights alone (no base, no tokenizer) and what they were trained on, written atomically."""
    if not hasattr(model, "peft_config"):
        raise PolicyError("slca sft-adapter needs policy.lora.enabled: a full fine-tune has no adapter to save")
    for config in model.peft_config.values():
        config.base_model_name_or_path = _adapter_source(params)  # portable: not this machine's path
    stable, _ = split_volatile(metrics, SFT_VOLATILE)
    info = {
        "base": _adapter_source(params),
        "chat_template": params.policy.chat_template,
        "lora": params.policy.lora.model_dump(),
        "sft": params.sft.model_dump(),
        "seed": params.project.seed,
        "metrics": stable,
    }
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        model.save_pretrained(staging)
        (staging / "README.md").unlink(missing_ok=True)  # PEFT's hub model card template: slca_adapter.json says it
        (staging / ADAPTER_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir


def run_sft_adapter(params: Any, out_dir: Path) -> dict:
    """`slca sft-adapter`: the warm-up of params.sft on data/train.jsonl, saved as a LoRA adapter only."""
    tasks = read_tasks(Path(params.data.out_dir) / "train.jsonl")
    with stage_run(
        "sft-adapter",
        params,
        log_params={"sft": params.sft.model_dump(), "policy": params.policy.model_dump()},
        extra_tags=precision_tags(params.policy),
    ):
        model, _, metrics = train_sft(params, tasks)
        save_adapter(model, params, Path(out_dir), metrics)
        log_metrics({key: value for key, value in metrics.items() if isinstance(value, (int, float))})
        log_json(metrics, "sft/metrics.json")
    return metrics


def run_sft(params: Any) -> dict:
    """Stage `sft`: warm up the policy on data/train.jsonl and save it to `params.sft.out_dir`."""
    tasks = read_tasks(Path(params.data.out_dir) / "train.jsonl")
    with stage_run(
        "sft",
        params,
        log_params={"sft": params.sft.model_dump(), "policy": params.policy.model_dump()},
        extra_tags=precision_tags(params.policy),
    ):
        model, tokenizer, metrics = train_sft(params, tasks)
        save_atomically(model, tokenizer, Path(params.sft.out_dir), metrics)
        log_metrics({key: value for key, value in metrics.items() if isinstance(value, (int, float))})
        log_json(metrics, "sft/metrics.json")
    return metrics

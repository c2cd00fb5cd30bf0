"""Multi-turn rollouts for SLCA-GRPO: the rollout engine driven by TRL's generation.

The turn loop, stop rule, observations and scoring are the rollout engine's (`slca.rollout`),
the same code evaluation runs; only the generator differs. On one process without vLLM (the CPU path)
turns come from `slca.rollout.cached.CachedTurnGenerator` over the trainer's model: one prefill per
group's prompt, the KV cache kept across turns, generation through merged LoRA weights in
`policy.generation_dtype`, TRL's sampling settings, a sampling stream seeded by (seed, step) so a resumed
run draws what the uninterrupted one drew. Otherwise `TRLTurnGenerator` generates each turn
with `GRPOTrainer._generate_single_turn` (plain `generate`, or vLLM colocate/server — whatever
the trainer is configured with), stopping at the chat format's stop set (which the trainer has in
`eos_token_ids`), and appends tool messages with the engine's `tool_suffix_ids`, cut at the
template's own end of turn as evaluation cuts them.
Under several processes it reports whether any process still has a live episode, so every
process runs the same number of rounds with equal-size batches.

Training answers tool calls through `training_env(params)`: the configured simulator, grounded on
the task's recorded gold calls. The response mask reaches TRL as `env_mask`, so tool-response
tokens never enter the loss.

    batch = run_multiturn(trainer, tasks, params, judge)   # used as GRPOTrainer's rollout_func
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from slca.rollout import (
    Episode,
    Turn,
    build_judge,
    per_kind_means,
    reward_fn,
    run_episodes,
    training_env,
)
from slca.rollout.cached import CachedTurnGenerator
from slca.rollout.chat_format import chat_format
from slca.rollout.loop import call_key, new_episodes, tool_suffix_ids
from slca.rollout.memory import resident_bytes

__all__ = ["TRLTurnGenerator", "build_judge", "rollout_batch", "rollout_stats", "run_multiturn"]


def _max_model_len(trainer: Any) -> int:
    if trainer.use_vllm and trainer.vllm_mode == "colocate":
        return int(trainer.vllm_generation.llm.llm_engine.model_config.max_model_len)
    return int(getattr(trainer.model.config, "max_position_embeddings", None) or 1 << 30)


class TRLTurnGenerator:
    """Turns from `GRPOTrainer._generate_single_turn`, each cut at its episode's own budget."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.tokenizer = trainer.processing_class
        self.eos_token_ids = set(chat_format(self.tokenizer, trainer.model).stop_ids)
        if set(trainer.eos_token_ids) != self.eos_token_ids:
            raise ValueError(
                f"TRL stops turns at {sorted(trainer.eos_token_ids)} but the chat format at "
                f"{sorted(self.eos_token_ids)}: load the policy with slca.train.policy.load_policy"
            )
        self.context_limit = _max_model_len(trainer)

    def generate(self, episodes: Sequence[Episode], budgets: Sequence[int], round_index: int) -> list[Turn]:
        ids, logprobs = self.trainer._generate_single_turn([e.sequence for e in episodes], None, {}, 1)
        turns = []
        for k, budget in enumerate(budgets):
            row = list(ids[k])[:budget]
            logps = list(logprobs[k])[: len(row)] if logprobs is not None else None
            turns.append(Turn(row, logps))
        return turns

    def tool_suffix(self, messages: Sequence[Mapping[str, Any]]) -> list[int]:
        return tool_suffix_ids(self.tokenizer, messages)

    def any_live(self, local_live: bool) -> bool | None:
        accelerator = self.trainer.accelerator
        if accelerator.num_processes == 1:
            return None
        flag = torch.tensor([1 if local_live else 0], device=accelerator.device)
        return bool(accelerator.gather(flag).sum().item() > 0)


def turn_generator(trainer: Any, params: Any) -> Any:
    """The trainer's turn generator: the cached one where it applies (kept on the trainer, so its generation
    copy is built once and refreshed each step), else TRL's own generation."""
    simple = (
        params.train.rollout_generator == "cached"
        and not trainer.use_vllm
        and trainer.accelerator.num_processes == 1
        and trainer.min_p is None
        and trainer.repetition_penalty == 1.0
    )
    if not simple:
        return TRLTurnGenerator(trainer)
    generator = getattr(trainer, "_slca_turn_generator", None)
    if generator is None:
        model = trainer.accelerator.unwrap_model(trainer.model)
        generator = CachedTurnGenerator(
            model,
            trainer.processing_class,
            temperature=trainer.temperature,
            top_k=trainer.top_k or 0,
            top_p=trainer.top_p,
            seed=trainer.args.seed,
            dtype=params.policy.generation_dtype,
        )
        if set(trainer.eos_token_ids) != generator.eos_token_ids:
            raise ValueError(
                f"TRL stops turns at {sorted(trainer.eos_token_ids)} but the chat format at "
                f"{sorted(generator.eos_token_ids)}: load the policy with slca.train.policy.load_policy"
            )
        trainer._slca_turn_generator = generator
    generator.calls = int(trainer.state.global_step)  # this step's sampling stream, also after a resume
    return generator


def rollout_batch(
    generator: Any, tasks: Sequence[Mapping[str, Any]], params: Any, judge: Any, env: Any = None
) -> list[Episode]:
    """One rollout per task row through the training path: training env, engine, scoring."""
    episodes = new_episodes(list(tasks), generator.tokenizer)
    return run_episodes(
        generator,
        episodes=episodes,
        env_factory=env or training_env(params),
        max_turns=params.train.max_tool_turns,
        max_new_tokens=params.train.max_completion_length,
        reward_fn=reward_fn(params, judge),
    )


def rollout_stats(episodes: Sequence[Episode], seconds: float) -> dict[str, float]:
    """Tool calls and turns per rollout, redundant-call rate, tokens per second, per-kind rewards."""
    keys = [[call_key(body) for turn in e.calls for body in turn] for e in episodes]
    calls = sum(len(k) for k in keys)
    redundant = sum(len(k) - len(set(k)) for k in keys)
    generated = sum(e.n_generated for e in episodes)
    n = max(len(episodes), 1)
    return {
        "rollout/tool_calls_per_rollout": calls / n,
        "rollout/redundant_call_rate": redundant / calls if calls else 0.0,
        "rollout/turns_per_rollout": sum(len(e.turns) for e in episodes) / n,
        "rollout/tokens_per_s": generated / seconds if seconds > 0 else 0.0,
        "rollout/success": sum(e.scores.get("success", 0.0) for e in episodes) / n,
        "system/resident_gb": resident_bytes() / 2**30,  # after the rollouts, freed pages given back before them
        **per_kind_means(list(episodes)),
    }


def run_multiturn(trainer: Any, tasks: Sequence[Mapping[str, Any]], params: Any, judge: Any) -> dict[str, Any]:
    """TRL rollout_func payload: ids, logprobs, `env_mask` and the per-rollout scores."""
    start = time.perf_counter()
    episodes = rollout_batch(turn_generator(trainer, params), tasks, params, judge)
    seconds = time.perf_counter() - start
    return {
        "prompt_ids": [e.prompt_ids for e in episodes],
        "completion_ids": [e.completion_ids for e in episodes],
        "logprobs": [e.logprobs for e in episodes] if trainer.use_vllm else None,
        "env_mask": [e.response_mask for e in episodes],
        "slca_scores": [dict(e.scores) for e in episodes],
        "slca_tail_tool_call": [e.last_turn_has_tool_call for e in episodes],
        "slca_stats": rollout_stats(episodes, seconds),
    }

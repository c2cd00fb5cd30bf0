"""In-domain evaluation on the synthesized test split, against the REAL tool executors.

The metrics and the live-policy evaluation are `slca.rollout.evaluation` (shared with the learning
curve and the SFT sweep, which sit in `train`); this module re-exports them and loads a saved
policy for the evaluate stage.

    result = evaluate_path("models/slca-s0", params)
    result["metrics"]["success"], result["per_kind"]["parallel"]["success"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slca.rollout.evaluation import (
    aggregate,
    by_kind,
    episode_metrics,
    evaluate_policy,
    flatten_table,
    pass_at_k,
    train_values,
    value_hits,
    value_key,
)

__all__ = [
    "aggregate",
    "by_kind",
    "episode_metrics",
    "evaluate_loaded",
    "evaluate_path",
    "evaluate_policy",
    "flatten_table",
    "pass_at_k",
    "split_train_values",
    "train_values",
    "value_hits",
    "value_key",
]


def split_train_values(params: Any) -> frozenset[str]:
    """`train_values` of `<data.out_dir>/train.jsonl`: the values an evaluation counts as seen."""
    from slca.train.policy import read_tasks

    return train_values(read_tasks(Path(params.data.out_dir) / "train.jsonl"))


def evaluate_path(model_path: str | Path, params: Any, split_path: str | Path | None = None) -> dict[str, Any]:
    """Load a saved policy and evaluate it on `<data.out_dir>/test.jsonl` (or `split_path`)."""
    from slca.train.policy import load_policy

    model, tokenizer = load_policy(model_path, params)
    return evaluate_loaded(model, tokenizer, params, split_path)


def evaluate_loaded(model: Any, tokenizer: Any, params: Any, split_path: str | Path | None = None) -> dict[str, Any]:
    """`evaluate_path` for a policy already in memory (e.g. a LoRA checkpoint merged into its base)."""
    from slca.train.policy import read_tasks

    tasks = read_tasks(split_path or Path(params.data.out_dir) / "test.jsonl", limit=params.eval.n_test)
    seen = split_train_values(params) if (Path(params.data.out_dir) / "train.jsonl").exists() else None
    return evaluate_policy(model, tokenizer, tasks, params, seen_values=seen)

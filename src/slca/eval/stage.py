"""The `evaluate` stage: one trained run through in-domain, BFCL and tau2-bench evaluation.

    slca evaluate --estimator slca --seed 0     # reports/eval/slca-s0.json
    slca evaluate --estimator sft               # the SFT warm-up itself: reports/eval/sft.json

The run's policy is loaded from `<train.out_dir>/<estimator>-s<seed>` (`sft.out_dir` for the
estimator name `sft`, the checkpoint every RL run starts from, so every table shows what RL added);
the in-domain test split runs against the real executors; BFCL and tau2 run the policy through a greedy
`generate_fn(messages, tools)`. Every figure lands in one JSON report (written atomically, before
anything is logged, so a tracking outage loses no evaluation) and in the stage's MLflow run.

A training run is evaluated only once it finished: its `metrics.json` (written last) must exist;
the SFT policy is published by one directory rename, so its directory existing is enough.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from slca.config import Params
from slca.runinfo import update_runinfo
from slca.tracking import log_json, log_metrics, stage_run, write_atomic


class EvaluationError(RuntimeError):
    """A run cannot be evaluated (missing model or data); the message says which path."""


SFT = "sft"  # the estimator name of the SFT-only policy (no RL)


def run_name(estimator: str, seed: int) -> str:
    return SFT if estimator == SFT else f"{estimator}-s{seed}"


def run_dir(params: Params, estimator: str, seed: int) -> Path:
    if estimator == SFT:
        return Path(params.sft.out_dir)
    return Path(params.train.out_dir) / run_name(estimator, seed)


def report_path(params: Params, estimator: str, seed: int) -> Path:
    return Path(params.eval.out_dir) / f"{run_name(estimator, seed)}.json"


def check_finished(model_dir: Path, estimator: str, seed: int) -> None:
    """Fail with one line unless `model_dir` holds a finished run (not a killed or still running one)."""
    from slca.train.train_stage import METRICS_FILE

    stage = "slca sft" if estimator == SFT else f"slca train --estimator {estimator} --seed {seed}"
    if not model_dir.exists():
        raise EvaluationError(f"{model_dir} does not exist; run `{stage}` first")
    if estimator != SFT and not (model_dir / METRICS_FILE).exists():
        raise EvaluationError(
            f"{model_dir} holds no finished run ({METRICS_FILE} missing: killed or still "
            f"running); run `{stage}` to finish it"
        )


def load_test_tasks(params: Params) -> list[dict[str, Any]]:
    path = Path(params.data.out_dir) / "test.jsonl"
    if not path.exists():
        raise EvaluationError(f"{path} does not exist; run the synthesize stage first")
    with path.open(encoding="utf-8") as handle:
        tasks = [json.loads(line) for line in handle if line.strip()]
    return tasks[: params.eval.n_test]


def _numeric(metrics: dict[str, Any], prefix: str) -> dict[str, float]:
    """Flatten nested dicts of numbers into {"prefix.a.b": value} for MLflow."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}.{key}"
        if isinstance(value, (int, float)):  # bool included
            flat[name] = float(value)
        elif isinstance(value, dict):
            flat.update(_numeric(value, name))
    return flat


def evaluate_bfcl(generate_fn: Any, params: Params) -> dict[str, Any]:
    from slca.eval.bfcl.generation import run_generation

    limit = params.eval.bfcl.limit or None
    outcome = run_generation(generate_fn, params.eval.bfcl.categories, limit=limit, mode=params.eval.bfcl.mode)
    return {"accuracy": outcome["accuracy"], "aggregate": outcome["aggregate"], "verdicts": outcome["verdicts"]}


def evaluate_tau2_bench(generate_fn: Any, params: Params) -> dict[str, Any] | None:
    settings = params.eval.tau2
    if not settings.enabled:
        return None
    try:
        from slca.eval.tau2_bench import evaluate_tau2
    except ImportError as error:  # the tau2 extra is optional
        return {"skipped": f"tau2 not installed ({error})"}
    endpoint = settings.user_simulator
    conversational = settings.domain not in ("mock", "telecom")
    return evaluate_tau2(
        generate_fn,
        domain=settings.domain,
        num_trials=settings.num_trials,
        task_ids=settings.task_ids,
        max_steps=settings.max_steps,
        seed=settings.seed,
        max_errors=settings.max_errors,
        task_split=settings.task_split,
        user_base_url=endpoint.base_url if conversational else None,
        user_model=endpoint.model if conversational else None,
        user_api_key=os.environ.get(endpoint.api_key_env, "EMPTY"),
        user_timeout_s=endpoint.timeout_s,
        user_retries=endpoint.retries,
        user_max_concurrency=endpoint.max_concurrency,
        batch_size=params.eval.batch_size,
    )


def run_evaluate(params: Params, estimator: str, seed: int) -> dict[str, Any]:
    """Evaluate `<estimator>-s<seed>`; writes reports/eval/<run>.json and returns the report."""
    from slca.eval.bfcl.score import measured
    from slca.eval.indomain import evaluate_policy, split_train_values
    from slca.rollout.hf import make_generate_fn
    from slca.rollout.precision import eval_generation_dtype, precision_tags
    from slca.train.policy import load_policy

    model_dir = run_dir(params, estimator, seed)
    check_finished(model_dir, estimator, seed)
    tasks = load_test_tasks(params)
    model, tokenizer = load_policy(model_dir, params)
    generate_fn = make_generate_fn(
        model,
        tokenizer,
        max_new_tokens=params.train.max_completion_length,
        dtype=eval_generation_dtype(params),
        batch_size=params.eval.batch_size,
    )

    with stage_run(
        "evaluate",
        params,
        log_params={"estimator": estimator, "seed": seed},
        extra_tags=precision_tags(params.policy, params),
    ):
        started = time.perf_counter()
        report: dict[str, Any] = {"run": run_name(estimator, seed), "estimator": estimator, "seed": seed}
        # argument values split into those the train split holds and held-out ones
        report["indomain"] = evaluate_policy(model, tokenizer, tasks, params, seen_values=split_train_values(params))
        report["bfcl"] = evaluate_bfcl(generate_fn, params)
        report["tau2"] = evaluate_tau2_bench(generate_fn, params)
        seconds = round(time.perf_counter() - started, 2)
        metrics = _numeric(report["indomain"]["metrics"], "indomain")
        metrics.update(_numeric(report["bfcl"]["accuracy"], "bfcl"))
        # the summary entries the run measured: one over a category not run would log the leaderboard's 0
        metrics.update(_numeric(measured(report["bfcl"]["aggregate"], report["bfcl"]["accuracy"]), "bfcl"))
        if report["tau2"] and "metrics" in report["tau2"]:
            metrics.update(_numeric(report["tau2"]["metrics"], "tau2"))
        report["metrics"] = metrics
        write_atomic(report_path(params, estimator, seed), json.dumps(report, indent=2, sort_keys=True))
        update_runinfo(report_path(params, estimator, seed), seconds=seconds)  # not in the report: DVC hashes it
        log_metrics({**metrics, "eval_seconds": seconds})
        log_json(report, f"eval/{run_name(estimator, seed)}.json")
    return report

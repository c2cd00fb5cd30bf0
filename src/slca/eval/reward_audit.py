"""`slca reward-audit`: prove the training signal rewards the right behaviour, before training on it.

An observant scripted oracle and a fixed set of corruptions of it (`slca.rollout.scripted`) are
rolled out on a sample of every task kind through the rollout engine twice:
- the **training** path: the configured simulator, grounded on the recorded gold calls
  (`training_env`), exactly as `slca train` answers calls;
- the **evaluation** path: the real executors (`eval_env`), exactly as `slca evaluate` does.
Both are scored by the one scoring path with the configured judge.

The stage fails (exit 1, one line) when
- the oracle's R_tool is below 1 for some task kind on either path (a policy that does the right
  thing with what it observed must be able to reach R_tool = 1);
- the oracle's Success is below `audit.min_oracle_success` on either path;
- a corruption does not score strictly lower than the oracle, on the same tasks, in the segment it
  corrupts (mean R_tool for tool corruptions, mean R_sum for summary corruptions);
- a summary-only corruption changes R_tool on any task.

It writes `audit.report_path` (JSON), prints a table and logs both to MLflow.

    report = audit(params, tasks, tokenizer)     # no files, no tracking
    run_reward_audit(params)                     # the stage
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slca.rollout import (
    KINDS,
    build_judge,
    eval_env,
    reward_fn,
    run_episodes,
    training_env,
)
from slca.rollout.scripted import CORRUPTIONS, ScriptedTurnGenerator, oracle_turn

PATHS = ("train", "eval")
MAX_NEW_TOKENS = 4096  # scripted turns are written whole; the budget is not the policy's


class AuditFailed(RuntimeError):
    """The reward audit found a signal that does not rank the oracle above its corruptions."""


def sample_tasks(tasks: Sequence[Mapping[str, Any]], per_kind: int, seed: int) -> list[Mapping[str, Any]]:
    """Up to `per_kind` tasks of every kind, drawn with `seed`, in kind order."""
    by_kind: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for task in tasks:
        by_kind[str(task.get("kind"))].append(task)
    rng = random.Random(seed)
    picked = []
    for kind in [*KINDS, *sorted(set(by_kind) - set(KINDS))]:
        rows = by_kind.get(kind, [])
        picked.extend(rng.sample(rows, min(per_kind, len(rows))))
    return picked


def _rollouts(
    tokenizer: Any, policy: Any, tasks: Sequence[Mapping[str, Any]], env: Any, params: Any, judge: Any
) -> list[Any]:
    generator = ScriptedTurnGenerator(tokenizer, policy)
    return run_episodes(
        generator,
        tasks,
        env_factory=env,
        max_turns=params.train.max_tool_turns,
        max_new_tokens=MAX_NEW_TOKENS,
        reward_fn=reward_fn(params, judge),
    )


def _means(episodes: Sequence[Any]) -> dict[str, float]:
    n = max(len(episodes), 1)
    return {
        "n": float(len(episodes)),
        "r_tool": sum(e.r_tool for e in episodes) / n,
        "r_sum": sum(e.r_sum for e in episodes) / n,
        "success": sum(e.scores["success"] for e in episodes) / n,
    }


def audit(params: Any, tasks: Sequence[Mapping[str, Any]], tokenizer: Any, judge: Any = None) -> dict[str, Any]:
    """The audit report for these tasks (see the module docstring); no files, no tracking."""
    judge = judge if judge is not None else build_judge(params)
    envs = {"train": training_env(params), "eval": eval_env(params)}
    report: dict[str, Any] = {
        "n_tasks": len(tasks),
        "kinds": sorted({str(t.get("kind")) for t in tasks}),
        "judge": params.rewards.judge,
        "simulator": params.simulator.backend,
        "grounded": params.simulator.grounded,
        "paths": {},
        "failures": [],
    }
    for path in PATHS:
        oracle = _rollouts(tokenizer, oracle_turn, tasks, envs[path], params, judge)
        by_id = {e.task_id: e for e in oracle}
        cases: dict[str, Any] = {
            "oracle": {
                "segment": None,
                **_means(oracle),
                "per_kind": {
                    k: _means([e for e in oracle if e.task.get("kind") == k])
                    for k in sorted({str(e.task.get("kind")) for e in oracle})
                },
            }
        }
        short = {
            kind: entry["r_tool"] for kind, entry in cases["oracle"]["per_kind"].items() if entry["r_tool"] < 1.0 - 1e-9
        }
        if short:
            report["failures"].append(
                f"{path}: the oracle's R_tool is below 1 on "
                + ", ".join(f"{k} ({v:.3f})" for k, v in sorted(short.items()))
                + ": a correct policy cannot reach full tool reward on this path"
            )
        success = cases["oracle"]["success"]
        if success < params.audit.min_oracle_success:
            misses = [e.task_id for e in oracle if not e.scores["success"]][:5]
            report["failures"].append(
                f"{path}: oracle Success {success:.3f} < {params.audit.min_oracle_success} (e.g. {', '.join(misses)})"
            )
        for item in CORRUPTIONS:
            chosen = [t for t in tasks if item.applies(t)]
            if not chosen:
                cases[item.name] = {"segment": item.segment, "n": 0.0}
                continue
            corrupted = _rollouts(tokenizer, item.turn, chosen, envs[path], params, judge)
            base = [by_id[e.task_id] for e in corrupted]
            key = "r_tool" if item.segment == "tool" else "r_sum"
            entry = {"segment": item.segment, **_means(corrupted), f"oracle_{key}": _means(base)[key]}
            entry["gap"] = entry[f"oracle_{key}"] - entry[key]
            if not entry["gap"] > 0:
                report["failures"].append(
                    f"{path}: {item.name} scores {key} {entry[key]:.3f}, "
                    f"not below the oracle's {entry[f'oracle_{key}']:.3f}"
                )
            if item.segment == "summary":
                moved = [e.task_id for e, b in zip(corrupted, base, strict=True) if e.r_tool != b.r_tool]
                entry["r_tool_changed"] = float(len(moved))
                if moved:
                    report["failures"].append(
                        f"{path}: summary-only corruption {item.name} changed R_tool "
                        f"on {len(moved)} task(s), e.g. {moved[0]}"
                    )
            cases[item.name] = entry
        report["paths"][path] = cases
    report["passed"] = not report["failures"]
    return report


def table(report: Mapping[str, Any]) -> str:
    """A markdown table: one row per case, R_tool / R_sum / Success per path."""
    lines = [
        "| case | segment | n | train R_tool | train R_sum | train Success | eval R_tool | eval R_sum | eval Success |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in report["paths"]["train"].items():
        other = report["paths"]["eval"].get(name, {})
        cells = [name, entry.get("segment") or "-", f"{int(entry.get('n', 0))}"]
        for side in (entry, other):
            cells += [f"{side[k]:.3f}" if "r_tool" in side else "-" for k in ("r_tool", "r_sum", "success")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def flat_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    out = {"audit/passed": float(report["passed"]), "audit/failures": float(len(report["failures"]))}
    for path, cases in report["paths"].items():
        for name, entry in cases.items():
            for key in ("r_tool", "r_sum", "success", "gap"):
                if key in entry:
                    out[f"audit/{path}/{name}/{key}"] = float(entry[key])
    return out


def audit_tokenizer(tasks: Sequence[Mapping[str, Any]], params: Any) -> Any:
    """A byte-level BPE tokenizer with the policy's chat template, trained on the audited tasks."""
    from slca.train.policy import corpus_texts, train_tokenizer

    return train_tokenizer(corpus_texts(tasks), min(params.policy.tiny.vocab_size, 2048), params.project.seed)


def run_reward_audit(params: Any) -> dict[str, Any]:
    """The stage: sample, audit both paths, write the report, log to MLflow, fail on a finding."""
    from slca.tracking import log_json, log_metrics, stage_run, write_atomic
    from slca.train.policy import read_tasks

    cfg = params.audit
    tasks = sample_tasks(
        read_tasks(Path(params.data.out_dir) / f"{cfg.split}.jsonl"), cfg.per_kind, params.project.seed
    )
    with stage_run(
        "reward_audit",
        params,
        log_params={
            "audit": cfg.model_dump(mode="json"),
            "judge": params.rewards.judge,
            "simulator_backend": params.simulator.backend,
        },
    ):
        report = audit(params, tasks, audit_tokenizer(tasks, params))
        write_atomic(cfg.report_path, json.dumps(report, indent=2, sort_keys=True) + "\n")
        rendered = table(report)
        print(rendered)
        log_metrics(flat_metrics(report))
        log_json(report, "reward_audit.json")
        import mlflow

        mlflow.log_text(rendered + "\n", "reward_audit.md")
    if report["failures"]:
        raise AuditFailed(f"reward audit failed ({len(report['failures'])} finding(s)): {report['failures'][0]}")
    return report

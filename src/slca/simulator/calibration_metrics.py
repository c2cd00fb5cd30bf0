"""Run calibration items through a backend and score the simulator against the real executors.

Metrics (all in [0, 1] except counts and latency): precision/recall/F1 of "this call is invalid",
error-class and exact-message agreement where both reject, response-schema conformance of the
simulator's successes, field-level value agreement where both succeed, consistency of repeated
read calls, and median µs per call; plus a per-perturbation breakdown.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from slca.simulator.backends import Backend
from slca.simulator.calibration_set import CalibItem
from slca.simulator.session import SimulatorSession
from slca.simulator.specs import ToolSpec, toolset
from slca.simulator.types import Knobs, ToolResult

BUSINESS_CLASSES = ("not_found", "conflict")


@dataclass(frozen=True)
class Outcome:
    result: ToolResult
    repeat: ToolResult | None
    latency_us: float


def row_specs(items: list[CalibItem]) -> dict[str, dict[str, ToolSpec]]:
    """Tool specs per row, built once and shared by every run."""
    specs: dict[str, dict[str, ToolSpec]] = {}
    for item in items:
        if item.row_id not in specs:
            specs[item.row_id] = toolset(item.tools)
    return specs


def run_items(
    items: list[CalibItem],
    backend: Backend,
    knobs: Knobs,
    specs: dict[str, dict[str, ToolSpec]],
    *,
    world: Any = None,
    full: bool = True,
    seed: int = 0,
) -> list[Outcome]:
    """Each item in a fresh episode: replay the prefix, time the target call, repeat it (if full)."""
    outcomes = []
    for index, item in enumerate(items):
        session = SimulatorSession(specs[item.row_id], backend, knobs=knobs, world=world, seed=seed + index)
        if full:
            for call in item.prefix:
                session.call(call)
        start = time.perf_counter()
        result = session.call(item.call)
        latency = (time.perf_counter() - start) * 1e6
        repeat = session.call(item.call) if full else None
        outcomes.append(Outcome(result, repeat, latency))
    return outcomes


def error_agreement(real: list[Outcome], sim: list[Outcome]) -> dict[str, float]:
    """P/R/F1 of flagging invalid calls, plus class and message agreement where both reject."""
    tp = sum(not r.result.ok and not s.result.ok for r, s in zip(real, sim))
    fp = sum(r.result.ok and not s.result.ok for r, s in zip(real, sim))
    fn = sum(not r.result.ok and s.result.ok for r, s in zip(real, sim))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    both = [(r.result, s.result) for r, s in zip(real, sim) if not r.result.ok and not s.result.ok]
    return {
        "error_precision": precision,
        "error_recall": recall,
        "error_f1": f1,
        "error_class_agreement": _mean([r.error_class == s.error_class for r, s in both]),
        "error_message_agreement": _mean([r.error == s.error for r, s in both]),
        "business_rule_misses": float(
            sum(not r.result.ok and r.result.error_class in BUSINESS_CLASSES and s.result.ok for r, s in zip(real, sim))
        ),
    }


def conformance(items: list[CalibItem], outcomes: list[Outcome], specs: dict) -> float:
    """Share of successful responses that conform to the tool's response schema."""
    checks = [
        not specs[item.row_id][o.result.name].response_errors(o.result.content)
        for item, o in zip(items, outcomes)
        if o.result.ok
    ]
    return _mean(checks)


def value_agreement(real: list[Outcome], sim: list[Outcome]) -> float:
    """Micro-averaged share of the real response's leaf fields the simulator reproduced."""
    matched = total = 0
    for r, s in zip(real, sim):
        if r.result.ok and s.result.ok:
            truth, guess = leaves(r.result.content), leaves(s.result.content)
            total += len(truth)
            matched += sum(path in guess and loosely_equal(value, guess[path]) for path, value in truth.items())
    return matched / total if total else 1.0


def consistency(items: list[CalibItem], outcomes: list[Outcome], specs: dict) -> float:
    """Share of successful read calls whose immediate repeat gave the same response."""
    checks = [
        o.repeat is not None and o.repeat.content == o.result.content
        for item, o in zip(items, outcomes)
        if o.result.ok and not specs[item.row_id][o.result.name].writes
    ]
    return _mean(checks)


def score(items: list[CalibItem], real: list[Outcome], sim: list[Outcome], specs: dict) -> dict[str, Any]:
    """Every calibration metric of `sim` against `real` on these items."""
    metrics: dict[str, Any] = {
        "n_items": float(len(items)),
        "n_invalid_real": float(sum(not o.result.ok for o in real)),
        "n_invalid_sim": float(sum(not o.result.ok for o in sim)),
    }
    metrics.update(error_agreement(real, sim))
    metrics["conformance"] = conformance(items, sim, specs)
    metrics["real_conformance"] = conformance(items, real, specs)
    metrics["value_agreement"] = value_agreement(real, sim)
    if all(o.repeat is not None for o in sim):
        metrics["consistency"] = consistency(items, sim, specs)
        metrics["real_consistency"] = consistency(items, real, specs)
    metrics["latency_us"] = _median([o.latency_us for o in sim])  # median: robust to preemption spikes
    metrics["real_latency_us"] = _median([o.latency_us for o in real])
    metrics["by_kind"] = by_kind(items, real, sim)
    return metrics


def by_kind(items: list[CalibItem], real: list[Outcome], sim: list[Outcome]) -> dict[str, dict[str, float]]:
    """Per perturbation kind: count, real rejection rate, verdict and class agreement."""
    groups: dict[str, list[tuple[ToolResult, ToolResult]]] = defaultdict(list)
    for item, r, s in zip(items, real, sim):
        groups[item.kind].append((r.result, s.result))
    return {
        kind: {
            "n": float(len(pairs)),
            "real_invalid_rate": _mean([not r.ok for r, _ in pairs]),
            "verdict_agreement": _mean([r.ok == s.ok for r, s in pairs]),
            "class_agreement": _mean([r.error_class == s.error_class for r, s in pairs]),
        }
        for kind, pairs in sorted(groups.items())
    }


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaf values of a JSON value by path (`a.b[0].c`)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(leaves(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(leaves(item, f"{prefix}[{index}]"))
        return out
    return {prefix: value}


def loosely_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return a == b


def _median(values: list) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2]) if ordered else 0.0


def _mean(values: list) -> float:
    return float(sum(values) / len(values)) if values else 1.0


def knob_diff(knobs: Knobs, base: Knobs) -> dict[str, Any]:
    return {name: value for name, value in knobs.as_dict().items() if getattr(base, name) != value}

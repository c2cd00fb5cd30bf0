"""Real artefacts for the dashboard tests: an advantage sample, eval reports, a calibration report,
and a populated MLflow SQLite store."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

TOOL = ['<tool_call>', '{"name": "get_weather"', ', "city": "Lima"}', '</tool_call>']
ENV = ['<tool_response>', '{"temp_c": 19}', '</tool_response>']
SUMMARY = ['It is', ' 19 °C', ' & cloudy', '.']


def rollout(
    prompt_id: str,
    tool_adv: float,
    sum_adv: float,
    grpo_adv: float,
    r_tool: float,
    r_sum: float,
    sample_idx: int = 0,
    group: int = 0,
    kind: str = "single",
) -> dict[str, Any]:
    """A tool segment, an environment (masked) run, then a summary segment, as `_sample` writes it."""
    kinds = ["tool"] * len(TOOL) + ["env"] * len(ENV) + ["summary"] * len(SUMMARY)
    active = {"tool": tool_adv, "summary": sum_adv, "env": 0.0}
    return {
        "prompt_id": prompt_id,
        "kind": kind,
        "domain": "weather",
        "group": group,
        "sample_idx": sample_idx,
        "tokens": TOOL + ENV + SUMMARY,
        "response_mask": [int(k != "env") for k in kinds],
        "tool_mask": [int(k == "tool") for k in kinds],
        "summary_mask": [int(k == "summary") for k in kinds],
        "advantages": [active[k] for k in kinds],
        "advantages_grpo": [grpo_adv if k != "env" else 0.0 for k in kinds],
        "r_tool": r_tool,
        "r_sum": r_sum,
        "penalty": 0.0,
        "fmt": 1.0,
        "name": 1.0,
        "key": 1.0,
        "value": r_tool,
        "parallel": 1.0,
    }


def sample(step: int = 1) -> dict[str, Any]:
    """Two prompt groups of two rollouts.

    Group 0 (weather-001, single): a perfect tool call with a poor summary, and the reverse; R_tool
    and R_sum disagree and GRPO's sign is the opposite of SLCA's on both tool segments (8 flips).
    Group 1 (weather-002, parallel): one rollout good on both, one poor on both; no flips.
    """
    return {
        "step": step,
        "estimator": "slca",
        "rollouts": [
            rollout("weather-001", tool_adv=0.8, sum_adv=-1.2, grpo_adv=-0.5, r_tool=1.0, r_sum=0.1),
            rollout("weather-001", tool_adv=-0.7, sum_adv=0.9, grpo_adv=0.25, r_tool=0.4, r_sum=0.9, sample_idx=1),
            rollout(
                "weather-002",
                tool_adv=0.5,
                sum_adv=0.6,
                grpo_adv=0.7,
                r_tool=1.0,
                r_sum=0.8,
                sample_idx=2,
                group=1,
                kind="parallel",
            ),
            rollout(
                "weather-002",
                tool_adv=-0.5,
                sum_adv=-0.6,
                grpo_adv=-0.7,
                r_tool=0.2,
                r_sum=0.1,
                sample_idx=3,
                group=1,
                kind="parallel",
            ),
        ],
    }


def calibration_report() -> dict[str, Any]:
    """The keys `slca.simulator.calibration.calibrate` writes, with fixed values."""

    def part(f1: float) -> dict[str, Any]:
        return {
            "n_items": 40.0,
            "error_precision": 1.0,
            "error_recall": f1,
            "error_f1": f1,
            "error_class_agreement": 0.9,
            "error_message_agreement": 0.85,
            "business_rule_misses": 0.0,
            "conformance": 1.0,
            "real_conformance": 1.0,
            "value_agreement": 0.75,
            "consistency": 1.0,
            "latency_us": 42.5,
            "real_latency_us": 120.0,
            "by_kind": {
                "gold": {"n": 10.0, "real_invalid_rate": 0.0, "verdict_agreement": 1.0, "class_agreement": 1.0},
                "missing_required": {
                    "n": 8.0,
                    "real_invalid_rate": 1.0,
                    "verdict_agreement": 0.875,
                    "class_agreement": 0.875,
                },
            },
        }

    return {
        "knobs": {"strict_extra_arguments": True, "check_ranges": True},
        "changed_from_params": {"check_ranges": True},
        "grid": [
            {"stage": 1, "knobs": {"check_ranges": value}, "metrics": {"error_f1": f1}}
            for value, f1 in ((True, 0.97), (False, 0.9))
        ],
        "search": part(0.97),
        "heldout": part(0.934),
        "params_heldout": part(0.8),
        "targets": {
            "error_f1": {"target": 0.99, "heldout": 0.934, "met": False},
            "conformance": {"target": 1.0, "heldout": 1.0, "met": True},
        },
        "sizes": {"rows": 20, "items": 80, "search": 40, "heldout": 40, "gold": 20},
        "seed": 0,
    }


def png(width: int = 4, height: int = 2) -> bytes:
    """A valid white RGB PNG (stands in for reports/calibration.png)."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    rows = b"".join(b"\x00" + b"\xff" * 3 * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


EVAL_RUNS = {("slca", 0): 0.6, ("slca", 1): 0.5, ("grpo", 0): 0.3}


def write_project(root: Path) -> None:
    """reports/calibration.{json,png}, reports/comparison.md, an on-disk eval report and samples."""
    reports = root / "reports"
    (reports / "eval").mkdir(parents=True, exist_ok=True)
    (reports / "calibration.json").write_text(json.dumps(calibration_report()), encoding="utf-8")
    (reports / "calibration.png").write_bytes(png())
    (reports / "comparison.md").write_text(
        "# Comparison\n\n| metric | slca |\n|---|---|\n| Success | 0.550 |\n", encoding="utf-8"
    )
    samples = root / "models" / "toolpo-s0" / "samples"  # a run known only from its files
    samples.mkdir(parents=True, exist_ok=True)
    (samples / "step_000002.json").write_text(json.dumps({**sample(2), "estimator": "toolpo"}), encoding="utf-8")
    # an on-disk report for a run the tracking store does not hold
    (reports / "eval" / "toolpo-s0.json").write_text(
        json.dumps({"run": "toolpo-s0", "estimator": "toolpo", "seed": 0, "metrics": {"indomain.success": 0.45}}),
        encoding="utf-8",
    )


def populate_store(uri: str, artifacts: Path, work: Path) -> dict[str, str]:
    """Train runs (metrics over 3 steps, a samples artifact) and evaluate runs; returns run ids."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("slca", artifact_location=artifacts.as_uri())
    ids = {}
    for estimator, seed in (("slca", 0), ("grpo", 0)):
        run = client.create_run(
            experiment,
            run_name=f"train-{estimator}-s{seed}",
            tags={"slca.stage": "train", "slca.estimator": estimator, "slca.seed": str(seed)},
        )
        run_id = run.info.run_id
        client.log_param(run_id, "estimator", estimator)
        client.log_param(run_id, "seed", seed)
        for step in (1, 2, 3):
            client.log_metric(run_id, "reward", 0.1 * step + (0.05 if estimator == "slca" else 0.0), step=step)
            client.log_metric(run_id, "rewards/r_tool/mean", 0.2 * step, step=step)
            client.log_metric(run_id, "rewards/components/fmt", 0.9, step=step)
            client.log_metric(run_id, "credit/misattribution_rate", 0.3 / step, step=step)
        if estimator == "slca":
            path = work / "step_000001.json"
            path.write_text(json.dumps(sample(1)), encoding="utf-8")
            client.log_artifact(run_id, str(path), artifact_path="samples")
        client.set_terminated(run_id)
        ids[f"train-{estimator}"] = run_id
    for (estimator, seed), success in EVAL_RUNS.items():
        run = client.create_run(experiment, tags={"slca.stage": "evaluate"})
        client.log_param(run.info.run_id, "estimator", estimator)
        client.log_param(run.info.run_id, "seed", seed)
        client.log_metric(run.info.run_id, "indomain.success", success)
        client.log_metric(run.info.run_id, "indomain.success.single", success)
        client.log_metric(run.info.run_id, "indomain.success.parallel", success / 2)
        client.log_metric(run.info.run_id, "bfcl.overall_accuracy_non_live", success / 2)
        client.set_terminated(run.info.run_id)
    return ids

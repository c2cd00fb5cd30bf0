"""Credit attribution page: one rollout token by token, coloured by advantage, the active estimator
next to GRPO, with a per-segment summary that flags sign disagreements."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from panels import common
from slca import dashboard_data as data

REQUIRED = ("tokens", "tool_mask", "summary_mask", "advantages", "advantages_grpo")


@dataclass(frozen=True)
class SampleSource:
    """Where one run's advantage samples live: MLflow artifacts, a folder on disk, or both."""

    label: str
    estimator: str
    run_id: str | None
    folder: Path | None


def sources(uri: str, paths: data.ProjectPaths) -> tuple[list[SampleSource], str | None]:
    """MLflow train runs (with their disk folder as fallback), then disk-only runs."""
    runs, error = common.stage_runs(uri, "train")
    disk = data.disk_sample_runs(paths.models)
    found = []
    for run in runs:
        found.append(SampleSource(f"{run.label} · {run.status.lower()}", run.estimator, run.run_id,
                                  disk.pop(f"{run.estimator}-s{run.seed}", None)))
    for name, folder in disk.items():
        found.append(SampleSource(f"{name} (disk: {folder})", name.rsplit("-s", 1)[0], None, folder))
    return found, error


def steps_of(uri: str, source: SampleSource) -> tuple[list[int], bool]:
    """(steps, from MLflow?): the run's sample steps, preferring its artifacts."""
    if source.run_id:
        steps = common.sample_steps(uri, source.run_id)
        if steps:
            return steps, True
    return (data.disk_sample_steps(source.folder) if source.folder else []), False


def rollout_label(rollout: dict[str, Any], index: int) -> str:
    rewards = " ".join(f"{k}={rollout[k]:+.3f}" for k in ("r_tool", "r_sum")
                       if isinstance(rollout.get(k), (int, float)))
    return f"#{index} · {rollout.get('prompt_id', '?')} · group {rollout.get('group', '?')} · {rewards}"


def render_rewards(rollout: dict[str, Any]) -> None:
    keys = [k for k in ("r_tool", "r_sum", "penalty", "fmt", "name", "key", "value", "parallel")
            if isinstance(rollout.get(k), (int, float))]
    for column, key in zip(st.columns(len(keys)) if keys else [], keys):
        column.metric(key, f"{rollout[key]:.3f}")


def highlight_disagreement(row: Any) -> list[str]:
    colour = "background-color: #fde0dd" if row["sign disagrees"] else ""
    return [colour] * len(row)


def render_segments(rollout: dict[str, Any], estimator: str) -> None:
    summary = data.segment_summary(rollout)
    st.markdown("**Per-segment credit**")
    st.dataframe(summary.style.apply(highlight_disagreement, axis=1).format(
        {"mean A (estimator)": "{:+.4f}", "mean A (GRPO)": "{:+.4f}"}), width="stretch")
    for segment, row in summary.iterrows():
        if row["sign disagrees"]:
            st.warning(f"sign disagreement on the {segment} segment: {estimator} gives "
                       f"{row['mean A (estimator)']:+.4f}, GRPO gives {row['mean A (GRPO)']:+.4f}")


def render_rollout(rollout: dict[str, Any], estimator: str) -> None:
    render_rewards(rollout)
    scale = data.colour_scale(rollout)
    st.markdown(data.legend_html(scale), unsafe_allow_html=True)
    left, right = st.columns(2)
    with left:
        st.markdown(f"**{estimator}** (active estimator)")
        st.markdown(data.tokens_html(rollout, "advantages", scale), unsafe_allow_html=True)
    with right:
        st.markdown("**grpo** (same rollout, trajectory-level advantage)")
        st.markdown(data.tokens_html(rollout, "advantages_grpo", scale), unsafe_allow_html=True)
    render_segments(rollout, estimator)


def render(uri: str, paths: data.ProjectPaths) -> None:
    st.header("Credit attribution")
    found, error = sources(uri, paths)
    if not found:
        st.info(common.no_runs_message("train", uri, error))
        return
    if error:
        st.caption(error)
    first_with_samples = next((i for i, s in enumerate(found) if steps_of(uri, s)[0]), 0)
    source = st.selectbox("Train run", found, index=first_with_samples, format_func=lambda s: s.label,
                          key="credit_run")
    steps, from_mlflow = steps_of(uri, source)
    if not steps:
        st.info(f"run {source.label} has no advantage samples yet (samples/step_NNNNNN.json)")
        return
    step = st.selectbox("Step", steps, index=len(steps) - 1, key="credit_step")
    sample = (common.load_sample(uri, source.run_id, step) if from_mlflow
              else common.load_disk_sample(str(source.folder), step))
    rollouts = sample.get("rollouts") or []
    if not rollouts:
        st.info(f"step {step} of {source.label} holds no rollouts")
        return
    index = st.selectbox("Rollout", range(len(rollouts)), format_func=lambda i: rollout_label(rollouts[i], i),
                         key="credit_rollout")
    missing = [k for k in REQUIRED if k not in rollouts[index]]
    if missing:
        st.error(f"step {step} of {source.label}: rollout {index} lacks {missing}; it was written by an older trainer")
        return
    render_rollout(rollouts[index], str(sample.get("estimator") or source.estimator))

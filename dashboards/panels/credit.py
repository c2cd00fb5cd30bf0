"""Credit attribution page (the credit explorer): a whole prompt group at once, every rollout's tokens
coloured by advantage on one scale per group, the active estimator, GRPO or both side by side, with
the tokens whose sign differs between the two outlined and counted per segment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from panels import common
from slca import dashboard_data as data
from slca import dashboard_groups as groups_data

REQUIRED = ("tokens", "tool_mask", "summary_mask", "advantages", "advantages_grpo")
ALL_KINDS = "all kinds"


@dataclass(frozen=True)
class SampleSource:
    """Where one run's advantage samples live: MLflow artifacts, a folder on disk, or both."""

    label: str
    estimator: str
    run_id: str | None
    folder: Path | None
    num_generations: int = 4


def sources(uri: str, paths: data.ProjectPaths) -> tuple[list[SampleSource], str | None]:
    """MLflow train runs (with their disk folder as fallback), then disk-only runs."""
    runs, error = common.stage_runs(uri, "train")
    disk = data.disk_sample_runs(paths.models)
    found = []
    for run in runs:
        size = run.params.get("train.num_generations", "4")
        found.append(
            SampleSource(
                f"{run.label} · {run.status.lower()}",
                run.estimator,
                run.run_id,
                disk.pop(f"{run.estimator}-s{run.seed}", None),
                int(size) if size.isdigit() else 4,
            )
        )
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


def pick_groups(found: list[groups_data.RolloutGroup]) -> list[groups_data.RolloutGroup]:
    """The filter row: task kind, only groups with sign flips, only groups whose rewards disagree."""
    kind_column, flips_column, disagree_column = st.columns([2, 2, 3])
    kind = kind_column.selectbox("Task kind", [ALL_KINDS, *groups_data.kinds_of(found)], key="credit_kind")
    only_flips = flips_column.checkbox("only groups with sign flips", key="credit_only_flips")
    only_disagreeing = disagree_column.checkbox(
        "only groups where R_tool and R_sum disagree", key="credit_only_disagree"
    )
    return groups_data.filter_groups(found, None if kind == ALL_KINDS else kind, only_flips, only_disagreeing)


def render_group(group: groups_data.RolloutGroup, estimator: str) -> None:
    views = {
        estimator: ("advantages",),
        "GRPO": ("advantages_grpo",),
        "side by side": ("advantages", "advantages_grpo"),
    }
    view = st.radio(
        "Advantages",
        list(views),
        horizontal=True,
        key="credit_view",
        format_func=lambda v: f"{v} (active estimator)" if v == estimator else v,
    )
    scale = groups_data.group_scale(group)
    st.markdown(data.legend_html(scale), unsafe_allow_html=True)
    st.markdown(groups_data.flip_summary_html(group), unsafe_allow_html=True)
    st.markdown(groups_data.group_html(group, views[view], scale, estimator), unsafe_allow_html=True)
    st.markdown("**Per rollout: rewards, mean advantage per segment, sign flips**")
    st.table(groups_data.group_frame(group).reset_index().style.format(precision=3))  # static: paints fast


def render(uri: str, paths: data.ProjectPaths) -> None:
    st.header("Credit attribution")
    found, error = sources(uri, paths)
    if not found:
        st.info(common.no_runs_message("train", uri, error))
        return
    if error:
        st.caption(error)
    run_column, step_column = st.columns([3, 1])
    first_with_samples = next((i for i, s in enumerate(found) if steps_of(uri, s)[0]), 0)
    source = run_column.selectbox(
        "Train run", found, index=first_with_samples, format_func=lambda s: s.label, key="credit_run"
    )
    steps, from_mlflow = steps_of(uri, source)
    if not steps:
        st.info(f"run {source.label} has no advantage samples yet (samples/step_NNNNNN.json)")
        return
    step = step_column.selectbox("Step", steps, index=len(steps) - 1, key="credit_step")
    sample = (
        common.load_sample(uri, source.run_id, step)
        if from_mlflow
        else common.load_disk_sample(str(source.folder), step)
    )
    rollouts = sample.get("rollouts") or []
    if not rollouts:
        st.info(f"step {step} of {source.label} holds no rollouts")
        return
    stale = [i for i, r in enumerate(rollouts) if any(k not in r for k in REQUIRED)]
    if stale:
        st.error(
            f"step {step} of {source.label}: rollouts {stale} lack some of {list(REQUIRED)}; "
            "they were written by an older trainer"
        )
        return
    shown = pick_groups(groups_data.sample_groups(sample, source.num_generations))
    if not shown:
        st.info(f"no prompt group of step {step} matches the filters: clear them or pick another step")
        return
    group = st.selectbox("Prompt group", shown, format_func=lambda g: g.label, key="credit_group")
    render_group(group, str(sample.get("estimator") or source.estimator))

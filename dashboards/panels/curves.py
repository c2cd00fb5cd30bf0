"""Training curves page: rewards, reward components and credit diagnostics across train runs."""

from __future__ import annotations

import streamlit as st

from panels import common
from slca import dashboard_data as data

MAX_DEFAULT_RUNS = 8
DEFAULT_METRICS = (
    "reward",
    "rewards/r_tool/mean",
    "rewards/r_sum/mean",
    "credit/misattribution_rate",
    "credit/contamination",
)


def render(uri: str) -> None:
    st.header("Training curves")
    runs, error = common.stage_runs(uri, "train")
    if not runs:
        st.info(common.no_runs_message("train", uri, error))
        return
    by_label = {run.label: run for run in runs}
    chosen = st.multiselect("Runs", list(by_label), default=list(by_label)[:MAX_DEFAULT_RUNS], key="curve_runs")
    if not chosen:
        st.info("pick at least one run")
        return
    keys = set().union(*(by_label[label].metrics.keys() for label in chosen))
    for group, names in data.group_metric_keys(keys).items():
        defaults = [n for n in names if n in DEFAULT_METRICS or group == "Reward components"]
        picked = st.multiselect(group, names, default=defaults, key=f"curve_{group}")
        for name in picked:
            histories = {label: common.metric_history(uri, by_label[label].run_id, name) for label in chosen}
            frame = data.curves_frame(histories)
            if frame.empty:
                continue
            st.markdown(f"**{name}**")
            st.line_chart(frame, x_label="step", y_label=name)

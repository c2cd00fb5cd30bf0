"""Run comparison page: two or more train runs (e.g. slca-s0 vs grpo-s0) overlaid: training curves,
misattribution rate, and in-domain success per task kind from each run's evaluation."""

from __future__ import annotations

import streamlit as st

from panels import common
from slca import dashboard_data as data


def render(uri: str) -> None:
    st.header("Run comparison")
    runs, error = common.stage_runs(uri, "train")
    if not runs:
        st.info(common.no_runs_message("train", uri, error))
        return
    by_label = {run.label: run for run in runs}
    chosen = st.multiselect(
        "Runs to compare",
        list(by_label),
        default=[run.label for run in data.default_comparison(runs)],
        key="compare_runs",
    )
    if len(chosen) < 2:
        st.info("pick two or more runs to compare")
        return
    histories = {
        metric: {label: common.metric_history(uri, by_label[label].run_id, metric) for label in chosen}
        for metric in data.COMPARE_METRICS
    }
    st.markdown("**last logged value**")
    st.dataframe(data.final_values_frame(histories).style.format(precision=3), width="stretch")
    columns = st.columns(2)
    for index, (metric, by_run) in enumerate(histories.items()):
        frame = data.curves_frame(by_run)
        if frame.empty:
            continue
        with columns[index % 2]:
            st.markdown(f"**{metric}**")
            st.line_chart(frame, x_label="step", y_label=metric, height=260)
    evaluations, _ = common.stage_runs(uri, "evaluate")
    kinds = data.kind_success_frame([by_label[label] for label in chosen], evaluations)
    st.markdown("**in-domain success by task kind** (newest evaluation of each run's estimator and seed)")
    if kinds.empty:
        st.caption("no evaluate run matches these runs yet: `slca evaluate` or `make run` writes them")
        return
    st.dataframe(kinds.style.format(precision=3), width="stretch")
    st.bar_chart(kinds, stack=False, height=260)

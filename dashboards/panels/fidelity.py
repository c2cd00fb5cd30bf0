"""Simulator fidelity page: how closely the tool simulator matches the real executors
(`reports/calibration.json`, else the newest `calibrate` run)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from slca import dashboard_data as data

HEADLINE = (
    ("error_f1", "held-out error-agreement F1"),
    ("conformance", "conformance"),
    ("value_agreement", "value agreement"),
    ("latency_us", "latency (µs, simulator)"),
)


def render_headline(report: dict[str, Any]) -> None:
    heldout = report.get("heldout") or {}
    shown = [(key, label) for key, label in HEADLINE if isinstance(heldout.get(key), (int, float))]
    for column, (key, label) in zip(st.columns(len(shown)) if shown else [], shown):
        real = heldout.get("real_latency_us") if key == "latency_us" else None
        column.metric(
            label,
            f"{heldout[key]:.1f}" if key == "latency_us" else f"{heldout[key]:.3f}",
            delta=f"real {real:.1f}" if isinstance(real, (int, float)) else None,
            delta_color="off",
        )


def render_plot(report: dict[str, Any], paths: data.ProjectPaths) -> None:
    if paths.calibration_png.exists():
        st.image(str(paths.calibration_png), caption=str(paths.calibration_png))
        return
    try:  # a partial report (metrics only) cannot be drawn
        from slca.simulator.calibration import plot_png

        st.image(plot_png(report), caption="calibration plot (drawn from the report)")
    except (KeyError, TypeError, ValueError, ImportError):
        st.caption(f"no calibration plot: {paths.calibration_png} is missing and the report cannot be drawn")


def render(uri: str, paths: data.ProjectPaths) -> None:
    st.header("Simulator fidelity")
    report, source = data.load_calibration(paths.calibration_json, uri)
    if not report:
        st.info(f"no simulator calibration yet ({source}): run `slca calibrate` or `make run` first")
        return
    st.caption(f"source: {source}")
    render_headline(report)
    targets = report.get("targets") or {}
    if targets:
        st.markdown("**targets (held out)**")
        st.dataframe(pd.DataFrame.from_dict(targets, orient="index"), width="stretch")
    st.markdown("**calibration metrics**")
    st.dataframe(data.calibration_frame(report), width="stretch")
    by_kind = data.calibration_by_kind(report)
    if not by_kind.empty:
        st.markdown("**held out, by call kind**")
        st.dataframe(by_kind, width="stretch")
    grid = data.calibration_grid(report)
    if not grid.empty:
        with st.expander(f"knob search: {len(grid)} settings scored on the search half"):
            st.dataframe(grid, width="stretch")
    if report.get("knobs"):
        changed = ", ".join(map(str, report.get("changed_from_params") or []))
        st.markdown("**chosen simulator knobs**" + (f" (changed from params: {changed})" if changed else ""))
        st.json(report["knobs"], expanded=False)
    render_plot(report, paths)

"""Evaluation comparison page: eval metrics per estimator (mean ± std over seeds), per run, and
`reports/comparison.md` as `slca compare` wrote it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from panels import common
from slca import dashboard_data as data


def per_run_frame(records: list[dict], metrics: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(
        [
            {
                "estimator": r["estimator"],
                "seed": r["seed"],
                "source": r["source"],
                **{m: r["metrics"].get(m) for m in metrics},
            }
            for r in records
        ]
    )
    return frame.set_index(["estimator", "seed"])


def render_comparison(paths: data.ProjectPaths) -> None:
    if paths.comparison_md.exists():
        st.subheader(f"{paths.comparison_md.name}")
        st.markdown(paths.comparison_md.read_text(encoding="utf-8"))
    else:
        st.caption(f"no {paths.comparison_md} yet: `slca compare` writes it")
    if paths.comparison_png.exists():
        st.image(str(paths.comparison_png))


def render(uri: str, paths: data.ProjectPaths) -> None:
    st.header("Evaluation comparison")
    runs, error = common.stage_runs(uri, "evaluate")
    records = data.eval_records(runs, paths.eval_dir)
    if error:
        st.caption(error)
    if not records:
        st.info(f"no evaluate runs in {uri} and no reports in {paths.eval_dir}: run `make run` first")
        render_comparison(paths)
        return
    available = data.ordered_eval_metrics(set().union(*(r["metrics"].keys() for r in records)))
    headline = [
        m
        for m in available
        if not m.startswith(("bfcl.", "tau2.")) or m in ("bfcl.overall_accuracy_non_live", "tau2.pass_hat_1")
    ][:8]
    metrics = st.multiselect("Metrics", available, default=headline, key="eval_metrics")
    st.markdown("**mean ± std over seeds**")
    st.dataframe(data.mean_std_frame(data.mean_std(records), metrics), width="stretch")
    st.markdown("**per run**")
    st.dataframe(per_run_frame(records, metrics), width="stretch")
    render_comparison(paths)

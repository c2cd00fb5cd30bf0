"""SLCA-GRPO dashboard: where the credit went.

Five tabs (only the open one runs) read the MLflow tracking store and the files the pipeline writes
under the project folder: credit attribution (a prompt group's token-level advantages, estimator vs
GRPO, sign flips), run comparison, training curves, evaluation comparison and simulator fidelity.
Store and folder are fixed at launch (`MLFLOW_TRACKING_URI`, default ./mlflow.db; `SLCA_PROJECT_DIR`,
default .): the page has no field to point it elsewhere, so a visitor cannot make the server fetch
URLs or open files of their choosing.

    slca dashboard --tracking-uri sqlite:///mlflow.db --project-dir .    # binds 127.0.0.1:8501
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent / "src"):  # panels package, and slca without an installed package
    if str(folder) not in sys.path:
        sys.path.insert(0 if folder == HERE else len(sys.path), str(folder))

import streamlit as st
from panels import compare, credit, curves, evaluation, fidelity

from slca import dashboard_data as data

TITLE = "SLCA-GRPO: where the credit went"

st.set_page_config(page_title=TITLE, layout="wide")
st.title(TITLE)
uri = data.tracking_uri()
paths = data.project_paths(data.project_dir())
if st.sidebar.button("Refresh", key="refresh"):
    st.cache_data.clear()
st.sidebar.caption(f"tracking: {uri}")
st.sidebar.caption(f"project: {paths.root}")

PAGES = {
    "Credit attribution": lambda: credit.render(uri, paths),
    "Run comparison": lambda: compare.render(uri),
    "Training curves": lambda: curves.render(uri),
    "Evaluation comparison": lambda: evaluation.render(uri, paths),
    "Simulator fidelity": lambda: fidelity.render(uri, paths),
}
# Only the open tab runs (a rerun on switching): the credit page paints without drawing every chart first.
for tab, render in zip(st.tabs(list(PAGES), key="page", on_change="rerun"), PAGES.values()):
    if tab.open:
        with tab:
            render()

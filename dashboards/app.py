"""SLCA-GRPO dashboard: where the credit went.

Four tabs read the MLflow tracking store and the files the pipeline writes under the project
folder: credit attribution (token-level advantages, estimator vs GRPO), training curves, evaluation
comparison and simulator fidelity. Store and folder are fixed at launch (`MLFLOW_TRACKING_URI`,
default ./mlflow.db; `SLCA_PROJECT_DIR`, default .): the page has no field to point it elsewhere,
so a visitor cannot make the server fetch URLs or open files of their choosing.

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
from panels import credit, curves, evaluation, fidelity

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

credit_tab, curves_tab, eval_tab, fidelity_tab = st.tabs(
    ["Credit attribution", "Training curves", "Evaluation comparison", "Simulator fidelity"])
with credit_tab:
    credit.render(uri, paths)
with curves_tab:
    curves.render(uri)
with eval_tab:
    evaluation.render(uri, paths)
with fidelity_tab:
    fidelity.render(uri, paths)

"""SLCA-GRPO dashboard: where the credit went.

Four tabs read the MLflow tracking store (sidebar URI, default `MLFLOW_TRACKING_URI` or
./mlflow.db) and the files the pipeline writes under the project folder:
credit attribution (token-level advantages, estimator vs GRPO), training curves, evaluation
comparison and simulator fidelity.

    streamlit run dashboards/app.py
"""

from __future__ import annotations

import os
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
uri = data.tracking_uri(st.sidebar.text_input("MLflow tracking URI", value=data.tracking_uri(), key="uri"))
root = st.sidebar.text_input("Project folder", value=os.environ.get("SLCA_PROJECT_DIR", "."), key="project_dir")
if st.sidebar.button("Refresh", key="refresh"):
    st.cache_data.clear()
paths = data.project_paths(root)
st.sidebar.caption(f"tracking: {uri}")

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

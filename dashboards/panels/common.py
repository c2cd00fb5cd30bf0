"""Cached readers shared by the dashboard pages (short TTL so new runs show up on refresh)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from slca import dashboard_data as data

TTL_S = 30


@st.cache_data(ttl=TTL_S, show_spinner=False)
def stage_runs(uri: str, stage: str) -> tuple[list[data.RunRow], str | None]:
    """(runs, error line): runs of one stage, or the reason the store could not be read."""
    try:
        return data.list_runs(uri, stage), None
    except data.StoreError as error:
        return [], str(error)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def sample_steps(uri: str, run_id: str) -> list[int]:
    try:
        return data.sample_steps(uri, run_id)
    except Exception:  # noqa: BLE001 - artifact store unreachable: the page falls back to files on disk
        return []


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_sample(uri: str, run_id: str, step: int) -> dict[str, Any]:
    return data.load_sample(uri, run_id, step)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def load_disk_sample(folder: str, step: int) -> dict[str, Any]:
    return data.load_disk_sample(Path(folder), step)


@st.cache_data(ttl=TTL_S, show_spinner=False)
def metric_history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    return data.metric_history(uri, run_id, key)


def no_runs_message(stage: str, uri: str, error: str | None) -> str:
    """The line shown when a page has nothing to draw."""
    if error:
        return f"{error}"
    return f"no {stage} runs in {uri}: run `make run` first"

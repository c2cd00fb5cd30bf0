"""The Streamlit app for real (`streamlit.testing.v1.AppTest`) against a populated SQLite MLflow store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dashboard_fixtures import populate_store, write_project
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "dashboards" / "app.py")
TIMEOUT_S = 60


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """(uri, project folder, empty store uri): train/evaluate runs in MLflow, reports on disk."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("dashboard")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    MlflowClient(tracking_uri=uri).search_experiments()  # creates the tables
    shutil.copyfile(root / "mlflow.db", root / "empty.db")  # a migrated store without runs, for free
    populate_store(uri, root / "artifacts", root)
    write_project(root / "project")
    return uri, root / "project", f"sqlite:///{root / 'empty.db'}"


def run_app(monkeypatch, uri: str, folder) -> AppTest:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("SLCA_PROJECT_DIR", str(folder))
    app = AppTest.from_file(APP, default_timeout=TIMEOUT_S)
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    return app


def markdown_text(app: AppTest) -> str:
    return "\n".join(m.value for m in app.markdown)


def test_app_renders_all_pages_from_the_store(project, monkeypatch):
    uri, folder, _ = project
    app = run_app(monkeypatch, uri, folder)
    assert app.title[0].value == "SLCA-GRPO: where the credit went"
    assert [h.value for h in app.header] == ["Credit attribution", "Training curves", "Evaluation comparison",
                                             "Simulator fidelity"]
    assert [t.label for t in app.tabs] == ["Credit attribution", "Training curves", "Evaluation comparison",
                                           "Simulator fidelity"]

    # credit attribution opens on the first run with samples: slca (the newer grpo run has none)
    runs = app.selectbox(key="credit_run")
    assert [label.split(" ")[0] for label in runs.options] == ["grpo-s0", "slca-s0", "toolpo-s0"]
    assert "(disk: " in runs.options[2]
    assert runs.value.estimator == "slca" and runs.value.run_id
    assert app.selectbox(key="credit_step").value == 1
    page = markdown_text(app)
    assert page.count("&lt;tool_call&gt;") == 2  # the same rollout under slca and under grpo
    assert "**slca** (active estimator)" in page and "**grpo** (same rollout" in page
    assert "slca-env" in page and "environment (masked)" in page
    segments = app.dataframe[0].value
    assert segments.loc["tool", "mean A (estimator)"] == pytest.approx(0.8)
    assert segments.loc["tool", "mean A (GRPO)"] == pytest.approx(-0.5)
    assert [w.value for w in app.warning] == [
        "sign disagreement on the tool segment: slca gives +0.8000, GRPO gives -0.5000"]
    assert {m.label: m.value for m in app.metric}["r_tool"] == "1.000"

    # the second rollout: the summary now disagrees in sign
    app.selectbox(key="credit_rollout").select_index(1).run()
    assert not app.exception
    assert [w.value for w in app.warning] == [
        "sign disagreement on the tool segment: slca gives -0.7000, GRPO gives +0.2500"]
    assert {m.label: m.value for m in app.metric}["r_sum"] == "0.900"

    # a run known only from models/<run>/samples/, and a run without samples
    app.selectbox(key="credit_run").select_index(2).run()
    assert app.selectbox(key="credit_run").value.run_id is None
    assert app.selectbox(key="credit_step").value == 2
    assert "**toolpo** (active estimator)" in markdown_text(app)
    app.selectbox(key="credit_run").select_index(0).run()
    assert any("has no advantage samples yet" in i.value for i in app.info)
    app.selectbox(key="credit_run").select_index(1).run()
    assert not app.exception

    # training curves: one chart per default metric
    assert sorted(label.split(" ")[0] for label in app.multiselect(key="curve_runs").value) == ["grpo-s0", "slca-s0"]
    assert app.multiselect(key="curve_Rewards").value == ["reward", "rewards/r_tool/mean"]
    assert app.multiselect(key="curve_Credit diagnostics").value == ["credit/misattribution_rate"]
    assert {"**reward**", "**rewards/components/fmt**", "**credit/misattribution_rate**"} <= {
        m.value for m in app.markdown}
    charts = app.get("vega_lite_chart")
    assert len(charts) == 4 and all('"step"' in chart.proto.spec for chart in charts)

    # evaluation: mean ± std over seeds, MLflow runs plus the on-disk report
    table = next(d.value for d in app.dataframe if "indomain.success" in d.value.columns
                 and d.value.index.name == "estimator")
    assert table.loc["slca", "indomain.success"] == "0.550 ± 0.071 (n=2)"
    assert table.loc["grpo", "indomain.success"] == "0.300 ± 0.000 (n=1)"
    assert table.loc["toolpo", "indomain.success"] == "0.450 ± 0.000 (n=1)"
    assert "# Comparison" in page or "# Comparison" in markdown_text(app)

    # simulator fidelity: headline metrics and the calibration table from reports/calibration.json
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["held-out error-agreement F1"] == "0.934"
    assert metrics["latency (µs, simulator)"] == "42.5"
    calibration = next(d.value for d in app.dataframe if d.value.index.name == "metric")
    assert calibration.loc["value_agreement", "tuned, held out"] == pytest.approx(0.75)
    assert len(app.get("image")) == 1  # reports/calibration.png
    grid = next(d.value for d in app.dataframe if "knob:check_ranges" in d.value.columns)
    assert grid["error_f1"].tolist() == [0.97, 0.9]


def test_app_says_what_to_do_without_a_store(tmp_path, monkeypatch):
    app = run_app(monkeypatch, f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path)
    infos = [i.value for i in app.info]
    missing = f"no tracking store at {tmp_path / 'mlflow.db'}: run `make run` first or point the URI elsewhere"
    assert infos[:2] == [missing, missing]  # credit attribution, training curves
    assert infos[2] == f"no evaluate runs in sqlite:///{tmp_path / 'mlflow.db'} and no reports in " \
                       f"{tmp_path / 'reports' / 'eval'}: run `make run` first"
    assert infos[3] == f"no simulator calibration yet ({missing}): run `slca calibrate` or `make run` first"
    assert not (tmp_path / "mlflow.db").exists()  # the dashboard never creates a store


def test_app_with_an_empty_store(project, monkeypatch, tmp_path):
    _, _, empty = project
    app = run_app(monkeypatch, empty, tmp_path)
    infos = [i.value for i in app.info]
    assert infos[:2] == [f"no train runs in {empty}: run `make run` first"] * 2
    assert infos[3] == f"no simulator calibration yet (no {tmp_path / 'reports' / 'calibration.json'} and " \
                       f"no calibrate run in {empty}): run `slca calibrate` or `make run` first"
    assert not app.dataframe and not app.get("vega_lite_chart")


def test_store_and_folder_are_fixed_at_launch_not_editable_in_the_page(project, monkeypatch):
    uri, folder, _ = project
    app = run_app(monkeypatch, uri, folder)
    assert not app.text_input and not app.sidebar.text_input  # no field to point the server elsewhere
    assert [c.value for c in app.sidebar.caption] == [f"tracking: {uri}", f"project: {folder}"]
    assert app.selectbox(key="credit_run").value.estimator == "slca"  # read from the launch-time store

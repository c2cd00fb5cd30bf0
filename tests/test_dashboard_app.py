"""The Streamlit app for real (`streamlit.testing.v1.AppTest`) against a populated SQLite MLflow store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from dashboard_fixtures import populate_store, write_project
from streamlit.testing.v1 import AppTest

from slca import dashboard_data as data

APP = str(Path(__file__).resolve().parents[1] / "dashboards" / "app.py")
TIMEOUT_S = 60
PAGES = ["Credit attribution", "Run comparison", "Training curves", "Evaluation comparison", "Simulator fidelity"]


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


def open_page(app: AppTest, name: str) -> AppTest:
    """Switch tabs as a click does: only the open tab runs."""
    app.session_state["page"] = name
    app.run()
    assert not app.exception, [e.message for e in app.exception]
    assert [h.value for h in app.header] == [name]
    return app


def markdown_text(app: AppTest) -> str:
    return "\n".join(m.value for m in app.markdown)


def test_app_renders_all_pages_from_the_store(project, monkeypatch):
    uri, folder, _ = project
    app = run_app(monkeypatch, uri, folder)
    assert app.title[0].value == "SLCA-GRPO: where the credit went"
    assert [t.label for t in app.tabs] == PAGES
    assert [h.value for h in app.header] == ["Credit attribution"]  # the other tabs run when opened

    # credit attribution opens on the first run with samples: slca (the newer grpo run has none)
    runs = app.selectbox(key="credit_run")
    assert [label.split(" ")[0] for label in runs.options] == ["grpo-s0", "slca-s0", "toolpo-s0"]
    assert "(disk: " in runs.options[2]
    assert runs.value.estimator == "slca" and runs.value.run_id
    assert app.selectbox(key="credit_step").value == 1
    assert app.selectbox(key="credit_kind").options == ["all kinds", "parallel", "single"]
    group = app.selectbox(key="credit_group")
    assert group.options == [
        "group 0 · weather-001 · single · 2 rollouts · flips tool 8 / summary 0",
        "group 1 · weather-002 · parallel · 2 rollouts · flips tool 0 / summary 0",
    ]
    assert app.radio(key="credit_view").options == ["slca (active estimator)", "GRPO", "side by side"]
    page = markdown_text(app)
    assert page.count('class="slca-rollout"') == 2 and page.count('data-view="estimator"') == 2
    assert page.count("slca-tok slca-tool slca-flip") == 8 and 'data-tool="8" data-summary="0"' in page
    assert "slca-env" in page and "environment (masked)" in page and "&lt;tool_call&gt;" in page
    table = app.table[0].value
    assert table["rollout"].tolist() == [0, 1]
    assert table.loc[0, "A tool (estimator)"] == pytest.approx(0.8)
    assert table.loc[0, "A tool (grpo)"] == pytest.approx(-0.5) and table.loc[1, "r_sum"] == 0.9

    # GRPO, then both side by side, on the same group and colour scale
    app.radio(key="credit_view").set_value("GRPO").run()
    page = markdown_text(app)
    assert page.count('data-view="grpo"') == 2 and 'data-view="estimator"' not in page
    assert f"background:{data.advantage_colour(-0.5, 1.2)}" in page
    app.radio(key="credit_view").set_value("side by side").run()
    page = markdown_text(app)
    assert page.count('data-view="grpo"') == 2 and page.count('data-view="estimator"') == 2

    # filters: the parallel group has no flips; no group is both parallel and flipping
    app.selectbox(key="credit_group").select_index(1).run()
    assert 'data-tool="0" data-summary="0"' in markdown_text(app)
    app.checkbox(key="credit_only_flips").check().run()
    assert [o.split(" · ")[1] for o in app.selectbox(key="credit_group").options] == ["weather-001"]
    app.selectbox(key="credit_kind").set_value("parallel").run()
    assert [i.value for i in app.info] == [
        "no prompt group of step 1 matches the filters: clear them or pick another step"
    ]
    app.checkbox(key="credit_only_flips").uncheck().run()
    app.checkbox(key="credit_only_disagree").check().run()
    assert any("matches the filters" in i.value for i in app.info)
    app.selectbox(key="credit_kind").set_value("all kinds").run()
    assert [o.split(" · ")[1] for o in app.selectbox(key="credit_group").options] == ["weather-001"]
    assert not app.exception

    # a run known only from models/<run>/samples/, and a run without samples
    app.selectbox(key="credit_run").select_index(2).run()
    assert app.selectbox(key="credit_run").value.run_id is None
    assert app.selectbox(key="credit_step").value == 2
    assert app.radio(key="credit_view").options[0] == "toolpo (active estimator)"
    app.selectbox(key="credit_run").select_index(0).run()
    assert any("has no advantage samples yet" in i.value for i in app.info)
    app.selectbox(key="credit_run").select_index(1).run()
    assert not app.exception

    # run comparison: the newest run of each estimator, curves and success per kind from their evaluations
    open_page(app, "Run comparison")
    assert [label.split(" ")[0] for label in app.multiselect(key="compare_runs").value] == ["grpo-s0", "slca-s0"]
    finals = next(d.value for d in app.dataframe if d.value.index.name == "run")
    slca_label = next(label for label in finals.index if label.startswith("slca-s0"))
    assert finals.loc[slca_label, "credit/misattribution_rate"] == pytest.approx(0.1)
    kinds = next(d.value for d in app.dataframe if d.value.index.name == "kind")
    assert kinds.loc["single", slca_label] == pytest.approx(0.6)  # slca seed 0, not seed 1 (0.5)
    assert kinds.loc["parallel", slca_label] == pytest.approx(0.3)
    charts = app.get("vega_lite_chart")  # reward, r_tool, misattribution; success by kind
    assert len(charts) == 4 and sum('"step"' in chart.proto.spec for chart in charts) == 3

    # training curves: one chart per default metric
    open_page(app, "Training curves")
    assert sorted(label.split(" ")[0] for label in app.multiselect(key="curve_runs").value) == ["grpo-s0", "slca-s0"]
    assert app.multiselect(key="curve_Rewards").value == ["reward", "rewards/r_tool/mean"]
    assert app.multiselect(key="curve_Credit diagnostics").value == ["credit/misattribution_rate"]
    assert {"**reward**", "**rewards/components/fmt**", "**credit/misattribution_rate**"} <= {
        m.value for m in app.markdown
    }
    charts = app.get("vega_lite_chart")
    assert len(charts) == 4 and all('"step"' in chart.proto.spec for chart in charts)

    # evaluation: mean ± std over seeds, MLflow runs plus the on-disk report
    open_page(app, "Evaluation comparison")
    table = next(
        d.value for d in app.dataframe if "indomain.success" in d.value.columns and d.value.index.name == "estimator"
    )
    assert table.loc["slca", "indomain.success"] == "0.550 ± 0.071 (n=2)"
    assert table.loc["grpo", "indomain.success"] == "0.300 ± 0.000 (n=1)"
    assert table.loc["toolpo", "indomain.success"] == "0.450 ± 0.000 (n=1)"
    assert "# Comparison" in markdown_text(app)

    # simulator fidelity: headline metrics and the calibration table from reports/calibration.json
    open_page(app, "Simulator fidelity")
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
    infos = [i.value for name in PAGES for i in open_page(app, name).info]
    missing = f"no tracking store at {tmp_path / 'mlflow.db'}: run `make run` first or point the URI elsewhere"
    assert infos[:3] == [missing] * 3  # credit attribution, run comparison, training curves
    assert (
        infos[3] == f"no evaluate runs in sqlite:///{tmp_path / 'mlflow.db'} and no reports in "
        f"{tmp_path / 'reports' / 'eval'}: run `make run` first"
    )
    assert infos[4] == f"no simulator calibration yet ({missing}): run `slca calibrate` or `make run` first"
    assert not (tmp_path / "mlflow.db").exists()  # the dashboard never creates a store


def test_app_with_an_empty_store(project, monkeypatch, tmp_path):
    _, _, empty = project
    app = run_app(monkeypatch, empty, tmp_path)
    infos, drawn = [], []
    for name in PAGES:
        open_page(app, name)
        infos += [i.value for i in app.info]
        drawn += [*app.dataframe, *app.get("vega_lite_chart")]
    assert infos[:3] == [f"no train runs in {empty}: run `make run` first"] * 3
    assert (
        infos[4] == f"no simulator calibration yet (no {tmp_path / 'reports' / 'calibration.json'} and "
        f"no calibrate run in {empty}): run `slca calibrate` or `make run` first"
    )
    assert not drawn


def test_store_and_folder_are_fixed_at_launch_not_editable_in_the_page(project, monkeypatch):
    uri, folder, _ = project
    app = run_app(monkeypatch, uri, folder)
    assert not app.text_input and not app.sidebar.text_input  # no field to point the server elsewhere
    assert [c.value for c in app.sidebar.caption] == [f"tracking: {uri}", f"project: {folder}"]
    assert app.selectbox(key="credit_run").value.estimator == "slca"  # read from the launch-time store

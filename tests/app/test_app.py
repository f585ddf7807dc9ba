"""AppTest tests of the Streamlit app: every page driven through its widgets, runs, charts and errors.

Problems are tiny (two moons, n = 200) so each test takes a second or two after the first import.
Runs execute on the app's Dask workers (the embedded cluster, started once per test session), or
in-process for the solvers defined here; AppTest cannot tick the page's polling fragment, so tests
wait for the runs (``wait_for_runs``) and rerun the script themselves.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import time

import numpy as np
import pytest
import torch
from conftest import wait_for_runs

from krr_app.charts import figures as charts, fit as fit_charts
from krr_app.jobs.config import DataSpec, make_config, parse_sweep_values, problems
from krr_app.jobs.runs import Run, RunRegistry
from krr_app.teaching.snippet import reproduce_snippet
from krr_app.text import shown_as
from krrcore.registry import SOLVERS, SolverInfo
from krrcore.solvers.base import Step
from krrcore.solvers.loops import IterativeKRR

SMALL = {"n": 200, "M": 40, "maxiter": 4, "auto_run": "false"}  # runs start on Run only


# -- solvers that exist only for these tests ---------------------------------------------------
class _ToyKRR(IterativeKRR):
    def __init__(self, kernel=None, penalty=1e-3, M=10, *, maxiter=5, seed=0):
        self.kernel = kernel
        self.penalty = penalty
        self.M = M
        self.maxiter = maxiter
        self.seed = seed

    def _setup(self, X, Y):
        self.centers_ = X[: self.M]
        self.coef_ = torch.zeros(self.M, Y.shape[1], dtype=X.dtype)


class DivergingKRR(_ToyKRR):
    """One good step, then a NaN residual: the base class raises SolverDivergedError."""

    def _steps(self, X, Y):
        yield Step(residual=0.5)
        yield Step(residual=math.nan)


class SlowKRR(_ToyKRR):
    """An endless solver taking 20 ms per iteration (only maxiter or Stop end it)."""

    def _steps(self, X, Y):
        residual = 1.0
        while True:
            time.sleep(0.02)
            residual *= 0.9
            yield Step(residual=residual)


def _register(monkeypatch, key, cls, label):
    monkeypatch.setitem(
        SOLVERS,
        key,
        SolverInfo(key, label, cls, "nystrom", True, ("M", "maxiter", "seed"), "a solver for tests", "tests"),
    )


def _texts(elements) -> str:
    """The elements' texts as a reader sees them (messages quoting inputs are escaped Markdown)."""
    return "\n".join(shown_as(str(e.value)) for e in elements)


def _chart_points(at, key="explore_convergence") -> list[int]:
    """Points per trace of the plotly chart drawn under ``key`` (Explore's convergence chart)."""
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith(f"-{key}")]
    spec = json.loads(chart.proto.spec)
    return [len(trace.get("x", [])) for trace in spec["data"]]


def _live_chart(at) -> tuple[int, str]:
    """The live chart's first run as the page sends it: (records, progress line)."""
    data = json.loads(at.get("bidi_component")[0].proto.json)
    return len(data["runs"][0]["records"]), data["runs"][0]["text"]


def _click_run(at, key="run"):
    return at.button(key=key).click().run()


def _snippet(at) -> str:
    """The "Reproduce in Python" code: not sent while its expander is closed (a browser would fetch
    and compile the code highlighter for it), sent with the notebook download once it is opened."""
    from krr_app.parts import views

    assert not at.code and "Download as a Jupyter notebook" not in {b.label for b in at.get("download_button")}
    at.session_state[views.reproduce_key("explore_notebook")] = True
    at = at.run()
    assert "Download as a Jupyter notebook" in {b.label for b in at.get("download_button")}
    return at.code[0].value


# -- Explore --------------------------------------------------------------------------------------
def test_explore_runs_falkon_and_shows_chart_metrics_and_snippet(app):
    at = app(**SMALL)
    assert not at.exception
    assert at.selectbox(key="dataset").value == "moons" and at.selectbox(key="solver").value == "falkon"
    at = wait_for_runs(_click_run(at))
    run = at.session_state["explore_run"]
    assert run.status == "done" and [r.iteration for r in run.records] == [0, 1, 2, 3, 4]
    assert "finished" in _texts(at.success)
    # The convergence chart: residual and test-error traces with one point per record.
    assert _chart_points(at) == [5, 5]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Test error"].endswith("%") and float(metrics["Test error"][:-1]) < 20
    # 2-D data: the decision surface is the second chart.
    assert len(at.get("plotly_chart")) == 2
    snippet = _snippet(at)
    assert "SOLVERS['falkon'].make(kernel=kernel, penalty=0.001, M=40, maxiter=4" in snippet
    assert "load('moons', n=200, seed=0, noise=0.2)" in snippet


def test_training_error_is_tracked_on_request(app):
    at = wait_for_runs(_click_run(app(**SMALL, eval_train="true")))
    run = at.session_state["explore_run"]
    assert all(math.isfinite(r.train_metric) for r in run.records)
    assert _chart_points(at) == [5, 5, 5]  # residual, test and train curves
    assert "eval_train=True" in _snippet(at)


def test_reproduce_snippet_gives_the_same_model():
    spec = DataSpec("moons", n=200, seed=1, knobs=(("noise", 0.2),))
    config = make_config(
        spec, kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=1e-3, solver="falkon", M=30, maxiter=3
    )
    from krrcore.datasets import load

    run = RunRegistry().start(config, load("moons", n=200, seed=1, noise=0.2))
    assert run.wait(120) and run.status == "done", run.message
    namespace = {}
    with contextlib.redirect_stdout(io.StringIO()) as out:
        exec(reproduce_snippet(config), namespace)
    np.testing.assert_allclose(namespace["prediction"], run.estimator.predict(run.data.X_test), rtol=1e-10)
    assert "reached maxiter=3" in out.getvalue()


def test_url_sets_the_view(app):
    """(Lessons, and what a lesson hides, are tested in tests/app/test_lessons.py.)"""
    at = app(dataset="sine1d", M=30, log10_penalty=-6, solver="nystrom_direct")
    assert at.selectbox(key="dataset").value == "sine1d"
    assert at.number_input(key="M").value == 30
    assert at.slider(key="log10_penalty").value == -6.0
    assert at.selectbox(key="solver").value == "nystrom_direct"
    labels = {w.label for w in at.number_input} | {w.label for w in at.radio}
    assert {"dtype", "Solver seed"} <= labels


def test_changing_dataset_applies_its_suggestions_and_median_button(app):
    at = app()
    at.selectbox(key="dataset").set_value("sine1d").run()
    from krrcore.datasets import DATASETS, load
    from krrcore.kernels import median_heuristic

    info = DATASETS["sine1d"]
    assert at.number_input(key="sigma").value == info.suggested_sigma
    assert at.slider(key="log10_penalty").value == round(math.log10(info.suggested_penalty) * 4) / 4
    at.button(key="median_sigma").click().run()
    expected = median_heuristic(load("sine1d", n=info.default_n, seed=0, noise=0.2).X_train)
    assert at.number_input(key="sigma").value == pytest.approx(expected, rel=1e-3)
    # M follows the data set too: diamonds' suggested M, and the usual one again on sine1d; at its
    # data set's suggestion M stays out of the link.
    at.selectbox(key="dataset").set_value("diamonds").run()
    assert at.number_input(key="M").value == DATASETS["diamonds"].suggested_M == 800
    assert "M" not in at.query_params
    at.selectbox(key="dataset").set_value("sine1d").run()
    assert at.number_input(key="M").value == 100 and "M" not in at.query_params


def test_live_progress_chart_grows_and_stop_ends_run_within_a_second(app, monkeypatch, in_process):
    _register(monkeypatch, "slow", SlowKRR, "Slow test solver")
    at = app(n=200, M=10, maxiter=100000, solver="slow")
    at = _click_run(at)
    assert not at.button(key="stop").disabled  # enabled from the run that started it
    run = at.session_state["explore_run"]
    looks = []
    for _ in range(2):
        deadline = time.time() + 30
        target = len(run.records) + 3
        while len(run.records) < target and time.time() < deadline:
            time.sleep(0.02)
        at.run()  # a page rerun mounts the live chart with the records so far (the browser appends later ones)
        looks.append(_live_chart(at))
    assert run.active
    assert looks[1][0] > looks[0][0], "the live chart did not get more records between two page runs"
    assert looks[0][1].startswith("iteration ") and "/ 100000" in looks[0][1]
    assert not at.get("progress")  # the live chart draws it
    # The one plotly chart is the fit beside the data, which the live chart's fit panel redraws in
    # place with the worker's pictures; the convergence chart is the live chart's own.
    (fit,) = at.get("plotly_chart")
    assert {trace["name"] for trace in json.loads(fit.proto.spec)["data"]} >= set(fit_charts.fit_live_traces(run.data))
    panels = json.loads(at.get("bidi_component")[0].proto.json)["panels"]
    assert [(p["kind"], p.get("run")) for p in panels] == [("convergence", None), ("fit", run.id)]
    assert panels[1]["target"] == "explore_fit_box" and panels[0]["runs"] == [run.id]
    # The panel moves the running figure only: it is marked with the run's id, the finished one is not.
    assert json.loads(fit.proto.spec)["layout"]["meta"][panels[1]["mark"]] == run.id
    at.button(key="stop").click().run()
    assert run.stop_event.is_set()
    assert run.wait(1.0), "the run did not stop within a second"
    at.run()
    assert run.status == "stopped" and "stopped by the user" in _texts(at.warning)
    finished = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    finished = [f for f in finished if {t.get("name") for t in f["data"]} >= set(fit_charts.fit_live_traces(run.data))]
    assert len(finished) == 1 and panels[1]["mark"] not in finished[0]["layout"].get("meta", {})


def test_step_computes_one_iteration_per_press_and_run_goes_on_from_there(app):
    """On the app's Dask workers: the first Step starts a run that pauses after iteration 1, each
    further Step computes exactly one more (its record and its picture come back), Run lets it go on."""
    at = app(**{**SMALL, "maxiter": 6})
    at = at.button(key="step").click().run()
    run = at.session_state["explore_run"]
    assert run.stepped and at.button(key="stop").disabled is False

    def settled(count):
        deadline = time.time() + 60
        while (
            len(run.records) < count or run.frame is None or run.frame.iteration < count - 1
        ) and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # nothing more comes while it is paused
        assert [r.iteration for r in run.records] == list(range(count)) and run.frame.iteration == count - 1
        assert run.active and run.paused

    settled(2)
    at = at.button(key="step").click().run()
    settled(3)
    assert _live_chart(at.run())[1].startswith("paused after iteration 2 / 6")
    at = wait_for_runs(at.button(key="run").click().run())
    assert run.status == "done" and [r.iteration for r in run.records] == list(range(7))
    assert sorted(run.surface.frames) == list(range(7))


def test_going_back_to_a_configuration_already_run_is_instant(app):
    at = wait_for_runs(_click_run(app(**SMALL, solver="nystrom_direct")))
    first = at.session_state["explore_run"]
    at.slider(key="log10_penalty").set_value(-5.0).run()
    assert "Showing the last run" in _texts(at.caption)
    at.slider(key="log10_penalty").set_value(-3.0).run()
    assert "Showing the last run" not in _texts(at.caption)
    assert "finished" in _texts(at.success)
    assert at.session_state["_krr_runs"].runs() == [first]  # reused, not re-run


@pytest.mark.parametrize("solver", list(SOLVERS))
def test_every_built_solver_runs_from_the_sidebar(app, solver):
    """The solver list is the registry's: each built solver, picked in the sidebar with its own
    default knobs, runs to a finished state with a finite test error."""
    at = app(n=300, M=60)  # below 100: SketchySAGA's default rank must adapt to M
    at.selectbox(key="solver").set_value(solver).run()
    if SOLVERS[solver].problem == "full":  # the page says whether K fits in memory
        assert any("fits in memory" in c.value for c in at.caption)
    if SOLVERS[solver].iterative:
        at.number_input(key="maxiter").set_value(3).run()
    at = wait_for_runs(_click_run(at), timeout=120)
    run = at.session_state["explore_run"]
    assert run.status == "done", run.message
    assert 0 <= run.metrics["test_classification_error"] < 0.5
    assert not at.exception


def test_diverging_solver_shows_error_and_keeps_earlier_results(app, monkeypatch, in_process):
    _register(monkeypatch, "diverging", DivergingKRR, "Diverging test solver")
    at = wait_for_runs(_click_run(app(**SMALL, solver="nystrom_direct")))
    good = at.session_state["explore_run"]
    at.selectbox(key="solver").set_value("diverging").run()
    at = wait_for_runs(_click_run(at))
    bad = at.session_state["explore_run"]
    assert bad.status == "error" and "diverged" in bad.message
    assert "The solver diverged" in _texts(at.error)
    assert _chart_points(at)[0] == 2  # the records before the NaN are kept and drawn
    assert good.status == "done" and good in at.session_state["_krr_runs"].runs()
    at.switch_page("app_pages/compare.py").run()
    table = at.dataframe[0].value
    assert set(table["status"]) == {"done", "error"}


def test_m_larger_than_n_blocks_the_run_with_a_message(app):
    at = app(n=50, M=100)
    assert "M = 100 centres, but there are only n = 40 training points" in _texts(at.error)
    assert at.button(key="run").disabled


@pytest.mark.parametrize(
    "content, message",
    [
        (b"x1,x2,y\n1,2,0.5\n", "the table has 1 data row(s); at least 4 are needed"),
        (b"x1,x2,y\n", "the file has a header (x1, x2, y) but no data rows"),
        (b"x1,y\n1,\n2,\n3,\n4,\n", "target column 'y' has no values (all 4 rows are missing)"),
        (b"", "This file (“bad.csv”) cannot be read: the file is empty (0 bytes)"),
    ],
    ids=["one-row", "header-only", "target-all-missing", "empty"],
)
def test_bad_csv_shows_a_clear_message_and_keeps_the_last_run(app, content, message):
    """(Text columns and gaps used to be refused here; they are encoded and filled now.)"""
    at = wait_for_runs(_click_run(app(**SMALL, solver="nystrom_direct")))
    at.selectbox(key="dataset").set_value("csv").run()
    at.file_uploader(key="csv_file").set_value(("bad.csv", content, "text/csv")).run()
    assert message in shown_as(_texts([*at.error, *at.warning, *at.info]))
    assert at.button(key="run").disabled
    assert "Showing the last run" in _texts(at.caption) and "finished" in _texts(at.success)


def test_uploaded_csv_runs(app):
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(x[:, 0]) + x[:, 1] ** 2
    csv = "a,b,target\n" + "\n".join(f"{a:.5f},{b:.5f},{t:.5f}" for (a, b), t in zip(x, y))
    at = app(solver="nystrom_direct", M=20)
    at.selectbox(key="dataset").set_value("csv").run()
    at.file_uploader(key="csv_file").set_value(("mine.csv", csv.encode(), "text/csv")).run()
    assert at.selectbox(key="csv_target").value == "target"
    at = wait_for_runs(_click_run(at))
    run = at.session_state["explore_run"]
    assert run.status == "done" and run.config.data.csv_filename == "mine.csv"
    assert "Test RMSE" in {m.label for m in at.metric}
    assert "from_csv('mine.csv', target='target', seed=0)" in _snippet(at)


# -- Compare --------------------------------------------------------------------------------------
def test_compare_overlays_solvers_with_table_and_removal(app):
    at = app(**SMALL)
    at.switch_page("app_pages/compare.py").run()
    assert at.multiselect(key="cmp_solvers").value == ["falkon", "nystrom_cg"]
    at.multiselect(key="cmp_solvers").set_value(["falkon", "nystrom_direct"]).run()
    at = wait_for_runs(_click_run(at, "cmp_run"))
    runs = at.session_state["_krr_runs"].runs()
    assert [r.config.solver for r in runs] == ["falkon", "nystrom_direct"]
    assert all(r.status == "done" for r in runs)
    # Two figures (iterations, seconds), each overlaying both runs in both panels; the two fits.
    assert len(at.get("plotly_chart")) == 4 and len(_chart_points(at, "cmp_iter")) == 4
    # The two fits on one colour scale: ±max|f| over both grids, so one colour means one f.
    surfaces = [
        next(t for t in json.loads(chart.proto.spec)["data"] if t.get("name") == fit_charts.FIT_SURFACE)
        for chart in at.get("plotly_chart")[2:]
    ]
    scales = [(t["zmin"], t["zmax"]) for t in surfaces]
    grids = [np.frombuffer(base64.b64decode(t["z"]["bdata"]), dtype=t["z"]["dtype"]) for t in surfaces]
    bounds = [float(np.abs(z).max()) for z in grids]
    assert scales[0] == scales[1] and bounds[0] != pytest.approx(bounds[1]), (scales, bounds)
    assert scales[0] == pytest.approx((-max(bounds), max(bounds)), rel=1e-6), (scales, bounds)
    table = at.dataframe[0].value
    assert list(table["status"]) == ["done", "done"]
    assert table["test classification error"].between(0, 0.3).all()
    assert {b.label for b in at.get("download_button")} >= {"Traces of all runs (CSV)", "Table of all runs (CSV)"}
    at.multiselect(key="cmp_selected").set_value([runs[0].id]).run()
    at.button(key="cmp_remove").click().run()
    assert at.session_state["_krr_runs"].runs() == [runs[1]]


def test_compare_stop_all_stops_queued_and_running_runs(app, monkeypatch, in_process):
    _register(monkeypatch, "slow", SlowKRR, "Slow test solver")
    at = app(n=200, M=10, maxiter=100000, solver="slow", cmp_mode="sweep", sweep_values="10, 20, 30")
    at.switch_page("app_pages/compare.py").run()
    at = _click_run(at, "cmp_run")
    assert not at.button(key="cmp_stop").disabled  # enabled from the run that started the batch
    runs = at.session_state["_krr_runs"].runs()
    assert [r.config.M for r in runs] == [10, 20, 30]
    at.button(key="cmp_stop").click().run()
    assert all(r.wait(1.0) for r in runs), "Stop all did not end every run within a second"
    assert {r.status for r in runs} == {"stopped"}


def test_compare_sweeps_m_and_rejects_lambda_zero(app):
    at = app(**SMALL)
    at.switch_page("app_pages/compare.py").run()
    at.radio(key="cmp_mode").set_value("sweep").run()
    assert at.selectbox(key="sweep_param").value == "M"
    assert at.selectbox(key="sweep_param").options == ["M (centres)", "λ", "max iterations t"]
    at.text_input(key="sweep_values").input("10, 30").run()
    at = wait_for_runs(_click_run(at, "cmp_run"))
    assert sorted(r.config.M for r in at.session_state["_krr_runs"].runs()) == [10, 30]
    at.selectbox(key="sweep_param").set_value("penalty").run()
    at.text_input(key="sweep_values").input("1e-3, 0").run()
    assert "λ = 0 cannot be used: λ must be > 0" in _texts(at.error)
    assert at.button(key="cmp_run").disabled


# -- the plain pieces -------------------------------------------------------------------------------
def test_config_drops_knobs_a_solver_ignores():
    spec = DataSpec("moons", n=200)
    exact = [
        make_config(
            spec,
            kernel="gaussian",
            kernel_params={"sigma": 1.0, "nu": 2.5},
            penalty=1e-3,
            solver="exact",
            M=m,
            maxiter=20,
        )
        for m in (10, 500)
    ]
    assert exact[0] == exact[1] and exact[0].M is None and exact[0].maxiter is None
    assert exact[0].kernel_params == (("sigma", 1.0),)
    falkon = make_config(spec, kernel="gaussian", kernel_params={"sigma": 1.0}, penalty=0.0, solver="falkon", M=500)
    found = problems(falkon, n_train=160)
    assert any("λ must be > 0" in p for p in found) and any("M = 500 centres" in p for p in found)
    assert any("Exact KRR is offered up to n = 8,000" in p for p in problems(exact[0], n_train=9000))
    assert problems(exact[0], n_train=8000) == []


def test_parse_sweep_values():
    assert parse_sweep_values("10, 20; 20", "M") == ([10, 20], None)
    assert parse_sweep_values("1e-6,1e-3", "penalty") == ([1e-6, 1e-3], None)
    assert "not a number" in parse_sweep_values("10, ten", "M")[1]
    assert "whole number" in parse_sweep_values("2.5", "M")[1]
    assert "λ must be > 0" in parse_sweep_values("0", "penalty")[1]


def test_registry_evicts_finished_runs_and_close_stops_active_ones():
    spec = DataSpec("moons", n=200)
    configs = [
        make_config(spec, kernel="gaussian", kernel_params={"sigma": 1.0}, penalty=1e-3, solver="falkon", M=m)
        for m in range(1, 5)
    ]
    registry = RunRegistry(max_runs=2)
    finished = []
    for config in configs[:3]:
        run = Run(config)
        run._finish("done")
        registry._runs[config] = run
        registry._evict()
        finished.append(run)
    assert registry.runs() == finished[1:]
    assert registry.dropped == [finished[0].label]  # the page names what it dropped
    active = Run(configs[3])
    registry._runs[configs[3]] = active
    registry.close()
    assert active.stop_event.is_set()
    with pytest.raises(RuntimeError, match="session has ended"):
        registry.start(configs[0], None)


def test_a_released_tab_s_runs_wait_for_a_reload_then_stop_with_their_fate_named():
    """A closed tab's registry is held ``grace`` seconds: a reload claiming one of its run ids gets
    the whole registry (its runs untouched); unclaimed, its active runs stop and each run's fate is
    kept in words for a late link."""
    from krr_app.jobs.runs import HANDOVER
    from krrcore.stream import IterationRecord

    spec = DataSpec("moons", n=200)
    configs = [
        make_config(spec, kernel="gaussian", kernel_params={"sigma": 1.0}, penalty=1e-3, solver="falkon", M=m)
        for m in (1, 2)
    ]
    registry = RunRegistry()
    done, active = Run(configs[0]), Run(configs[1])
    done._finish("done")
    registry._runs.update({configs[0]: done, configs[1]: active})
    registry.release(grace=30.0)
    assert not active.stop_event.is_set() and not registry.closed
    assert HANDOVER.claim("no-such-run") is None
    assert HANDOVER.claim(active.id) is registry  # the reload's session now holds it
    assert HANDOVER.claim(active.id) is None  # claimed once
    active._append(IterationRecord(iteration=3, seconds=0.1, residual=0.5))
    registry.release(grace=0.2)
    deadline = time.time() + 10
    while HANDOVER.fate(active.id) is None:
        assert time.time() < deadline, "the unclaimed registry was not closed"
        time.sleep(0.05)
    assert active.stop_event.is_set() and registry.closed
    assert HANDOVER.fate(active.id) == "stopped 0.2 s after its tab was closed, after iteration 3"
    assert HANDOVER.fate(done.id) == "over (done) before its tab was closed, and its result was kept 0.2 s for a reload"
    empty = RunRegistry()
    empty.release(grace=30.0)  # nothing to keep: closed at once
    assert empty.closed


def test_the_convergence_figure_before_any_run_has_its_panels_and_no_invented_scale():
    from krr_app.charts import figures as charts

    fig = charts.convergence_figure([])
    assert [len(trace.x) for trace in fig.data] == [0, 0]  # one empty trace per panel (drawn by plotly.js)
    assert [a.text for a in fig.layout.annotations if a.text == charts.EMPTY_TEXT] == [charts.EMPTY_TEXT] * 2
    assert {a.text for a in fig.layout.annotations} >= {"Residual (solver's own measure)", "Test metric"}
    assert fig.layout.xaxis.title.text == "iteration t" and fig.layout.xaxis.showticklabels is False
    assert fig.layout.yaxis.showticklabels is False and fig.layout.yaxis2.showticklabels is False


def test_traces_frame_has_one_row_per_record():
    config = make_config(
        DataSpec("moons", n=200), kernel="gaussian", kernel_params={"sigma": 1.0}, penalty=1e-3, solver="falkon", M=10
    )
    run = Run(config)
    from krrcore.stream import IterationRecord

    for i in range(3):
        run._append(IterationRecord(iteration=i, seconds=0.1 * i, residual=10.0**-i, metric="mse"))
    frame = charts.traces_frame([run])
    assert list(frame["iteration"]) == [0, 1, 2] and set(frame["run_id"]) == {run.id}
    assert frame["M"].tolist() == [10, 10, 10]

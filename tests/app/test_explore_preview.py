"""Explore answers at once: the data are drawn before any run (an SVG image, so no chart library
has to load first; it stays, the fit goes beside it), and a small problem runs by itself on every
change (a large one waits for Run and says why)."""

from __future__ import annotations

import base64
import re

from conftest import wait_for_runs

from krr_app.jobs.config import SMALL_TEXT


def _svgs(at) -> list[str]:
    """The SVG pictures on the page (a Markdown image of the SVG as a base64 data URL)."""
    urls = re.findall(r"!\[The data: [^\n]*\]\(data:image/svg\+xml;base64,([^)]+)\)", _texts(at.markdown))
    return [base64.b64decode(url).decode() for url in urls]


def _points(svg: str) -> int:
    """Data points drawn: the dots ("M x y h0" each) of the points' paths (legend markers are circles)."""
    return sum(len(re.findall(r"M-?\d+ -?\d+h0", d)) for d in re.findall(r'<path class="dots" d="([^"]*)"', svg))


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def test_the_data_are_drawn_before_any_run(app):
    at = app(auto_run="false", n=300)
    assert not at.session_state["_krr_runs"].runs()
    (svg,) = _svgs(at)
    assert _points(svg) == 240  # every training point of Two moons
    assert ">x1 (standardised)<" in svg and ">class<" in svg
    assert "n = 240 training + 60 test points · d = 2 features · task: binary" in _texts(at.markdown)
    picture = next(m.value for m in at.markdown if m.value.startswith("![The data"))
    assert len(picture) < 8_000  # a small message: the browser parses it before drawing it
    # Nothing waits for plotly to load: the convergence chart's empty axes come one look later
    # (views.empty_convergence_chart; the browser test sees them drawn).
    assert not at.get("plotly_chart")


def test_a_1d_set_shows_train_and_test_points_and_a_higher_dimensional_one_its_principal_components(app):
    at = app(auto_run="false", dataset="sine1d", n=100)
    (svg,) = _svgs(at)
    assert _points(svg) == 100 and ">train points<" in svg and ">test points<" in svg
    at = app(auto_run="false", dataset="diabetes")
    (svg,) = _svgs(at)
    assert re.search(r">PC 1 \(\d+% of variance\)<", svg)
    assert _points(svg) == at.session_state["_krr_settings"].dataset.n_train
    assert "d = 10 features · task: regression · progression: mean" in _texts(at.markdown)


def test_small_problems_run_by_themselves_on_every_change(app):
    at = wait_for_runs(app(n=200, M=40, maxiter=4, solver="nystrom_direct"))
    assert at.toggle(key="auto_run").value is True
    assert [r.status for r in at.session_state["_krr_runs"].runs()] == ["done"]
    assert SMALL_TEXT in at.toggle(key="auto_run").help
    at = wait_for_runs(at.slider(key="log10_penalty").set_value(-5.0).run())
    runs = at.session_state["_krr_runs"].runs()
    assert [r.config.penalty for r in runs] == [1e-3, 1e-5] and "finished" in _texts(at.success)
    # The finished run's fit goes beside the data's picture, which stays (a decision surface over the points).
    assert "Decision surface" in _texts(at.markdown) and len(_svgs(at)) == 1
    assert len(at.get("plotly_chart")) == 2  # the convergence chart and the fit


def test_a_problem_that_is_not_small_waits_for_run_and_says_why(app):
    at = app(n=6000, M=40, solver="nystrom_direct")
    assert not at.session_state["_krr_runs"].runs()
    assert f"This problem is not small ({SMALL_TEXT} run by themselves): press **Run**." in _texts(at.caption)
    assert _points(_svgs(at)[0]) == 2000  # the data are drawn all the same (a subsample)


def test_run_does_not_start_a_configuration_that_is_already_running(app, monkeypatch, in_process):
    from test_app import SlowKRR, _register

    _register(monkeypatch, "slow", SlowKRR, "Slow test solver")
    at = app(n=200, M=10, maxiter=100000, solver="slow")  # small: it starts by itself
    (running,) = at.session_state["_krr_runs"].runs()
    assert running.active
    at = at.button(key="run").click().run()
    assert at.session_state["_krr_runs"].runs() == [running]
    at.button(key="stop").click().run()
    assert running.wait(5)


def test_a_run_replaced_before_its_first_iteration_leaves_no_row(app, monkeypatch, in_process):
    """A knob moved while the last run is still running: a run that has iterations is kept as
    stopped; one replaced before its first record (still setting up) is dropped."""
    import time

    from test_app import SlowKRR, _register

    class SlowSetupKRR(SlowKRR):
        def _setup(self, X, Y):
            time.sleep(1.0)
            super()._setup(X, Y)

    _register(monkeypatch, "slow", SlowKRR, "Slow test solver")
    _register(monkeypatch, "slow_setup", SlowSetupKRR, "Slow set-up test solver")
    at = app(n=200, M=10, maxiter=100000, solver="slow")
    (first,) = at.session_state["_krr_runs"].runs()
    deadline = time.time() + 10
    while not first.records and time.time() < deadline:
        time.sleep(0.02)
    at = at.selectbox(key="solver").set_value("slow_setup").run()  # first has records: kept, stopped
    (kept, second) = at.session_state["_krr_runs"].runs()
    assert kept is first and first.wait(5) and first.status == "stopped"
    assert second.active and not second.records
    at = at.number_input(key="M").set_value(12).run()  # second is still setting up: dropped
    runs = at.session_state["_krr_runs"].runs()
    assert [r.id for r in runs][:1] == [first.id] and second not in runs and runs[-1].config.M == 12
    at.button(key="stop").click().run()
    assert runs[-1].wait(5)


def test_explanations_are_written_when_their_expander_is_opened(app):
    """Closed, an explanation's formulas are not sent (the browser lays out a closed expander's
    content too, in front of the first picture); opening one reruns the page with them."""
    from krr_app.parts import views
    from krr_app import explain

    at = app(auto_run="false")
    knobs = views.explanation_key("krr", "sigma", "lambda", "M")
    solved = views.explanation_key("krr", "lambda", "M", "falkon")
    assert {"What do these knobs mean?", "What is being solved?"} <= {e.label for e in at.get("expander")}
    assert explain.TEXT["sigma"].strip() not in _texts(at.sidebar.markdown) + _texts(at.markdown)
    at.session_state[knobs] = True
    at = at.run()
    shown = _texts(at.sidebar.markdown) + _texts(at.markdown)
    assert all(explain.TEXT[k].strip() in shown for k in ("krr", "sigma", "lambda", "M"))
    assert explain.TEXT["falkon"].strip() not in shown and not at.session_state[solved]  # the other stays closed


def test_the_picture_is_drawn_before_the_model_and_solver_controls(app, monkeypatch):
    """The data's picture is made once the sidebar's data section is drawn and before its model and
    solver controls are (the order the browser gets them in: a new visitor's browser draws the
    picture before it has fetched and laid out those widgets); the page holds all of them."""
    import streamlit as st

    from krr_app.charts import preview

    drawn_before = []
    make_picture = preview.data_image_markdown

    def recording(data):
        drawn_before.append(
            {
                k
                for k in ("dataset", "n", "seed", "kernel", "sigma", "log10_penalty", "M", "solver")
                if k in st.session_state
            }
        )
        return make_picture(data)

    monkeypatch.setattr(preview, "data_image_markdown", recording)
    at = app(auto_run="false", M=30)
    assert drawn_before == [{"dataset", "n", "seed"}]
    assert at.number_input(key="M").value == 30 and at.selectbox(key="solver").value == "falkon"
    assert len(_svgs(at)) == 1 and at.button(key="run").disabled is False

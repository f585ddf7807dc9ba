"""Explore answers at once: the data are drawn before any run, and a small problem runs by
itself on every change (a large one waits for Run and says why)."""
from __future__ import annotations

import base64
import json

import numpy as np
from conftest import wait_for_runs

from krr_app.config import SMALL_TEXT


def _figures(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _length(values) -> int:
    """Points in a plotly array (numpy arrays travel as base64 "bdata")."""
    if isinstance(values, dict):
        return len(base64.b64decode(values["bdata"])) // np.dtype(values["dtype"]).itemsize
    return len(values)


def _texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def test_the_data_are_drawn_before_any_run(app):
    at = app(auto_run="false", n=300)
    assert not at.session_state["_krr_runs"].runs()
    (figure,) = _figures(at)
    (points,) = figure["data"]
    assert points["mode"] == "markers" and _length(points["x"]) == 240          # every training point of Two moons
    assert "n = 240 training + 60 test points · d = 2 features · task: binary" in _texts(at.markdown)


def test_a_1d_set_shows_train_and_test_points_and_a_higher_dimensional_one_its_principal_axes(app):
    at = app(auto_run="false", dataset="sine1d", n=100)
    (figure,) = _figures(at)
    assert [t["name"] for t in figure["data"]] == ["train points", "test points"]
    assert [_length(t["x"]) for t in figure["data"]] == [80, 20]
    at = app(auto_run="false", dataset="diabetes")
    (figure,) = _figures(at)
    assert figure["layout"]["xaxis"]["title"]["text"].startswith("PC 1 (")
    assert "d = 10 features · task: regression · progression: mean" in _texts(at.markdown)


def test_small_problems_run_by_themselves_on_every_change(app):
    at = wait_for_runs(app(n=200, M=40, maxiter=4, solver="nystrom_direct"))
    assert at.toggle(key="auto_run").value is True
    assert [r.status for r in at.session_state["_krr_runs"].runs()] == ["done"]
    assert SMALL_TEXT in at.toggle(key="auto_run").help
    at = wait_for_runs(at.slider(key="log_lambda").set_value(-5.0).run())
    runs = at.session_state["_krr_runs"].runs()
    assert [r.config.penalty for r in runs] == [1e-3, 1e-5] and "finished" in _texts(at.success)
    # The finished run's fit replaces the data's own picture (a decision surface over the points).
    assert "Decision surface" in _texts(at.markdown) and "The data" not in _texts(at.markdown)


def test_a_problem_that_is_not_small_waits_for_run_and_says_why(app):
    at = app(n=6000, M=40, solver="nystrom_direct")
    assert not at.session_state["_krr_runs"].runs()
    assert f"This problem is not small ({SMALL_TEXT} run by themselves): press **Run**." in _texts(at.caption)
    assert _figures(at)                                                      # the data are drawn all the same

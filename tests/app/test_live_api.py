"""The live chart's records endpoint (krr_app.jobs.live_api): what a look asks and gets.

The endpoint is called as Starlette calls it (an ASGI request scope), with runs executed on
threads of this process; tests/browser/test_browser.py drives it from the page in chromium.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from starlette.requests import Request

import base64

import numpy as np

from krr_app.jobs import live_api
from krr_app.jobs.config import DataSpec, make_config
from krr_app.jobs.runs import Run
from krrcore import datasets
from krrcore.stream import IterationRecord
from krr_app.jobs.surface import GRID_2D, SurfaceFrame


def _call(run_id: str, query: str = "") -> tuple[int, dict]:
    scope = {
        "type": "http",
        "method": "GET",
        "path": live_api.PREFIX + run_id,
        "query_string": query.encode(),
        "headers": [],
        "path_params": {"run_id": run_id},
    }
    response = asyncio.run(live_api._run_endpoint(Request(scope)))
    return response.status_code, json.loads(response.body)


@pytest.fixture
def run():
    config = make_config(
        DataSpec("moons", n=200),
        kernel="gaussian",
        kernel_params={"sigma": 0.5},
        penalty=1e-3,
        solver="falkon",
        M=20,
        maxiter=10,
    )
    run = Run(config)
    live_api.publish(run)
    return run


def test_a_look_gets_the_records_it_has_not_drawn_nan_as_null(run):
    run._started("test worker")
    for t in range(4):
        run._append(
            IterationRecord(
                iteration=t,
                seconds=0.1 * t,
                residual=10.0**-t,
                val_metric=math.nan if t == 0 else 0.5 / (t + 1),
                metric="classification_error",
            )
        )
    status, first = _call(run.id)
    assert status == 200 and first["status"] == "running" and first["active"] is True and first["paused"] is False
    assert [r["iteration"] for r in first["records"]] == [0, 1, 2, 3] and first["count"] == 4
    assert first["records"][0]["val_metric"] is None  # JSON has no NaN
    assert first["records"][2]["residual"] == pytest.approx(1e-2)
    assert first["records"][1]["metric"] == "classification_error"
    assert first["text"].startswith("iteration 3 / 10 · residual 0.001")
    assert first["next_ms"] > 0
    status, later = _call(run.id, "since=3")
    assert status == 200 and [r["iteration"] for r in later["records"]] == [3] and later["count"] == 4


def test_a_record_carries_its_numeric_extras_only(run):
    run._started("test worker")
    run._append(
        IterationRecord(
            iteration=1,
            seconds=0.1,
            residual=0.5,
            extras={
                "sigma": 0.7,
                "penalty": 1e-4,
                "blocks": 3,
                "residual_kind": "float64",
                "gap": math.inf,
                "flag": True,
            },
        )
    )
    _, state = _call(run.id)
    assert state["records"][0]["extras"] == {"sigma": 0.7, "penalty": 1e-4, "blocks": 3.0}


def _frame_values(frame) -> np.ndarray:
    return np.frombuffer(base64.b64decode(frame["values"]), dtype="<f4")


def test_the_latest_picture_goes_to_a_client_that_has_an_older_one(run):
    """A picture is what the fit figure plots (two classes: f itself) on the worker's grid, sent
    once per iteration: a look that names it in frame_since gets none."""
    run.data = datasets.load("moons", n=200)
    run._started("test worker")
    _, state = _call(run.id)
    assert "frame" not in state  # not asked: no picture
    _, state = _call(run.id, "frame_since=-1")
    assert state["frame"] is None  # asked, none yet
    values = np.linspace(-1, 1, GRID_2D**2, dtype=np.float32)[:, None]
    run._frame(SurfaceFrame(3, values, 0.01))
    run._frame(SurfaceFrame(2, -values, 0.01))  # late: older than the one held
    _, state = _call(run.id, "frame_since=-1")
    frame = state["frame"]
    assert (frame["iteration"], frame["kind"], frame["size"]) == (3, "fit", GRID_2D**2)
    np.testing.assert_array_equal(_frame_values(frame), values[:, 0])
    assert _call(run.id, "frame_since=3")[1]["frame"] is None
    assert _call(run.id, "frame_since=2")[1]["frame"]["iteration"] == 3


def test_a_regression_picture_is_in_the_targets_units():
    config = make_config(
        DataSpec("sine1d", n=200),
        kernel="gaussian",
        kernel_params={"sigma": 0.5},
        penalty=1e-3,
        solver="falkon",
        M=20,
        maxiter=10,
    )
    data = datasets.load("sine1d", n=200)
    run = Run(config, data)
    live_api.publish(run)
    run._started("test worker")
    run._frame(SurfaceFrame(1, np.array([[0.0], [1.0]], dtype=np.float32), 0.0))
    _, state = _call(run.id, "frame_since=0")
    np.testing.assert_allclose(_frame_values(state["frame"]), data.to_original_units(np.array([0.0, 1.0])), rtol=1e-6)


def test_a_finished_run_says_so_and_the_page_reruns_once(run):
    run._started("test worker")
    run._fail("boom")
    status, state = _call(run.id, "since=0")
    assert status == 200 and state["active"] is False and state["status"] == "error" and state["records"] == []


def test_unknown_runs_and_bad_queries_are_named(run):
    status, body = _call("nosuchrun0000")
    assert status == 404 and "no such run" in body["error"]
    status, body = _call(run.id, "since=two")
    assert status == 400 and body["error"] == "since must be a whole number, got 'two'"
    status, body = _call(run.id, "frame_since=1.5")
    assert status == 400 and body["error"] == "frame_since must be a whole number, got '1.5'"


def test_a_run_is_forgotten_with_its_session():
    config = make_config(
        DataSpec("moons", n=200),
        kernel="gaussian",
        kernel_params={"sigma": 0.5},
        penalty=1e-3,
        solver="falkon",
        M=20,
        maxiter=10,
    )
    run = Run(config)
    live_api.publish(run)
    run_id = run.id
    del run
    import gc

    gc.collect()
    assert _call(run_id)[0] == 404

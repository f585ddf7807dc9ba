"""The Tune page in AppTest: a tuning run on the workers ends with its values, its steps, the map
and (with one σ per feature) the relevance bars; Stop ends it; "Apply to Explore" moves Explore and
its link to the tuned σ, λ and M. A finished FALKON run whose residual stayed high says what to try.
The real-browser walk (live chart, Stop, Apply, screenshot) is tests/browser/test_browser_tune.py."""

from __future__ import annotations

import json
import math

import pytest
from conftest import wait_for_runs

from krr_app.jobs.config import format_number
from krr_app.jobs.run_status import progress_text

TUNE = "app_pages/tune.py"


def _tune(app, **query):
    at = app(**query)
    return at.switch_page(TUNE).run()


def _charts(at) -> list:
    return at.get("plotly_chart")


def test_a_tuning_run_shows_its_values_steps_and_map_and_applies_to_explore(app):
    at = _tune(app, dataset="diabetes", M="80")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="tune_objective").value == "gcv"  # FalkonCV's default objective
    at = wait_for_runs(at.button(key="tune_start").click().run())
    run = at.session_state["tune_run"]
    assert run.status == "done" and run.config.solver == "falkon_cv", run.message
    assert run.worker, "the tuning ran on a worker"
    estimator = run.estimator
    labels = {m.label: m.value for m in at.metric}
    assert labels["Tuned λ"] == format_number(estimator.penalty_)
    assert float(labels["Tuned σ"]) == pytest.approx(estimator.sigma_, rel=1e-3)
    number, unit = labels["Test RMSE"].split(" ", 1)  # "0.2143 y": in the target's units
    assert float(number.replace(",", "")) == pytest.approx(run.metrics["test_rmse"], rel=1e-3)
    assert unit == run.data.target_name
    # The validated error beside the test error: √(held-out MSE) ± its standard error.
    value, spread = labels["Validated RMSE"].split(" ± ")
    spread, spread_unit = spread.split(" ", 1)
    assert spread_unit == run.data.target_name
    assert float(value) == pytest.approx(math.sqrt(estimator.validation_error_), rel=1e-3)
    assert float(spread) == pytest.approx(
        estimator.validation_stderr_ / (2 * math.sqrt(estimator.validation_error_)), rel=0.05
    )
    # The stop reason in words, and the legend's start at the values the search started from.
    why = next(c.value for c in at.caption if c.value.startswith("**Why it stopped.**"))
    assert "FACTR" not in why and "LNSRCH" not in why and "held-out rows" in why
    start = run.records[0].extras
    legend = [
        t["name"]
        for c in _charts(at)
        for t in json.loads(c.proto.spec)["data"]
        if t.get("name", "").startswith("start (")
    ]
    assert legend == [f"start (σ = {start['sigma']:.3g}, λ = {start['penalty']:.2g})"]
    charts = _charts(at)
    assert len(charts) == 2  # the steps, and the path over the map (M not searched)
    line = progress_text(run)  # the live chart's line: steps, σ, λ, not iterations of t
    assert f"step {run.records[-1].iteration} of at most 30 · final fit · σ " in line and "objective" in line
    at.button(key="tune_apply").click().run()
    assert at.session_state["sigma"] == pytest.approx(estimator.sigma_, rel=1e-5)
    assert at.session_state["log10_penalty"] == pytest.approx(math.log10(estimator.penalty_), abs=1e-4)
    assert at.session_state["M"] == 80 and at.session_state["solver"] in ("falkon", "falkon_bless")
    assert at.query_params["sigma"] == f"{estimator.sigma_:.6g}"  # the link carries the tuned values
    assert float(at.query_params["log10_penalty"]) == pytest.approx(math.log10(estimator.penalty_), abs=1e-4)


def test_finding_M_draws_the_validated_error_against_M(app):
    """ "Find M too": M doubles until the validated error stops improving; the curve is drawn, and the
    headline's centres are the M kept."""
    at = _tune(app, dataset="diabetes", tune_find_M="true")
    at = wait_for_runs(at.button(key="tune_start").click().run())
    run = at.session_state["tune_run"]
    assert run.status == "done", run.message
    curve = run.estimator.M_curve_
    assert len(curve) >= 2 and [m for m, _ in curve] == sorted(m for m, _ in curve)
    figures = [json.loads(c.proto.spec) for c in _charts(at)]
    drawn = [t for f in figures for t in f["data"] if t.get("name") == "validated error (held-out rows)"]
    assert len(drawn) == 1 and drawn[0]["x"] == [m for m, _ in curve]
    M = int(run.estimator.centers_.shape[0])
    assert {m.label: m.value for m in at.metric}["Centres"].startswith(f"{M:,} ")


def test_one_sigma_per_feature_draws_the_relevance_of_each_feature(app):
    at = _tune(app, dataset="diabetes", M="60", tune_ard="true", tune_steps="40")  # room past the σ line search
    at = wait_for_runs(at.button(key="tune_start").click().run())
    run = at.session_state["tune_run"]
    assert run.status == "done", run.message
    figures = [json.loads(c.proto.spec) for c in _charts(at)]
    bars = [f["data"][0] for f in figures if f["data"][0].get("name") == "relevance 1/σ_j"]
    assert len(bars) == 1 and len(bars[0]["x"]) == run.data.d == len(run.estimator.sigma_)
    off = [name for name, text in zip(bars[0]["x"], bars[0]["text"]) if text == "off"]
    assert off and len(off) < run.data.d  # diabetes: some of its 10 features are not needed


def test_stop_ends_a_tuning_run_at_its_best_point(app):
    at = _tune(app, dataset="diamonds", n="10000", M="400", tune_steps="200", tune_ard="true")  # ~20 s to the end
    at = at.button(key="tune_start").click().run()
    run = at.session_state["tune_run"]
    while not run.records and run.active:
        run.wait(0.2)
    at.button(key="tune_stop").click().run()
    at = wait_for_runs(at)
    assert run.status == "stopped" and "stopped by the user" in run.message
    assert run.estimator is not None and run.records[-1].extras["stage"] == 5  # refitted at the best point


def test_a_falkon_run_whose_residual_stays_high_says_what_to_try(app):
    at = app(
        dataset="concrete", solver="falkon", sigma="3.5", log10_penalty="-9", M="300", maxiter="5", auto_run="false"
    )
    at = wait_for_runs(at.button(key="run").click().run())
    warnings = [w.value for w in at.warning]
    assert any(w.startswith("Falkon's residual is still") and "Try BLESS centres" in w for w in warnings), warnings

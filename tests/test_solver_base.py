"""The shared estimator plumbing of krrcore.solvers.base: lazy step values, stop rules, records."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from krrcore.kernels import GaussianKernel
from krrcore.solvers.base import IterativeKRR, Step


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
    assert len(calls) == 3                                  # residual and objective share one call
    records = model.trace_[1:]
    assert [r.residual for r in records] == pytest.approx([0.5, 0.25, 0.5 / 3])
    assert [r.objective for r in records] == [-1.0, -2.0, -3.0]
    assert all(r.eval_seconds >= 0.2 for r in records)
    assert records[-1].seconds < 0.2                         # the sleeps are evaluation, not solver time
    # A plain zero-argument callable is the same contract.
    model = _ScriptedSolver([Step(residual=lambda: 0.25, objective=lambda: 3.0)]).fit(X, y)
    assert (model.trace_[-1].residual, model.trace_[-1].objective) == (0.25, 3.0)

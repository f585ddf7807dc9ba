"""Divergence: one rule (krrcore.stream.Stopper.divergence) for every iterative solver — a NaN or
infinite residual, or one grown by orders of magnitude over its best — raises SolverDivergedError
naming the settings to change, and keeps the best iterate."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning

from krrcore.kernels import LaplacianKernel
from krrcore.registry import SOLVERS
from krrcore.solvers.base import Step
from krrcore.solvers.loops import IterativeKRR
from krrcore.solvers.sketchysaga import SketchySAGA
from krrcore.stream import DIVERGENCE_FACTOR, IterationRecord, SolverDivergedError, Stopper
from solver_problems import make_problem, one_thread  # noqa: F401 (one_thread: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")


def _record(iteration, residual):
    return IterationRecord(iteration=iteration, seconds=0.0, residual=residual)


def test_the_rule_growth_over_the_best_and_the_start_nan_and_the_working_precision_floor():
    stopper = Stopper()
    assert stopper.divergence(_record(0, 1.0)) == ""
    assert stopper.divergence(_record(1, 1e-3)) == ""
    assert stopper.divergence(_record(2, 5.0)) == ""  # 5000× its best: not yet
    message = stopper.divergence(_record(3, 20.0))
    assert message == "diverged at iteration 3: the residual grew to 20, 2e+04 times its best (0.001 at iteration 1)"
    # Round-off drift far below the start (CG run past its convergence) is not divergence.
    drift = Stopper()
    for iteration, residual in enumerate([1.0, 1e-6, 1e-11, 1e-7, 8e-3]):
        assert drift.divergence(_record(iteration, residual)) == ""
    assert drift.divergence(_record(5, 1.5)) != ""
    assert "became nan" in Stopper().divergence(_record(4, math.nan))
    assert "became 1.0" in Stopper().divergence(_record(4, 1.0), finite=False)  # a NaN in the iterate
    # Round-off around a converged residual is not divergence: the best counts as at least the floor.
    converged = Stopper()
    converged.divergence(_record(0, 1e-30))
    assert converged.divergence(_record(1, 1e-15), floor=2.2e-15) == ""
    assert converged.divergence(_record(1, 1e-15)) != ""


class _Growing(IterativeKRR):
    """A toy solver: the residual halves twice, then grows tenfold per iteration."""

    DIVERGENCE_ADVICE = ("lower step (now {step!r})",)

    def __init__(self, maxiter=50, step=3.0, stall_patience=50):
        self.kernel, self.penalty, self.maxiter = None, 1e-3, maxiter
        self.step, self.stall_patience = step, stall_patience

    def _setup(self, X, Y):
        self.centers_ = X
        self.coef_ = torch.zeros_like(Y)

    def _steps(self, X, Y):
        residual = 1.0
        for k in range(1, 100):
            self.coef_ = torch.full_like(self.coef_, float(k))
            residual = residual / 2 if k <= 2 else residual * 10
            yield Step(residual=residual)


def _data(n=20):
    X = np.random.default_rng(0).standard_normal((n, 2))
    return X, np.sin(X[:, 0])


def test_a_growing_residual_raises_names_the_setting_and_keeps_the_best_iterate():
    model = _Growing()
    with pytest.raises(SolverDivergedError) as caught:
        model.fit(*_data())
    # Best 0.25 at iteration 2; 2.5e3 at iteration 6 is exactly 1e4 times it, not more.
    assert str(caught.value) == (
        "_Growing diverged at iteration 7: the residual grew to 2.5e+04, 1e+05 times its "
        "best (0.25 at iteration 2); kept the best iterate (iteration 2, residual 0.25). "
        "Lower step (now 3.0)."
    )
    assert [r.iteration for r in model.trace_] == list(range(7))
    assert torch.all(model.coef_ == 2.0)  # the best iterate, not the last


# The divergent settings of a SketchySAGA run (the step is too large for the batch's gradient noise).
@pytest.mark.parametrize(
    "settings", [dict(lr_scale=4, maxiter=40), dict(lr_scale=1e3), dict(batch_size=1, lr_scale=2, maxiter=3000)]
)
def test_sketchysaga_with_a_step_too_large_raises_naming_lr_scale_and_batch_size(settings):
    X, y = make_problem(n=1000, d=5)
    model = SketchySAGA(LaplacianKernel(4.0), 1e-2, M=100, seed=0, **settings)
    with pytest.raises(SolverDivergedError, match=r"SketchySAGA diverged at iteration \d+: the residual") as caught:
        model.fit(X, y)
    message = str(caught.value)
    batch = settings.get("batch_size", 1000)  # the default, 1024, capped at n
    assert (
        f"Lower lr_scale (now {settings['lr_scale']!r}; the default is 0.5) or raise batch_size (now {batch})"
        in message
    )
    assert np.all(np.isfinite(model.predict(X)))  # the best iterate is a usable model
    assert max(r.residual for r in model.trace_) < DIVERGENCE_FACTOR * 1.0


def test_the_default_step_does_not_diverge():
    X, y = make_problem(n=1000, d=5)
    model = SketchySAGA(LaplacianKernel(4.0), 1e-2, M=100, seed=0, maxiter=200).fit(X, y)
    assert model.trace_[-1].residual < 0.1


def test_sketchysaga_stalled_on_the_zero_model_before_the_growth_shows_warns():
    """A patience shorter than the growth takes: "stalled" on the zero model, with a warning."""
    X, y = make_problem(n=1000, d=5)
    model = SketchySAGA(LaplacianKernel(4.0), 1e-2, M=100, seed=0, lr_scale=4, maxiter=200, stall_patience=3)
    with pytest.warns(
        ConvergenceWarning,
        match=r"SketchySAGA never improved on its starting point \(the zero "
        r"model\) in 3 iterations\. Lower lr_scale \(now 4;",
    ):
        model.fit(X, y)
    assert model.stop_reason_.startswith("stalled")


def test_a_stall_that_never_left_the_zero_model_warns_with_the_settings():
    class Worse(_Growing):
        def _steps(self, X, Y):
            while True:
                yield Step(residual=3.0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = Worse(stall_patience=5).fit(*_data())
    assert model.stop_reason_.startswith("stalled")
    assert [str(w.message) for w in caught if w.category is ConvergenceWarning] == [
        "Worse never improved on its starting point (the zero model) in 5 iterations. Lower step (now 3.0)."
    ]


@pytest.mark.parametrize("key", sorted(k for k, info in SOLVERS.items() if info.iterative))
def test_every_iterative_solver_names_its_own_settings_after_a_fit(key):
    """The advice is formatted from the fitted estimator (parameters and fitted values such as
    FALKON's jitter_), so every solver's must format after a fit."""
    X, y = make_problem(n=300, d=3)
    info = SOLVERS[key]
    size = {"M": 30} if info.problem == "nystrom" else {}
    model = info.make(kernel=LaplacianKernel(4.0), penalty=1e-3, maxiter=2, **size)
    model.fit(X, y)
    advice = model._divergence_advice()
    assert advice.endswith(".") and "(now " in advice and "{" not in advice
    for template in model.DIVERGENCE_ADVICE:
        assert template.format(**vars(model)).lower() in advice.lower()

"""Memory and time estimated before anything is allocated: every solver's ``memory_estimate`` and the
refusals of fits too large for the machine (each before a single kernel entry is computed, with the numbers
and advice)."""

import warnings

import numpy as np
import pytest
import torch

from krrcore import SOLVERS
from krrcore.kernels import GaussianKernel
from krrcore.memory import MemoryEstimate, MemoryLimitError, PeakMemory, SlowFitWarning, TimeLimitError
from krrcore.solvers.askotch import ASkotch
from krrcore.solvers.base import KRRBase
from krrcore.solvers.exact import ExactKRR, NystromKRR
from krrcore.solvers.falkon import Falkon
from krrcore.solvers.pcg import NystromPCG
from krrcore.solvers.sketchysaga import SketchySAGA


class KernelEvaluated(AssertionError):
    pass


class TrippedKernel(GaussianKernel):
    """A Gaussian kernel that fails the test if any kernel entry is computed."""

    def block(self, P1, P2, out=None):
        raise KernelEvaluated("a kernel block was computed before the refusal")

    def diag(self, X):
        raise KernelEvaluated("the kernel diagonal was computed before the refusal")


def _data(n, d=10, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal(n)


@pytest.mark.parametrize(
    "make, n, expected",
    [
        (lambda k: NystromKRR(k, 1e-6, M=55_000), 60_000, r"lower M to at most [\d,]+"),
        (lambda k: Falkon(k, 1e-6, M=55_000), 60_000, r"lower M to at most [\d,]+.*SketchySAGA"),
        (lambda k: Falkon(k, 1e-6, M=150_000), 200_000, r"lower M to at most [\d,]+"),
        (lambda k: ExactKRR(k, 1e-6), 60_000, r"subsample to at most n=[\d,]+"),
    ],
    ids=["NystromKRR-M55k", "Falkon-M55k", "Falkon-M150k-n200k", "ExactKRR-n60k"],
)
def test_memory_refusals_come_before_any_allocation(make, n, expected):
    """The issue's cases that cannot fit: refused with the peak, its dominant part, the limit and a
    suggestion — before one kernel entry is computed and without allocating anything of note."""
    X, y = _data(n)
    est = make(TrippedKernel(3.0))
    with PeakMemory() as mem, pytest.raises(MemoryLimitError, match=expected) as info:
        est.fit(X, y)
    message = str(info.value)
    assert "needs about" in message and "storage budget of" in message and "Refused before allocating" in message
    estimate = info.value.estimate
    assert estimate.stored_bytes > estimate.limit_bytes
    assert isinstance(info.value, MemoryError) and isinstance(info.value, ValueError)
    if mem.supported:
        assert mem.extra_bytes < 64 * 2**20, f"{mem.extra_bytes / 2**20:.0f} MiB allocated before refusing"


@pytest.mark.parametrize(
    "make, n",
    [
        (lambda k: NystromPCG(k, 1e-6, maxiter=1, timeout=30), 200_000),
        (lambda k: ASkotch(k, 1e-6, blocks=1, maxiter=1, timeout=30), 60_000),
        (lambda k: SketchySAGA(k, 1e-6, M=70_000, maxiter=1, timeout=30), 80_000),
    ],
    ids=["NystromPCG-n200k", "ASkotch-blocks1-n60k", "SketchySAGA-M70k"],
)
def test_slow_fits_are_refused_past_their_timeout_and_warned_otherwise(make, n):
    """The issue's cases that fit in memory but take minutes per iteration: with ``timeout`` they are
    refused at once with the estimated time; without one a SlowFitWarning states it before the set-up."""
    X, y = _data(n)
    est = make(TrippedKernel(3.0))
    with pytest.raises(TimeLimitError, match=r"set-up and one iteration would take about .* beyond timeout=30") as info:
        est.fit(X, y)
    estimate = est.memory_estimate(n, X.shape[1])
    assert estimate.suggestion and str(info.value).endswith(f"; {estimate.suggestion}.")  # what to change
    assert estimate.fits and estimate.seconds_for(1) > 30
    est.set_params(timeout=None)
    with pytest.warns(SlowFitWarning, match=r"per iteration on this CPU") as caught, pytest.raises(KernelEvaluated):
        est.fit(X, y)  # the warning comes first; the tripped kernel then stops the fit
    assert str(caught[0].message).endswith(f"to go faster: {estimate.suggestion}.")


def _small_instance(key, n):
    kernel = GaussianKernel(3.0)
    params = {"maxiter": 3}
    info = SOLVERS[key]
    if "M" in info.knobs:
        params["M"] = 200
    if not info.iterative:
        params.pop("maxiter")
    return info.make(kernel=kernel, penalty=1e-3, **params)


@pytest.mark.parametrize("key", sorted(SOLVERS))
def test_every_registered_solver_estimates_and_records_its_estimate(key):
    """Each solver in the registry answers ``memory_estimate`` from its parameters alone, and a fit
    keeps the estimate it checked in ``memory_estimate_``."""
    n, d = 800, 5
    est = _small_instance(key, n)
    assert type(est)._estimate_resources is not KRRBase._estimate_resources
    estimate = est.memory_estimate(n, d)
    assert isinstance(estimate, MemoryEstimate) and estimate.fits
    sizes = [p.bytes for p in estimate.parts]
    assert estimate.peak_bytes == sum(sizes) > n * d * 8 and sizes == sorted(sizes, reverse=True)
    assert {p.kind for p in estimate.parts} >= {"data", "stored"}
    assert estimate.setup_seconds >= 0 and estimate.seconds_per_iteration >= 0
    assert estimate.describe().startswith(type(est).__name__)
    X, y = _data(n, d)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowFitWarning)
        est.fit(X, y)
    assert est.memory_estimate_.parts == estimate.parts  # the limit follows the free memory


def test_estimate_follows_dtype_and_budget():
    """float32 halves the data, FALKON's preconditioner stays float64; a ``memory_budget`` is the
    storage limit checked and reported."""
    f64 = Falkon(GaussianKernel(3.0), 1e-6, M=20_000).memory_estimate(100_000, 20)
    f32 = Falkon(GaussianKernel(3.0), 1e-6, M=20_000, dtype="float32").memory_estimate(100_000, 20)
    parts64, parts32 = {p.name: p for p in f64.parts}, {p.name: p for p in f32.parts}
    name = next(p for p in parts64 if p.startswith("preconditioner"))
    assert parts64[name].bytes == parts32[name].bytes == 20_000**2 * 8 and parts64[name].kind == "stored"
    assert parts32["training data X, y"].bytes * 2 == parts64["training data X, y"].bytes
    small = NystromKRR(GaussianKernel(3.0), 1e-6, M=2_000, memory_budget=2**20).memory_estimate(10_000, 5)
    assert small.limit_bytes == 2**20 and not small.fits
    with pytest.raises(MemoryLimitError, match=r"against a storage budget of 1 MiB"):
        small.check()


def test_memory_budget_sets_the_limit_checked():
    """A user's ``memory_budget`` bounds what a fit stores: ExactKRR's two n×n matrices."""
    X, y = _data(500, 3)  # K and its factor: 4 MB
    est = ExactKRR(GaussianKernel(3.0), 1e-3, memory_budget=2**20)
    with pytest.raises(MemoryLimitError, match=r"subsample to at most n="):
        est.fit(X, y)
    assert est.memory_estimate(500, 3).limit_bytes == 2**20
    est.set_params(memory_budget=None).fit(X, y)
    assert torch.isfinite(est.coef_).all()

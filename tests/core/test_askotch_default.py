"""ASkotch's default never stores the n×n kernel matrix: variant "auto" runs the
fresh-block variant (no strong-convexity estimate needed), or Alg. 1 with the free bound on μ when
λn ≥ n/|b|; Alg. 1 with μ "auto" still stores K for its Lanczos estimate when asked for explicitly."""

import pytest

import krrcore.full_system as full_system
from krrcore.kernels import GaussianKernel
from krrcore.memory import PeakMemory
from krrcore.solvers.askotch import ASkotch

from solver_problems import make_problem, one_thread  # noqa: F401 (one_thread: a fixture)

KERNEL = GaussianKernel(3.0)


@pytest.fixture
def dense_kernel_calls(monkeypatch):
    """Records every n×n kernel matrix built through krrcore.full_system (how K gets stored)."""
    calls = []
    original = full_system.dense_kernel

    def spy(kernel, A, B, **kw):
        calls.append((A.shape[0], B.shape[0]))
        return original(kernel, A, B, **kw)

    monkeypatch.setattr(full_system, "dense_kernel", spy)
    return calls


def test_default_askotch_never_allocates_K(dense_kernel_calls, one_thread):
    n = 3000
    X, y = make_problem(n=n, d=5)
    model = ASkotch(KERNEL, 1e-4, maxiter=3 * 30)  # B = 30 blocks of 100: three passes
    estimate = model.memory_estimate(n, 5)
    assert not any(p.name.startswith("kernel matrix K") for p in estimate.parts)
    assert estimate.stored_bytes < 0.1 * n * n * 8
    with PeakMemory() as mem:
        model.fit(X, y)
    assert dense_kernel_calls == []
    assert model._variant == "fresh_blocks" and not hasattr(model, "mu_")
    if mem.supported:  # everything torch and BLAS allocate stays near the estimate (K alone is 72 MB)
        assert mem.extra_bytes < 1.5 * estimate.peak_bytes + 32 * 2**20
    residuals = [r.residual for r in model.trace_]
    assert residuals[-1] < 0.5 * residuals[1]
    # Alg. 1 with μ "auto", the old default, stores K for its Lanczos estimate when K fits.
    alg1 = ASkotch(KERNEL, 1e-4, variant="alg1", maxiter=1)
    assert any(p.name.startswith("kernel matrix K") for p in alg1.memory_estimate(n, 5).parts)
    alg1.fit(X, y)
    assert (n, n) in dense_kernel_calls


def test_auto_variant_falls_back_to_alg1_with_the_free_bound():
    """When λn ≥ n/|b| the fresh-block momentum is undefined: Alg. 1, μ from λn ≤ λ_min (no K)."""
    X, y = make_problem(n=400, d=5)
    model = ASkotch(KERNEL, 0.05, blocks=4, rank=20, maxiter=8).fit(X, y)  # λn = 20 ≥ n/|b| = 4
    assert model._variant == "alg1" and model.mu_ > 0
    fresh = ASkotch(KERNEL, 1e-4, blocks=4, rank=20, maxiter=8).fit(X, y)
    assert fresh._variant == "fresh_blocks"
    assert ASkotch(KERNEL, 1e-4, blocks=4, rank=20, cache_preconditioners=True, maxiter=1).fit(X, y)._variant == "alg1"


def test_bad_mu_is_named_even_where_the_variant_ignores_it():
    X, y = make_problem(n=200, d=5)
    with pytest.raises(ValueError, match="mu must be"):
        ASkotch(KERNEL, 1e-4, blocks=2, rank=20, mu="big").fit(X, y)

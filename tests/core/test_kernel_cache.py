"""K_nM blocks cached within the storage budget and reused across CG iterations."""

import numpy as np
import pytest
import torch

from krrcore.kernels import GaussianKernel
from krrcore.ops import KernelOperator
from krrcore.solvers.falkon import KERNEL_CACHE, Falkon, NystromGD


class CountingKernel(GaussianKernel):
    def __init__(self, sigma):
        super().__init__(sigma)
        self.rows = 0

    def block(self, P1, P2, out=None):
        self.rows += len(P1)
        return super().block(P1, P2, out=out)


def test_cached_rows_are_computed_once_and_products_do_not_change():
    X = torch.randn(1000, 3, dtype=torch.float64)
    C = X[:50]
    v, w = torch.randn(50, 2, dtype=torch.float64), torch.randn(1000, 2, dtype=torch.float64)
    reference = KernelOperator(GaussianKernel(1.0), X, C, block_rows=128)
    for cache_rows in (0, 300, 1000):
        kernel = CountingKernel(1.0)
        op = KernelOperator(kernel, X, C, block_rows=128, cache_bytes=cache_rows * 50 * 8)
        for _ in range(3):
            torch.testing.assert_close(op.fused(v, w), reference.fused(v, w))
            torch.testing.assert_close(op.rmatvec(w), reference.rmatvec(w))
        assert op.cached_rows == cache_rows
        assert kernel.rows == 1000 + 5 * (1000 - cache_rows)  # the cached prefix is evaluated once
        assert (op._buffer is None) == (cache_rows == 1000)  # a whole cache needs no block buffer beside it


def test_falkon_caches_what_the_budget_leaves_and_fits_the_same_model():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 4))
    y = np.sin(X[:, 0])
    kernel = GaussianKernel(2.0)
    whole = Falkon(kernel, 1e-3, M=100, maxiter=15).fit(X, y)
    assert whole.operator_.cached_rows == 3000
    assert dict((p.name, p.bytes) for p in whole.memory_estimate_.parts)[KERNEL_CACHE] == 3000 * 100 * 8
    budget = 4 * 100 * 100 * 8 + 1500 * 100 * 8  # room for about half of K_nM after the rest
    part = Falkon(kernel, 1e-3, M=100, maxiter=15, memory_budget=budget).fit(X, y)
    assert 0 < part.operator_.cached_rows < 3000
    estimate = part.memory_estimate_
    assert estimate.stored_bytes <= estimate.limit_bytes
    np.testing.assert_allclose(
        part.predict(X[:200]), whole.predict(X[:200]), rtol=0, atol=1e-6
    )  # summation order differs
    gd = NystromGD(kernel, 1e-6, M=100, maxiter=3).fit(X, y)  # its power iteration reuses them too
    assert gd.operator_.cached_rows == 3000


def _validation_rows_evaluated(memory_budget=None):
    """Kernel rows a fit evaluates for its records' validation metric, the records, and the fit."""
    rng = np.random.default_rng(1)
    X, X_val = rng.standard_normal((3000, 4)), rng.standard_normal((777, 4))
    y, y_val = np.sin(X[:, 0]), np.sin(X_val[:, 0])
    counts = []
    for validation in ((), (X_val, y_val)):
        kernel = CountingKernel(2.0)
        model = Falkon(kernel, 1e-3, M=100, maxiter=15, memory_budget=memory_budget).fit(X, y, *validation)
        counts.append(kernel.rows)
    return counts[1] - counts[0], model, X_val, y_val


def test_validation_kernel_rows_are_kept_for_the_records_when_they_fit_the_scratch_budget():
    kept, model, X_val, y_val = _validation_rows_evaluated()
    assert kept == 777  # once, not once per record
    assert len(model.trace_) == 16
    parts = {p.name: p for p in model.memory_estimate_.parts}
    assert parts["validation kernel rows K(X_val, centres)"].bytes == 777 * 100 * 8
    assert parts["validation data X_val, y_val"].bytes == 777 * 5 * 8
    final = model.trace_[-1].val_metric
    assert final == pytest.approx(np.mean((model.predict(X_val) - y_val) ** 2), rel=1e-10)
    # Below one scratch budget's worth the rows are evaluated at every record, as before, and the
    # records' metrics do not change.
    recomputed, small, _, _ = _validation_rows_evaluated(memory_budget=600_000)
    assert recomputed == 777 * 16
    assert "validation kernel rows K(X_val, centres)" not in {p.name for p in small.memory_estimate_.parts}
    np.testing.assert_allclose([r.val_metric for r in small.trace_], [r.val_metric for r in model.trace_], rtol=1e-8)


def test_bless_centers_get_the_cache_the_budget_leaves_for_the_dictionary_they_are():
    """The estimate counts M centres before the BLESS dictionary exists. The dictionary stops at M
    points, so the plan holds; where BLESS's λ path ends (at κ²/n) before M, the K_nM cache is sized
    again from the storage budget with the real, smaller M: more rows cached than planned
    (heavy-tailed data, n = 3,000: M = 2,600 asked, 1,413 points at λ = κ²/n; the estimate's bytes
    held 1,814 rows)."""
    rng = np.random.default_rng(0)
    X = rng.standard_cauchy((3000, 3))
    y = np.sin(X[:, 0])
    for M, budget in ((40, 800 * 1024), (2600, 90_000 * 1024)):
        model = Falkon(GaussianKernel(1.0), 1e-6, M=M, maxiter=3, centers="bless", memory_budget=budget).fit(X, y)
        used = model.centers_.shape[0]
        planned = dict((p.name, p.bytes) for p in model.memory_estimate_.parts)[KERNEL_CACHE] // (M * 8)
        assert planned < 3000
        if M == 40:
            assert used == 40 and model.operator_.cached_rows == planned
        else:
            assert model.center_set_.info["penalty"] == pytest.approx(1 / 3000) and used < M
            assert model.operator_.cached_rows == 3000


@pytest.mark.parametrize("threads", [1, 2])
def test_float64_products_over_float32_blocks_are_float64_arithmetic_on_the_float32_values(threads):
    """fused(dtype=float64) over float32 blocks (FALKON's refinement residual): cached blocks, blocks
    evaluated in the walk, v only, w only, both; one thread or two."""
    g = torch.Generator().manual_seed(3)
    X = torch.randn(1000, 3, generator=g)
    C = X[:50].clone()
    v = torch.randn(50, 2, generator=g, dtype=torch.float64)
    w = torch.randn(1000, 2, generator=g, dtype=torch.float64)
    before_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for cache_rows in (0, 300, 1000):
            op = KernelOperator(
                GaussianKernel(1.0),
                X,
                C,
                block_rows=128,
                cache_bytes=cache_rows * 50 * 4,
                accumulate_dtype=torch.float64,
            )
            op.rmatvec(torch.ones(1000))  # fills the cache
            K = torch.cat([block.clone() for _, _, block in op.blocks()]).double()  # its float32 values, exactly
            for args, want in (((v, w), K.T @ (K @ v + w)), ((v, None), K.T @ (K @ v)), ((None, w), K.T @ w)):
                got = op.fused(*args, dtype=torch.float64)
                assert got.dtype == torch.float64
                torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-12)
            got = op.fused(v[:, 0], dtype=torch.float64)  # a vector in, a vector out
            torch.testing.assert_close(got, K.T @ (K @ v[:, 0]), rtol=1e-13, atol=1e-12)
    finally:
        torch.set_num_threads(before_threads)

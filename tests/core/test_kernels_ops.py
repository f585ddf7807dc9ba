"""Kernels against naive cdist references; blocked products against dense ones."""

import math

import numpy as np
import pytest
import torch

from krrcore.kernels import (
    KERNELS,
    GaussianKernel,
    LaplacianKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    make_kernel,
    median_heuristic,
)
from krrcore.ops import CPU_BLOCK_BYTES, MIN_BLOCK_ROWS, KernelOperator, block_rows_for_budget, preferred_block_rows


def _data(n=157, m=63, d=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(n, d, generator=g, dtype=torch.float64),
        torch.randn(m, d, generator=g, dtype=torch.float64) * 1.5,
    )


ARD = [0.5, 1.0, 2.0, 0.7, 3.0, 1.3]


def _reference(kernel, X1, X2):
    """Naive definitions, distances from torch.cdist on unscaled inputs."""
    if isinstance(kernel, GaussianKernel):
        s = torch.as_tensor(kernel.params()["sigma"], dtype=torch.float64)
        return torch.exp(-(torch.cdist(X1 / s, X2 / s) ** 2) / 2)
    if isinstance(kernel, LaplacianKernel):
        s = torch.as_tensor(kernel.params()["sigma"], dtype=torch.float64)
        return torch.exp(-torch.cdist(X1 / s, X2 / s, p=kernel.p))
    if isinstance(kernel, MaternKernel):
        s = torch.as_tensor(kernel.params()["sigma"], dtype=torch.float64)
        r = torch.cdist(X1 / s, X2 / s)
        if kernel.nu == 0.5:
            return torch.exp(-r)
        if kernel.nu == 1.5:
            return (1 + math.sqrt(3) * r) * torch.exp(-math.sqrt(3) * r)
        return (1 + math.sqrt(5) * r + 5 * r**2 / 3) * torch.exp(-math.sqrt(5) * r)
    if isinstance(kernel, LinearKernel):
        return X1 @ X2.T
    if isinstance(kernel, PolynomialKernel):
        return (kernel.gamma * X1 @ X2.T + kernel.coef0) ** kernel.degree
    raise AssertionError(kernel)


KERNEL_CASES = [
    GaussianKernel(1.7),
    GaussianKernel(ARD),
    LaplacianKernel(2.0, p=2),
    LaplacianKernel(ARD, p=2),
    LaplacianKernel(3.0, p=1),
    LaplacianKernel(ARD, p=1),
    MaternKernel(1.2, nu=0.5),
    MaternKernel(1.2, nu=1.5),
    MaternKernel(ARD, nu=2.5),
    LinearKernel(),
    PolynomialKernel(degree=3, gamma=0.5, coef0=1.0),
]


@pytest.mark.parametrize("kernel", KERNEL_CASES, ids=repr)
def test_kernel_matches_naive_reference(kernel):
    X1, X2 = _data()
    K = kernel(X1, X2)
    ref = _reference(kernel, X1, X2)
    scale = max(1.0, float(ref.abs().max()))
    assert torch.allclose(K, ref, atol=1e-6 * scale, rtol=0)
    diag_ref = torch.diagonal(_reference(kernel, X1, X1))
    assert torch.allclose(kernel.diag(X1), diag_ref, atol=1e-6 * max(1.0, float(diag_ref.abs().max())), rtol=0)


def test_kernel_float32_follows_input_dtype():
    X1, X2 = _data()
    K = GaussianKernel(1.0)(X1.float(), X2.float())
    assert K.dtype == torch.float32
    assert torch.allclose(K.double(), GaussianKernel(1.0)(X1, X2), atol=1e-5)


@pytest.mark.parametrize("block_rows", [1, 7, 50, 157, 1000])
@pytest.mark.parametrize("kernel", [GaussianKernel(1.3), LaplacianKernel(2.0, p=1), PolynomialKernel(2)], ids=repr)
def test_blocked_products_equal_dense(kernel, block_rows):
    X, C = _data()
    K = kernel(X, C)
    op = KernelOperator(kernel, X, C, block_rows=block_rows)
    g = torch.Generator().manual_seed(1)
    v = torch.randn(C.shape[0], 3, generator=g, dtype=torch.float64)
    w = torch.randn(X.shape[0], 3, generator=g, dtype=torch.float64)
    u = torch.randn(X.shape[0], generator=g, dtype=torch.float64)
    tol = dict(rtol=1e-10, atol=1e-10)
    assert torch.allclose(op.matvec(v), K @ v, **tol)
    assert torch.allclose(op.rmatvec(u), K.T @ u, **tol)
    assert torch.allclose(op.fused(v, w), K.T @ (K @ v + w), **tol)
    assert torch.allclose(op.fused(v), K.T @ (K @ v), **tol)
    assert torch.allclose(op.fused(None, w), K.T @ w, **tol)
    assert torch.allclose(op.gram(), K.T @ K, **tol)
    G, P = op.gram(w)
    assert torch.allclose(G, K.T @ K, **tol) and torch.allclose(P, K.T @ w, **tol)


@pytest.mark.parametrize("block_rows", [1, 7, 1000])
def test_row_subset_products_and_blocks_equal_dense_rows(block_rows):
    """matvec(rows=) and blocks(rows=) walk X[rows] only, in blocks of one buffer no taller than needed."""
    X, C = _data()
    kernel = LaplacianKernel(2.0, p=1)
    K = kernel(X, C)
    op = KernelOperator(kernel, X, C, block_rows=block_rows)
    rows = torch.tensor([150, 3, 3, 77, 0, 12, 99, 42, 8, 140, 61])  # unsorted, with a repeat
    v = torch.randn(C.shape[0], 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert torch.allclose(op.matvec(v, rows=rows), K[rows] @ v, rtol=1e-10, atol=1e-10)
    assert op._buffer.shape[0] == min(block_rows, rows.numel())
    seen = torch.cat([Kb.clone() for _start, _stop, Kb in op.blocks(rows=rows)])
    assert torch.allclose(seen, K[rows], rtol=1e-10, atol=1e-10)
    assert op.matvec(v, rows=rows[:0]).shape == (0, 2)
    assert torch.allclose(op.matvec(v), K @ v, rtol=1e-10, atol=1e-10)  # the full pass grows the buffer
    assert op._buffer.shape[0] == op.block_rows


def test_block_size_is_solved_from_budget():
    """The largest block within the budget, no taller than the device prefers: on a CPU a block of
    about CPU_BLOCK_BYTES, which stays in cache through its kernel function and both mat-vecs."""
    M, itemsize = 2000, 8
    rows = block_rows_for_budget(10**6, M, itemsize=itemsize, budget_bytes=64 * 2**20, d=10)
    assert rows * (M + 2 * 10 + 3) * itemsize <= (64 - 6.4) * 2**20  # block + features + K v
    assert (rows + 1) * (M + 2 * 10 + 3) * itemsize > (64 - 6.4) * 2**20  # and it is the largest such
    cpu = preferred_block_rows(M, itemsize)
    assert cpu == CPU_BLOCK_BYTES // (M * itemsize) < rows and preferred_block_rows(M, itemsize, "cuda") > rows
    X = torch.randn(10**4, 10, dtype=torch.float64)
    assert KernelOperator(GaussianKernel(1.0), X, X[:M], memory_budget=64 * 2**20).block_rows == cpu
    assert block_rows_for_budget(10**6, M, itemsize=itemsize, budget_bytes=2 * 2**20, d=10, max_rows=cpu) < cpu
    assert preferred_block_rows(10**6, 4) == MIN_BLOCK_ROWS
    X, C = _data()
    op = KernelOperator(GaussianKernel(1.0), X, C, memory_budget=10 * C.shape[0] * 8)
    assert op.block_rows < X.shape[0] and op.buffer_bytes <= 10 * C.shape[0] * 8
    with pytest.raises(ValueError, match="memory_budget"):
        KernelOperator(GaussianKernel(1.0), X, C, memory_budget=100)


def test_median_heuristic_matches_numpy():
    X, _ = _data(n=80)
    d = torch.cdist(X, X).numpy()[np.triu_indices(80, 1)]
    assert median_heuristic(X) == pytest.approx(float(np.median(d)), rel=1e-9)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: GaussianKernel(0.0), "sigma"),
        (lambda: GaussianKernel(-1), "sigma"),
        (lambda: GaussianKernel(float("nan")), "sigma"),
        (lambda: GaussianKernel([1.0, -2.0]), "sigma"),
        (lambda: GaussianKernel("wide"), "sigma"),
        (lambda: LaplacianKernel(1.0, p=3), "p must be 1 or 2"),
        (lambda: MaternKernel(1.0, nu=1.0), "nu"),
        (lambda: PolynomialKernel(degree=0), "degree"),
        (lambda: make_kernel("cosine"), "kernel must be one of"),
    ],
)
def test_bad_kernel_parameters_raise(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize(
    "X1, message",
    [
        (np.array([[1.0, np.nan]]), "X1 contains 1 NaN"),
        (np.array([["a", "b"]]), "X1 must contain only numbers"),
        (np.zeros((0, 2)), "X1 is empty"),
        (np.zeros(3), "X1 must have 2 dimensions"),
    ],
)
def test_bad_kernel_inputs_raise(X1, message):
    with pytest.raises(ValueError, match=message):
        GaussianKernel(1.0)(X1, np.zeros((2, 2)))


def test_mismatched_features_raise():
    with pytest.raises(ValueError, match="mismatched"):
        GaussianKernel(1.0)(np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="per-feature"):
        GaussianKernel([1.0, 2.0])(np.zeros((2, 3)), np.zeros((2, 3)))


@pytest.mark.parametrize(
    "kernel", [LaplacianKernel(0.7, p=2), MaternKernel(0.7, nu=0.5), MaternKernel(0.7, nu=2.5)], ids=repr
)
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_square_root_kernels_are_exact_on_equal_points(kernel, dtype, tol):
    """sqrt of the expanded form's round-off would give k(x, x) ≈ 1 − √eps (1e-3 in float32)."""
    X, _ = _data(n=300, d=10)
    X = (X * 3 + 5).to(dtype)  # large norms make the cancellation worst
    K = kernel(X, X)
    assert float((torch.diagonal(K) - 1).abs().max()) <= tol


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_constant_diag_says_whether_k_x_x_is_the_same_for_every_row(name):
    """BLESS's scoring reads one K(x, x) for every row when ``constant_diag`` says so."""
    X = torch.randn(50, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 3
    diag = KERNELS[name]().diag(X)
    assert KERNELS[name].constant_diag == bool(torch.allclose(diag, diag[:1].expand_as(diag)))

"""The GPU path: every solver and the kernel products on CUDA against the CPU
(skipped without a GPU), and no tensor created on torch's default device by accident — checked on
any machine by making the default device "meta" during a fit: a stray factory call without an
explicit device then yields a data-less tensor and the fit fails."""

import numpy as np
import pytest
import torch

from krrcore import SOLVERS
from krrcore.kernels import GaussianKernel, LaplacianKernel
from krrcore.ops import KernelOperator, dense_kernel

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def _data(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)


def _make(key, device):
    info = SOLVERS[key]
    params = {"maxiter": 5} if info.iterative else {}
    if "M" in info.knobs:
        params["M"] = 40
    if "blocks" in info.knobs:
        params["rank"] = 20
    return info.make(kernel=GaussianKernel(2.0), penalty=1e-3, device=device, **params)


@pytest.mark.parametrize("key", sorted(SOLVERS))
def test_no_tensor_is_created_on_the_default_device(key):
    X, y = _data()
    reference = _make(key, "cpu").fit(X, y).predict(X[:20])
    model = _make(key, "cpu")
    with torch.device("meta"):
        model.fit(X, y)
        predictions = model.predict(X[:20])
    np.testing.assert_allclose(predictions, reference, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("key", ["falkon", "falkon_bless"])
def test_float32_falkon_creates_no_tensor_on_the_default_device(key):
    """float32 takes its own set-up paths (A factored in float32, BLESS's float32 scoring)."""
    X, y = _data()
    reference = _make(key, "cpu").set_params(dtype="float32").fit(X, y).predict(X[:20])
    model = _make(key, "cpu").set_params(dtype="float32")
    with torch.device("meta"):
        model.fit(X, y)
        predictions = model.predict(X[:20])
    np.testing.assert_allclose(predictions, reference, rtol=1e-6, atol=1e-7)


@CUDA
@pytest.mark.parametrize("key", sorted(SOLVERS))
def test_every_solver_on_cuda_matches_the_cpu(key):
    X, y = _data()
    cpu = _make(key, "cpu").fit(X, y)
    gpu = _make(key, "cuda").fit(X, y)
    assert gpu.coef_.device.type == "cuda"
    np.testing.assert_allclose(gpu.predict(X[:50]), cpu.predict(X[:50]), rtol=1e-6, atol=1e-6)


@CUDA
@pytest.mark.parametrize("kernel", [GaussianKernel(1.5), LaplacianKernel(2.0, p=1)], ids=["gaussian", "laplacian-l1"])
def test_kernel_products_on_cuda_match_the_cpu(kernel):
    X = torch.randn(700, 5, dtype=torch.float64)
    C, v, w = X[:60], torch.randn(60, 2, dtype=torch.float64), torch.randn(700, 2, dtype=torch.float64)
    cpu = KernelOperator(kernel, X, C, block_rows=128, cache_bytes=300 * 60 * 8)
    gpu = KernelOperator(kernel, X.cuda(), C.cuda(), block_rows=128, cache_bytes=300 * 60 * 8)
    for _ in range(2):  # the second pass reads the cached prefix
        torch.testing.assert_close(gpu.fused(v.cuda(), w.cuda()).cpu(), cpu.fused(v, w))
        torch.testing.assert_close(gpu.matvec(v.cuda()).cpu(), cpu.matvec(v))
        torch.testing.assert_close(gpu.rmatvec(w.cuda()).cpu(), cpu.rmatvec(w))
    torch.testing.assert_close(dense_kernel(kernel, X.cuda(), C.cuda()).cpu(), dense_kernel(kernel, X, C))

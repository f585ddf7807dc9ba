"""The preconditioner's blocked in-place factorisations (krrcore.linalg) against torch's dense ones,
and its M×M buffer refused before it is allocated when the device cannot hold it."""

import pytest
import torch

from krrcore import linalg, memory
from krrcore.kernels import GaussianKernel
from krrcore.linalg import cholesky_lower_, lower_gram_
from krrcore.memory import MemoryBudgetError
from krrcore.preconditioner import FalkonPreconditioner, buffer_dtype


def _spd(M, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(M, M + 5, generator=g, dtype=torch.float64)
    return (X @ X.T / M + 0.1 * torch.eye(M, dtype=torch.float64)).to(dtype)


@pytest.mark.parametrize("M, block", [(1, 4), (37, 8), (64, 16), (100, 33), (50, 64)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_blocked_cholesky_in_place_matches_torch_and_keeps_the_upper_triangle(M, block, dtype):
    S = _spd(M, dtype=dtype)
    other = torch.randn(M, M, generator=torch.Generator().manual_seed(1), dtype=dtype).triu(1)
    A = torch.tril(S) + other
    assert cholesky_lower_(A, block=block) == 0
    tol = 1e-12 if dtype == torch.float64 else 2e-5
    torch.testing.assert_close(torch.tril(A), torch.linalg.cholesky(S), rtol=0, atol=tol)
    assert torch.equal(torch.triu(A, 1), other)


@pytest.mark.parametrize("M, block", [(37, 8), (100, 33), (20, 64)])
def test_blocked_lower_gram_in_place_is_lauum(M, block):
    L = torch.linalg.cholesky(_spd(M))
    other = torch.randn(M, M, generator=torch.Generator().manual_seed(2), dtype=torch.float64).triu(1)
    A = L + other
    lower_gram_(A, block=block)
    torch.testing.assert_close(torch.tril(A), torch.tril(L.T @ L), rtol=0, atol=1e-12)
    assert torch.equal(torch.triu(A, 1), other)


def test_blocked_cholesky_on_a_transposed_view_factors_the_upper_triangle():
    S = _spd(45)
    buf = torch.triu(S).clone()
    assert cholesky_lower_(buf.T, block=16) == 0
    torch.testing.assert_close(buf.T.tril(), torch.linalg.cholesky(S), rtol=0, atol=1e-12)


def test_blocked_cholesky_reports_the_block_that_is_not_positive_definite():
    S = _spd(40)
    S[30, 30] = -1.0
    assert cholesky_lower_(torch.tril(S), block=8) == 25  # block column 24..31, 1-based


def test_blocked_preconditioner_layout_matches_lapack(monkeypatch):
    """The GPU path's buffer (T's factor below, A's above, diagonals aside), run here on the CPU in
    blocks of 16, equals LAPACK's."""
    C = torch.rand(70, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    # A jitter that keeps K_MM well conditioned: the two orders of rounding then agree closely.
    lapack = FalkonPreconditioner(GaussianKernel(2.0), C, 1e-3, jitter=1e-3)
    monkeypatch.setattr(FalkonPreconditioner, "_factor_in_place", FalkonPreconditioner._factor_blocked)
    monkeypatch.setattr(linalg.cholesky_lower_, "__defaults__", (16,))
    monkeypatch.setattr(linalg.lower_gram_, "__defaults__", (16,))
    blocked = FalkonPreconditioner(GaussianKernel(2.0), C, 1e-3, jitter=1e-3)
    assert blocked.jitter_ == lapack.jitter_
    torch.testing.assert_close(blocked.diag_T, lapack.diag_T, rtol=1e-9, atol=0)
    torch.testing.assert_close(blocked.diag_A, lapack.diag_A, rtol=1e-9, atol=0)
    scale = float(lapack._packed.abs().max())
    torch.testing.assert_close(blocked._packed, lapack._packed, rtol=0, atol=1e-9 * scale)
    u = torch.randn(70, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    torch.testing.assert_close(blocked.apply_t(lapack.apply(u)), lapack.apply_t(lapack.apply(u)), rtol=1e-8, atol=0)


def test_preconditioner_buffer_is_refused_before_allocating(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: 2 * 2**30)
    assert buffer_dtype(10_000, torch.float32, "cpu") == torch.float64  # 0.8 GB and its panels fit 2 GiB
    with pytest.raises(
        MemoryBudgetError,
        match=r"M=20,000 centres \(one 20,000×20,000 matrix in float64\) needs .* lower M to at most 12,",
    ):
        buffer_dtype(20_000, torch.float32, "cpu")
    # A GPU with float32 data keeps a float32 buffer where float64 does not fit; float64 data is refused.
    assert buffer_dtype(15_000, torch.float32, "cuda") == torch.float32
    with pytest.raises(MemoryBudgetError, match=r"15,000×15,000 matrix in float64\) needs"):
        buffer_dtype(15_000, torch.float64, "cuda")
    assert memory.gib(2**30) == "1 GiB"


def test_falkon_estimate_counts_the_buffer_the_preconditioner_will_keep(monkeypatch):
    """M = 100,000 float32 on an 80 GB card: a float32 buffer (40 GB), not the 80 GB of float64."""
    from types import SimpleNamespace

    from krrcore.solvers import Falkon

    monkeypatch.setattr(memory, "available_bytes", lambda device=None: 80 * 10**9)
    card = SimpleNamespace(device=torch.device("cuda"), itemsize=4, dtype=torch.float32)
    assert Falkon()._system_itemsize(card, 100_000) == 4
    assert Falkon()._system_name(card, 100_000) == "preconditioner (one float32 M×M buffer)"
    assert Falkon()._system_itemsize(card, 20_000) == 8
    cpu = SimpleNamespace(device=torch.device("cpu"), itemsize=4, dtype=torch.float32)
    assert Falkon()._system_itemsize(cpu, 100_000) == 8

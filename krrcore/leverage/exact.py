"""Exact ridge leverage scores ℓ(i, λ) = (K(K + λnI)⁻¹)_ii (BLESS Eq. 1), the float64 references:
one ``eigh`` for a whole λ grid, or a blocked Cholesky route for one λ, each guarded by the memory policy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .._validation import check_int, check_positive
from ..memory import check_fits
from ..ops import dense_kernel
from ._inputs import _as_float64, _check_kernel
from .cost import check_time, exact_estimate


@dataclass
class ExactLeveragePath:
    """Exact ℓ(i, λ) for a grid of λ, from one eigendecomposition of K (Eq. 1)."""

    penalties: np.ndarray  # (p,)
    scores: torch.Tensor  # (p, n) float64; row j holds ℓ(·, penalties[j])
    d_eff: np.ndarray  # (p,)  Σ_i ℓ(i, λ)
    d_inf: np.ndarray  # (p,)  n·max_i ℓ(i, λ)
    eigenvalues: torch.Tensor  # (n,) of K, clamped at 0, ascending


def check_eigh_fits(n: int, memory_budget: int | None = None, device=None) -> None:
    """The memory check of :func:`exact_scores_path` (three n×n float64 matrices), callable before
    any other work that would lead to it."""
    check_fits(
        3 * n * n * 8,
        f"exact leverage scores by eigendecomposition (n={n}, three n×n float64 matrices)",
        "use exact_scores(method='cholesky') for one λ, bless/bless_r, or subsample X",
        memory_budget,
        device,
    )


def exact_scores_path(
    X, kernel, penalties, *, memory_budget: int | None = None, timeout: float | None = None
) -> ExactLeveragePath:
    """Exact leverage scores for every λ in ``penalties`` from one ``eigh`` of K (float64).

    With K = U diag(s) Uᵀ: ℓ(·, λ) = (U∘U) s/(s + λn) and d_eff(λ) = Σ s/(s + λn) (Eq. 1).
    Needs about three n×n float64 matrices; raises ``ValueError`` with the GiB needed otherwise.
    ``timeout``: seconds; an estimated time above it is refused before starting (and past a minute
    warns), as for the estimators (:mod:`krrcore.leverage.cost`).
    """
    kernel = _check_kernel(kernel)
    X = _as_float64(X)
    n = X.shape[0]
    given = penalties.tolist() if hasattr(penalties, "tolist") else penalties
    given = [given] if not isinstance(given, (list, tuple)) else list(given)
    if not given or any(isinstance(v, (list, tuple)) for v in given):
        raise ValueError("penalties must be a non-empty 1-D sequence of positive numbers")
    for j, lam in enumerate(given):
        check_positive(lam, f"penalties[{j}]")  # a bool is refused, not read as 1
    lams = np.asarray(given, dtype=np.float64)
    check_eigh_fits(n, memory_budget, X.device)
    check_time(exact_estimate("eigh", n, X.shape[1], len(lams), X.device, memory_budget), timeout)
    K = dense_kernel(kernel, X, X)
    s, U = torch.linalg.eigh(K)
    del K
    s.clamp_min_(0.0)
    U.mul_(U)  # U∘U in place
    ridge = torch.as_tensor(lams * n, dtype=torch.float64, device=X.device)
    shrink = s.unsqueeze(0) / (s.unsqueeze(0) + ridge.unsqueeze(1))  # (p, n): s/(s + λn)
    scores = shrink @ U.T
    d_eff = shrink.sum(1)
    return ExactLeveragePath(lams, scores, d_eff.cpu().numpy(), (n * scores.max(1).values).cpu().numpy(), s)


def exact_scores(
    X,
    kernel,
    penalty,
    *,
    method: str = "auto",
    block_size: int = 1024,
    memory_budget: int | None = None,
    timeout: float | None = None,
) -> torch.Tensor:
    """Exact ℓ(i, λ) = (K(K + λnI)⁻¹)_ii for all i, in float64 (Eq. 1).

    ``method``: "cholesky" (ℓ_i = 1 − λn‖L⁻¹e_i‖² with L Lᵀ = K + λnI; columns of L⁻¹ solved
    ``block_size`` at a time on the trailing triangle, about n³/3 flops after the factorisation)
    or "eigh" (one eigendecomposition, as :func:`exact_scores_path`: ~10× the flops, but no
    cancellation, so scores near machine precision keep their relative accuracy); "auto" is
    "cholesky" — for one λ it is always the cheaper route (docs/measurements.md). Raises
    :class:`~krrcore.memory.MemoryBudgetError` with the GiB needed when K does not fit; ``timeout``
    as :func:`exact_scores_path`'s.
    """
    kernel = _check_kernel(kernel)
    lam = check_positive(penalty, "penalty")
    if method not in ("auto", "eigh", "cholesky"):
        raise ValueError(f"method must be 'auto', 'eigh' or 'cholesky', got {method!r}")
    X = _as_float64(X)
    n = X.shape[0]
    if method == "eigh":
        return exact_scores_path(X, kernel, [lam], memory_budget=memory_budget, timeout=timeout).scores[0]
    block_size = check_int(block_size, "block_size")
    check_fits(
        2 * n * n * 8,
        f"exact leverage scores by Cholesky (n={n}, two n×n float64 matrices)",
        "use bless/bless_r for approximate scores, or subsample X",
        memory_budget,
        X.device,
    )
    check_time(exact_estimate("cholesky", n, X.shape[1], 1, X.device, memory_budget), timeout)
    K = dense_kernel(kernel, X, X)
    ridge = lam * n
    K.diagonal().add_(ridge)
    info = torch.empty((), dtype=torch.int32, device=X.device)
    L, info = torch.linalg.cholesky_ex(K, out=(K, info))  # overwrites K
    if int(info) != 0:
        raise ValueError(f"K + λnI is not positive definite at penalty={lam:g} (Cholesky failed at row {int(info)})")
    inv_diag = torch.empty(n, dtype=torch.float64, device=X.device)
    for start in range(0, n, block_size):
        stop = min(start + block_size, n)
        # Columns start..stop of L⁻¹ vanish above row `start`: solve on the trailing block only.
        E = torch.zeros(n - start, stop - start, dtype=torch.float64, device=X.device)
        E.diagonal().fill_(1.0)
        Z = torch.linalg.solve_triangular(L[start:, start:], E, upper=False)
        inv_diag[start:stop] = (Z * Z).sum(0)
    return (1.0 - ridge * inv_diag).clamp_(0.0, 1.0)

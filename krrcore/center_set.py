"""Nyström centre sets and the selector interface (the low layer: it imports nothing of krrcore's
solvers or samplers, so :mod:`krrcore.leverage` can build on it and :mod:`krrcore.centers` can list
every selector in one static table).

A selector returns a :class:`CenterSet`: the centres, their row indices in X (when drawn from X)
and the diagonal of FALKON's D matrix (Appendix A, Def. 2): all ones for uniform sampling,
D_jj = 1/√(n p_j · count_j) for centres drawn with probabilities p (Alg. 2, selectNystromCenters).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ._validation import as_tensor


@dataclass
class CenterSet:
    centers: torch.Tensor  # (M, d)
    indices: torch.Tensor | None  # (M,) rows of X, or None for user-given centres
    weights: torch.Tensor | None = None  # diag(D), (M,); None means D = I
    info: dict | None = None  # selector-specific extras (e.g. the BLESS λ path)

    @property
    def M(self) -> int:
        return self.centers.shape[0]


class CenterSelector:
    """Base class: ``select(X, M, generator, kernel=None) -> CenterSet``.

    ``kernel`` is the solver's kernel, which data-dependent selectors (leverage scores) need.
    """

    name = "base"

    def select(self, X: torch.Tensor, M: int, generator: torch.Generator, kernel=None) -> CenterSet:
        raise NotImplementedError


class UniformCenters(CenterSelector):
    """M distinct rows of X drawn uniformly without replacement (FALKON's default)."""

    name = "uniform"

    def select(self, X, M, generator, kernel=None):
        n = X.shape[0]
        if M > n:
            raise ValueError(f"M={M} centres requested but the training set has only n={n} points")
        idx = torch.randperm(n, generator=generator, device="cpu")[:M].to(X.device)
        return CenterSet(X[idx], idx)


class FixedCenters(CenterSelector):
    """User-given centres (any M×d array), optionally with weights (diag D)."""

    name = "fixed"

    def __init__(self, centers, weights=None):
        self.centers = centers
        self.weights = weights

    def select(self, X, M, generator, kernel=None):
        C = as_tensor(self.centers, "centers", dtype=X.dtype, device=X.device)
        if C.shape[1] != X.shape[1]:
            raise ValueError(f"centers have {C.shape[1]} features but X has {X.shape[1]}")
        w = None
        if self.weights is not None:
            w = as_tensor(self.weights, "center weights", dtype=X.dtype, device=X.device, ndim=(1,))
            if w.shape[0] != C.shape[0] or bool((w <= 0).any()):
                raise ValueError("center weights must be positive, one per centre")
        return CenterSet(C, None, w)


def weighted_sample(
    probabilities: torch.Tensor, M: int, generator: torch.Generator, n: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """FALKON Alg. 2 selectNystromCenters: M draws with replacement from ``probabilities``,
    duplicates merged; returns (unique indices, diag(D)).

    D_jj = √(count_j / (n p_j)). The preconditioner needs K_MM D² K_MM / M ≈ K_nMᵀK_nM / n
    (compare BBᵀ in Def. 3 with Eq. 10); importance weighting gives K_nMᵀK_nM ≈ Σ_draws
    K_{M,i}K_{i,M}/(M p_i), and a point drawn c times contributes c such terms. Appendix G's
    listing divides by count instead; both agree when no point is drawn twice (Def. 2).
    """
    p = probabilities.double().cpu()
    p = p / p.sum()
    draws = torch.multinomial(p, M, replacement=True, generator=generator)
    idx, count = torch.unique(draws, return_counts=True)
    weights = torch.sqrt(count.double() / (n * p[idx]))
    return idx, weights

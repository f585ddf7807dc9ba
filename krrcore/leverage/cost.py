"""The time a leverage computation will take, estimated before it starts, under the estimators'
policy (:mod:`krrcore.memory`): refused with :class:`~krrcore.memory.TimeLimitError` past a given
``timeout``, a :class:`~krrcore.memory.SlowFitWarning` past :data:`~krrcore.memory.SLOW_FIT_SECONDS`.

A level of BLESS / BLESS-R (Alg. 1–2) costs, for R_h candidates scored against the previous
dictionary J_{h−1} (Eq. 3): R_h·|J_{h−1}| kernel entries, the triangular solves R_h·|J_{h−1}|²
(a float32 pass, and float64 where its rounding matters) and the factor of J_h, |J_h|³. The sizes
follow d_eff(λ_h), estimated before the draws from a small pilot (:func:`pilot_d_eff`): R_h =
q1·min(κ²/λ_h, n) ≈ q1·d_eff (BLESS; at most n for BLESS-R, whose candidates are nested) and
|J_h| ≈ min(q2·d_eff, R_h, n). It is the paths to small λ — where every level holds about n points
— that the estimate is there to catch; an order of magnitude, as the estimators' (CPU rates in
:mod:`krrcore.memory`).
"""

from __future__ import annotations

import math

import torch

from ..memory import CostModel, MemoryEstimate, warn_if_slow
from ..ops import dense_kernel

#: Fixed cost of one level (its draws, bookkeeping and small tensors) in seconds, the same order as
#: a kernel pass over a few hundred points: what dominates the many levels of a small problem.
LEVEL_SECONDS = 0.01
#: Solves per candidate block: a float32 pass plus a float64 one where its rounding matters.
SOLVE_PASSES = 3


#: Points of the pilot that estimates d_eff(λ) along the path (one small ``eigvalsh``).
PILOT_POINTS = 256


def pilot_d_eff(X: torch.Tensor, kernel, penalties) -> list[float]:
    """d_eff(λ) for each λ, estimated from a seeded uniform subsample of m points: K's eigenvalues
    are about n/m times K_mm's μ, so d_eff(λ) = Σ s/(s + λn) ≈ Σ μ/(μ + λm) (Eq. 1). Where that
    nears m the subsample cannot resolve d_eff, and the bound min(n, κ²/λ) is used instead."""
    n = X.shape[0]
    m = min(n, PILOT_POINTS)
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(0), device="cpu")[:m].to(X.device)
    mu = torch.linalg.eigvalsh(dense_kernel(kernel, X[idx], X[idx])).clamp_min(0.0)
    kappa2 = float(kernel.diag(X[idx]).max())
    out = []
    for lam in penalties:
        d = float((mu / (mu + lam * m)).sum())
        out.append(d * n / m if m == n else (d if d < m / 2 else min(float(n), kappa2 / lam)))
    return out


def path_estimate(
    method: str, X: torch.Tensor, kernel, q1: float, q2: float, penalties, memory_budget=None
) -> MemoryEstimate:
    """Estimated seconds (``setup_seconds``) and the last dictionary's factor of a λ path."""
    n, d = X.shape
    model = CostModel(d=d, dtype=torch.float64, device=X.device, memory_budget=memory_budget)
    previous = 0.0
    for d_eff in pilot_d_eff(X, kernel, penalties):
        candidates = min(q1 * d_eff, float(n)) if method == "bless_r" else q1 * d_eff
        size = min(q2 * d_eff, candidates, float(n))
        model.setup += (
            LEVEL_SECONDS
            + model.entry_seconds(SOLVE_PASSES * candidates * previous)
            + model.flop_seconds(SOLVE_PASSES * candidates * previous**2 + size**3)
        )
        previous = size
    model.hold("dictionary factor", previous**2 * 8)
    return model.build(
        method,
        n,
        1,
        f"raise penalty ({len(penalties)} levels down to λ={penalties[-1]:.3g}, the last of about "
        f"{math.ceil(previous):,} points), lower q1 or q2, or use fewer points",
    )


def exact_estimate(method: str, n: int, d: int, penalties: int, device, memory_budget=None) -> MemoryEstimate:
    """Estimated seconds of the exact scores (:mod:`krrcore.leverage.exact`): K (n² entries), then
    its ``eigh`` (about 9n³ flops with the eigenvectors, and n² per λ) or its Cholesky factor and
    the diagonal of its inverse (about n³/3 each)."""
    model = CostModel(d=d, dtype=torch.float64, device=device, memory_budget=memory_budget)
    flops = 9.0 * n**3 + 2.0 * penalties * n * n if method == "eigh" else 2.0 * n**3 / 3
    model.setup += model.entry_seconds(n * n) + model.flop_seconds(flops)
    model.hold("K and its factor", (3 if method == "eigh" else 2) * n * n * 8)
    return model.build(
        f"exact leverage scores ({method})", n, 1, "use fewer points (exact scores cost O(n³)), or bless/bless_r"
    )


def check_time(estimate: MemoryEstimate, timeout: float | None) -> MemoryEstimate:
    """Refuse past ``timeout`` seconds (None: no limit), warn past a minute; the estimate back."""
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds or None, got {timeout!r}")
    estimate.check(timeout=timeout)
    warn_if_slow(estimate, stacklevel=3)
    return estimate

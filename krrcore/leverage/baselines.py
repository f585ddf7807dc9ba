"""Comparison points for BLESS: Recursive-RLS (Musco & Musco 2017) and uniform sampling."""

from __future__ import annotations

import math
import time

import torch

from .._validation import check_int, check_positive
from ._inputs import _generator, _sampler_inputs
from .bless import _Context, DEFAULT_Q, DEFAULT_Q2, lambda_path, _path_inputs, _with_scores
from .dictionary import _Dictionary
from .results import LeverageLevel, LeverageResult


#: Musco & Musco's base-case size 192·log(1/δ), at δ = 0.05.
RRLS_BASE_SIZE = math.ceil(192 * math.log(20))


def recursive_rls(
    X,
    kernel,
    penalty,
    *,
    q2: float | None = None,
    base_size: int = RRLS_BASE_SIZE,
    seed=0,
    points=None,
    memory_budget: int | None = None,
) -> LeverageResult:
    """Recursive-RLS (Musco & Musco, NIPS 2017, Alg. 2) at a fixed λ, unrolled bottom-up.

    A random permutation gives nested uniform subsets of sizes n, ⌈n/2⌉, …, down to
    ``base_size``; the smallest is taken whole (A = I, exact for that subset). Each larger subset
    is scored by Eq. (3) with the previous dictionary at the *same* ridge λn (scores of a subset
    over-estimate those of the whole set, which is what makes the recursion safe) and each point
    enters with probability p = min(q2·ℓ̃, 1), weight A_jj = p. The paper's constants (3/(2λ)
    inflation, 16·log(Σℓ̃/δ) oversampling) are replaced by the same q2 as BLESS-R so the methods
    differ only in their strategy. Every level has penalty λ; ``n_points`` gives the subset size
    and ``d_eff`` the subset's own effective dimension. Cost O(n·|J|²): the last level scores all
    n points.
    """
    kernel, X, kappa2, lam, point_idx = _sampler_inputs(X, kernel, penalty, points)
    n = X.shape[0]
    q2 = check_positive(DEFAULT_Q2 if q2 is None else q2, "q2")
    base_size = check_int(base_size, "base_size")
    ctx = _Context(X, kernel, kappa2, 1.0, q2, _generator(seed), memory_budget)
    t0 = time.perf_counter()
    perm = torch.randperm(n, generator=ctx.generator, device="cpu").to(X.device)
    sizes = [n]
    while sizes[-1] > base_size:
        sizes.append(math.ceil(sizes[-1] / 2))
    sizes.reverse()
    ridge = lam * n
    base = perm[: sizes[0]].sort().values
    ones = torch.ones(base.numel(), dtype=torch.float64, device=X.device)
    t = time.perf_counter()
    base_scores = _Dictionary(kernel, X, base, ones, ridge, memory_budget).scores(base)
    levels = [
        LeverageLevel(
            lam,
            base,
            ones,
            ones.clone(),
            torch.ones_like(base),
            float(base_scores.sum()),
            sizes[0],
            sizes[0],
            expected_size=float(sizes[0]),
            seconds=time.perf_counter() - t,
        )
    ]
    for m in sizes[1:]:
        t = time.perf_counter()
        previous = levels[-1]
        U = perm[:m]
        scores = _Dictionary(kernel, X, previous.indices, previous.weights, ridge, memory_budget).scores(U)
        p = (q2 * scores).clamp_(max=1.0)
        accept = ctx.rand(m) < p
        order = torch.argsort(U[accept])
        indices, probabilities = U[accept][order], p[accept][order]
        levels.append(
            LeverageLevel(
                lam,
                indices,
                probabilities,
                probabilities.clone(),
                torch.ones_like(indices),
                float(scores.sum()),
                m,
                m,
                expected_size=float(p.sum()),
                seconds=time.perf_counter() - t,
            )
        )
    if levels[-1].size == 0:
        raise ValueError("recursive_rls selected no points at the final level: raise q2")
    result = LeverageResult(
        "recursive_rls",
        n,
        kappa2,
        levels,
        {"q2": q2, "base_size": base_size, "penalty": lam},
        seconds=time.perf_counter() - t0,
    )
    return _with_scores(result, X, kernel, point_idx, memory_budget)


def uniform(
    X,
    kernel,
    penalty,
    *,
    M: int | None = None,
    q: float = DEFAULT_Q,
    q1: float | None = None,
    lambda0: float | None = None,
    seed=0,
    points=None,
    memory_budget: int | None = None,
) -> LeverageResult:
    """Uniform sampling as a leverage-score method: M distinct points, A = (M/n)·I.

    A = (M/n)I is the marginal inclusion probability, so Eq. (3) with this dictionary is the
    score estimate uniform Nyström sampling implies (the "Uniform" row of the paper's Fig. 1).
    Default M = min(n, ⌈κ²/λ⌉): the d_∞ bound uniform sampling needs (Bach 2013). The levels
    evaluate the *same* dictionary along the BLESS λ path, each d_eff estimated on
    q1·min(κ²/λ_h, n) uniform candidates, so the app can draw d_eff(λ) for it too.
    """
    kernel, X, kappa2, lam, point_idx = _sampler_inputs(X, kernel, penalty, points)
    n = X.shape[0]
    q, q1, lambda0 = _path_inputs(q, q1, lambda0, lam, kappa2)
    M = min(n, math.ceil(kappa2 / lam)) if M is None else check_int(M, "M")
    if M > n:
        raise ValueError(f"M={M} centres requested but X has only n={n} points")
    ctx = _Context(X, kernel, kappa2, q1, 1.0, _generator(seed), memory_budget)
    t0 = time.perf_counter()
    indices = torch.randperm(n, generator=ctx.generator, device="cpu")[:M].sort().values.to(X.device)
    probabilities = torch.full((M,), M / n, dtype=torch.float64, device=X.device)
    levels = []
    for lam_h in lambda_path(lambda0, lam, q):
        t = time.perf_counter()
        R, U = ctx.uniform_candidates(lam_h)
        d_h = n / R * float(_Dictionary(kernel, X, indices, probabilities, lam_h * n, memory_budget).scores(U).sum())
        levels.append(
            LeverageLevel(
                lam_h,
                indices,
                probabilities,
                probabilities,
                torch.ones_like(indices),
                d_h,
                R,
                n,
                expected_size=float(M),
                seconds=time.perf_counter() - t,
            )
        )
    result = LeverageResult(
        "uniform",
        n,
        kappa2,
        levels,
        {"M": M, "q": q, "q1": q1, "lambda0": lambda0, "penalty": lam},
        seconds=time.perf_counter() - t0,
    )
    return _with_scores(result, X, kernel, point_idx, memory_budget)

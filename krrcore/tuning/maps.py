"""The tuning objective over a coarse (σ, λ) grid: the map a tuning path is drawn over.

One blocked pass and one eigenproblem per σ give the objective at every λ in closed form
(:class:`~krrcore.tuning.objectives.PenaltyProfile`), so a map of s σ values costs s passes, not
s × (number of λ) fits. It is computed on the rows, split and centres a :class:`FalkonCV` with the
same ``objective``, ``M``, ``tune_rows``, ``validation_fraction`` and ``seed`` tunes on, so its
valley is the one the search descends (for a single σ: ARD paths are drawn at the geometric mean of
the σ_j of the features in use, :func:`~krrcore.tuning.choice.typical_sigma`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._validation import as_tensor, check_int
from ..centers import select_centers
from ..kernels import GaussianKernel, median_heuristic
from .search import PENALTY_BOUNDS
from .objectives import PenaltyProfile, check_objective, gaussian_block, row_stats, tuning_problem


def validation_map(
    X,
    y,
    M: int = 500,
    *,
    objective: str = "gcv",
    seed: int = 0,
    tune_rows: int | None = None,
    validation_fraction: float = 0.2,
    sigma_center: float | None = None,
    sigma_decades: float = 1.5,
    sigma_points: int = 12,
    penalty_range: tuple[float, float] | None = None,
    penalty_points: int = 31,
    memory_budget: int | None = None,
) -> dict:
    """The objective on a grid of one σ (``sigma_points`` log-spaced over ``sigma_decades`` either
    side of ``sigma_center``, default the median heuristic) × λ (``penalty_points`` log-spaced over
    ``penalty_range``, default the tuner's float64 bounds).

    Returns plain values: ``log10_sigma`` (s,), ``log10_penalty`` (p,), ``values`` (s × p, NaN where
    the objective is not finite), ``objective``, ``rows`` (rows the map was computed on), ``M``
    and, per σ, the best λ (``best_log10_penalty``: the valley)."""
    check_objective(objective)
    check_int(sigma_points, "sigma_points", minimum=2)
    check_int(penalty_points, "penalty_points", minimum=2)
    X64 = as_tensor(X, "X", dtype=torch.float64, device="cpu")
    Y64 = as_tensor(y, "y", dtype=torch.float64, device="cpu", ndim=(1, 2))
    Y64 = Y64[:, None] if Y64.ndim == 1 else Y64
    problem, _, rows, _ = tuning_problem(
        X64,
        Y64,
        objective,
        tune_rows=tune_rows,
        validation_fraction=validation_fraction,
        seed=seed,
        memory_budget=memory_budget,
    )
    center = sigma_center if sigma_center is not None else median_heuristic(X64[rows], seed=seed)
    log_sigmas = np.linspace(math.log10(center) - sigma_decades, math.log10(center) + sigma_decades, sigma_points)
    low, high = penalty_range or PENALTY_BOUNDS[torch.float64]
    log_penalties = np.linspace(math.log10(low), math.log10(high), penalty_points)
    Z = select_centers("uniform", X64, M, seed, kernel=GaussianKernel(center)).centers
    values, valley = [], []
    for ls in log_sigmas:
        sigma = float(10**ls)
        train = row_stats(problem.X, problem.Y, Z, sigma, memory_budget)
        val = (
            row_stats(problem.X_val, problem.Y_val, Z, sigma, memory_budget, gram=False)
            if objective == "holdout"
            else None
        )  # (the other objectives read the fitted rows only)
        log_sigma = torch.tensor(math.log(sigma), dtype=torch.float64)
        profile = PenaltyProfile(objective, train, gaussian_block(Z, Z, log_sigma), val)
        row = profile.values(torch.tensor(10**log_penalties)).numpy()
        values.append(np.where(np.isfinite(row), row, np.nan))
        valley.append(math.log10(profile.best(low, high)[0]))
    return {
        "log10_sigma": log_sigmas.tolist(),
        "log10_penalty": log_penalties.tolist(),
        "values": np.array(values).tolist(),
        "objective": objective,
        "rows": int(len(rows)),
        "M": int(Z.shape[0]),
        "best_log10_penalty": valley,
    }

"""Input checks shared by every leverage-score entry point (float64 data, kernel, λ, seeds, point sets)."""

from __future__ import annotations

import numpy as np
import torch

from .._validation import check_int, check_positive
from ..kernels import Kernel
from ..rows import rows_of


def _check_kernel(kernel) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise ValueError(f"kernel must be a krrcore.kernels.Kernel, got {type(kernel).__name__}")
    return kernel


def _as_float64(X) -> torch.Tensor:
    """Leverage scores are computed in float64 whatever the data dtype (cancellation in Eq. 3).
    Rows kept elsewhere stay there, cast where they are (:mod:`krrcore.rows`)."""
    return rows_of(X).float64(X)


def _generator(seed) -> torch.Generator:
    """A CPU generator from an int seed, or the given generator (used as is)."""
    if isinstance(seed, torch.Generator):
        return seed
    seed = check_int(seed, "seed", minimum=0)
    if seed > 2**63 - 1:
        raise ValueError(f"seed must be an integer in [0, 2**63 - 1], got {seed}")
    return torch.Generator().manual_seed(seed)


def _kernel_scale(kernel: Kernel, X: torch.Tensor) -> float:
    """κ² = max_i K(x_i, x_i): ℓ(i, λ) ≤ K_ii/(λn) ≤ κ²/(λn), so d_eff(λ) ≤ κ²/λ."""
    kappa2 = rows_of(X).max_kernel_diag(X, kernel)
    if not kappa2 > 0:
        raise ValueError("kernel is zero on the diagonal of X: leverage scores are undefined")
    return kappa2


#: λn below this many times float64's round-off of κ² leaves Eq. (3) to round-off: refused.
ROUND_OFF_FACTOR = 100.0


def _check_sampling_penalty(penalty, kappa2: float, n: int | None = None) -> float:
    lam = check_positive(penalty, "penalty")
    floor = ROUND_OFF_FACTOR * torch.finfo(torch.float64).eps * kappa2
    if n is not None and lam * n < floor:
        raise ValueError(
            f"penalty={lam:g} is below what float64 resolves against the kernel scale κ² = {kappa2:g} (λn = "
            f"{lam * n:.3g} < {floor:.3g}, {ROUND_OFF_FACTOR:g}·eps·κ²): Eq. (3) divides round-off by λn there, "
            f"and every score is 1 to working precision; choose penalty >= {floor / n:.2g}"
        )
    if lam >= kappa2:
        raise ValueError(
            f"penalty={lam:g} is not below the kernel scale κ² = max K(x,x) = {kappa2:g}: then every "
            f"leverage score is at most κ²/(λn) ≤ 1/n and d_eff(λ) ≤ κ²/λ ≤ 1, so there is nothing to "
            f"sample; choose penalty < {kappa2:g}"
        )
    return lam


def _sampler_inputs(X, kernel, penalty, points):
    """Checks shared by every sampler, done before any work: (kernel, X64, κ², λ, point indices)."""
    kernel = _check_kernel(kernel)
    X = _as_float64(X)
    kappa2 = _kernel_scale(kernel, X)
    lam = _check_sampling_penalty(penalty, kappa2, X.shape[0])
    point_idx = None if points is None else _index_tensor(points, X.shape[0], X.device)
    return kernel, X, kappa2, lam, point_idx


def _index_tensor(points, n: int, device) -> torch.Tensor:
    """``points``: None or "all" (every row), or integer indices into X."""
    if points is None or (isinstance(points, str) and points == "all"):
        return torch.arange(n, device=device)
    if isinstance(points, str):
        raise ValueError(f"points must be 'all', None or integer indices, got {points!r}")
    idx = torch.as_tensor(np.asarray(points) if not isinstance(points, torch.Tensor) else points)
    if idx.numel() == 0:
        raise ValueError("points is empty: ask for at least one point")
    if idx.dtype == torch.bool:
        raise ValueError("points must be integer indices, not a boolean mask (use mask.nonzero())")
    if idx.is_floating_point() or idx.is_complex():
        raise ValueError(f"points must be integer indices into X, got dtype {idx.dtype}")
    idx = idx.reshape(-1).to(device=device, dtype=torch.int64)
    if int(idx.min()) < 0 or int(idx.max()) >= n:
        raise ValueError(
            f"points must lie in [0, {n}) (X has n={n} rows), got range [{int(idx.min())}, {int(idx.max())}]"
        )
    return idx

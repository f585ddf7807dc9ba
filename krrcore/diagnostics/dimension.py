"""The effective dimension d_eff(λ) = Tr K(K + λnI)⁻¹ = Σ s_i/(s_i + λn) (BLESS paper Eq. 1): how many
centres M a problem needs, exact or estimated from a Nyström approximation of K's spectrum."""

from __future__ import annotations

import math

import numpy as np
import torch

from .._validation import as_tensor, check_int
from ..ops import KernelOperator
from .spectra import kernel_eigenvalues


def effective_dimension(eigenvalues_K: torch.Tensor, n: int, penalties) -> torch.Tensor:
    """d_eff(λ) = Σ_i s_i/(s_i + λn) from eigenvalues s of K, for each λ (BLESS Eq. 1)."""
    s = eigenvalues_K.double().clamp_min(0)
    lam = torch.as_tensor(penalties, dtype=torch.float64).reshape(-1, 1)
    return (s.unsqueeze(0) / (s.unsqueeze(0) + lam * n)).sum(1)


def nystrom_kernel_eigenvalues(kernel, X, M: int, *, seed: int = 0, memory_budget: int | None = None) -> torch.Tensor:
    """Eigenvalues of the Nyström approximation K_nM K_MM⁺ K_Mn (M uniform centres): a cheap,
    downward-biased estimate of K's top spectrum for d_eff when n is too large for ``eigh``."""
    X = as_tensor(X, "X", dtype=torch.float64)
    M = min(check_int(M, "M"), X.shape[0])
    g = torch.Generator().manual_seed(int(seed))
    C = X[torch.randperm(X.shape[0], generator=g, device="cpu")[:M].to(X.device)]
    s, U = torch.linalg.eigh(kernel(C, C))
    keep = s > s.max() * 1e-12
    R = U[:, keep] / torch.sqrt(s[keep])  # K_MM^{-1/2} on its range
    G = KernelOperator(kernel, X, C, memory_budget=memory_budget).gram()
    return torch.linalg.eigvalsh(R.T @ G @ R).clamp_min(0)


def effective_dimension_curve(
    kernel, X, penalties, *, seed: int = 0, exact_max_n: int = 1500, nystrom_M: int = 1000, kernel_spectrum=None
):
    """d_eff(λ) for each λ in ``penalties``: a DataFrame (penalty, d_eff, method).

    Exact eigenvalues of K up to ``exact_max_n`` points (``kernel_spectrum`` if the caller has an
    exact one); above, the eigenvalues of a Nyström approximation with ``nystrom_M`` uniform centres,
    which gives a lower bound (its ``method`` says so).
    """
    import pandas as pd

    X = as_tensor(X, "X", dtype=torch.float64)
    n = X.shape[0]
    if n <= exact_max_n:
        if kernel_spectrum is None or kernel_spectrum.method != "exact":
            kernel_spectrum = kernel_eigenvalues(kernel, X, exact_max_n=exact_max_n)
        s, method = kernel_spectrum.eigenvalues, "exact"
    else:
        M = min(nystrom_M, n)
        s, method = nystrom_kernel_eigenvalues(kernel, X, M, seed=seed), f"Nyström estimate (M = {M}, lower bound)"
    d = effective_dimension(s, n, list(penalties)).cpu().numpy()
    return pd.DataFrame({"penalty": list(penalties), "d_eff": d, "method": method})


def interpolate_deff(curve, penalty: float) -> float:
    """d_eff at ``penalty`` by log-log interpolation of a computed curve (it is smooth and monotone)."""
    x = np.log(curve["penalty"].to_numpy())
    y = np.log(np.clip(curve["d_eff"].to_numpy(), 1e-300, None))
    order = np.argsort(x)
    return float(np.exp(np.interp(math.log(penalty), x[order], y[order])))

"""Condition numbers, spectra and effective dimensions: the numbers behind the paper's story.

* Nyström system H̃ = K_nMᵀK_nM/n + λK_MM (FALKON paper Eq. 8, scaled by 1/n) and FALKON's
  preconditioned system W = Pᵀ H̃ P, P = D T⁻¹A⁻¹ (Def. 4): cond(H̃) is typically 10⁶–10¹⁰,
  cond(W) a small constant once M ≳ d_eff (Lemma/Thm. 1–2).
* Full KRR: K + λnI (cond ≤ 1 + λ_max(K)/(λn)).
* d_eff(λ) = Tr K(K + λnI)⁻¹ (BLESS paper Eq. 1): how many centres M a problem needs.

Small problems use dense eigenvalues ("exact"); large ones Lanczos extreme-eigenvalue estimates
("lanczos", k steps), and every result says which, so a page can label estimates as such.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ._validation import as_tensor, check_int, check_positive
from .center_set import CenterSet
from .linalg import lanczos_ritz_values  # noqa: F401 (public here: the diagnostics API)
from .ops import KernelOperator
from .preconditioner import FalkonPreconditioner


@dataclass
class Spectrum:
    """Eigenvalues (ascending, float64) or Lanczos Ritz values of one symmetric system."""

    name: str
    eigenvalues: torch.Tensor
    method: str                   # "exact" or "lanczos (k steps)"

    @property
    def condition_number(self) -> float:
        lo = float(self.eigenvalues.min())
        hi = float(self.eigenvalues.max())
        if lo <= 0:
            return float("inf")
        return hi / lo

    def as_dict(self) -> dict:
        return {"name": self.name, "method": self.method, "condition_number": self.condition_number,
                "lambda_min": float(self.eigenvalues.min()), "lambda_max": float(self.eigenvalues.max())}


def nystrom_spectra(kernel, X, centers, penalty: float, *, weights=None, exact_max_M: int = 1500,
                    lanczos_steps: int = 40, memory_budget: int | None = None, seed: int = 0,
                    gram: torch.Tensor | None = None) -> dict[str, Spectrum]:
    """Spectra of H̃ (unpreconditioned Nyström system) and W = PᵀH̃P (FALKON's), float64.

    ``centers`` is an M×d array or a :class:`CenterSet` (its weights give D). ``gram`` may pass a
    precomputed K_nMᵀK_nM (it does not depend on λ), so a sweep over λ costs one kernel pass.
    """
    X = as_tensor(X, "X", dtype=torch.float64)
    if isinstance(centers, CenterSet):
        weights = centers.weights if weights is None else weights
        centers = centers.centers
    C = as_tensor(centers, "centers", dtype=torch.float64, device=X.device)
    lam = check_positive(penalty, "penalty")
    n, M = X.shape[0], C.shape[0]
    op = KernelOperator(kernel, X, C, memory_budget=memory_budget)
    K_MM = kernel(C, C)
    pc = FalkonPreconditioner(kernel, C, lam, weights=weights, data_dtype=torch.float64)
    if M <= exact_max_M:
        H = (op.gram() if gram is None else gram.double()) / n + lam * K_MM
        P = pc.apply(torch.eye(M, dtype=torch.float64, device=X.device))
        W = P.T @ H @ P
        W = (W + W.T) / 2
        return {"nystrom": Spectrum("H̃ = K_nMᵀK_nM/n + λK_MM", torch.linalg.eigvalsh((H + H.T) / 2), "exact"),
                "falkon": Spectrum("W = Pᵀ H̃ P (FALKON)", torch.linalg.eigvalsh(W), "exact")}

    def H_mv(v):
        return op.fused(v) / n + lam * (K_MM @ v)

    def W_mv(v):
        return pc.apply_t(H_mv(pc.apply(v)))

    method = f"lanczos ({lanczos_steps} steps)"
    return {"nystrom": Spectrum("H̃ = K_nMᵀK_nM/n + λK_MM",
                                lanczos_ritz_values(H_mv, M, steps=lanczos_steps, device=X.device, seed=seed), method),
            "falkon": Spectrum("W = Pᵀ H̃ P (FALKON)",
                               lanczos_ritz_values(W_mv, M, steps=lanczos_steps, device=X.device, seed=seed), method)}


def kernel_eigenvalues(kernel, X, *, exact_max_n: int = 4000, lanczos_steps: int = 60,
                       memory_budget: int | None = None, seed: int = 0) -> Spectrum:
    """Eigenvalues of K_nn (exact up to ``exact_max_n`` points, else Lanczos on blocked products).

    Lanczos returns only ``lanczos_steps`` Ritz values: right for λ_min/λ_max and condition
    numbers, wrong for sums over the spectrum — use :func:`nystrom_kernel_eigenvalues` for d_eff.
    """
    X = as_tensor(X, "X", dtype=torch.float64)
    n = X.shape[0]
    if n <= exact_max_n:
        K = kernel(X, X)
        return Spectrum("K", torch.linalg.eigvalsh((K + K.T) / 2).clamp_min(0), "exact")
    op = KernelOperator(kernel, X, X, memory_budget=memory_budget)
    ritz = lanczos_ritz_values(op.matvec, n, steps=lanczos_steps, device=X.device, seed=seed)
    return Spectrum("K", ritz.clamp_min(0), f"lanczos ({lanczos_steps} steps)")


def full_krr_spectrum(kernel, X, penalty: float, **kwargs) -> Spectrum:
    """Spectrum of K + λnI from that of K."""
    lam = check_positive(penalty, "penalty")
    K = kernel_eigenvalues(kernel, X, **kwargs)
    n = as_tensor(X, "X").shape[0]
    return Spectrum("K + λnI", K.eigenvalues + lam * n, K.method)


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
    C = X[torch.randperm(X.shape[0], generator=g)[:M].to(X.device)]
    s, U = torch.linalg.eigh(kernel(C, C))
    keep = s > s.max() * 1e-12
    R = U[:, keep] / torch.sqrt(s[keep])                    # K_MM^{-1/2} on its range
    G = KernelOperator(kernel, X, C, memory_budget=memory_budget).gram()
    return torch.linalg.eigvalsh(R.T @ G @ R).clamp_min(0)

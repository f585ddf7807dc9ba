"""Spectra and condition numbers of the systems the solvers face, alone and swept over λ and M.

* Nyström system H̃ = K_nMᵀK_nM/n + λK_MM (FALKON paper Eq. 8, scaled by 1/n) and FALKON's
  preconditioned system W = Pᵀ H̃ P, P = D T⁻¹A⁻¹ (Def. 4): cond(H̃) is typically 10⁶–10¹⁰,
  cond(W) a small constant once M ≳ d_eff (Lemma/Thm. 1–2).
* Full KRR: K + λnI (cond ≤ 1 + λ_max(K)/(λn)).

Small problems use dense eigenvalues ("exact"); large ones Lanczos extreme-eigenvalue estimates
("lanczos", k steps), and every result says which, so a page can label estimates as such.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validation import as_tensor, check_positive
from ..center_set import CenterSet
from ..centers import select_centers
from ..linalg import lanczos_ritz_values
from ..ops import KernelOperator
from ..preconditioner import FalkonPreconditioner
from .blocks import askotch_blocks

#: Display names of the systems, in the order the Conditioning page compares them (the ``system``
#: column of :func:`condition_vs_penalty` and :func:`condition_vs_M`).
SYSTEMS = {
    "full": "K + λnI (exact KRR)",
    "nystrom": "H̃ (Nyström, Eq. 8)",
    "falkon": "W = BᵀHB (FALKON, Eq. 13)",
    "askotch": "ASkotch block, Nyström-preconditioned (worst of B)",
}


@dataclass
class Spectrum:
    """Eigenvalues (ascending, float64) or Lanczos Ritz values of one symmetric system."""

    name: str
    eigenvalues: torch.Tensor
    method: str  # "exact" or "lanczos (k steps)"

    @classmethod
    def from_values(cls, name: str, eigenvalues, method: str) -> "Spectrum":
        """A spectrum from plain numbers (e.g. a cached numpy array), as float64."""
        return cls(name, torch.as_tensor(eigenvalues, dtype=torch.float64), method)

    @property
    def condition_number(self) -> float:
        lo = float(self.eigenvalues.min())
        hi = float(self.eigenvalues.max())
        if lo <= 0:
            return float("inf")
        return hi / lo

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "method": self.method,
            "condition_number": self.condition_number,
            "lambda_min": float(self.eigenvalues.min()),
            "lambda_max": float(self.eigenvalues.max()),
        }


def nystrom_spectra(
    kernel,
    X,
    centers,
    penalty: float,
    *,
    weights=None,
    exact_max_M: int = 1500,
    lanczos_steps: int = 40,
    memory_budget: int | None = None,
    seed: int = 0,
    gram: torch.Tensor | None = None,
) -> dict[str, Spectrum]:
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
        return {
            "nystrom": Spectrum("H̃ = K_nMᵀK_nM/n + λK_MM", torch.linalg.eigvalsh((H + H.T) / 2), "exact"),
            "falkon": Spectrum("W = Pᵀ H̃ P (FALKON)", torch.linalg.eigvalsh(W), "exact"),
        }

    def H_mv(v):
        return op.fused(v) / n + lam * (K_MM @ v)

    def W_mv(v):
        return pc.apply_t(H_mv(pc.apply(v)))

    method = f"lanczos ({lanczos_steps} steps)"
    return {
        "nystrom": Spectrum(
            "H̃ = K_nMᵀK_nM/n + λK_MM",
            lanczos_ritz_values(H_mv, M, steps=lanczos_steps, device=X.device, seed=seed),
            method,
        ),
        "falkon": Spectrum(
            "W = Pᵀ H̃ P (FALKON)", lanczos_ritz_values(W_mv, M, steps=lanczos_steps, device=X.device, seed=seed), method
        ),
    }


def kernel_eigenvalues(
    kernel, X, *, exact_max_n: int = 4000, lanczos_steps: int = 60, memory_budget: int | None = None, seed: int = 0
) -> Spectrum:
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
    return shifted_spectrum(kernel_eigenvalues(kernel, X, **kwargs), as_tensor(X, "X").shape[0], penalty)


def shifted_spectrum(kernel_spectrum: Spectrum, n: int, penalty: float) -> Spectrum:
    """K + λnI from a spectrum of K (clipped at 0): κ = (s_max + λn)/(s_min + λn), with K's method."""
    lam = check_positive(penalty, "penalty")
    return Spectrum("K + λnI", kernel_spectrum.eigenvalues.double().clamp_min(0) + lam * n, kernel_spectrum.method)


def spectrum_summary(spectrum: Spectrum) -> dict:
    """Plain numbers of a spectrum: eigenvalues (numpy), κ, λ_min, λ_max, size and method."""
    ev = spectrum.eigenvalues.double()
    return {
        "eigenvalues": ev.cpu().numpy(),
        "method": spectrum.method,
        "condition_number": spectrum.condition_number,
        "lambda_min": float(ev.min()),
        "lambda_max": float(ev.max()),
        "size": int(ev.numel()),
    }


def condition_vs_penalty(
    kernel,
    X,
    penalties,
    *,
    M: int,
    seed: int = 0,
    blocks: int | None = None,
    rank: int | None = None,
    kernel_spectrum: Spectrum | None = None,
    exact_max_n: int = 1500,
    exact_max_M: int = 800,
    exact_max_block: int = 1200,
    lanczos_steps: int = 60,
):
    """κ of every system for each λ in ``penalties``: a DataFrame (penalty, system, condition_number, method).

    K + λnI from one spectrum of K (``kernel_spectrum`` if the caller has it); H̃ and W at M uniform
    centres sharing one K_nMᵀK_nM for every λ; with ``blocks``, ASkotch's worst preconditioned block
    (the worst block limits the step sizes), from ASkotch's own set-up at each λ
    (:func:`krrcore.diagnostics.askotch_blocks`).
    """
    import pandas as pd

    X = as_tensor(X, "X", dtype=torch.float64)
    n = X.shape[0]
    if kernel_spectrum is None:
        kernel_spectrum = kernel_eigenvalues(kernel, X, exact_max_n=exact_max_n, lanczos_steps=lanczos_steps, seed=seed)
    centers = select_centers("uniform", X, M, seed)
    gram = KernelOperator(kernel, X, centers.centers).gram() if centers.M <= exact_max_M else None
    rows = []
    for lam in penalties:
        full = shifted_spectrum(kernel_spectrum, n, lam)
        rows.append(
            {
                "penalty": lam,
                "system": SYSTEMS["full"],
                "condition_number": full.condition_number,
                "method": full.method,
            }
        )
        spectra = nystrom_spectra(
            kernel, X, centers, lam, exact_max_M=exact_max_M, lanczos_steps=lanczos_steps, seed=seed, gram=gram
        )
        for key, spectrum in spectra.items():
            rows.append(
                {
                    "penalty": lam,
                    "system": SYSTEMS[key],
                    "condition_number": spectrum.condition_number,
                    "method": spectrum.method,
                }
            )
        if blocks:
            table, _ = askotch_blocks(
                kernel,
                X,
                lam,
                blocks,
                rank,
                seed=seed,
                exact_max_block=exact_max_block,
                lanczos_steps=lanczos_steps,
                whole=False,
            )
            rows.append(
                {
                    "penalty": lam,
                    "system": SYSTEMS["askotch"],
                    "condition_number": float(table["kappa_preconditioned"].max()),
                    "method": str(table["method"].iloc[0]),
                }
            )
    return pd.DataFrame(rows)


def condition_vs_M(kernel, X, penalty: float, Ms, *, seed: int = 0, exact_max_M: int = 800, lanczos_steps: int = 60):
    """κ(H̃) and κ(W) for each number of uniform centres M: a DataFrame (M, system, condition_number, method)."""
    import pandas as pd

    X = as_tensor(X, "X", dtype=torch.float64)
    rows = []
    for M in Ms:
        centers = select_centers("uniform", X, int(M), seed)
        spectra = nystrom_spectra(
            kernel, X, centers, penalty, exact_max_M=exact_max_M, lanczos_steps=lanczos_steps, seed=seed
        )
        for key, spectrum in spectra.items():
            rows.append(
                {
                    "M": int(M),
                    "system": SYSTEMS[key],
                    "condition_number": spectrum.condition_number,
                    "method": spectrum.method,
                }
            )
    return pd.DataFrame(rows)

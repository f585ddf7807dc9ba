"""Randomized Nyström approximation and the preconditioner built from it (ASkotch paper, App. B).

One implementation shared by NyströmPCG (preconditioner of K), ASkotch/Skotch (one per block
K_bb) and SketchySAGA (of a subsampled Hessian (n/b_H)K_HMᵀK_HM):

* :func:`randomized_nystrom` — Alg. 2: M̂ = Û diag(Λ̂) Ûᵀ from a sketch MΩ, never forming M̂;
  M itself may be given only as a product ``apply(Ω) = MΩ`` (matrix-free).
* :class:`NystromPreconditioner` — (M̂ + ρI)⁻¹ applied by the Cholesky-stabilised Woodbury form
  of B.2.1 (reliable in float32, where ÛᵀÛ ≠ I), and (M̂ + ρI)^{-1/2} by Eq. (10).
* :func:`get_L` — Alg. 3: preconditioned smoothness constant λ₁((P+ρI)^{-1/2} H (P+ρI)^{-1/2})
  by 10 steps of randomized powering.
* :func:`get_mu` — its counterpart at the other end of the spectrum: the strong-convexity constant
  μ_Pβ of App. D over a block-diagonal preconditioner, by Lanczos (a diagnostic: what Theorem 5.1's
  rate depends on).
* :func:`resolve_damping` — ρ from the paper's damping rules (Sec. 3.2 defaults).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from ._validation import check_int, check_positive
from .linalg import jitter_cholesky, lanczos_ritz_values, solve_lower

#: Matrix-free access to a symmetric PSD matrix: V (p×k) -> M V (p×k).
MatMul = Callable[[torch.Tensor], torch.Tensor]

#: Power iterations in get_L; B.3: "10 iterations of randomized powering are enough".
GET_L_ITERATIONS = 10
#: Lanczos steps of :func:`get_mu`. At n = 600 (B = 6): 1.06–1.4× the exact μ_P on well-conditioned
#: problems, but 60× on an ill-conditioned one (Gaussian, λn = 6e-3), whose B − 1 smallest
#: eigenvalues need ~160 steps.
GET_MU_STEPS = 20


@dataclass
class NystromApproximation:
    """M̂ = U diag(eigvals) Uᵀ (Alg. 2 output); eigenvalues descending, clipped at 0.

    ``shift`` is ν of Alg. 2 (plus any extra jitter the Cholesky needed), reported for
    diagnostics. ``rank`` is the sketch size r asked for; ``eigvals`` keeps all r values.
    """

    U: torch.Tensor  # (p, r), approximately orthonormal columns
    eigvals: torch.Tensor  # (r,), descending, >= 0
    shift: float

    @property
    def smallest_eigval(self) -> float:
        """Λ̂[r−1], the smallest retained eigenvalue: the "damped" ρ adds it (Sec. 3.2)."""
        return float(self.eigvals[-1])


def gaussian_test_matrix(p: int, r: int, *, generator: torch.Generator, dtype, device) -> torch.Tensor:
    """Alg. 2 lines 1–2: Ω = thin_qr(randn(p, r)) (drawn on the CPU generator for reproducibility)."""
    omega = torch.randn(p, r, generator=generator, dtype=dtype, device="cpu")
    return torch.linalg.qr(omega.to(device), mode="reduced")[0]


def randomized_nystrom(
    apply: MatMul, p: int, rank: int, trace: float, *, generator: torch.Generator, dtype: torch.dtype, device
) -> NystromApproximation:
    """Randomized Nyström approximation of a p×p PSD matrix M (ASkotch paper Alg. 2, after [50, Alg. 3]).

    ``apply(Ω)`` returns MΩ; ``trace`` is Tr(M), which sets the stabilising shift
    ν = eps(dtype)·Tr(M). Steps: Y = (M + νI)Ω; C = chol(ΩᵀY); B = Y C⁻ᵀ; [Û, Σ] = svd(B);
    Λ̂ = max(Σ² − ν, 0). Cost O(cost(MΩ) + p r²), storage O(p r).

    If ΩᵀY is not numerically positive definite (possible in float32 when M has fewer than r
    significant eigenvalues), the shift is raised until the Cholesky succeeds; the larger shift is
    removed from the eigenvalues again, so M̂ stays an approximation of M.
    """
    rank = check_int(rank, "rank")
    if rank > p:
        raise ValueError(f"rank must be <= the size of the matrix it approximates ({p}), got {rank}")
    if not math.isfinite(trace) or trace < 0:
        raise ValueError(f"trace of a PSD matrix must be finite and >= 0, got {trace}")
    omega = gaussian_test_matrix(p, rank, generator=generator, dtype=dtype, device=device)
    shift = torch.finfo(dtype).eps * trace
    Y = apply(omega)
    Y.add_(omega, alpha=shift)
    core = omega.T @ Y
    core = 0.5 * (core + core.T)  # symmetric up to round-off; Cholesky reads one triangle only
    C, info = torch.linalg.cholesky_ex(core)
    if int(info) != 0:
        # Extra jitter Δ·I on ΩᵀY equals a shift of M by Δ (ΩᵀΩ = I), so Y gets Δ·Ω too.
        base = max(shift, torch.finfo(dtype).eps * float(core.diagonal().abs().max()), torch.finfo(dtype).tiny)
        C, extra = jitter_cholesky(core, 10 * base, name="ΩᵀMΩ of the Nyström sketch")
        Y.add_(omega, alpha=extra)
        shift += extra
    B = solve_lower(C, Y.T).T  # B = Y C⁻ᵀ
    U, sigma, _ = torch.linalg.svd(B, full_matrices=False)
    eigvals = (sigma * sigma - shift).clamp_min(0.0)
    return NystromApproximation(U=U, eigvals=eigvals, shift=shift)


def resolve_damping(damping, approx: NystromApproximation | None, lam: float) -> float:
    """Preconditioner damping ρ (ASkotch paper Sec. 3.2 and B.4 defaults).

    * ``"damped"`` (default): ρ = λ + Λ̂[r−1], the ridge plus the smallest retained eigenvalue;
    * ``"regularization"``: ρ = λ;
    * a positive number: ρ itself, on the scale of the system being preconditioned.

    ``lam`` is the paper's λ, i.e. λn in krrcore's per-sample ``penalty`` convention.
    """
    if isinstance(damping, str):
        if damping == "damped":
            return lam + (approx.smallest_eigval if approx is not None else 0.0)
        if damping == "regularization":
            return lam
        raise ValueError(f"damping must be 'damped', 'regularization' or a positive number, got {damping!r}")
    return check_positive(damping, "damping")


class NystromPreconditioner:
    """(P + ρI)⁻¹ with P = U diag(Λ̂) Uᵀ from :func:`randomized_nystrom` (ASkotch paper B.2.1).

    :meth:`solve` uses the Cholesky-stabilised Woodbury form
    (P + ρI)⁻¹g = (g − U L⁻ᵀ L⁻¹ Uᵀ g)/ρ with L Lᵀ = ρ diag(Λ̂⁻¹) + UᵀU, which is the exact
    inverse for the U actually computed, so it stays reliable in float32 where UᵀU ≠ I.
    Directions with Λ̂ᵢ = 0 are dropped (they add nothing to P; ρ/0 would break the Cholesky).
    :meth:`inv_sqrt` applies (P + ρI)^{-1/2} by Eq. (10), which assumes UᵀU = I; the paper
    reports it works in single precision for get_L.
    """

    def __init__(self, approx: NystromApproximation, rho: float):
        self.rho = check_positive(rho, "damping rho")
        keep = approx.eigvals > 0
        self.U = approx.U[:, keep]
        self.eigvals = approx.eigvals[keep]
        self.approx = approx
        if self.eigvals.numel():
            core = self.U.T @ self.U
            core.diagonal().add_(self.rho / self.eigvals)
            self._L, _ = jitter_cholesky(core, 0.0, name="ρΛ̂⁻¹ + ÛᵀÛ")
        else:
            self._L = None

    @property
    def rank(self) -> int:
        """Number of directions the preconditioner acts on (positive Nyström eigenvalues)."""
        return int(self.eigvals.numel())

    @property
    def largest_eigval(self) -> float:
        """λ₁(P + ρI) = Λ̂[0] + ρ."""
        return (float(self.eigvals[0]) if self.eigvals.numel() else 0.0) + self.rho

    def solve(self, G: torch.Tensor) -> torch.Tensor:
        """(P + ρI)⁻¹ G for G of shape (p,) or (p, k) (B.2.1, Cholesky form)."""
        if self._L is None:
            return G / self.rho
        inner = solve_lower(self._L, self.U.T @ G)
        inner = solve_lower(self._L, inner, transpose=True)
        return (G - self.U @ inner) / self.rho

    def inv_sqrt(self, V: torch.Tensor) -> torch.Tensor:
        """(P + ρI)^{-1/2} V by Eq. (10): U (Λ̂+ρ)^{-1/2} UᵀV + (V − U UᵀV)/√ρ."""
        if self._L is None:
            return V / math.sqrt(self.rho)
        UtV = self.U.T @ V
        scale = (self.eigvals + self.rho).rsqrt()
        scale = scale if V.ndim == 1 else scale[:, None]
        return self.U @ (scale * UtV) + (V - self.U @ UtV) / math.sqrt(self.rho)


def get_L(
    apply_H: MatMul,
    p: int,
    preconditioner: NystromPreconditioner | None,
    *,
    generator: torch.Generator,
    dtype: torch.dtype,
    device,
    iterations: int = GET_L_ITERATIONS,
) -> float:
    """Preconditioned smoothness constant L_P = λ₁((P+ρI)^{-1/2} H (P+ρI)^{-1/2}) (Alg. 3, Eq. 11).

    Randomized powering from a random unit vector; ``preconditioner=None`` gives λ₁(H) (the
    unpreconditioned smoothness constant L_b of NU_ACDM). The estimate is the Rayleigh quotient
    v_{T−1}ᵀ A v_{T−1} of the last normalised iterate (Alg. 3's "(v^{T−1})ᵀ v^T" read with v^T
    taken before its normalisation, which is what makes it an eigenvalue estimate).
    """
    iterations = check_int(iterations, "iterations")

    def apply_A(v: torch.Tensor) -> torch.Tensor:
        if preconditioner is None:
            return apply_H(v[:, None])[:, 0]
        u = preconditioner.inv_sqrt(v)
        return preconditioner.inv_sqrt(apply_H(u[:, None])[:, 0])

    v = torch.randn(p, generator=generator, dtype=dtype, device="cpu").to(device)
    v /= torch.linalg.vector_norm(v)
    estimate = 0.0
    for _ in range(iterations):
        Av = apply_A(v)
        estimate = float(v @ Av)
        norm = torch.linalg.vector_norm(Av)
        if float(norm) == 0.0:
            return 0.0
        v = Av / norm
    return estimate


def get_mu(
    apply_H: MatMul,
    n: int,
    blocks,
    preconditioners,
    weights,
    *,
    dtype: torch.dtype,
    device,
    seed: int = 0,
    steps: int = GET_MU_STEPS,
) -> float:
    """Strong-convexity constant μ_Pβ = λ_min(P_β^{-1/2} H P_β^{-1/2}) for H = K + λI (n×n).

    P_β = blkdiag(w_b (P_b + ρ_b I)) over the index sets ``blocks`` is the norm of ASkotch's App. D.1,
    ‖v‖²_Pβ = Σ_b L_Pb^β ‖v_b‖²_{P_b+ρ_bI} (``weights`` w_b = L_Pb^β); a ``None`` preconditioner
    stands for P_b + ρ_bI = I, so with no preconditioners this is λ_min(H), NU_ACDM's μ.

    ``steps`` Lanczos steps from a random start, one product with H each. The smallest Ritz value
    approaches λ_min from above, so this is an estimate, not a bound, and a poor one when the
    bottom of the spectrum is a tight cluster (see :data:`GET_MU_STEPS`); ASkotch therefore takes
    its μ from λ_min(H) instead (:meth:`krrcore.ASkotch._strong_convexity`).
    """
    scales = [1.0 / math.sqrt(float(w)) for w in weights]

    def inv_sqrt(V: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(V)
        for idx, pc, scale in zip(blocks, preconditioners, scales):
            block = V[idx]
            out[idx] = (pc.inv_sqrt(block) if pc is not None else block) * scale
        return out

    ritz = lanczos_ritz_values(
        lambda V: inv_sqrt(apply_H(inv_sqrt(V))), n, steps=steps, dtype=dtype, device=device, seed=seed
    )
    return float(ritz[0])

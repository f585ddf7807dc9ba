"""ASkotch's blocks: how well each Nyström-preconditioned block is conditioned, and what the whole
partition adds up to (ASkotch paper Alg. 1–3, Eq. 11, Theorem 5.1, App. D).

Everything comes from ASkotch's own set-up — :class:`~krrcore.solvers.askotch.ASkotch` fitted with
``maxiter=0`` and ``cache_preconditioners=True`` — so the partition, the rank-r randomized Nyström
approximations P_b, the damping ρ_b and L_Pb (get_L) are exactly the ones the solver with this
seed uses; nothing here rebuilds a preconditioner or restates the damping rule.
"""

from __future__ import annotations

import math

import torch

from .._validation import as_tensor
from ..linalg import lanczos_ritz_values
from ..nystrom import GET_MU_STEPS, get_mu
from ..solvers.askotch import ASkotch


def _kappa(eigenvalues: torch.Tensor) -> float:
    """λ_max/λ_min; ∞ when round-off leaves λ_min ≤ 0 (a numerically singular system)."""
    lo = float(eigenvalues.min())
    return float(eigenvalues.max()) / lo if lo > 0 else math.inf


def askotch_partition(kernel, X, penalty: float, blocks: int, rank: int, *, seed: int = 0, damping="damped") -> ASkotch:
    """ASkotch after its set-up on X (float64): ``block_indices_``, ``block_preconditioners_``
    (P_b + ρ_bI), ``block_smoothness_`` (L_Pb by get_L). μ is taken as λ (no Lanczos): the
    diagnostics compute μ_P themselves."""
    X = as_tensor(X, "X", dtype=torch.float64)
    model = ASkotch(
        kernel,
        penalty,
        blocks=blocks,
        rank=rank,
        seed=seed,
        damping=damping,
        mu="lambda",
        maxiter=0,
        variant="alg1",
        cache_preconditioners=True,
        residual="estimate",
        dtype="float64",
        device=X.device,
    )
    return model.fit(X, torch.ones(X.shape[0], dtype=torch.float64, device=X.device))


def _block_row(
    K_bb: torch.Tensor, lam_n: float, precond, L_P: float, *, exact_max_block: int, lanczos_steps: int, seed: int
) -> dict:
    """κ(K_bb + λnI) and κ of (P_b + ρI)^{-1/2}(K_bb + λnI)(P_b + ρI)^{-1/2}, L_b, L_P and exact λ_max."""
    p = K_bb.shape[0]

    def H_mv(V):
        return K_bb @ V + lam_n * V

    if p <= exact_max_block:
        method = "exact"
        eig_H = torch.linalg.eigvalsh(K_bb).clamp_min(0) + lam_n
        S = precond.inv_sqrt(torch.eye(p, dtype=torch.float64, device=K_bb.device))
        A = S @ H_mv(S)
        eig_A = torch.linalg.eigvalsh((A + A.T) / 2)
    else:
        method = f"lanczos ({lanczos_steps} steps)"
        eig_H = lanczos_ritz_values(H_mv, p, steps=lanczos_steps, device=K_bb.device, seed=seed)
        eig_A = lanczos_ritz_values(
            lambda V: precond.inv_sqrt(H_mv(precond.inv_sqrt(V))), p, steps=lanczos_steps, device=K_bb.device, seed=seed
        )
    return {
        "size": p,
        "method": method,
        "kappa_block": _kappa(eig_H),
        "kappa_preconditioned": _kappa(eig_A),
        "L_b": float(eig_H.max()),
        "L_P (get_L)": L_P,
        "lambda_max_preconditioned": float(eig_A.max()),
        "rho": precond.rho,
    }


def askotch_blocks(
    kernel,
    X,
    penalty: float,
    blocks: int,
    rank: int,
    *,
    seed: int = 0,
    damping="damped",
    exact_max_block: int = 1200,
    exact_max_n: int = 1500,
    lanczos_steps: int = 60,
    whole: bool = True,
):
    """(table, whole) for ASkotch's partition of X into ``blocks`` blocks at rank ``rank``.

    ``table``: a DataFrame, one row per block b — size, κ(K_bb + λnI), κ of the preconditioned block,
    L_b = λ₁(K_bb + λnI), L_P from get_L (the solver's estimate), the exact λ_max of the
    preconditioned block, ρ_b and ``method`` ("exact" up to ``exact_max_block`` points, else Lanczos).
    ``whole`` (None when ``whole=False``): :func:`partition_constants`.
    """
    import pandas as pd

    X = as_tensor(X, "X", dtype=torch.float64)
    n = X.shape[0]
    model = askotch_partition(kernel, X, penalty, blocks, rank, seed=seed, damping=damping)
    lam_n = penalty * n
    rows = []
    for b, (idx, precond) in enumerate(zip(model.block_indices_, model.block_preconditioners_)):
        Xb = X[idx.to(X.device)]
        row = _block_row(
            kernel(Xb, Xb),
            lam_n,
            precond,
            float(model.block_smoothness_[b]),
            exact_max_block=exact_max_block,
            lanczos_steps=lanczos_steps,
            seed=seed + b,
        )
        rows.append({"block": b + 1, **row})
    table = pd.DataFrame(rows)
    constants = (
        partition_constants(kernel, X, penalty, model, table, exact_max_n=exact_max_n, seed=seed) if whole else None
    )
    return table, constants


def partition_constants(
    kernel, X, penalty: float, model: ASkotch, table, *, exact_max_n: int = 1500, seed: int = 0
) -> dict:
    """μ_P and Theorem 5.1's iteration factor, with and without Nyström, for one partition.

    μ_P = λ_min(P^{-1/2}(K + λnI)P^{-1/2}) over P = blkdiag(P_b + ρ_bI) (App. D) and λ_min(K + λnI),
    exact up to ``exact_max_n`` points, else by Lanczos (``get_mu``, from above — on ill-conditioned
    problems μ_P can be far below the estimate), and the accelerated iteration factor
    Σ_b √L_Pb / √μ_P (Thm. 5.1) against NU_ACDM's Σ_b √L_b / √λ_min(K + λnI), with L_Pb and L_b
    from ``table`` (:func:`askotch_blocks`).
    """
    X = as_tensor(X, "X", dtype=torch.float64)
    n = X.shape[0]
    lam_n = penalty * n
    parts = [idx.to(X.device) for idx in model.block_indices_]
    preconds = model.block_preconditioners_
    H = kernel(X, X)
    H.diagonal().add_(lam_n)
    if n <= exact_max_n:
        method = "exact"
        S = torch.zeros(n, n, dtype=torch.float64, device=X.device)
        for idx, pc in zip(parts, preconds):
            S[idx[:, None], idx[None, :]] = pc.inv_sqrt(torch.eye(idx.numel(), dtype=torch.float64, device=X.device))
        A = S @ H @ S
        mu_P = float(torch.linalg.eigvalsh((A + A.T) / 2)[0])
        mu = float(torch.linalg.eigvalsh(H)[0])
    else:
        method = f"lanczos ({GET_MU_STEPS} steps)"
        ones = [1.0] * len(parts)
        mu_P = get_mu(lambda V: H @ V, n, parts, preconds, ones, dtype=torch.float64, device=X.device, seed=seed)
        mu = get_mu(
            lambda V: H @ V, n, parts, [None] * len(parts), ones, dtype=torch.float64, device=X.device, seed=seed
        )

    def factor(L, m):  # round-off can leave a numerically singular system at a tiny λ
        return sum(math.sqrt(v) for v in L) / math.sqrt(m) if m > 0 else math.inf

    return {
        "mu_P": mu_P,
        "lambda_min": mu,
        "lam_n": lam_n,
        "method": method,
        "factor_preconditioned": factor(table["L_P (get_L)"], mu_P),
        "factor_plain": factor(table["L_b"], mu),
    }

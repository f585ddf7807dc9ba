"""Cached computations behind the Conditioning, Leverage scores and Dataset pages.

Every function here is keyed on plain parameters only: ``data_key`` (the page's hashable
:class:`~krr_app.config.DataSpec`, or any tuple that names the data), the kernel's registry name
and its parameters as a sorted tuple, and numbers. The training matrix itself passes through an
argument named ``_X`` so Streamlit never hashes it. Results are small (spectra of at most
:data:`MAX_ROWS` values, tables of a few dozen rows), which is what ``st.cache_data`` is for.

Sizes are bounded so a click never starts minutes of work: the pages look at a seeded random
subsample of at most :data:`MAX_ROWS` training points; below :data:`EXACT_MAX_N` points (and
:data:`EXACT_MAX_M` centres) spectra are exact ``eigh``, above they are Lanczos estimates and every
result carries a ``method`` saying which, so the pages can label estimates as such.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st
import torch

from krrcore.centers import select_centers
from krrcore.ops import KernelOperator
from krrcore.diagnostics import (effective_dimension, kernel_eigenvalues, lanczos_ritz_values,
                                 nystrom_kernel_eigenvalues, nystrom_spectra)
from krrcore.kernels import make_kernel

#: Training points the diagnostics look at (a seeded random subsample above this).
MAX_ROWS = 4000
#: Dense eigenvalues of K (n×n) up to this n; Lanczos extreme eigenvalues above.
EXACT_MAX_N = 1500
#: Dense eigenvalues of the M×M Nyström systems up to this M; Lanczos above.
EXACT_MAX_M = 800
#: Dense eigenvalues of an ASkotch block's systems up to this block size; Lanczos above.
EXACT_MAX_BLOCK = 1200
#: Training points the κ-against-λ and κ-against-M sweeps use (each grid point solves a new system).
SWEEP_MAX_ROWS = 1500
#: Centres of the κ-against-λ sweep at most (a dense M×M eigh per system and grid λ).
SWEEP_MAX_M = 400
#: Lanczos steps for every estimate on these pages.
LANCZOS_STEPS = 60
#: Centres of the Nyström estimate of K's spectrum used for d_eff when n > EXACT_MAX_N.
DEFF_NYSTROM_M = 1000
#: Entries each cached function keeps (all sessions together).
CACHE_ENTRIES = 32

#: Names of the systems the Conditioning page compares, in display order.
SYSTEMS = {
    "full": "K + λnI (exact KRR)",
    "nystrom": "H̃ (Nyström, Eq. 8)",
    "falkon": "W = BᵀHB (FALKON, Eq. 13)",
    "askotch": "ASkotch block, Nyström-preconditioned (worst of B)",
}


def kernel_from(kernel: str, kernel_params: tuple):
    return make_kernel(kernel, **dict(kernel_params))


def subsample(X, limit: int = MAX_ROWS, seed: int = 0) -> np.ndarray:
    """At most ``limit`` rows of X, drawn without replacement with a fixed seed (all rows if fewer)."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] <= limit:
        return X
    rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], size=limit, replace=False))
    return X[rows]


def _tensor(X) -> torch.Tensor:
    return torch.as_tensor(np.ascontiguousarray(X, dtype=np.float64))


def _spectrum_row(spectrum) -> dict:
    """Plain summary of a krrcore Spectrum (κ = λ_max/λ_min; ∞ when λ_min ≤ 0 numerically)."""
    ev = spectrum.eigenvalues.double()
    return {"method": spectrum.method, "condition_number": spectrum.condition_number,
            "lambda_min": float(ev.min()), "lambda_max": float(ev.max()), "size": int(ev.numel())}


def is_estimate(method: str) -> bool:
    return method != "exact"


# ---------------------------------------------------------------------------------------------
# Conditioning: K + λnI, H̃, FALKON's W, ASkotch's blocks
# ---------------------------------------------------------------------------------------------

@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Eigenvalues of K…")
def kernel_spectrum(_X, data_key, kernel: str, kernel_params: tuple) -> dict:
    """Eigenvalues of K_nn (ascending): exact ``eigh`` up to EXACT_MAX_N rows, else Lanczos Ritz values."""
    spectrum = kernel_eigenvalues(kernel_from(kernel, kernel_params), _tensor(_X), exact_max_n=EXACT_MAX_N,
                                  lanczos_steps=LANCZOS_STEPS)
    return {"eigenvalues": spectrum.eigenvalues.numpy(), "method": spectrum.method}


def full_system(eigs_K: np.ndarray, n: int, penalty: float) -> dict:
    """Spectrum summary of K + λnI from K's eigenvalues: κ = (s_max + λn)/(s_min + λn)."""
    shifted = np.clip(eigs_K, 0, None) + penalty * n
    return {"eigenvalues": shifted, "condition_number": float(shifted.max() / shifted.min()),
            "lambda_min": float(shifted.min()), "lambda_max": float(shifted.max()), "size": int(shifted.size)}


def _nystrom_pair(X: torch.Tensor, kernel, penalty: float, M: int, seed: int, centers=None, gram=None) -> dict:
    centers = select_centers("uniform", X, M, seed) if centers is None else centers
    spectra = nystrom_spectra(kernel, X, centers, penalty, exact_max_M=EXACT_MAX_M, lanczos_steps=LANCZOS_STEPS,
                              seed=seed, gram=gram)
    return {key: {**_spectrum_row(s), "eigenvalues": s.eigenvalues.numpy()} for key, s in spectra.items()}


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Spectra of the Nyström systems…")
def nystrom_systems(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, M: int, seed: int) -> dict:
    """{"nystrom": ..., "falkon": ...}: eigenvalues, κ and method of H̃ and W at M uniform centres."""
    return _nystrom_pair(_tensor(_X), kernel_from(kernel, kernel_params), penalty, M, seed)


def _block_partition(n: int, blocks: int, seed: int) -> list[torch.Tensor]:
    """ASkotch's own random partition of [n] into ``blocks`` blocks (Alg. 1, line 1), seeded."""
    from krrcore.solvers.askotch import random_partition

    return random_partition(n, blocks, torch.Generator().manual_seed(int(seed)))


def _block_preconditioner(K_bb: torch.Tensor, lam_n: float, rank: int, seed: int):
    """(P_b + ρI as a NystromPreconditioner, the generator after the sketch): rank-r randomized
    Nyström of K_bb (Alg. 2) with ρ = λn + Λ̂_r ("damped", Sec. 3.2), seeded."""
    from krrcore.nystrom import NystromPreconditioner, randomized_nystrom, resolve_damping

    p = K_bb.shape[0]
    gen = torch.Generator().manual_seed(int(seed))
    approx = randomized_nystrom(lambda V: K_bb @ V, p, min(rank, p), float(K_bb.diagonal().sum()),
                                generator=gen, dtype=torch.float64, device=K_bb.device)
    return NystromPreconditioner(approx, resolve_damping("damped", approx, lam_n)), gen


def _block_spectra(K_bb: torch.Tensor, lam_n: float, rank: int, seed: int):
    """(row, preconditioner): κ of K_bb + λnI and of its Nyström-preconditioned form, and L_P by
    get_L (ASkotch Alg. 2–3); the preconditioner is returned for whole-partition quantities.

    The preconditioner is P_b + ρI with P_b the rank-r randomized Nyström approximation of K_bb
    and ρ = λn + Λ̂_r ("damped", Sec. 3.2); the preconditioned system is
    (P_b + ρI)^{-1/2}(K_bb + λnI)(P_b + ρI)^{-1/2}, whose top eigenvalue is L_P (Eq. 11).
    """
    from krrcore.nystrom import get_L

    p = K_bb.shape[0]
    pc, gen = _block_preconditioner(K_bb, lam_n, rank, seed)

    def H_mv(V):
        return K_bb @ V + lam_n * V

    def A_mv(V):
        return pc.inv_sqrt(H_mv(pc.inv_sqrt(V)))

    if p <= EXACT_MAX_BLOCK:
        method = "exact"
        eig_H = torch.linalg.eigvalsh(K_bb).clamp_min(0) + lam_n
        S = pc.inv_sqrt(torch.eye(p, dtype=torch.float64))
        A = S @ H_mv(S)
        eig_A = torch.linalg.eigvalsh((A + A.T) / 2)
    else:
        method = f"lanczos ({LANCZOS_STEPS} steps)"
        eig_H = lanczos_ritz_values(H_mv, p, steps=LANCZOS_STEPS, seed=seed)
        eig_A = lanczos_ritz_values(A_mv, p, steps=LANCZOS_STEPS, seed=seed)
    L_P = get_L(H_mv, p, pc, generator=gen, dtype=torch.float64, device=K_bb.device)
    kappa = (lambda ev: float(ev.max() / ev.min()) if float(ev.min()) > 0 else math.inf)
    return {"size": p, "method": method, "kappa_block": kappa(eig_H), "kappa_preconditioned": kappa(eig_A),
            "L_b": float(eig_H.max()), "L_P (get_L)": L_P, "lambda_max_preconditioned": float(eig_A.max()),
            "rho": pc.rho}, pc


def askotch_available() -> str | None:
    """None when ASkotch (its solver module and randomized Nyström preconditioner) imports, else why not."""
    try:
        import krrcore.nystrom  # noqa: F401
        import krrcore.solvers.askotch  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="ASkotch's block preconditioners…")
def askotch_blocks(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, blocks: int, rank: int,
                   seed: int) -> tuple[pd.DataFrame, dict]:
    """(table, whole): one row per block b — κ(K_bb + λnI), κ of the preconditioned block, L_b, L_P
    (get_L) and exact λ_max — and what the blocks add up to (:func:`_partition_constants`)."""
    X = _tensor(_X)
    k = kernel_from(kernel, kernel_params)
    n = X.shape[0]
    lam_n = penalty * n
    parts = _block_partition(n, blocks, seed)
    H = k(X, X)                       # the whole system: μ_P needs it, and the blocks are its principal parts
    H.diagonal().add_(lam_n)
    rows, preconds = [], []
    for b, idx in enumerate(parts):
        K_bb = H[idx][:, idx]
        K_bb.diagonal().sub_(lam_n)
        row, pc = _block_spectra(K_bb, lam_n, rank, seed + b)
        rows.append({"block": b + 1, **row})
        preconds.append(pc)
    table = pd.DataFrame(rows)
    return table, _partition_constants(H, parts, preconds, table, lam_n, seed)


def _partition_constants(H: torch.Tensor, parts, preconds, table: pd.DataFrame, lam_n: float, seed: int) -> dict:
    """μ_P and Theorem 5.1's iteration factor, with and without Nyström, for one partition.

    μ_P = λ_min(P^{-1/2}(K + λnI)P^{-1/2}) over P = blkdiag(P_b + ρ_bI) (App. D) and λ_min(K + λnI),
    exact up to EXACT_MAX_N points, else by Lanczos (``get_mu``, from above — on ill-conditioned
    problems μ_P can be far below the estimate), and the accelerated iteration factor
    Σ_b √L_Pb / √μ_P (Thm. 5.1) against NU_ACDM's Σ_b √L_b / √λ_min(K + λnI), with L_Pb and L_b
    from the block table.
    """
    from krrcore.nystrom import GET_MU_STEPS, get_mu

    n = H.shape[0]
    if n <= EXACT_MAX_N:
        method = "exact"
        S = torch.zeros(n, n, dtype=torch.float64)
        for idx, pc in zip(parts, preconds):
            S[idx[:, None], idx[None, :]] = pc.inv_sqrt(torch.eye(idx.numel(), dtype=torch.float64))
        A = S @ H @ S
        mu_P = float(torch.linalg.eigvalsh((A + A.T) / 2)[0])
        mu = float(torch.linalg.eigvalsh(H)[0])
    else:
        method = f"lanczos ({GET_MU_STEPS} steps)"
        ones = [1.0] * len(parts)
        mu_P = get_mu(lambda V: H @ V, n, parts, preconds, ones, dtype=torch.float64, device=H.device, seed=seed)
        mu = get_mu(lambda V: H @ V, n, parts, [None] * len(parts), ones, dtype=torch.float64, device=H.device,
                    seed=seed)

    def factor(L, m):          # round-off can leave a numerically singular system at a tiny λ
        return sum(math.sqrt(v) for v in L) / math.sqrt(m) if m > 0 else math.inf

    return {"mu_P": mu_P, "lambda_min": mu, "lam_n": lam_n, "method": method,
            "factor_preconditioned": factor(table["L_P (get_L)"], mu_P), "factor_plain": factor(table["L_b"], mu)}


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Condition numbers along λ…")
def condition_vs_penalty(_X, data_key, kernel: str, kernel_params: tuple, M: int, seed: int, penalties: tuple,
                         blocks: int | None = None, rank: int | None = None) -> pd.DataFrame:
    """κ of every system for each λ (rows: penalty, system, condition_number, method).

    ASkotch's rows (when ``blocks`` is given) hold the largest κ over its blocks: the worst block
    limits the step sizes.
    """
    X = _tensor(_X)
    k = kernel_from(kernel, kernel_params)
    eigs = kernel_spectrum(_X, data_key, kernel, kernel_params)
    n = X.shape[0]
    centers = select_centers("uniform", X, M, seed)
    gram = KernelOperator(k, X, centers.centers).gram() if M <= EXACT_MAX_M else None   # shared by every λ
    parts = _block_partition(n, blocks, seed) if blocks else []
    K_blocks = [k(X[idx], X[idx]) for idx in parts]
    rows = []
    for lam in penalties:
        full = full_system(eigs["eigenvalues"], n, lam)
        rows.append({"penalty": lam, "system": SYSTEMS["full"], "condition_number": full["condition_number"],
                     "method": eigs["method"]})
        for key, s in _nystrom_pair(X, k, lam, M, seed, centers=centers, gram=gram).items():
            rows.append({"penalty": lam, "system": SYSTEMS[key], "condition_number": s["condition_number"],
                         "method": s["method"]})
        if K_blocks:
            per_block = [_block_spectra(K_bb, lam * n, rank, seed + b)[0] for b, K_bb in enumerate(K_blocks)]
            rows.append({"penalty": lam, "system": SYSTEMS["askotch"],
                         "condition_number": max(r["kappa_preconditioned"] for r in per_block),
                         "method": per_block[0]["method"]})
    return pd.DataFrame(rows)


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Condition numbers along M…")
def condition_vs_M(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, seed: int,
                   Ms: tuple) -> pd.DataFrame:
    """κ(H̃) and κ(W) for each number of uniform centres M (rows: M, system, condition_number, method)."""
    X = _tensor(_X)
    k = kernel_from(kernel, kernel_params)
    rows = []
    for M in Ms:
        for key, s in _nystrom_pair(X, k, penalty, int(M), seed).items():
            rows.append({"M": int(M), "system": SYSTEMS[key], "condition_number": s["condition_number"],
                         "method": s["method"]})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Effective dimension and suggested hyper-parameters (Dataset page)
# ---------------------------------------------------------------------------------------------

@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Effective dimension…")
def effective_dimension_curve(_X, data_key, kernel: str, kernel_params: tuple, penalties: tuple,
                              seed: int = 0) -> pd.DataFrame:
    """d_eff(λ) = Tr K(K + λnI)⁻¹ = Σ s_i/(s_i + λn) (BLESS Eq. 1) for each λ.

    Exact eigenvalues of K up to EXACT_MAX_N rows; above, the eigenvalues of a Nyström
    approximation with DEFF_NYSTROM_M centres, which gives a lower bound (labelled as estimate).
    """
    X = _tensor(_X)
    n = X.shape[0]
    k = kernel_from(kernel, kernel_params)
    if n <= EXACT_MAX_N:
        s, method = kernel_spectrum(_X, data_key, kernel, kernel_params)["eigenvalues"], "exact"
        s = torch.as_tensor(s)
    else:
        M = min(DEFF_NYSTROM_M, n)
        s, method = nystrom_kernel_eigenvalues(k, X, M, seed=seed), f"Nyström estimate (M = {M}, lower bound)"
    d = effective_dimension(s, n, list(penalties)).numpy()
    return pd.DataFrame({"penalty": list(penalties), "d_eff": d, "method": method})


def interpolate_deff(curve: pd.DataFrame, penalty: float) -> float:
    """d_eff at ``penalty`` by log-log interpolation of a computed curve (it is smooth and monotone)."""
    x = np.log(curve["penalty"].to_numpy())
    y = np.log(np.clip(curve["d_eff"].to_numpy(), 1e-300, None))
    order = np.argsort(x)
    return float(np.exp(np.interp(math.log(penalty), x[order], y[order])))


#: How kernel parameters are written in the explanations.
PARAM_SYMBOLS = {"sigma": "σ", "nu": "ν"}


def suggested_kernel(median_distance: float, catalogue_kernel: dict | None = None) -> tuple[str, tuple]:
    """(name, params) to suggest: the dataset catalogue's curated kernel when there is one, else a
    Gaussian with σ = the median pairwise distance (the median heuristic)."""
    if catalogue_kernel:
        params = dict(catalogue_kernel)
        return params.pop("name", "gaussian"), tuple(sorted(params.items()))
    return "gaussian", (("sigma", float(median_distance)),)


def suggest_hyperparameters(n_train: int, median_distance: float, curve: pd.DataFrame, *,
                            catalogue_kernel: dict | None = None, catalogue_penalty: float | None = None) -> dict:
    """Kernel/σ, λ and M for a first FALKON run, each with the reasoning as a short sentence.

    ``curve`` is d_eff(λ) for the kernel :func:`suggested_kernel` returns (same arguments).

    * σ: the catalogue's curated bandwidth, else the median pairwise distance of the (z-scored)
      training points (median heuristic).
    * λ: the catalogue's curated value, else 1/√n, the regularisation of FALKON Thm. 3 (optimal
      rates in the worst case).
    * M: max(√n, d_eff(λ)·log n), capped at n: √n centres suffice for uniform sampling at
      λ = 1/√n (Thm. 3) and leverage-score sampling needs M ≳ d_eff(λ) log n (Thm. 4, BLESS).
    """
    kernel, params = suggested_kernel(median_distance, catalogue_kernel)
    reasons = {}
    median = float(median_distance)
    sigma = dict(params).get("sigma")
    if catalogue_kernel:
        shown = ", ".join(f"{PARAM_SYMBOLS.get(k, k)} = {v:.3g}" for k, v in params)
        reasons["sigma"] = (f"{kernel.capitalize()} kernel with {shown}: the setting "
                            f"curated for this dataset. The median heuristic would give σ = {median:.3g}.")
    else:
        reasons["sigma"] = (f"σ = median distance between training points = {median:.3g} (median heuristic): "
                            "points closer than σ count as similar, so the kernel is neither all-ones nor "
                            "all-zeros off the diagonal.")
    theory = 1.0 / math.sqrt(n_train)
    if catalogue_penalty is not None and catalogue_penalty > 0:
        penalty = float(catalogue_penalty)
        reasons["lambda"] = (f"λ = {penalty:.2g}, the value curated for this dataset; the worst-case theory "
                             f"value is λ = 1/√n = {theory:.2g} (FALKON Thm. 3).")
    else:
        penalty = theory
        reasons["lambda"] = (f"λ = 1/√n = {theory:.2g} with n = {n_train:,} training points: the choice under "
                             "which FALKON attains the optimal statistical rate (Thm. 3). Tune it on a "
                             "validation split from there.")
    deff = interpolate_deff(curve, penalty)
    by_sqrt = math.ceil(math.sqrt(n_train))
    by_deff = math.ceil(deff * math.log(n_train))
    M = int(min(n_train, max(by_sqrt, by_deff)))
    reasons["M"] = (f"M = max(√n, d_eff(λ)·log n) = max({by_sqrt}, {deff:.1f}·{math.log(n_train):.1f} = {by_deff})"
                    f"{' capped at n' if M == n_train else ''} = {M}: √n uniform centres suffice at λ = 1/√n "
                    "(FALKON Thm. 3); leverage-score sampling needs M ≳ d_eff(λ)·log n (Thm. 4).")
    return {"kernel": kernel, "kernel_params": dict(params), "sigma": sigma, "penalty": penalty, "M": M,
            "d_eff": deff, "reasons": reasons}


# ---------------------------------------------------------------------------------------------
# Leverage scores (Leverage scores page): exact vs approximate, the λ path, where centres fall
# ---------------------------------------------------------------------------------------------

#: Exact leverage scores (one n×n eigh) up to this many points.
LEVERAGE_EXACT_MAX_N = 2000


def leverage_available() -> str | None:
    """None when :mod:`krrcore.leverage` imports, else the reason (the page says "not built yet")."""
    try:
        import krrcore.leverage  # noqa: F401
    except ImportError as exc:
        return str(exc)
    return None


def r_acc_summary(approx: np.ndarray, exact: np.ndarray) -> dict:
    """R-ACC = ℓ̃(i, λ)/ℓ(i, λ) (BLESS paper, Sect. 4): mean and 5th/95th percentiles."""
    ratio = approx / exact
    q05, q95 = np.quantile(ratio, [0.05, 0.95])
    return {"mean": float(ratio.mean()), "q05": float(q05), "q95": float(q95)}


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Leverage scores…")
def leverage_report(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, method: str, q2: float,
                    seed: int) -> dict:
    """Approximate scores ℓ̃ of ``method`` (a key of ``krrcore.leverage.SAMPLERS``) at its final
    level for every point, exact ℓ along the same λ path (one eigh of K), R-ACC and the path.

    Returns {"points": DataFrame (index, exact, approximate, r_acc), "path": DataFrame (level,
    penalty, d_eff estimate, exact d_eff, exact d_∞, dictionary size), "r_acc": summary,
    "dictionary": selected indices, "seconds", "note", "method"}.
    """
    from krrcore import leverage

    X = _tensor(_X)
    k = kernel_from(kernel, kernel_params)
    kwargs = {} if method == "uniform" else {"q2": q2}
    result = leverage.SAMPLERS[method](X, k, penalty, seed=seed, points="all", **kwargs)
    path = result.path()
    exact = leverage.exact_scores_path(X, k, sorted(set(path["penalty"]) | {penalty}, reverse=True))
    by_penalty = dict(zip(exact.penalties.tolist(), range(len(exact.penalties))))
    path["d_eff exact"] = [float(exact.d_eff[by_penalty[p]]) for p in path["penalty"]]
    path["d_inf exact"] = [float(exact.d_inf[by_penalty[p]]) for p in path["penalty"]]
    exact_final = exact.scores[by_penalty[result.penalty]].numpy()
    approx = result.scores.numpy()
    points = pd.DataFrame({"index": result.points.numpy(), "exact": exact_final, "approximate": approx,
                           "r_acc": approx / exact_final})
    return {"points": points, "path": path, "r_acc": r_acc_summary(approx, exact_final),
            "dictionary": result.indices.numpy(), "seconds": result.seconds, "note": result.note,
            "method": method, "final_penalty": result.penalty,
            "d_eff": float(exact.d_eff[by_penalty[penalty]]), "d_inf": float(exact.d_inf[by_penalty[penalty]])}


def projection_2d(X: np.ndarray) -> tuple[np.ndarray, tuple[str, str]]:
    """The points themselves when d ≤ 2 (1-D data gets a zero second axis), else the first two
    principal components of the centred data (axis titles say which)."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[1] == 2:
        return X, ("x₁", "x₂")
    if X.shape[1] == 1:
        return np.column_stack([X[:, 0], np.zeros(len(X))]), ("x₁", "")
    Xc = X - X.mean(0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    share = s ** 2 / max(float((s ** 2).sum()), 1e-300)
    return Xc @ Vt[:2].T, (f"PC 1 ({share[0]:.0%} of variance)", f"PC 2 ({share[1]:.0%} of variance)")


@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Centres: uniform vs BLESS…")
def centres_comparison(_X, data_key, kernel: str, kernel_params: tuple, penalty: float, M: int,
                       leverage_penalty: float, seed: int) -> dict:
    """M uniform centres vs M centres drawn ∝ BLESS scores at ``leverage_penalty`` (FALKON Alg. 2),
    with where they fall (2-D view) and FALKON's κ(W) at ``penalty`` for each set.

    Returns {"coords": (n, 2) array, "axes": titles, "sets": {name: {"indices", "weights", "kappa_W",
    "kappa_H", "method", "distinct"}}}.
    """
    from krrcore.leverage import BlessCenters

    X = _tensor(_X)
    k = kernel_from(kernel, kernel_params)
    selections = {
        "Uniform": select_centers("uniform", X, M, seed),
        "BLESS": BlessCenters(penalty=leverage_penalty, kernel=k).select(X, M, torch.Generator().manual_seed(seed)),
    }
    coords, axes = projection_2d(_X)
    sets = {}
    for name, centres in selections.items():
        spectra = _nystrom_pair(X, k, penalty, M, seed, centers=centres)
        sets[name] = {"indices": centres.indices.numpy(),
                      "weights": None if centres.weights is None else centres.weights.numpy(),
                      "kappa_W": spectra["falkon"]["condition_number"],
                      "kappa_H": spectra["nystrom"]["condition_number"],
                      "method": spectra["falkon"]["method"], "distinct": int(centres.indices.numel())}
    return {"coords": coords, "axes": axes, "sets": sets}


# ---------------------------------------------------------------------------------------------
# Dataset summary (Dataset page)
# ---------------------------------------------------------------------------------------------

@st.cache_data(max_entries=CACHE_ENTRIES, show_spinner="Summarising the data…")
def dataset_summary(_dataset, data_key) -> dict:
    """:func:`krrcore.datasets.describe` of the split plus a per-feature table (original units)."""
    from krrcore.datasets import describe

    summary = describe(_dataset)
    constant = set(summary["constant_features"])
    summary["feature_table"] = pd.DataFrame({
        "feature": [f["name"] for f in summary["features"]],
        "mean (original units)": [f["mean"] for f in summary["features"]],
        "std (original units)": [f["std"] for f in summary["features"]],
        "constant": [f["name"] in constant for f in summary["features"]],
    })
    return summary

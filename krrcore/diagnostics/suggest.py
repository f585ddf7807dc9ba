"""First hyper-parameters for a data set: kernel and σ, λ and M, each with its reasoning as a sentence
(FALKON Thm. 3–4, BLESS), from the median pairwise distance and a d_eff(λ) curve."""

from __future__ import annotations

import math

from .dimension import interpolate_deff


#: How kernel parameters are written in the explanations.
PARAM_SYMBOLS = {"sigma": "σ", "nu": "ν"}


def suggested_kernel(median_distance: float, catalogue_kernel: dict | None = None) -> tuple[str, tuple]:
    """(name, params) to suggest: the dataset catalogue's curated kernel when there is one, else a
    Gaussian with σ = the median pairwise distance (the median heuristic)."""
    if catalogue_kernel:
        params = dict(catalogue_kernel)
        return params.pop("name", "gaussian"), tuple(sorted(params.items()))
    return "gaussian", (("sigma", float(median_distance)),)


def theory_penalty(n_train: int) -> float:
    """λ = 1/√n: the regularisation under which FALKON attains the optimal statistical rate in the
    worst case (FALKON Thm. 3) — the first λ to try, and the tuner's starting λ."""
    return 1.0 / math.sqrt(n_train)


def suggest_hyperparameters(
    n_train: int,
    median_distance: float,
    curve,
    *,
    catalogue_kernel: dict | None = None,
    catalogue_penalty: float | None = None,
) -> dict:
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
        reasons["sigma"] = (
            f"{kernel.capitalize()} kernel with {shown}: the setting "
            f"curated for this dataset. The median heuristic would give σ = {median:.3g}."
        )
    else:
        reasons["sigma"] = (
            f"σ = median distance between training points = {median:.3g} (median heuristic): "
            "points closer than σ count as similar, so the kernel is neither all-ones nor "
            "all-zeros off the diagonal."
        )
    theory = theory_penalty(n_train)
    if catalogue_penalty is not None and catalogue_penalty > 0:
        penalty = float(catalogue_penalty)
        reasons["lambda"] = (
            f"λ = {penalty:.2g}, the value curated for this dataset; the worst-case theory "
            f"value is λ = 1/√n = {theory:.2g} (FALKON Thm. 3)."
        )
    else:
        penalty = theory
        reasons["lambda"] = (
            f"λ = 1/√n = {theory:.2g} with n = {n_train:,} training points: the choice under "
            "which FALKON attains the optimal statistical rate (Thm. 3). Tune it on a "
            "validation split from there."
        )
    deff = interpolate_deff(curve, penalty)
    by_sqrt = math.ceil(math.sqrt(n_train))
    by_deff = math.ceil(deff * math.log(n_train))
    M = int(min(n_train, max(by_sqrt, by_deff)))
    reasons["M"] = (
        f"M = max(√n, d_eff(λ)·log n) = max({by_sqrt}, {deff:.1f}·{math.log(n_train):.1f} = {by_deff})"
        f"{' capped at n' if M == n_train else ''} = {M}: √n uniform centres suffice at λ = 1/√n "
        "(FALKON Thm. 3); leverage-score sampling needs M ≳ d_eff(λ)·log n (Thm. 4)."
    )
    return {
        "kernel": kernel,
        "kernel_params": dict(params),
        "sigma": sigma,
        "penalty": penalty,
        "M": M,
        "d_eff": deff,
        "reasons": reasons,
    }

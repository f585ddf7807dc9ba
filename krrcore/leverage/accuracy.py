"""How accurate a sampler's scores are: R-ACC ℓ̃/ℓ against exact scores along its λ path (BLESS
paper, Sect. 4 and Fig. 1), with the exact d_eff(λ_h) and d_∞(λ_h) of every level."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .exact import check_eigh_fits, exact_scores_path
from .samplers import SAMPLERS


def r_acc_summary(approx, exact) -> dict:
    """R-ACC = ℓ̃(i, λ)/ℓ(i, λ) (BLESS paper, Sect. 4): mean and 5th/95th percentiles."""
    ratio = np.asarray(approx, dtype=np.float64) / np.asarray(exact, dtype=np.float64)
    q05, q95 = np.quantile(ratio, [0.05, 0.95])
    return {"mean": float(ratio.mean()), "q05": float(q05), "q95": float(q95)}


@dataclass
class LeverageComparison:
    """One sampler's scores against the exact ones (see :func:`compare_with_exact`).

    ``points``: DataFrame (index, exact, approximate, r_acc), one row per point, at the sampler's
    final λ; ``path``: the sampler's λ path (:meth:`LeverageResult.path`) with columns
    "d_eff exact" and "d_inf exact"; ``r_acc``: :func:`r_acc_summary`; ``d_eff``/``d_inf``: exact, at
    the requested λ; ``dictionary``: the final dictionary's indices; ``seconds``: the sampler's time
    (without the scores); ``note``: why it stopped early, if it did; ``result``: the sampler's
    :class:`~krrcore.leverage.LeverageResult`.
    """

    method: str
    penalty: float
    final_penalty: float
    points: object
    path: object
    r_acc: dict
    d_eff: float
    d_inf: float
    dictionary: np.ndarray
    seconds: float
    note: str
    result: object = None


def compare_with_exact(
    X, kernel, penalty: float, method: str = "bless", *, seed=0, memory_budget=None, **sampler_kwargs
) -> LeverageComparison:
    """Run the sampler ``method`` (a key of :data:`krrcore.leverage.SAMPLERS`) with Eq. (3) scores for
    every point, and the exact scores for every λ of its path and ``penalty`` from one ``eigh``
    of K (:func:`~krrcore.leverage.exact_scores_path`; memory-checked: three n×n float64 matrices).
    ``sampler_kwargs`` go to the sampler (``q2=`` ...)."""
    import pandas as pd

    if method not in SAMPLERS:
        raise ValueError(f"method must be one of {sorted(SAMPLERS)}, got {method!r}")
    shape = getattr(X, "shape", None) or np.shape(X)
    check_eigh_fits(
        int(shape[0]) if len(shape) else 0,
        memory_budget,
        getattr(X, "device", None) if isinstance(X, torch.Tensor) else None,
    )  # before the sampler runs
    result = SAMPLERS[method](
        X, kernel, penalty, seed=seed, points="all", memory_budget=memory_budget, **sampler_kwargs
    )
    path = result.path()
    exact = exact_scores_path(
        X, kernel, sorted(set(path["penalty"]) | {penalty}, reverse=True), memory_budget=memory_budget
    )
    row = {p: j for j, p in enumerate(exact.penalties.tolist())}
    path["d_eff exact"] = [float(exact.d_eff[row[p]]) for p in path["penalty"]]
    path["d_inf exact"] = [float(exact.d_inf[row[p]]) for p in path["penalty"]]
    exact_final = exact.scores[row[result.penalty]].cpu().numpy()
    approx = result.scores.cpu().numpy()
    points = pd.DataFrame(
        {
            "index": result.points.cpu().numpy(),
            "exact": exact_final,
            "approximate": approx,
            "r_acc": approx / exact_final,
        }
    )
    return LeverageComparison(
        method=method,
        penalty=float(penalty),
        final_penalty=result.penalty,
        points=points,
        path=path,
        r_acc=r_acc_summary(approx, exact_final),
        d_eff=float(exact.d_eff[row[penalty]]),
        d_inf=float(exact.d_inf[row[penalty]]),
        dictionary=result.indices.cpu().numpy(),
        seconds=result.seconds,
        note=result.note,
        result=result,
    )

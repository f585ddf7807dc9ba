"""Uniform against leverage-score centres: where M centres fall and FALKON's κ(W) with each set
(FALKON Alg. 2 on BLESS scores, against FALKON's uniform default)."""

from __future__ import annotations

import torch

from .._validation import as_tensor
from ..centers import select_centers
from ..leverage import BlessCenters
from .data import projection_2d
from .spectra import nystrom_spectra


def compare_centers(
    kernel,
    X,
    penalty: float,
    M: int,
    leverage_penalty: float,
    *,
    seed: int = 0,
    exact_max_M: int = 800,
    lanczos_steps: int = 60,
) -> dict:
    """M uniform centres vs M centres drawn ∝ BLESS scores at ``leverage_penalty``, with where they
    fall (:func:`~krrcore.diagnostics.projection_2d`) and κ(W), κ(H̃) at ``penalty`` for each set.

    Returns {"coords": (n, 2) array, "axes": titles, "sets": {"Uniform" | "BLESS": {"indices",
    "weights" (diag D or None), "kappa_W", "kappa_H", "method", "distinct"}}}.
    """
    X = as_tensor(X, "X", dtype=torch.float64)
    selections = {
        "Uniform": select_centers("uniform", X, M, seed),
        "BLESS": BlessCenters(penalty=leverage_penalty, kernel=kernel).select(
            X, M, torch.Generator().manual_seed(seed)
        ),
    }
    coords, axes = projection_2d(X.cpu().numpy())
    sets = {}
    for name, centers in selections.items():
        spectra = nystrom_spectra(
            kernel, X, centers, penalty, exact_max_M=exact_max_M, lanczos_steps=lanczos_steps, seed=seed
        )
        sets[name] = {
            "indices": centers.indices.cpu().numpy(),
            "weights": None if centers.weights is None else centers.weights.cpu().numpy(),
            "kappa_W": spectra["falkon"].condition_number,
            "kappa_H": spectra["nystrom"].condition_number,
            "method": spectra["falkon"].method,
            "distinct": int(centers.indices.numel()),
        }
    return {"coords": coords, "axes": axes, "sets": sets}

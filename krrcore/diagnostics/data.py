"""What the diagnostic pages look at: a bounded, seeded subsample of the training points, and a 2-D
view of them (the points themselves, or their first two principal components)."""
from __future__ import annotations

import numpy as np


def subsample(X, limit: int, seed: int = 0) -> np.ndarray:
    """At most ``limit`` rows of X, drawn without replacement with a fixed seed (all rows if fewer)."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] <= limit:
        return X
    rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], size=limit, replace=False))
    return X[rows]


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

"""A fitted model's predictions on a plotting grid over 1-D or 2-D data (the app's fit chart).

Computed where the model was fitted (a worker), so a front end receives GRID_1D or GRID_2D²
predictions instead of evaluating the kernel against every centre in the web server.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Grid points of the fitted curve (1-D data) and per axis of the prediction surface (2-D data).
GRID_1D = 400
GRID_2D = 80


@dataclass
class FitSurface:
    """``axes``: one grid vector per feature; ``values``: the model's raw output on the grid
    (1-D: (GRID_1D, k); 2-D: (GRID_2D², k), row-major with the first feature varying fastest)."""

    axes: tuple[np.ndarray, ...]
    values: np.ndarray


def grid_axes(X: np.ndarray, points: int) -> tuple[np.ndarray, ...]:
    """One evenly spaced vector per column, spanning the data with 5% padding."""
    lo, hi = X.min(0), X.max(0)
    pad = 0.05 * np.where(hi > lo, hi - lo, 1.0)
    return tuple(np.linspace(lo[j] - pad[j], hi[j] + pad[j], points) for j in range(X.shape[1]))


def fit_surface(X: np.ndarray, estimator) -> FitSurface:
    """Predictions of ``estimator`` on a grid spanning ``X`` (1 or 2 columns)."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[1] == 1:
        axes = grid_axes(X, GRID_1D)
        points = axes[0][:, None]
    elif X.shape[1] == 2:
        axes = grid_axes(X, GRID_2D)
        points = np.stack(np.meshgrid(*axes), -1).reshape(-1, 2)
    else:
        raise ValueError(f"a fit surface needs 1 or 2 features, got {X.shape[1]}")
    values = np.asarray(estimator.predict(points))
    return FitSurface(axes=axes, values=values.reshape(len(points), -1))

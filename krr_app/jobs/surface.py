"""A model's predictions on a plotting grid over 1-D or 2-D data (the app's fit chart), at the end
of a fit and while it runs.

Computed where the model is fitted (a worker), so a front end receives GRID_1D or GRID_2D²
predictions instead of evaluating the kernel against every centre in the web server.

:class:`LiveSurface` takes a picture of the current iterate after a solver's record: the same
grid, predicted from the ``coef_`` the solver holds while its generator is suspended, so the
cost never enters the records' solver ``seconds``. Pictures are taken while their time stays
within :data:`FRAME_SHARE` of the fit's wall time (every iteration for a small problem, at a
bounded rate for a large one, whose grid predictions cost more), or on request (a stepped run).
The one-off evaluation of the grid's kernel rows, once they are kept, is taken when it fits that
budget and is not charged again: charging it made a large problem's picture stay at iteration 1
while the solver went on, where reading the kept rows costs a few per cent of an iteration. A fit
keeps at most :data:`MAX_KEPT_FRAMES` pictures, evenly spaced in iterations, for replaying it
afterwards.

:func:`add_uncertainty` adds a model's predictive standard deviation on the same grid, from the
library's ``predict(X, return_std=True)`` (:mod:`krrcore.solvers.uncertainty`), with the noise level
the fit estimated and its centres, so a front end draws the band or the map without the posterior.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from krrcore.solvers.records import IteratePredictions

#: Grid points of the fitted curve (1-D data) and per axis of the prediction surface (2-D data).
GRID_1D = 400
GRID_2D = 80
#: Share of a fit's wall time its live pictures may take, beyond FRAME_ALLOWANCE_SECONDS.
FRAME_SHARE = 0.05
#: Seconds of pictures every fit may take whatever its length (a small problem is drawn at every
#: iteration: once the grid's kernel rows are kept, a picture costs a product with them).
FRAME_ALLOWANCE_SECONDS = 0.2
#: Pictures a fit keeps for replay (every ``stride``-th iteration, the stride doubling as needed).
MAX_KEPT_FRAMES = 64
#: Centres sent with an uncertainty surface for drawing (more say nothing a picture can show).
MAX_DRAWN_CENTERS = 2000


@dataclass
class FitSurface:
    """``axes``: one grid vector per feature; ``values``: the model's raw output on the grid
    (1-D: (GRID_1D, k); 2-D: (GRID_2D², k), row-major with the first feature varying fastest).
    ``frames``: the pictures kept while the model was fitted, by iteration (same layout, float32).
    ``uncertainty``: the predictive standard deviation on the grid (:func:`add_uncertainty`), or None."""

    axes: tuple[np.ndarray, ...]
    values: np.ndarray
    frames: dict[int, np.ndarray] = field(default_factory=dict)
    uncertainty: GridUncertainty | None = None

    def at(self, iteration: int) -> tuple[int | None, np.ndarray]:
        """(the iteration shown, the grid values) of the model after ``iteration``: the picture
        kept at the latest iteration up to it (the first kept, before that), the final model from
        the last picture's iteration on; (None, the final model) when no picture was kept."""
        if not self.frames:
            return None, self.values
        last = max(self.frames)
        if iteration >= last:
            return last, self.values
        kept = max((k for k in self.frames if k <= iteration), default=min(self.frames))
        return kept, self.frames[kept]


@dataclass(frozen=True)
class GridUncertainty:
    """A model's posterior on the plotting grid, as the library states it: ``mean`` and ``std`` of a
    new observation ((points, k), the fit's scaled units, from ``predict(grid, return_std=True)``),
    ``noise_std`` σ̂ (same units), ``effective_dof`` df, ``noise_source`` the library's sentence on
    how σ̂ was obtained, ``kind`` ("exact GP" or "DTC (Nyström)"), ``centers`` the model's centres
    (None when there are more than :data:`MAX_DRAWN_CENTERS`), ``n_centers`` their number and
    ``seconds`` the posterior's set-up plus the grid's standard deviations on the worker."""

    mean: np.ndarray
    std: np.ndarray
    noise_std: float
    effective_dof: float
    noise_source: str
    kind: str
    centers: np.ndarray | None
    n_centers: int
    seconds: float


@dataclass(frozen=True)
class SurfaceFrame:
    """One picture of an iterate: the grid predictions after record ``iteration`` (float32, the
    layout of :attr:`FitSurface.values`) and the seconds it took."""

    iteration: int
    values: np.ndarray
    seconds: float


def grid_axes(X: np.ndarray, points: int) -> tuple[np.ndarray, ...]:
    """One evenly spaced vector per column, spanning the data with 5% padding."""
    lo, hi = X.min(0), X.max(0)
    pad = 0.05 * np.where(hi > lo, hi - lo, 1.0)
    return tuple(np.linspace(lo[j] - pad[j], hi[j] + pad[j], points) for j in range(X.shape[1]))


def plotting_grid(X: np.ndarray) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """The grid's axes over ``X`` (1 or 2 columns) and its points, row-major, first feature fastest."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] not in (1, 2):
        raise ValueError(f"a fit surface needs 1 or 2 features, got {X.shape[1] if X.ndim == 2 else X.shape}")
    axes = grid_axes(X, GRID_1D if X.shape[1] == 1 else GRID_2D)
    return axes, grid_points(axes)


def grid_points(axes: tuple[np.ndarray, ...]) -> np.ndarray:
    """The points of the grid with these ``axes`` (:func:`plotting_grid`'s layout)."""
    if len(axes) == 1:
        return axes[0][:, None]
    return np.stack(np.meshgrid(*axes), -1).reshape(-1, len(axes))


def add_uncertainty(surface: FitSurface, estimator) -> FitSurface:
    """``surface`` with the fitted ``estimator``'s predictive standard deviation on its grid
    (an estimator fitted with ``uncertainty=True``; the library refuses the others with the reason)."""
    start = time.perf_counter()
    mean, std = estimator.predict(grid_points(surface.axes), return_std=True)
    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    centers = np.asarray(estimator.centers_, dtype=np.float64)
    surface.uncertainty = GridUncertainty(
        mean=mean.reshape(len(mean), -1),
        std=std.reshape(len(std), -1),
        noise_std=float(np.max(estimator.noise_std_)),
        effective_dof=float(estimator.effective_dof_),
        noise_source=estimator.noise_source_,
        kind=estimator.posterior_.kind,
        centers=centers if len(centers) <= MAX_DRAWN_CENTERS else None,
        n_centers=len(centers),
        seconds=getattr(estimator, "uncertainty_seconds_", 0.0) + time.perf_counter() - start,
    )
    return surface


def fit_surface(X: np.ndarray, estimator) -> FitSurface:
    """Predictions of a fitted ``estimator`` on a grid spanning ``X`` (1 or 2 columns)."""
    axes, points = plotting_grid(X)
    values = np.asarray(estimator.predict(points))
    return FitSurface(axes=axes, values=values.reshape(len(points), -1))


class LiveSurface:
    """Pictures of a model on the plotting grid over ``X`` while a solver fits it (module docstring).

    Call :meth:`due` after each record and :meth:`capture` when it says so (or for a record that
    must be drawn, e.g. a stepped run's); :meth:`finish` gives the fitted model's
    :class:`FitSurface` with the pictures kept. ``seconds`` is their total time, ``count`` their number.
    """

    def __init__(
        self,
        X: np.ndarray,
        *,
        share: float = FRAME_SHARE,
        allowance: float = FRAME_ALLOWANCE_SECONDS,
        keep: int = MAX_KEPT_FRAMES,
    ):
        self.axes, self._points = plotting_grid(X)
        self.share, self.allowance, self.keep = share, allowance, max(2, int(keep))
        self.started = time.perf_counter()
        self.seconds = 0.0
        self.setup_seconds = 0.0  # of ``seconds``: the one-off evaluation of the kept kernel rows
        self.count = 0  # pictures taken
        self.latest: SurfaceFrame | None = None
        self.frames: dict[int, np.ndarray] = {}
        self.stride = 1
        self._predictions: IteratePredictions | None = None  # the estimator's outputs on the grid

    def due(self, estimator) -> bool:
        """Whether a picture of ``estimator`` now keeps the pictures' time within budget: the
        allowance plus FRAME_SHARE of the wall time since this object was made, the kept rows'
        evaluation not counted once done. Before a picture has evaluated the kernel, its cost is
        krrcore's estimate for |grid| × centres entries."""
        budget = self.allowance + self.share * (time.perf_counter() - self.started)
        return self.seconds - self.setup_seconds + self._predictions_of(estimator).cost() <= budget

    def _predictions_of(self, estimator) -> IteratePredictions:
        if self._predictions is None or self._predictions.estimator is not estimator:
            self._predictions = IteratePredictions(estimator, self._points)
        return self._predictions

    def _predict(self, estimator) -> np.ndarray:
        """The current iterate's (|grid|, k) outputs, in the estimator's dtype (0 at the start)."""
        return self._predictions_of(estimator)()

    def capture(self, estimator, iteration: int) -> SurfaceFrame:
        """The picture of ``estimator``'s current iterate after record ``iteration``."""
        start = time.perf_counter()
        values = self._predict(estimator).astype(np.float32)
        frame = SurfaceFrame(iteration, values, time.perf_counter() - start)
        self.seconds += frame.seconds
        if self._predictions_of(estimator).kept_now:
            self.setup_seconds += frame.seconds
        self.count += 1
        self.latest = frame
        if iteration % self.stride == 0:
            self.frames[iteration] = values
        while len(self.frames) > self.keep:
            self.stride *= 2
            self.frames = {k: v for k, v in self.frames.items() if k % self.stride == 0}
        return frame

    def finish(self, estimator, iteration: int) -> FitSurface:
        """The fitted model's surface (full precision), with the pictures kept and the final one
        at ``iteration`` (the last record's), whatever the stride."""
        start = time.perf_counter()
        values = self._predict(estimator)
        self.latest = SurfaceFrame(iteration, values.astype(np.float32), time.perf_counter() - start)
        self.frames[iteration] = self.latest.values
        return FitSurface(axes=self.axes, values=values, frames=dict(self.frames))

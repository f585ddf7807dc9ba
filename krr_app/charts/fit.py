"""The fitted function over 1-D data, or the prediction surface over 2-D data, from a run's grid
predictions (:class:`krr_app.jobs.surface.FitSurface`): the finished model's figure, and the traces the
live chart's fit panel restyles in place while the solver iterates (:mod:`krr_app.parts.live_chart`,
the pictures' values from :func:`fit_display` through :mod:`krr_app.jobs.live_api`). Plain data in,
figures out; no Streamlit here.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from krrcore.metrics import predicted_labels

from krr_app.charts import uncertainty
from krr_app.charts.figures import layout
from krr_app.charts.preview import browser_values, point_traces


def fit_figure(data, surface, *, height: int = 420, color_range: tuple[float, float] | None = None) -> go.Figure | None:
    """The fitted function (1-D data) or prediction surface (2-D data) over the points, from the
    grid predictions a worker computed (:class:`krr_app.jobs.surface.FitSurface`); None otherwise.

    Axes are the z-scored features the model sees; regression targets are in their own units.
    ``color_range`` (2-D regression or two classes): the colour scale's (min, max), so that figures
    drawn side by side colour one value alike (:func:`shared_color_range`); default: this fit's own.
    A surface with the posterior on its grid gets the 90% band over 1-D data
    (:mod:`krr_app.charts.uncertainty`, which also draws the 2-D map).
    """
    if surface is None or data.d not in (1, 2):
        return None
    if data.d == 2:
        return _fit_2d(data, surface, height, color_range)
    figure = _fit_1d(data, surface, height)
    if getattr(surface, "uncertainty", None) is not None:
        figure = uncertainty.with_band(figure, data, surface)  # the 2-D map is a figure of its own
    return figure


def shared_color_range(data, surfaces) -> tuple[float, float] | None:
    """One colour scale for fits of ``data`` shown side by side: (min, max) of f over all their
    grids (regression), ±max|f| (two classes: white stays f = 0); None when there is no scale."""
    shown = [fit_display(data, s.values) for s in surfaces if s is not None]
    shown = [v[np.isfinite(v)] for v in shown]
    shown = [v for v in shown if v.size]
    if data.d != 2 or data.task not in ("regression", "binary") or not shown:
        return None
    if data.task == "binary":
        bound = max(float(np.abs(v).max()) for v in shown) or 1.0
        return -bound, bound
    return min(float(v.min()) for v in shown), max(float(v.max()) for v in shown)


#: The fit figure's traces that a new picture of the model changes (the live chart's fit panel
#: restyles them in place): 1-D data, the curve; 2-D data, the surface and the decision boundary.
FIT_CURVE, FIT_SURFACE, FIT_BOUNDARY, FIT_CLASSES = (
    "fitted f(x)",
    "f(x)",
    "decision boundary f(x) = 0",
    "predicted class",
)


def fit_display(data, values: np.ndarray) -> np.ndarray:
    """What the fit figure plots of a model's grid outputs ``values`` ((points, k)), flat: f in the
    target's units (regression), f (two classes: its sign is the class) or the predicted class's
    index (more classes)."""
    values = np.asarray(values).reshape(len(values), -1)
    if data.task == "regression":
        return data.to_original_units(values[:, 0])
    if data.task == "binary":
        return values[:, 0]
    return predicted_labels(values).astype(np.float64)


def fit_live_traces(data) -> tuple[str, ...]:
    """The names of :func:`fit_figure`'s traces that show the model (what a new picture changes)."""
    if data.d == 1:
        return (FIT_CURVE,)
    if data.task == "binary":
        return FIT_SURFACE, FIT_BOUNDARY
    return (FIT_SURFACE if data.task == "regression" else FIT_CLASSES,)


def _fit_1d(data, surface, height):
    grid = surface.axes[0]
    points, x_title, y_title = point_traces(data)
    fig = go.Figure(points)
    fig.add_trace(
        go.Scatter(
            x=browser_values(grid),
            y=browser_values(fit_display(data, surface.values)),
            mode="lines",
            name=FIT_CURVE,
            line={"color": "#1f77b4", "width": 3},
        )
    )
    return layout(fig, height, top=30, xaxis_title=x_title, yaxis_title=y_title)


def _zero_crossings(z: np.ndarray) -> np.ndarray:
    """A grid with the zero crossings of ``z`` in a quarter of its float64 bytes, for a contour
    drawn at 0 alone: z/max|z| as int16. A positive scale leaves the crossings plotly interpolates
    linearly between neighbouring grid values z₁, z₂ where they were; rounding moves one by at most
    (max|z|/32767)/|z₁ − z₂| of their spacing. (int16 has no NaN: a grid with gaps stays float.)"""
    if not np.isfinite(z).all():
        return browser_values(z)
    return np.rint(z * (32767 / (float(np.abs(z).max()) or 1.0))).astype(np.int16)


def _fit_2d(data, surface, height, color_range=None):
    (gx, gy) = surface.axes
    shape = (len(gy), len(gx))
    gx, gy = browser_values(gx), browser_values(gy)
    z = fit_display(data, surface.values).reshape(shape)
    fig = go.Figure()
    if data.task == "regression":
        fig.add_trace(
            go.Contour(
                x=gx,
                y=gy,
                z=browser_values(z),
                colorscale="Viridis",
                **({"zmin": color_range[0], "zmax": color_range[1]} if color_range else {}),
                opacity=0.75,
                name=FIT_SURFACE,
                colorbar={"title": data.target_name},
            )
        )
    elif data.task == "binary":
        bound = color_range[1] if color_range else float(np.nanmax(np.abs(z))) or 1.0
        fig.add_trace(
            go.Contour(
                x=gx,
                y=gy,
                z=browser_values(z),
                colorscale="RdBu",
                zmin=-bound,
                zmax=bound,
                opacity=0.7,
                name=FIT_SURFACE,
                colorbar={"title": "f(x)"},
                contours={"coloring": "heatmap"},
            )
        )
        # Its hover would show the rescaled grid, not f: the surface below shows f(x) there.
        fig.add_trace(
            go.Contour(
                x=gx,
                y=gy,
                z=_zero_crossings(z),
                showscale=False,
                hoverinfo="skip",
                name=FIT_BOUNDARY,
                contours={"start": 0, "end": 0, "size": 1, "coloring": "none"},
                line={"width": 3, "color": "black"},
            )
        )
    else:
        fig.add_trace(
            go.Heatmap(
                x=gx, y=gy, z=z.astype(np.int16), colorscale="Turbo", opacity=0.45, showscale=False, name=FIT_CLASSES
            )
        )
    points, x_title, y_title = point_traces(data, colorbar=False)  # the surface has the colour bar
    fig.add_traces(points)
    return layout(fig, height, top=30, xaxis_title=x_title, yaxis_title=y_title)

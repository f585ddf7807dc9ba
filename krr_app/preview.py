"""The data before any run: what Explore draws the moment a data set is chosen.

1-D data: the points (x, y), train and test. 2-D data: the points in the plane, coloured by
class or target. More dimensions: the training points on their first two principal components
(:func:`krrcore.diagnostics.data.projection_2d`, with the share of variance each holds), coloured
the same way, and a one-line summary. Plain data in, a plotly figure out (no Streamlit here).
"""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from krrcore.diagnostics.data import projection_2d

#: Points drawn (a seeded subsample beyond this keeps the browser quick).
MAX_POINTS = 2000
_COLOURS = {"train": "#7f7f7f", "test": "#ff7f0e"}


def _rows(n: int, limit: int = MAX_POINTS) -> np.ndarray:
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, size=limit, replace=False))


def _colour(data, y: np.ndarray) -> tuple[np.ndarray, str, str]:
    """Marker colours for targets ``y``: the target's value (regression), ±1 (binary) or the class index."""
    if data.task == "regression":
        return data.to_original_units(y), "Viridis", data.target_name
    if data.task == "binary":
        return y.reshape(len(y), -1)[:, 0], "RdBu", "class (±1)"
    return y.argmax(1).astype(float), "Turbo", "class"


def point_traces(data, *, colorbar: bool = True) -> tuple[list, str, str]:
    """The data's points as plotly traces, with the x and y axis titles: y against x with train and
    test points (1-D); the training points in the plane (2-D) or on their first two principal
    components (more dimensions), coloured by target or class. The fit figures draw their points
    with it."""
    if data.d == 1:
        traces = []
        for name, X, y in (("train", data.X_train, data.y_train), ("test", data.X_test, data.y_test)):
            idx = _rows(len(X))
            values = data.to_original_units(y[idx]) if data.task == "regression" else y[idx].reshape(len(idx), -1)[:, 0]
            traces.append(go.Scatter(x=X[idx, 0], y=values, mode="markers", name=f"{name} points",
                                     marker={"size": 5, "color": _COLOURS[name], "opacity": 0.55}))
        return traces, f"{data.feature_names[0]} (standardised)", data.target_name
    idx = _rows(data.n_train)
    if data.d == 2:
        coords, titles = data.X_train[idx], [f"{data.feature_names[i]} (standardised)" for i in (0, 1)]
    else:
        coords, titles = projection_2d(data.X_train[idx])
    colour, scale, title = _colour(data, data.y_train[idx])
    marker = {"color": colour, "colorscale": scale, "size": 6, "line": {"width": 0.6, "color": "white"}}
    if colorbar:
        marker["colorbar"] = {"title": title}
    return [go.Scatter(x=coords[:, 0], y=coords[:, 1], mode="markers", name="training points", marker=marker)], *titles


def data_figure(data, *, height: int = 420) -> go.Figure:
    """The data set as a picture (:func:`point_traces`)."""
    traces, x_title, y_title = point_traces(data)
    fig = go.Figure(traces)
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10}, xaxis_title=x_title,
                      yaxis_title=y_title, legend={"orientation": "h", "yanchor": "top", "y": -0.15, "x": 0})
    return fig


def summary(data) -> str:
    """One line: sizes, task and the target's spread or classes."""
    parts = [f"n = {data.n_train:,} training + {data.n_test:,} test points", f"d = {data.d:,} feature"
             + ("s" if data.d != 1 else ""), f"task: {data.task}"]
    if data.task == "regression":
        y = data.to_original_units(data.y_train)
        parts.append(f"{data.target_name}: mean {np.mean(y):.4g}, std {np.std(y):.4g}")
    elif data.classes is not None:
        parts.append(f"{len(data.classes)} classes")
    return " · ".join(parts)

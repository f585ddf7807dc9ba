"""Plotly figures and CSV tables built from runs: plain data in, figures out (no Streamlit here).

* :func:`convergence_figure`: residual and test metric against iteration or seconds, log scale,
  one colour per run (Explore shows one run, Compare overlays several), as the papers plot them
  (FALKON Fig. 1; ASkotch Fig. 2 and 3 use solver time on the x axis).
* :func:`fit_figure`: the fitted function over 1-D data, or the prediction surface over 2-D data.
* :func:`traces_frame` / :func:`summary_frame`: what the CSV downloads and the Compare table hold.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from krrcore.metrics import predicted_labels

PALETTE = qualitative.Plotly + qualitative.D3
X_AXES = {"iteration": "iteration t", "seconds": "solver time (s)"}
METRIC_NAMES = {"mse": "MSE", "rmse": "RMSE", "mae": "MAE", "relative_error": "relative error", "smape": "SMAPE",
                "classification_error": "classification error", "auc": "AUC"}
#: Points drawn over a fit plot (more only slows the browser down).
MAX_SCATTER = 2000


def metric_title(name: str) -> str:
    return METRIC_NAMES.get(name, name or "metric")


def _finite_positive(xs, ys):
    pairs = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y) and y > 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def convergence_figure(runs, x: str = "iteration", *, height: int = 380) -> go.Figure:
    """Two panels sharing the x axis: the solver's residual and the test metric per iteration.

    Log-scale y (zero values, e.g. a perfect classification error, cannot be drawn on it and are
    left out). A direct solver has one record (its float64 residual, ~1e-13): it appears as a single marker.
    """
    if x not in X_AXES:
        raise ValueError(f"x must be one of {sorted(X_AXES)}, got {x!r}")
    metrics = sorted({r.metric for run in runs for r in run.records if r.metric})
    metric = metric_title(metrics[0]) if len(metrics) == 1 else "metric"
    tracked_train = any(math.isfinite(r.train_metric) for run in runs for r in run.records)
    title = f"Test {metric}" + (" (train: dotted)" if tracked_train else "")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("Residual (solver's own measure)", title),
                        horizontal_spacing=0.1)
    for i, run in enumerate(runs):
        records = run.records
        color = PALETTE[i % len(PALETTE)]
        xs = [getattr(r, x) for r in records]
        mode = "lines+markers" if len(records) <= 60 else "lines"
        for col, field, dash in ((1, "residual", None), (2, "val_metric", None), (2, "train_metric", "dot")):
            px, py = _finite_positive(xs, [getattr(r, field) for r in records])
            if field == "train_metric" and not px:
                continue      # only drawn when the run tracked it
            name = run.label + (" (train)" if field == "train_metric" else "")
            fig.add_trace(go.Scatter(x=px, y=py, mode=mode if len(px) > 1 else "markers", name=name,
                                     legendgroup=run.id, showlegend=col == 2, line={"color": color, "dash": dash},
                                     marker={"color": color, "size": 6 if len(px) > 1 else 11},
                                     hovertemplate=f"{name}<br>{X_AXES[x]}=%{{x}}<br>{field}=%{{y:.4g}}"
                                                   "<extra></extra>"),
                          row=1, col=col)
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=1)
    # A test error usually spans a decade or two: plain numbers at 1, 2, 5 × 10^k read best.
    fig.update_yaxes(type="log", tickformat=".2~g", dtick="D2", row=1, col=2)
    fig.update_xaxes(title_text=X_AXES[x])
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"orientation": "h", "yanchor": "top", "y": -0.2, "x": 0})
    return fig


def traces_frame(runs) -> pd.DataFrame:
    """Every record of every run, one row each, with the run's id, label and configuration."""
    frames = []
    for run in runs:
        rows = [r.as_row() for r in run.records]
        if not rows:
            continue
        frame = pd.DataFrame(rows)
        for k, v in reversed(list({"run_id": run.id, "run": run.label, "status": run.status,
                                   **run.config.as_dict()}.items())):
            frame.insert(0, k, [v] * len(frame))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: Test metrics Compare's table shows (the CSV download has them all).
TABLE_METRICS = ("rmse", "mae", "classification_error", "auc")


def summary_frame(runs, metrics: tuple[str, ...] | None = TABLE_METRICS) -> pd.DataFrame:
    """One row per run: final test metrics (``metrics``; None: all), iterations, time and memory."""
    rows = []
    for run in runs:
        records = run.records
        row = {"run": run.label, "status": run.status, "iterations": records[-1].iteration if records else 0}
        for key, value in run.metrics.items():
            if key.startswith("test_") and (metrics is None or key[5:] in metrics):
                row[f"test {metric_title(key[5:])}"] = value
        row["solver s"] = run.timings.get("solver_seconds", math.nan)
        row["wall s"] = run.timings.get("wall_seconds", math.nan)
        row["peak memory MB"] = (run.peak_memory_bytes / 2**20) if run.peak_memory_bytes is not None else math.nan
        row["id"] = run.id
        rows.append(row)
    return pd.DataFrame(rows)


def _subsample(n: int, limit: int, seed: int = 0) -> np.ndarray:
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def fit_figure(data, surface, *, height: int = 420) -> go.Figure | None:
    """The fitted function (1-D data) or prediction surface (2-D data) over the points, from the
    grid predictions a worker computed (:class:`krrcore.surface.FitSurface`); None otherwise.

    Axes are the z-scored features the model sees; regression targets are in their own units.
    """
    if surface is None or data.d not in (1, 2):
        return None
    return (_fit_1d if data.d == 1 else _fit_2d)(data, surface, height)


def _fit_1d(data, surface, height):
    grid, pred = surface.axes[0], surface.values
    fig = go.Figure()
    for name, Xs, ys, color in (("train", data.X_train, data.y_train, "#7f7f7f"),
                                ("test", data.X_test, data.y_test, "#ff7f0e")):
        idx = _subsample(len(Xs), MAX_SCATTER)
        yv = data.to_original_units(ys[idx]) if data.task == "regression" else ys[idx].reshape(len(idx), -1)[:, 0]
        fig.add_trace(go.Scatter(x=Xs[idx, 0], y=yv, mode="markers", name=f"{name} points",
                                 marker={"size": 5, "color": color, "opacity": 0.55}))
    curve = data.to_original_units(pred[:, 0]) if data.task == "regression" else pred[:, 0]
    fig.add_trace(go.Scatter(x=grid, y=curve, mode="lines", name="fitted f(x)",
                             line={"color": "#1f77b4", "width": 3}))
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      xaxis_title=f"{data.feature_names[0]} (standardised)", yaxis_title=data.target_name)
    return fig


def _fit_2d(data, surface, height):
    (gx, gy), pred = surface.axes, surface.values
    shape = (len(gy), len(gx))
    fig = go.Figure()
    if data.task == "regression":
        z = data.to_original_units(pred[:, 0]).reshape(shape)
        fig.add_trace(go.Contour(x=gx, y=gy, z=z, colorscale="Viridis", opacity=0.75, name="f(x)",
                                 colorbar={"title": data.target_name}))
    elif data.task == "binary":
        z = pred[:, 0].reshape(shape)
        bound = float(np.nanmax(np.abs(z))) or 1.0
        fig.add_trace(go.Contour(x=gx, y=gy, z=z, colorscale="RdBu", zmin=-bound, zmax=bound, opacity=0.7,
                                 name="f(x)", colorbar={"title": "f(x)"}, contours={"coloring": "heatmap"}))
        fig.add_trace(go.Contour(x=gx, y=gy, z=z, showscale=False, name="decision boundary f(x) = 0",
                                 contours={"start": 0, "end": 0, "size": 1, "coloring": "none"},
                                 line={"width": 3, "color": "black"}))
    else:
        z = predicted_labels(pred).reshape(shape).astype(float)
        fig.add_trace(go.Heatmap(x=gx, y=gy, z=z, colorscale="Turbo", opacity=0.45, showscale=False,
                                 name="predicted class"))
    idx = _subsample(data.n_train, MAX_SCATTER)
    Xs = data.X_train[idx]
    if data.task == "regression":
        color, scale = data.to_original_units(data.y_train[idx]), "Viridis"
    elif data.task == "binary":
        color, scale = data.y_train[idx], "RdBu"
    else:
        color, scale = data.y_train[idx].argmax(1).astype(float), "Turbo"
    fig.add_trace(go.Scatter(x=Xs[:, 0], y=Xs[:, 1], mode="markers", name="training points",
                             marker={"color": color, "colorscale": scale, "size": 6,
                                     "line": {"width": 0.6, "color": "white"}}))
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      xaxis_title=f"{data.feature_names[0]} (standardised)",
                      yaxis_title=f"{data.feature_names[1]} (standardised)",
                      legend={"orientation": "h", "yanchor": "top", "y": -0.15, "x": 0})
    return fig

"""The Tune page's figures from a tuning run's records and map: plain data in, figures out.

* :func:`tuning_frame`: one row per record (step, stage, σ, λ, objective, validation error) — the
  table the page offers as a CSV, and what every figure here plots.
* :func:`progress_figure`: the objective and the validation error per step.
* :func:`map_figure`: the objective over a (log λ, log σ) grid (:func:`krrcore.tuning.validation_map`,
  computed on a worker), its valley (the best λ of each σ), and the path the search took.
* :func:`m_curve_figure`: the validated error against M when M is searched (``M="auto"``).
* :func:`stop_words`: why the search stopped, in sentences.

The per-feature relevance bars (1/σ_j) are :func:`krr_app.charts.data.relevance_figure`, shared with
the Dataset page.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from krrcore.numbers import readable
from krrcore.tuning import OBJECTIVES, STAGES

from krr_app.charts.figures import PALETTE, layout, metric_title

#: Objective names as the figures write them.
OBJECTIVE_TITLES = {"gcv": "GCV", "holdout": "hold-out error", "compreg": "complexity-regularised objective"}
#: Colour of each stage's markers (the start, the σ scan, the descent, ARD, the centres, the final fit).
STAGE_COLOURS = {0: "#444444", 1: PALETTE[4], 2: PALETTE[0], 3: PALETTE[2], 4: PALETTE[3], 5: PALETTE[1]}


def _finite(value) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def tuning_frame(records) -> pd.DataFrame:
    """One row per record of a tuning run (:class:`krrcore.stream.IterationRecord`)."""
    rows = []
    for r in records:
        extras = r.extras
        rows.append(
            {
                "step": r.iteration,
                "stage": STAGES.get(int(extras.get("stage", 0)), ""),
                "stage code": int(extras.get("stage", 0)),
                "seconds": r.seconds,
                "σ (geometric mean)": extras.get("sigma"),
                "λ": extras.get("penalty"),
                "objective": _finite(r.objective),
                "validation error": _finite(r.val_metric),
                "relative hypergradient": _finite(r.residual),
            }
        )
    return pd.DataFrame(rows)


def progress_figure(frame: pd.DataFrame, objective: str, metric: str = "mse", *, height: int = 340) -> go.Figure:
    """Two panels sharing the step axis: the tuning objective and the validation (test) error of
    the model at each step's σ and λ; markers coloured by stage."""
    name = OBJECTIVE_TITLES.get(objective, objective)
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=(f"Objective: {name}", f"Validation {metric_title(metric)}"),
    )
    for col, column in ((1, "objective"), (2, "validation error")):
        ys = frame[column] if column in frame else pd.Series(dtype=float)
        fig.add_trace(
            go.Scatter(
                x=frame["step"], y=ys, mode="lines", line={"color": "#bbbbbb"}, showlegend=False, hoverinfo="skip"
            ),
            row=1,
            col=col,
        )
        for code, part in frame.groupby("stage code"):
            fig.add_trace(
                go.Scatter(
                    x=part["step"],
                    y=part[column],
                    mode="markers",
                    name=STAGES.get(code, ""),
                    legendgroup=str(code),
                    showlegend=col == 1,
                    marker={"color": STAGE_COLOURS.get(code, PALETTE[5]), "size": 7},
                    hovertemplate=f"step %{{x}}<br>{column} %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="step (one evaluation of the objective)")
    positive = frame["objective"].dropna()
    fig.update_yaxes(
        type="log" if len(positive) and (positive > 0).all() else "linear", exponentformat="power", row=1, col=1
    )
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=2)
    return layout(fig, height)


def map_figure(grid: dict | None, frame: pd.DataFrame, *, height: int = 440) -> go.Figure:
    """The objective over (log₁₀ λ, log₁₀ σ) as a heat map (log₁₀ of its value), the valley (each
    σ's best λ) and the search's path — start, steps, the point kept. ``grid``: a
    :func:`krrcore.tuning.validation_map` result, or None while it is computed (the path alone)."""
    fig = go.Figure()
    if grid is not None:
        values = np.asarray(grid["values"], dtype=float)
        shown = np.where(values > 0, np.log10(np.where(values > 0, values, 1.0)), np.nan)
        title = OBJECTIVE_TITLES.get(grid["objective"], grid["objective"])
        fig.add_trace(
            go.Heatmap(
                x=grid["log10_penalty"],
                y=grid["log10_sigma"],
                z=shown,
                colorscale="Viridis",
                reversescale=True,
                name=f"log₁₀ {title}",
                colorbar={"title": {"text": f"log₁₀ {title}", "side": "right"}, "len": 0.8},
                hovertemplate="log₁₀ λ %{x:.2f}<br>log₁₀ σ %{y:.2f}<br>log₁₀ objective %{z:.3f}<extra></extra>",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=grid["best_log10_penalty"],
                y=grid["log10_sigma"],
                mode="lines",
                name="valley: each σ's best λ",
                line={"color": "white", "dash": "dot", "width": 2},
            )
        )
    path = frame.dropna(subset=["σ (geometric mean)", "λ"])
    path = path[path["stage code"] < 5]
    if len(path):
        xs, ys = np.log10(path["λ"].astype(float)), np.log10(path["σ (geometric mean)"].astype(float))
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=ys,
                mode="lines+markers",
                name="the search's path",
                line={"color": "#e45756", "width": 2},
                marker={"size": 6, "color": "#e45756"},
                customdata=path["step"],
                hovertemplate="step %{customdata}<br>log₁₀ λ %{x:.2f}<br>log₁₀ σ %{y:.2f}<extra></extra>",
            )
        )
        first = path.iloc[0]
        fig.add_trace(
            go.Scatter(
                x=xs[:1],
                y=ys[:1],
                mode="markers",
                name=f"start (σ = {first['σ (geometric mean)']:.3g}, λ = {first['λ']:.2g})",
                marker={"symbol": "circle-open", "size": 14, "color": "white", "line": {"width": 3}},
            )
        )
        final = frame[frame["stage code"] == 5]
        best = (
            final.iloc[-1]
            if len(final)
            else (path.loc[path["objective"].idxmin()] if path["objective"].notna().any() else path.iloc[-1])
        )
        fig.add_trace(
            go.Scatter(
                x=[math.log10(best["λ"])],
                y=[math.log10(best["σ (geometric mean)"])],
                mode="markers",
                name=f"tuned (σ = {readable(best['σ (geometric mean)'], 3)}, λ = {readable(best['λ'], 2)})",
                marker={"symbol": "star", "size": 18, "color": "#ffd700", "line": {"width": 1, "color": "black"}},
            )
        )
    fig.update_xaxes(title_text="log₁₀ λ")
    fig.update_yaxes(title_text="log₁₀ σ")
    return layout(fig, height)


def m_curve_figure(curve, chosen: int, *, height: int = 300) -> go.Figure:
    """The validated error against M (``M="auto"``: M doubled until the error stopped improving),
    the M kept marked."""
    Ms, errors = [int(m) for m, _ in curve], [float(e) for _, e in curve]
    fig = go.Figure(
        go.Scatter(
            x=Ms,
            y=errors,
            mode="lines+markers",
            name="validated error (held-out rows)",
            line={"color": PALETTE[0]},
            hovertemplate="M %{x:,}<br>validated MSE %{y:.4g}<extra></extra>",
        )
    )
    if chosen in Ms:
        fig.add_trace(
            go.Scatter(
                x=[chosen],
                y=[errors[Ms.index(chosen)]],
                mode="markers",
                name=f"M kept ({chosen:,})",
                marker={"symbol": "star", "size": 16, "color": "#ffd700", "line": {"width": 1, "color": "black"}},
            )
        )
    fig.update_xaxes(title_text="M (centres)", type="log")
    fig.update_yaxes(title_text="validated MSE", type="log", exponentformat="power")
    return layout(fig, height)


def stop_words(reason: str) -> str:
    """A tuning run's stop reason (the library's, in words: :func:`krrcore.tuning.search.lbfgs_words`
    names the optimiser's messages) as sentences, one per part."""
    parts = [p.strip() for p in (reason or "").split(";") if p.strip()]
    return " ".join(p[0].upper() + p[1:] + ("" if p.endswith(".") else ".") for p in parts)


def objective_text(objective: str) -> str:
    """What the objective measures, in one sentence (:data:`krrcore.tuning.OBJECTIVES`)."""
    return f"{OBJECTIVE_TITLES.get(objective, objective)}: {OBJECTIVES.get(objective, '')}"

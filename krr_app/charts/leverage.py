"""The Leverage scores page's figures: exact against approximate scores (histogram and scatter), the
BLESS path of λ against d_eff and dictionary size, and the centres chosen on the data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from krr_app.charts.figures import PALETTE, layout

#: Points drawn in a scatter (more only slows the browser down).
MAX_POINTS = 3000


def score_histogram(points: pd.DataFrame, *, height: int = 340) -> go.Figure:
    """Distribution of exact and approximate scores over log₁₀ bins (scores span many decades)."""
    fig = go.Figure()
    positive = points[(points["exact"] > 0) & (points["approximate"] > 0)]
    lo = float(np.log10(positive[["exact", "approximate"]].to_numpy().min()))
    hi = float(np.log10(positive[["exact", "approximate"]].to_numpy().max()))
    bins = {"start": lo, "end": hi + 1e-9, "size": max((hi - lo) / 40, 1e-3)}
    for col, color, label in (
        ("exact", PALETTE[0], "exact ℓ(i, λ)"),
        ("approximate", PALETTE[1], "approximate ℓ̃(i, λ)"),
    ):
        fig.add_trace(go.Histogram(x=np.log10(positive[col]), xbins=bins, name=label, marker_color=color, opacity=0.6))
    fig.update_xaxes(title_text="log₁₀ leverage score")
    fig.update_yaxes(title_text="points")
    return layout(fig, height, barmode="overlay")


def score_scatter_points(points: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """What the scores' scatter draws (:func:`score_scatter`, :func:`krr_app.charts.images.scores_image`):
    up to MAX_POINTS evenly spaced points with both scores positive (a log-log plot), and 50
    log-spaced exact scores over their range, where the line ℓ̃ = ℓ and the R-ACC band are drawn."""
    shown = points.iloc[np.linspace(0, len(points) - 1, min(len(points), MAX_POINTS)).astype(int)]
    shown = shown[(shown["exact"] > 0) & (shown["approximate"] > 0)]
    return shown, np.geomspace(float(shown["exact"].min()), float(shown["exact"].max()), 50)


def score_scatter(points: pd.DataFrame, r_acc: dict, *, height: int = 380) -> go.Figure:
    """Approximate against exact scores (log-log) with the line ℓ̃ = ℓ and the R-ACC band between
    the 5th and 95th percentiles of ℓ̃/ℓ (the accuracy BLESS Fig. 1 reports)."""
    shown, xs = score_scatter_points(points)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=np.concatenate([xs, xs[::-1]]),
            y=np.concatenate([xs * r_acc["q95"], (xs * r_acc["q05"])[::-1]]),
            fill="toself",
            fillcolor="rgba(31,119,180,0.15)",
            line={"width": 0},
            name=f"R-ACC 5–95% band [{r_acc['q05']:.2f}, {r_acc['q95']:.2f}]",
            hoverinfo="skip",
        )
    )
    fig.add_trace(go.Scatter(x=xs, y=xs, mode="lines", name="ℓ̃ = ℓ", line={"color": "#444", "dash": "dash"}))
    fig.add_trace(
        go.Scatter(
            x=shown["exact"],
            y=shown["approximate"],
            mode="markers",
            name="points",
            marker={"size": 5, "color": PALETTE[1], "opacity": 0.6},
            customdata=shown["index"],
            hovertemplate="point %{customdata}<br>ℓ=%{x:.3g}<br>ℓ̃=%{y:.3g}<extra></extra>",
        )
    )
    fig.update_xaxes(type="log", exponentformat="power", title_text="exact ℓ(i, λ)")
    fig.update_yaxes(type="log", exponentformat="power", title_text="approximate ℓ̃(i, λ)")
    return layout(fig, height)


def path_figure(path: pd.DataFrame, *, height: int = 380) -> go.Figure:
    """d_eff(λ_h) (the sampler's estimate and exact), d_∞(λ_h) and |J_h| along the λ path."""
    fig = go.Figure()
    series = (
        ("d_eff", "d_eff estimate (sampler)", PALETTE[1], "solid"),
        ("d_eff exact", "d_eff(λ) exact", PALETTE[0], "solid"),
        ("d_inf exact", "d_∞(λ) = n·max ℓ exact", PALETTE[3], "dash"),
        ("size", "dictionary size |J_h|", PALETTE[2], "dot"),
    )
    for col, label, color, dash in series:
        if col in path:
            fig.add_trace(
                go.Scatter(
                    x=path["penalty"],
                    y=path[col],
                    name=label,
                    mode="lines+markers",
                    line={"color": color, "dash": dash},
                    marker={"size": 6},
                    hovertemplate=f"{label}<br>λ=%{{x:.3g}}<br>%{{y:.4g}}<extra></extra>",
                )
            )
    fig.update_xaxes(
        type="log", exponentformat="power", title_text="λ_h (the path runs right to left)", autorange="reversed"
    )
    fig.update_yaxes(type="log", exponentformat="power", title_text="dimension / points")
    return layout(fig, height)


def centers_figure(
    coords: np.ndarray,
    axes: tuple[str, str],
    indices: np.ndarray,
    *,
    colour=None,
    colour_title: str = "",
    weights=None,
    title: str = "",
    height: int = 380,
) -> go.Figure:
    """All points (grey, or coloured by ``colour``) and the selected centres on top (red crosses,
    sized by their FALKON weight D_jj when given)."""
    fig = go.Figure()
    idx = np.linspace(0, len(coords) - 1, min(len(coords), MAX_POINTS)).astype(int)
    marker = {"size": 5, "color": "#bbbbbb"}
    if colour is not None:
        marker = {
            "size": 5,
            "color": np.log10(np.clip(np.asarray(colour)[idx], 1e-300, None)),
            "colorscale": "Viridis",
            "colorbar": {"title": colour_title, "len": 0.8},
        }
    fig.add_trace(
        go.Scatter(x=coords[idx, 0], y=coords[idx, 1], mode="markers", name="data", marker=marker, hoverinfo="skip")
    )
    size = 10
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        size = (7 + 9 * (w - w.min()) / (np.ptp(w) or 1.0)).tolist()
    fig.add_trace(
        go.Scatter(
            x=coords[indices, 0],
            y=coords[indices, 1],
            mode="markers",
            name=f"{len(indices)} centres",
            customdata=indices,
            marker={"symbol": "x", "size": size, "color": "#d62728", "line": {"width": 1, "color": "white"}},
            hovertemplate="centre: point %{customdata}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text=axes[0])
    fig.update_yaxes(title_text=axes[1])
    return layout(fig, height, title={"text": title, "x": 0, "font": {"size": 14}})


# -- dataset diagnostics -----------------------------------------------------------------------

"""The Dataset page's figures: the target's distribution or class counts, the features' scales,
the effective dimension d_eff(λ) of the data's kernel, and the features' relevance from a tuning."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from krr_app.charts.figures import PALETTE, bar_axis, estimate_suffix, guide, layout, positive_span
from krr_app.text import chart_text


def target_figure(dataset, *, height: int = 320) -> go.Figure:
    """Histogram of the regression target (original units), or class counts per split."""
    fig = go.Figure()
    if dataset.task == "regression":
        for split, y, color in (("train", dataset.y_train, PALETTE[0]), ("test", dataset.y_test, PALETTE[1])):
            fig.add_trace(
                go.Histogram(x=dataset.to_original_units(np.asarray(y)), name=split, opacity=0.65, marker_color=color)
            )
        unit = f" ({dataset.target_unit})" if dataset.target_unit else ""
        fig.update_xaxes(title_text=chart_text(f"{dataset.target_name}{unit}"))
        fig.update_yaxes(title_text="rows")
        return layout(fig, height, barmode="overlay")
    return layout(_class_counts(fig, target_frame(dataset)), height, barmode="group")


def _class_counts(fig: go.Figure, frame: pd.DataFrame) -> go.Figure:
    for i, split in enumerate(("train", "test")):
        fig.add_trace(go.Bar(x=frame["class"].map(chart_text), y=frame[split], name=split, marker_color=PALETTE[i]))
    fig.update_xaxes(title_text="class", type="category")
    fig.update_yaxes(title_text="rows")
    return fig


def target_frame(dataset) -> pd.DataFrame:
    """The target's values (regression) or class counts per split (classification), as a table."""
    if dataset.task == "regression":
        return pd.concat(
            [
                pd.DataFrame({"split": split, dataset.target_name: dataset.to_original_units(np.asarray(y))})
                for split, y in (("train", dataset.y_train), ("test", dataset.y_test))
            ],
            ignore_index=True,
        )
    rows = []
    for c in dataset.classes.tolist():
        rows.append(
            {
                "class": str(c),
                "train": int(np.sum(dataset.labels_train == c)),
                "test": int(np.sum(dataset.labels_test == c)),
            }
        )
    return pd.DataFrame(rows)


def feature_scales_figure(features: pd.DataFrame, *, height: int = 320) -> go.Figure:
    """Standard deviation of each feature in its original units: the spread z-scoring removes."""
    std = features["std (original units)"].where(features["std (original units)"] > 0)
    fig = go.Figure(go.Bar(x=features["feature"].map(chart_text), y=std, marker_color=PALETTE[0], name="std"))
    fig.update_yaxes(type=bar_axis(std), exponentformat="power", title_text="std in original units")
    fig.update_xaxes(title_text="feature", type="category")
    return layout(fig, height)


def deff_figure(
    curves: dict[str, pd.DataFrame], *, marks: dict[str, float] | None = None, n: int | None = None, height: int = 360
) -> go.Figure:
    """d_eff(λ) = Tr K(K + λnI)⁻¹ for each kernel in ``curves``; ``marks`` are labelled vertical lines."""
    fig = go.Figure()
    for i, (label, frame) in enumerate(curves.items()):
        method = frame["method"].iloc[0]
        fig.add_trace(
            go.Scatter(
                x=frame["penalty"],
                y=frame["d_eff"],
                name=label + estimate_suffix(method),
                mode="lines+markers",
                line={"color": PALETTE[i % len(PALETTE)]},
                hovertemplate="λ=%{x:.3g}<br>d_eff=%{y:.4g}<extra></extra>",
            )
        )
    penalties = np.concatenate([c["penalty"].to_numpy() for c in curves.values()]) if curves else np.array([1.0])
    values = np.concatenate([c["d_eff"].to_numpy() for c in curves.values()]) if curves else np.array([1.0])
    if n is not None:
        guide(fig, y=n, label=f"n = {n:,}", span=positive_span(penalties), dash="dash")
    by_value: dict[float, list[str]] = {}
    for label, value in (marks or {}).items():  # marks at the same λ share one line and one label
        by_value.setdefault(value, []).append(label)
    for value, labels in by_value.items():
        guide(fig, x=value, label=" = ".join(labels), span=positive_span(np.append(values, n or 1)))
    fig.update_xaxes(type="log", exponentformat="power", title_text="λ")
    fig.update_yaxes(type="log", exponentformat="power", title_text="d_eff(λ)")
    return layout(fig, height)


#: A feature whose relevance 1/σ_j is below this share of the largest is drawn as switched off.
OFF_SHARE = 1e-6


def relevance_figure(features, relevance, *, height: int = 320) -> go.Figure:
    """Each feature's relevance 1/σ_j from a tuning with one σ per feature (ARD): how strongly the
    kernel, hence the fitted function, moves with it. Features the tuning switched off (relevance
    below :data:`OFF_SHARE` of the largest) are drawn as such at zero."""
    relevance = np.asarray(relevance, dtype=float)
    off = relevance < OFF_SHARE * relevance.max()
    colours = [PALETTE[7] if o else PALETTE[0] for o in off]
    fig = go.Figure(
        go.Bar(
            x=[str(f) for f in features],
            y=np.where(off, 0.0, relevance),
            marker_color=colours,
            name="relevance 1/σ_j",
            text=["off" if o else "" for o in off],
            textposition="outside",
            hovertemplate="%{x}: 1/σ = %{y:.3g}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="feature", type="category")
    fig.update_yaxes(title_text="relevance 1/σ_j")
    return layout(fig, height)

"""Plotly figures and CSV tables built from runs: plain data in, figures out (no Streamlit here).

* :func:`convergence_figure`: residual and test metric against iteration or seconds, log scale,
  one colour per run (Explore shows one run, Compare overlays several), as the papers plot them
  (FALKON Fig. 1; ASkotch Fig. 2 and 3 use solver time on the x axis).
* The fitted function / prediction surface of a run: :mod:`krr_app.charts.fit`.
* :func:`traces_frame` / :func:`summary_frame`: what the CSV downloads and the Compare table hold.
* The Conditioning page's figures (spectra, κ against λ and M, ASkotch's blocks); the Leverage
  page's are :mod:`krr_app.charts.leverage`, the Dataset page's :mod:`krr_app.charts.data`. Every
  figure plots exactly the table the page offers as a CSV download, so what a student downloads is
  what they saw. Estimated values (Lanczos, Nyström) are drawn with open markers and say so in the
  legend; :func:`guide`, :func:`bar_axis` and :func:`positive_span` are the rules they share.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from krr_app import units
from krr_app.units import METRIC_NAMES, metric_title  # noqa: F401  (re-exported: pages name metrics through charts)
from krrcore.numbers import D3_FORMAT, readable

PALETTE = qualitative.Plotly + qualitative.D3
X_AXES = {"iteration": "iteration t", "seconds": "solver time (s)"}


RESIDUAL_TITLE = "Residual (solver's own measure)"
#: The residual's name in hover text.
RESIDUAL_HOVER = "relative residual"
#: What an empty convergence figure (no run yet) says in each panel.
EMPTY_TEXT = "drawn as the solver runs"

MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}
#: Every figure's legend: one horizontal row (wrapping as needed) at the bottom of the figure,
#: placed in the figure's own ("container") coordinates. plotly reserves the legend's height as
#: bottom margin and lays the x axes' tick labels and titles out above it. A legend placed at
#: y < 0 in plot ("paper") coordinates sits a fixed share of the plot's height below the axis: too
#: little for the tick labels and title once the plot is short, the column narrow or the legend
#: wraps, and then it covers the x-axis title.
LEGEND_BELOW = {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0}


def layout(fig: go.Figure, height: int, *, top: int = MARGIN["t"], **kwargs) -> go.Figure:
    """Every figure's height, margins (``top`` leaves room for titles) and legend (:data:`LEGEND_BELOW`),
    and its hover numbers written by :func:`krrcore.numbers.readable` (:func:`readable_hover`)."""
    fig.update_layout(height=height, margin={**MARGIN, "t": top}, legend=LEGEND_BELOW, **kwargs)
    return readable_hover(fig)


#: A hover template's x or y with a d3 format that may write an exponent (types g and e).
_HOVER_NUMBER = re.compile(r"%\{(x|y):[^}]*?\.(\d+)~?[ge]\}")


def readable_hover(fig: go.Figure) -> go.Figure:
    """Rewrite each ``%{x:.3g}``/``%{y:.4g}`` of the traces' hover templates as the same values
    written by :func:`~krrcore.numbers.readable` (with that many digits), carried in ``customdata``:
    d3 has no format that writes plain decimals from 10⁻³ to 10⁹ and an exponent only outside."""
    for trace in fig.data:
        template = getattr(trace, "hovertemplate", None)
        if not isinstance(template, str) or not _HOVER_NUMBER.search(template):
            continue
        extra = [] if trace.customdata is None else np.asarray(trace.customdata, dtype=object)
        n = len(trace.x if trace.x is not None else trace.y)
        columns = [] if len(extra) == 0 else [list(c) for c in extra.reshape(len(extra), -1).T]
        if len(columns) == 1:
            template = template.replace("%{customdata}", "%{customdata[0]}")

        def column(match, columns=columns, trace=trace):
            values = np.asarray(getattr(trace, match.group(1)), dtype=np.float64).ravel()
            columns.append([readable(v, int(match.group(2))) for v in values])
            return f"%{{customdata[{len(columns) - 1}]}}"

        template = _HOVER_NUMBER.sub(column, template)
        if any(len(c) != n for c in columns):
            continue  # values of other shapes (a heat map's grid): left as they are
        trace.customdata = np.array(columns, dtype=object).T if columns else None
        trace.hovertemplate = template
    return fig


def _finite_positive(xs, ys):
    pairs = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y) and y > 0]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def convergence_figure(runs, x: str = "iteration", *, height: int = 380) -> go.Figure:
    """Two panels sharing the x axis: the solver's residual and the test metric per iteration.

    Log-scale y (zero values, e.g. a perfect classification error, cannot be drawn on it and are
    left out). A direct solver has one record (its float64 residual, ~1e-13): it appears as a single marker.
    Without records (no run yet) the panels have no scale, and say what will be drawn there.
    """
    if x not in X_AXES:
        raise ValueError(f"x must be one of {sorted(X_AXES)}, got {x!r}")
    labels = sorted(
        {units.metric_label(getattr(run, "data", None), r.metric) for run in runs for r in run.records if r.metric}
    )
    metric = labels[0] if len(labels) == 1 else "metric"
    tracked_train = any(math.isfinite(r.train_metric) for run in runs for r in run.records)
    title = f"Test {metric}" + (" (train: dotted)" if tracked_train else "")
    fig = make_subplots(rows=1, cols=2, subplot_titles=(RESIDUAL_TITLE, title), horizontal_spacing=0.1)
    for i, run in enumerate(runs):
        records = run.records
        color = PALETTE[i % len(PALETTE)]
        xs = [getattr(r, x) for r in records]
        mode = "lines+markers" if len(records) <= 60 else "lines"
        data = getattr(run, "data", None)
        for col, field, dash in ((1, "residual", None), (2, "val_metric", None), (2, "train_metric", "dot")):
            ys = [
                getattr(r, field) if col == 1 else units.shown_value(data, r.metric, getattr(r, field)) for r in records
            ]
            px, py = _finite_positive(xs, ys)
            if field == "train_metric" and not px:
                continue  # only drawn when the run tracked it
            name = run.label + (" (train)" if field == "train_metric" else "")
            fig.add_trace(
                go.Scatter(
                    x=px,
                    y=py,
                    mode=mode if len(px) > 1 else "markers",
                    name=name,
                    legendgroup=run.id,
                    showlegend=col == 2,
                    line={"color": color, "dash": dash},
                    marker={"color": color, "size": 6 if len(px) > 1 else 11},
                    hovertemplate=f"{name}<br>{X_AXES[x]} %{{x:{D3_FORMAT}}}<br>"
                    f"{RESIDUAL_HOVER if col == 1 else metric} "
                    f"%{{y:{'.3g' if col == 1 else '.4g'}}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(type="log", exponentformat="power", row=1, col=1)
    # A test error usually spans a decade or two: plain numbers at 1, 2, 5 × 10^k read best.
    fig.update_yaxes(type="log", tickformat=",.2~r", dtick="D2", row=1, col=2)
    fig.update_xaxes(title_text=X_AXES[x])
    if not fig.data:  # before any run: the panels and their axes' titles, no invented scale
        fig.update_xaxes(showticklabels=False, showgrid=False, zeroline=False)
        fig.update_yaxes(showticklabels=False, showgrid=False)
        for col in (1, 2):  # plotly.js draws a panel only when a trace is in it: an empty one
            fig.add_trace(go.Scatter(x=[], y=[], showlegend=False, hoverinfo="skip"), row=1, col=col)
            fig.add_annotation(
                text=EMPTY_TEXT,
                xref="x domain" if col == 1 else "x2 domain",
                yref="y domain" if col == 1 else "y2 domain",
                x=0.5,
                y=0.5,
                showarrow=False,
                font={"color": "#888"},
            )
    return layout(fig, height)


def traces_frame(runs) -> pd.DataFrame:
    """Every record of every run, one row each, with the run's id, label and configuration."""
    frames = []
    for run in runs:
        rows = [r.as_row() for r in run.records]
        if not rows:
            continue
        frame = pd.DataFrame(rows)
        data = getattr(run, "data", None)
        if units.unit_of(data):  # a regression's test metric as the charts show it: the target's units
            for column in ("val_metric", "train_metric"):
                frame[column] = [units.shown_value(data, r.metric, getattr(r, column)) for r in run.records]
            frame["metric"] = [units.shown_metric(data, r.metric) for r in run.records]
            frame.insert(frame.columns.get_loc("metric") + 1, "metric_unit", units.unit_of(data))
        for k, v in reversed(
            list({"run_id": run.id, "run": run.label, "status": run.status, **run.config.as_dict()}.items())
        ):
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
                unit = units.unit_of(getattr(run, "data", None)) if key[5:] in ("rmse", "mae", "mse") else ""
                row[f"test {metric_title(key[5:])}" + (f" ({unit})" if unit else "")] = value
        row["solver s"] = run.timings.get("solver_seconds", math.nan)
        row["wall s"] = run.timings.get("wall_seconds", math.nan)
        row["peak memory MB"] = (run.peak_memory_bytes / 2**20) if run.peak_memory_bytes is not None else math.nan
        row["id"] = run.id
        rows.append(row)
    return pd.DataFrame(rows)


# -- the diagnostic pages (Conditioning, Leverage scores, Dataset) ------------------------------


def estimate_suffix(method: str) -> str:
    return "" if method == "exact" else f" — estimate, {method}"


def guide(
    fig: go.Figure,
    *,
    x: float | None = None,
    y: float | None = None,
    label: str,
    span: tuple[float, float],
    dash: str = "dot",
) -> None:
    """A labelled vertical (``x``) or horizontal (``y``) line drawn as a trace over ``span``.

    A trace rather than a layout shape: shapes on log axes take log₁₀ coordinates, a trap for
    every caller; a two-point trace is placed in data units on any axis type.
    """
    # the label sits at the first point: the top of a vertical line, the left end of a horizontal one
    xs, ys = ([x, x], [span[1], span[0]]) if x is not None else (list(span), [y, y])
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines+text",
            text=[label, ""],
            textposition="top right",
            line={"dash": dash, "color": "#555", "width": 1.5},
            name=label,
            showlegend=False,
            hoverinfo="skip",
            cliponaxis=False,
        )
    )


def bar_axis(values) -> str:
    """ "log" when bar heights span more than a decade, else "linear": bars on a log axis start at
    the axis' bottom, which exaggerates small differences."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v) & (v > 0)]
    return "log" if v.size and v.max() / v.min() > 10 else "linear"


def positive_span(values) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v) & (v > 0)]
    return (float(v.min()), float(v.max())) if v.size else (1.0, 10.0)


def spectra_frame(spectra: dict[str, dict]) -> pd.DataFrame:
    """Long table of the spectra: one row per eigenvalue (system, method, rank, eigenvalue, relative)."""
    frames = []
    for name, s in spectra.items():
        ev = np.sort(np.asarray(s["eigenvalues"], dtype=np.float64))[::-1]
        top = ev[0] if ev.size and ev[0] > 0 else math.nan
        frames.append(
            pd.DataFrame(
                {
                    "system": name,
                    "method": s["method"],
                    "rank": np.arange(1, ev.size + 1),
                    "eigenvalue": ev,
                    "relative": ev / top,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


#: One colour per system on every Conditioning chart (matched on the label's start).
_SYSTEM_COLOR_KEYS = ("K + λnI", "H̃", "W", "ASkotch")


def system_color(name: str, fallback: int) -> str:
    for i, key in enumerate(_SYSTEM_COLOR_KEYS):
        if name.startswith(key):
            return PALETTE[i % len(PALETTE)]
    return PALETTE[fallback % len(PALETTE)]


def spectra_figure(frame: pd.DataFrame, *, height: int = 380) -> go.Figure:
    """Eigenvalues divided by the largest, against their rank as a fraction of the system's size.

    On this plot a system's condition number is 1/(the curve's lowest value): the spread shows
    directly, whatever the systems' sizes (n for K + λnI, M for the Nyström ones).
    """
    fig = go.Figure()
    for i, (name, part) in enumerate(frame.groupby("system", sort=False)):
        method = part["method"].iloc[0]
        keep = part["relative"] > 0
        x = part["rank"][keep] / len(part)
        fig.add_trace(
            go.Scatter(
                x=x,
                y=part["relative"][keep],
                name=name + estimate_suffix(method),
                mode="lines+markers" if method != "exact" else "lines",
                marker={"symbol": "circle-open", "size": 7},
                line={"color": system_color(name, i), "width": 2.5},
                hovertemplate=f"{name}<br>rank/size=%{{x:.3f}}<br>λᵢ/λ_max=%{{y:.3g}}<extra></extra>",
            )
        )
    fig.update_yaxes(type="log", exponentformat="power", title_text="λᵢ / λ_max")
    fig.update_xaxes(title_text="rank i / system size (largest eigenvalue first)", range=[0, 1.02])
    return layout(fig, height)


def kappa_figure(
    frame: pd.DataFrame,
    x: str,
    *,
    current: float | None = None,
    reference: tuple[str, float] | None = None,
    height: int = 380,
) -> go.Figure:
    """Condition number κ against ``x`` ("penalty" or "M"), one line per system, log-log.

    ``current`` draws a dotted vertical line at the sidebar's value; ``reference`` (label, κ) a
    horizontal line for a system that does not depend on ``x`` (K + λnI against M).
    """
    fig = go.Figure()
    for i, (name, part) in enumerate(frame.groupby("system", sort=False)):
        estimated = part["method"] != "exact"
        y = part["condition_number"].where(np.isfinite(part["condition_number"]))
        color = system_color(name, i)
        fig.add_trace(
            go.Scatter(
                x=part[x],
                y=y,
                name=name,
                mode="lines+markers",
                line={"color": color},
                marker={"color": color, "size": 8, "symbol": np.where(estimated, "circle-open", "circle").tolist()},
                hovertemplate=f"{name}<br>{x}=%{{x:.3g}}<br>κ=%{{y:.3g}}<extra></extra>",
            )
        )
    ys = list(frame["condition_number"]) + ([reference[1]] if reference is not None else [])
    if reference is not None:
        guide(fig, y=reference[1], label=reference[0], span=positive_span(frame[x]), dash="dash")
    if current is not None:
        guide(fig, x=current, label="sidebar", span=positive_span(ys))
    fig.update_yaxes(type="log", exponentformat="power", title_text="condition number κ = λ_max/λ_min")
    fig.update_xaxes(type="log", exponentformat="power", title_text="λ" if x == "penalty" else "M (centres)")
    return layout(fig, height)


def askotch_figure(frame: pd.DataFrame, *, height: int = 340) -> go.Figure:
    """Per block b: κ(K_bb + λnI) against κ of the Nyström-preconditioned block (log scale)."""
    fig = go.Figure()
    blocks = [f"block {b}" for b in frame["block"]]
    fig.add_trace(go.Bar(x=blocks, y=frame["kappa_block"], name="κ(K_bb + λnI)", marker_color=PALETTE[0]))
    fig.add_trace(
        go.Bar(
            x=blocks,
            y=frame["kappa_preconditioned"],
            name="κ((P_b+ρI)^-½ (K_bb+λnI) (P_b+ρI)^-½)",
            marker_color=PALETTE[2],
        )
    )
    fig.update_yaxes(
        type=bar_axis(pd.concat([frame["kappa_block"], frame["kappa_preconditioned"]])),
        exponentformat="power",
        title_text="κ",
    )
    return layout(fig, height, barmode="group")


# -- leverage scores ----------------------------------------------------------------------------

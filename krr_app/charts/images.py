"""Charts as SVG images sent as Markdown: a diagnostic page's first picture, painted the moment the
page arrives, before the chart library (plotly.js, seconds of script for a new visitor's browser)
has loaded — as :mod:`krr_app.charts.preview` draws Explore's data.

:func:`spectra_image` is Conditioning's eigenvalue spectra and :func:`scores_image` the Leverage
page's approximate-against-exact scores: the tables the pages offer as CSV downloads, drawn like
:func:`krr_app.charts.figures.spectra_figure` and :func:`krr_app.charts.leverage.score_scatter` (same axes,
colours, open markers for estimates). Plain data in, Markdown out; no Streamlit here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

import numpy as np
import pandas as pd

from krr_app.charts.figures import PALETTE, estimate_suffix, system_color
from krr_app.charts.leverage import score_scatter_points
from krr_app.charts.preview import _label, dots, svg_markdown, ticks
from krrcore.numbers import readable

WIDTH, HEIGHT = 900, 380
#: Plot area margins (pixels); the legend goes below the x-axis title, one entry a line.
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 12, 48
LEGEND_LINE = 20


@dataclass(frozen=True)
class Series:
    """One thing drawn: a line, markers (open for estimates), or a filled band (a closed polygon)."""

    name: str
    x: np.ndarray
    y: np.ndarray
    colour: str
    mode: str = "lines"  # "lines", "markers", "lines+markers" or "band"
    open_markers: bool = False
    dash: bool = False


def _log_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    """Ticks of a log axis as plotly draws them: 1, 2, 5 × 10^k labelled as plain numbers over two
    decades or fewer, powers of ten (10^k) over more."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    inside = lo / 1.0001, hi * 1.0001
    if b - a <= 2:
        values = [m * 10.0**k for k in range(a, b + 1) for m in (1, 2, 5)]
        return [(v, readable(v, 2)) for v in values if inside[0] <= v <= inside[1]]
    step = max(1, math.ceil((b - a) / 6))
    return [
        (10.0**k, f'10<tspan dy="-6" font-size="10">{str(k).replace("-", "−")}</tspan>')
        for k in range(a, b + 1, step)
        if inside[0] <= 10.0**k <= inside[1]
    ]


def _linear_ticks(lo: float, hi: float) -> list[tuple[float, str]]:
    return [(float(v), _label(float(v))) for v in ticks(lo, hi)]


def _span(values: np.ndarray, log: bool) -> tuple[float, float]:
    v = values[np.isfinite(values) & ((values > 0) if log else True)]
    lo, hi = (float(v.min()), float(v.max())) if v.size else (1.0, 10.0)
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    pad = 0.04 * ((hi - lo) or 1.0)
    return lo - pad, hi + pad


def chart_svg(series: list[Series], *, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False) -> str:
    """``series`` on linear or log axes, with gridlines, titles and a legend below."""
    height = HEIGHT + LEGEND_LINE * len(series)
    plot_bottom = HEIGHT - BOTTOM
    (x0, x1) = _span(np.concatenate([np.asarray(s.x, float) for s in series]), log_x)
    (y0, y1) = _span(np.concatenate([np.asarray(s.y, float) for s in series]), log_y)

    def sx(v):
        v = np.log10(v) if log_x else np.asarray(v, float)
        return LEFT + (v - x0) / (x1 - x0) * (WIDTH - LEFT - RIGHT)

    def sy(v):
        v = np.log10(v) if log_y else np.asarray(v, float)
        return plot_bottom - (v - y0) / (y1 - y0) * (plot_bottom - TOP)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" '
        'font-family="sans-serif" font-size="13" fill="#555">'
    ]
    x_ticks = _log_ticks(10**x0, 10**x1) if log_x else _linear_ticks(x0, x1)
    y_ticks = _log_ticks(10**y0, 10**y1) if log_y else _linear_ticks(y0, y1)
    for t, label in x_ticks:
        x = float(sx(t))
        out.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{plot_bottom}" stroke="#eee"/>'
            f'<text x="{x:.1f}" y="{plot_bottom + 18}" text-anchor="middle">{label}</text>'
        )
    for t, label in y_ticks:
        y = float(sy(t))
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>'
        )
    out.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 10}" text-anchor="middle">{escape(x_title)}</text>'
        f'<text transform="translate(16 {(TOP + plot_bottom) / 2}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_title)}</text>"
    )
    out.append(
        f'<clipPath id="plot"><rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" '
        f'height="{plot_bottom - TOP}"/></clipPath><g clip-path="url(#plot)">'
    )
    for s in series:
        keep = np.isfinite(s.x) & np.isfinite(s.y) & ((s.y > 0) if log_y else True) & ((s.x > 0) if log_x else True)
        xs, ys = sx(np.asarray(s.x, float)[keep]), sy(np.asarray(s.y, float)[keep])
        path = " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(xs, ys))
        if s.mode == "band":
            out.append(f'<polygon points="{path}" fill="{s.colour}" fill-opacity="0.15" stroke="none"/>')
            continue
        if "lines" in s.mode and len(xs) > 1:
            dash = ' stroke-dasharray="6 4"' if s.dash else ""
            out.append(f'<polyline points="{path}" fill="none" stroke="{s.colour}" stroke-width="2.5"{dash}/>')
        if "markers" in s.mode and s.open_markers:  # a few: an estimated spectrum's points
            out.append(
                "".join(
                    f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3.5" fill="none" stroke="{s.colour}" stroke-width="1.5"/>'
                    for a, b in zip(xs, ys)
                )
            )
        elif "markers" in s.mode:  # up to MAX_POINTS: one path of dots, not a <circle> each
            out.append(dots(xs, ys, [s.colour] * len(xs), 0.6))
    out.append("</g>")
    for k, s in enumerate(series):
        y = HEIGHT + LEGEND_LINE * k + 4
        if s.mode == "band":
            swatch = f'<rect x="{LEFT}" y="{y - 9}" width="22" height="10" fill="{s.colour}" fill-opacity="0.3"/>'
        elif s.mode == "markers":
            swatch = (
                f'<circle cx="{LEFT + 11}" cy="{y - 4}" r="3.5" fill="{"none" if s.open_markers else s.colour}" '
                f'stroke="{s.colour}" stroke-width="1.5"/>'
            )
        else:
            swatch = (
                f'<line x1="{LEFT}" x2="{LEFT + 22}" y1="{y - 4}" y2="{y - 4}" stroke="{s.colour}" '
                'stroke-width="2.5"' + (' stroke-dasharray="6 4"' if s.dash else "") + "/>"
            )
        out.append(swatch + f'<text x="{LEFT + 30}" y="{y}">{escape(s.name)}</text>')
    out.append("</svg>")
    return "".join(out)


def spectra_image(frame: pd.DataFrame) -> str:
    """:func:`krr_app.charts.figures.spectra_figure` as a Markdown image: λᵢ/λ_max against rank/size."""
    series = []
    for i, (name, part) in enumerate(frame.groupby("system", sort=False)):
        method = part["method"].iloc[0]
        keep = part["relative"] > 0
        series.append(
            Series(
                name + estimate_suffix(method),
                (part["rank"][keep] / len(part)).to_numpy(),
                part["relative"][keep].to_numpy(),
                system_color(name, i),
                mode="lines" if method == "exact" else "lines+markers",
                open_markers=True,
            )
        )
    svg = chart_svg(series, x_title="rank i / system size (largest eigenvalue first)", y_title="λᵢ / λ_max", log_y=True)
    return svg_markdown(svg, "Eigenvalue spectra: " + ", ".join(frame["system"].unique()))


def scores_image(points: pd.DataFrame, r_acc: dict) -> str:
    """:func:`krr_app.charts.leverage.score_scatter` as a Markdown image: approximate against exact scores,
    the line ℓ̃ = ℓ and the R-ACC band between the 5th and 95th percentiles of ℓ̃/ℓ."""
    shown, xs = score_scatter_points(points)
    series = [
        Series(
            f"R-ACC 5–95% band [{r_acc['q05']:.2f}, {r_acc['q95']:.2f}]",
            np.concatenate([xs, xs[::-1]]),
            np.concatenate([xs * r_acc["q95"], (xs * r_acc["q05"])[::-1]]),
            PALETTE[0],
            mode="band",
        ),
        Series("ℓ̃ = ℓ", xs, xs, "#444", dash=True),
        Series("points", shown["exact"].to_numpy(), shown["approximate"].to_numpy(), PALETTE[1], mode="markers"),
    ]
    svg = chart_svg(series, x_title="exact ℓ(i, λ)", y_title="approximate ℓ̃(i, λ)", log_x=True, log_y=True)
    return svg_markdown(svg, f"Approximate against exact leverage scores of {len(points):,} points")

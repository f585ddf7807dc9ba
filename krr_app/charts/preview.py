"""The data before any run: what Explore draws the moment a data set is chosen.

1-D data: the points (x, y), train and test. 2-D data: the points in the plane, coloured by
class or target. More dimensions: the training points on their first two principal components
(:func:`krrcore.diagnostics.data.projection_2d`, with the share of variance each holds), coloured
the same way, and a one-line summary. Plain data in, an SVG image (:func:`data_svg`, drawn the
moment the page arrives; :func:`data_image_markdown` makes it a Markdown image) or plotly traces
(:func:`point_traces`, for the fit figures) out; no Streamlit here.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from html import escape

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from krrcore.diagnostics.data import projection_2d
from krrcore.numbers import readable

#: Points drawn (a seeded subsample beyond this keeps the browser quick).
MAX_POINTS = 2000
#: Points a plotly fit figure draws over its surface: each is an SVG node that plotly draws again
#: with every new picture of the running model; a picture of Two moons' figure took about 0.37 s
#: with 2,000 points and 0.18 s with 1,000 in headless chromium on an idle machine, and several
#: times that while a worker kept the cores busy.
FIGURE_MAX_POINTS = 1000
_COLOURS = {"train": "#7f7f7f", "test": "#ff7f0e"}
#: Radius of a point in the SVG picture (pixels of its 600 × 440 canvas).
DOT_RADIUS = 3.2
#: Colours a value scale is drawn with in the SVG picture (more are not told apart by eye).
_LEVELS = 64


def _rows(n: int, limit: int = MAX_POINTS) -> np.ndarray:
    if n <= limit:
        return np.arange(n)
    return np.sort(np.random.default_rng(0).choice(n, size=limit, replace=False))


def _colour(data, y: np.ndarray) -> tuple[np.ndarray, str, str]:
    """Marker colours for targets ``y``: the target's value (regression), ±1 (binary) or the class index."""
    if data.task == "regression":
        return data.to_original_units(y), "Viridis", data.target_name
    if data.task == "binary":
        return y.reshape(len(y), -1)[:, 0], "RdBu", "class"
    return y.argmax(1).astype(float), "Turbo", "class"


@dataclass(frozen=True)
class PointSet:
    """Points drawn alike: a fixed ``colour``, or one per point from ``values`` on ``scale``."""

    name: str
    x: np.ndarray
    y: np.ndarray
    colour: str | None = None
    values: np.ndarray | None = None
    scale: str | None = None
    values_title: str = ""
    opacity: float = 0.8
    legend: tuple[tuple[float, str], ...] = ()  # (value, label) pairs the SVG legend shows


def point_sets(data, limit: int = MAX_POINTS) -> tuple[list[PointSet], str, str]:
    """What the data's picture shows, with the x and y axis titles: y against x, train and test
    points (1-D); the training points in the plane (2-D) or on their first two principal
    components (more dimensions), coloured by target or class; at most ``limit`` points of each set."""
    if data.d == 1:
        sets = []
        for name, X, y in (("train", data.X_train, data.y_train), ("test", data.X_test, data.y_test)):
            idx = _rows(len(X), limit)
            values = data.to_original_units(y[idx]) if data.task == "regression" else y[idx].reshape(len(idx), -1)[:, 0]
            sets.append(PointSet(f"{name} points", X[idx, 0], values, colour=_COLOURS[name], opacity=0.55))
        return sets, f"{data.feature_names[0]} (standardised)", data.target_name
    idx = _rows(data.n_train, limit)
    if data.d == 2:
        coords, titles = data.X_train[idx], [f"{data.feature_names[i]} (standardised)" for i in (0, 1)]
    else:
        coords, titles = projection_2d(data.X_train[idx])
    values, scale, title = _colour(data, data.y_train[idx])
    if data.task == "binary":
        legend = ((1.0, str(data.classes[1])), (-1.0, str(data.classes[0])))
    elif data.task == "multiclass":
        legend = tuple((float(k), str(c)) for k, c in enumerate(data.classes))
    else:
        lo, hi = float(values.min()), float(values.max())
        legend = tuple((v, _label(v, 3)) for v in (hi, (lo + hi) / 2, lo))
    return [
        PointSet(
            "training points", coords[:, 0], coords[:, 1], values=values, scale=scale, values_title=title, legend=legend
        )
    ], *titles


def browser_values(values) -> np.ndarray:
    """``values`` as float32, the precision a chart needs: plotly.py sends a numpy array as its raw
    bytes (base64), so float64 doubles a chart's message for digits no screen or hover label shows."""
    return np.asarray(values, dtype=np.float32)


def point_traces(data, *, colorbar: bool = True) -> tuple[list, str, str]:
    """:func:`point_sets` as plotly traces, at most :data:`FIGURE_MAX_POINTS` of each (the fit
    figures draw their points with it)."""
    sets, x_title, y_title = point_sets(data, FIGURE_MAX_POINTS)
    traces = []
    for points in sets:
        if points.colour is not None:
            marker = {"size": 5, "color": points.colour, "opacity": points.opacity}
        else:
            marker = {
                "color": browser_values(points.values),
                "colorscale": points.scale,
                "size": 6,
                "line": {"width": 0.6, "color": "white"},
            }
            if colorbar:
                marker["colorbar"] = {"title": points.values_title}
        traces.append(
            go.Scatter(
                x=browser_values(points.x), y=browser_values(points.y), mode="markers", name=points.name, marker=marker
            )
        )
    return traces, x_title, y_title


def ticks(lo: float, hi: float, count: int = 5) -> np.ndarray:
    """Round tick values (steps of 1, 2 or 5 × 10^k) covering [lo, hi]."""
    raw = (hi - lo) / count
    base = 10.0 ** np.floor(np.log10(raw))
    step = base * min((m for m in (1, 2, 5, 10) if m * base >= raw), default=10)
    values = np.arange(np.ceil(lo / step) * step, hi + step / 2, step)
    return values[values <= hi]


def _label(value: float, digits: int = 6) -> str:
    """A tick's or legend's label; a tick's value is round (:func:`ticks`), so six digits lose
    nothing and show no trailing zeros."""
    return readable(value + 0.0, digits).replace("-", "−")


def data_svg(data, *, width: int = 600, height: int = 440) -> str:
    """The data's picture (:func:`point_sets`) as a self-contained SVG image: it appears with the
    page, without waiting for a chart library to load in the browser (plotly takes seconds on a
    loaded machine), so a student sees the data at once."""
    sets, x_title, y_title = point_sets(data)
    left, right, top, bottom = 60, 120, 12, 48
    xs = np.concatenate([p.x for p in sets])
    ys = np.concatenate([p.y for p in sets])
    (x0, x1), (y0, y1) = [(v.min() - 0.04 * (np.ptp(v) or 1), v.max() + 0.04 * (np.ptp(v) or 1)) for v in (xs, ys)]

    def sx(v):
        return left + (v - x0) / (x1 - x0) * (width - left - right)

    def sy(v):
        return height - bottom - (v - y0) / (y1 - y0) * (height - top - bottom)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="14" fill="#555">'
    ]
    for t in ticks(x0, x1):
        out.append(
            f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{top}" y2="{height - bottom}" stroke="#e6e6e6"/>'
            f'<text x="{sx(t):.1f}" y="{height - bottom + 16}" text-anchor="middle">{_label(t)}</text>'
        )
    for t in ticks(y0, y1):
        out.append(
            f'<line x1="{left}" x2="{width - right}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#e6e6e6"/>'
            f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{_label(t)}</text>'
        )
    out.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 10}" text-anchor="middle">{escape(x_title)}</text>'
        f'<text transform="translate(16 {(top + height - bottom) / 2}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_title)}</text>'
    )
    legend_y = top + 14
    for points in sets:
        if points.colour is not None:
            colours = [points.colour] * len(points.x)
            out.append(
                f'<circle cx="{width - right + 16}" cy="{legend_y - 4}" r="4" fill="{points.colour}"/>'
                f'<text x="{width - right + 26}" y="{legend_y}">{escape(points.name)}</text>'
            )
            legend_y += 18
        else:
            lo, hi = float(points.values.min()), float(points.values.max())
            palette = sample_colorscale(points.scale, np.linspace(0, 1, _LEVELS))

            def level(v):
                return np.clip(np.rint((v - lo) / ((hi - lo) or 1.0) * (_LEVELS - 1)), 0, _LEVELS - 1).astype(int)

            colours = [palette[k] for k in level(points.values)]
            out.append(f'<text x="{width - right + 10}" y="{legend_y}">{escape(points.values_title)}</text>')
            for k, (value, text) in enumerate(points.legend):
                y = legend_y + 18 + 18 * k
                out.append(
                    f'<circle cx="{width - right + 16}" cy="{y - 4}" r="4" '
                    f'fill="{palette[level(value)]}"/>'
                    f'<text x="{width - right + 26}" y="{y}">{escape(text)}</text>'
                )
        out.append(dots(sx(np.asarray(points.x)), sy(np.asarray(points.y)), colours, points.opacity))
    out.append("</svg>")
    return "".join(out)


def dots(x: np.ndarray, y: np.ndarray, colours: list[str], opacity: float) -> str:
    """Points as round dots of radius DOT_RADIUS: per colour one path of zero-length round-capped
    strokes ("M x y h0" a point, whole pixels), a few bytes a point where a <circle> takes a
    hundred, so the picture's message — text the browser's Markdown renderer parses before it can
    draw it — stays small."""
    groups: dict[str, list[str]] = {}
    for a, b, c in zip(np.rint(x).astype(int), np.rint(y).astype(int), colours):
        groups.setdefault(c, []).append(f"M{a} {b}h0")
    return "".join(
        f'<path class="dots" d="{"".join(d)}" stroke="{c}" stroke-opacity="{opacity}" '
        f'stroke-width="{2 * DOT_RADIUS}" stroke-linecap="round" fill="none"/>'
        for c, d in groups.items()
    )


def data_image_markdown(data) -> str:
    """:func:`data_svg` as a Markdown image (a base64 data URL; its alt text is the summary).

    Explore sends it as plain Markdown, the one element the browser can draw as soon as it
    arrives: Streamlit's Markdown renderer is loaded with the page, while HTML in Markdown first
    fetches and runs an HTML parser (rehype-raw) and ``st.image`` its own element script, both
    queued behind every other element's (the sidebar's widgets) on a new visitor's first load."""
    return svg_markdown(data_svg(data), f"The data: {summary(data)}")


def svg_markdown(svg: str, alt: str) -> str:
    """An SVG picture as a Markdown image (a base64 data URL), ``alt`` its text (see
    :func:`data_image_markdown` for why Markdown)."""
    alt = re.sub(r"([\\\[\]])", r"\\\1", alt)
    return f"![{alt}](data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()})"


def summary(data) -> str:
    """One line: sizes, task and the target's spread or classes."""
    parts = [
        f"n = {data.n_train:,} training + {data.n_test:,} test points",
        f"d = {data.d:,} feature" + ("s" if data.d != 1 else ""),
        f"task: {data.task}",
    ]
    if data.task == "regression":
        y = data.to_original_units(data.y_train)
        parts.append(f"{data.target_name}: mean {readable(np.mean(y))}, std {readable(np.std(y))}")
    elif data.classes is not None:
        parts.append(f"{len(data.classes)} classes")
    return " · ".join(parts)

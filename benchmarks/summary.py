"""What every benchmark case shares: its :class:`Summary` (tables, figures, notes) and the rules its
tables and figures follow (one colour per method across a run, log axes, the hardware floor's row,
skipped and failed rows named)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: "Same test error" for times-to-target: within this factor of the reference error.
SAME_ERROR = 1.01


@dataclass
class Summary:
    tables: dict[str, list[dict]] = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def seconds_to(points: list[dict], target: float, key: str = "test_mse") -> float:
    """Solver seconds of the first point at or below ``target`` (NaN if none)."""
    return next((p["seconds"] for p in points if p[key] <= target), math.nan)


def plotly_go():
    import plotly.graph_objects as go

    return go


COLOURS: dict[str, str] = {}


def colour(key: str) -> str:
    """One colour per solver/method across every panel and figure of a run."""
    from plotly.colors import qualitative

    return COLOURS.setdefault(key, qualitative.Plotly[len(COLOURS) % len(qualitative.Plotly)])


def log_axes(fig, x=True, y=False, x_title="", y_title="", title=""):
    fig.update_layout(
        title=title, template="plotly_white", width=900, height=520, legend=dict(orientation="h", y=-0.18)
    )
    fig.update_xaxes(type="log" if x else "linear", title=x_title)
    fig.update_yaxes(type="log" if y else "linear", title=y_title)
    return fig


def floor_of(results: list[dict], n, M, dtype) -> dict:
    return next(
        (
            r
            for r in results
            if r["solver"] == "floor" and r["n"] == n and r.get("M") == M and r["dtype"] == dtype and "floor_s" in r
        ),
        {},
    )


def fit_rows(results):
    return [r for r in results if r["solver"] != "floor"]


def skips(results) -> list[str]:
    return [
        f"{r.get('label', r['solver'])} at n = {r['n']:,}: skipped — {r['skipped']}" for r in results if "skipped" in r
    ] + [f"{r.get('solver')} at n = {r.get('n')}: FAILED — {r['error']}" for r in results if "error" in r]

"""Where the model is unsure: the 90% band around a 1-D fit and the map of the predictive standard
deviation over 2-D data, from the grid's posterior a worker computed
(:class:`krr_app.jobs.surface.GridUncertainty`, the library's ``predict(X, return_std=True)``), with
the sentence that says what they mean. Plain data in, figures and text out; no Streamlit here.

The band is the mean ± z·std of a new observation, z the standard normal's 95% quantile: a nominal
90% interval of the Gaussian-process posterior whose mean is the KRR model (the exact GP for
ExactKRR, the DTC posterior of the same centres for the Nyström solvers; :mod:`krrcore.solvers.uncertainty`).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import plotly.graph_objects as go

from krrcore.numbers import readable

from krr_app.charts.figures import layout
from krr_app.charts.preview import browser_values, point_traces

#: The band's coverage and its half-width in standard deviations.
COVERAGE = 0.90
Z = NormalDist().inv_cdf(0.5 + COVERAGE / 2)
#: The traces' names (the tests and the browser find them by name).
BAND_LOWER, BAND_UPPER, STD_MAP, CENTERS = (
    "90% interval (lower)",
    "90% interval",
    "predictive std",
    "centres",
)


def _scale(data) -> float:
    """Target units per unit of the fit's scaled targets (regression); classification stays in f."""
    return float(data.y_scale) if data.task == "regression" else 1.0


def band(data, uncertainty) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lower, upper) on the grid in the target's units: the library's mean ± Z·std."""
    mean, std = uncertainty.mean[:, 0], uncertainty.std[:, 0]
    return (
        data.to_original_units(mean),
        data.to_original_units(mean - Z * std),
        data.to_original_units(mean + Z * std),
    )


def std_in_units(data, uncertainty) -> np.ndarray:
    """The predictive standard deviation on the grid in the target's units (flat)."""
    return uncertainty.std[:, 0] * _scale(data)


def band_traces(data, surface) -> list[go.Scatter]:
    """The 1-D band as two traces: the lower bound, then the upper filled down to it."""
    grid = browser_values(surface.axes[0])
    _, lower, upper = band(data, surface.uncertainty)
    line = {"width": 0, "color": "rgba(31, 119, 180, 0.25)"}
    return [
        go.Scatter(x=grid, y=browser_values(lower), mode="lines", name=BAND_LOWER, line=line, showlegend=False),
        go.Scatter(
            x=grid,
            y=browser_values(upper),
            mode="lines",
            name=BAND_UPPER,
            line=line,
            fill="tonexty",
            fillcolor="rgba(31, 119, 180, 0.22)",
        ),
    ]


def with_band(figure: go.Figure, data, surface) -> go.Figure:
    """The 1-D fit ``figure`` with the band beneath its traces and the centres as a rug below."""
    out = go.Figure(data=[*band_traces(data, surface), *figure.data], layout=figure.layout)
    rug = centers_trace(data, surface.uncertainty, at=float(np.min(band(data, surface.uncertainty)[1])))
    if rug is not None:
        out.add_trace(rug)
    return out


def centers_trace(data, uncertainty, *, at: float | None = None) -> go.Scatter | None:
    """The model's centres (1-D: ticks at height ``at``; 2-D: crosses), or None when they are not sent
    or are every training point (exact KRR: each point is its own centre)."""
    C = uncertainty.centers
    if C is None or uncertainty.kind == "exact GP":
        return None
    marker = {"color": "black", "size": 9 if C.shape[1] == 1 else 7}
    if C.shape[1] == 1:
        x, y = C[:, 0], np.full(len(C), at)
        marker["symbol"] = "line-ns-open"
    else:
        x, y = C[:, 0], C[:, 1]
        marker["symbol"] = "x-thin-open"
    name = f"{CENTERS} (M = {len(C):,})"
    return go.Scatter(x=browser_values(x), y=browser_values(y), mode="markers", name=name, marker=marker)


def uncertainty_map(data, surface, *, height: int = 420) -> go.Figure:
    """The 2-D map: the predictive standard deviation over the grid (target units for regression, f
    for two classes), the points and the centres on it."""
    (gx, gy) = surface.axes
    z = std_in_units(data, surface.uncertainty).reshape(len(gy), len(gx))
    unit = data.target_name if data.task == "regression" else "f(x)"
    fig = go.Figure(
        go.Heatmap(
            x=browser_values(gx),
            y=browser_values(gy),
            z=browser_values(z),
            colorscale="Viridis",  # monotone: the brighter, the less sure
            zsmooth="best",
            name=STD_MAP,
            colorbar={"title": f"std ({unit})"},
        )
    )
    points, x_title, y_title = point_traces(data, colorbar=False)
    for trace in points:
        trace.marker.opacity = 0.5
    fig.add_traces(points)
    rug = centers_trace(data, surface.uncertainty)
    if rug is not None:
        fig.add_trace(rug)
    return layout(fig, height, top=30, xaxis_title=x_title, yaxis_title=y_title)


def meaning(data, uncertainty) -> str:
    """One sentence on what the band (1-D) or the map (2-D) means, with the noise level as estimated."""
    unit = f" {data.target_name}" if data.task == "regression" else ""
    noise = readable(uncertainty.noise_std * _scale(data), 4)
    where = (
        "away from the training points, each of them its own centre"
        if uncertainty.kind == "exact GP"
        else f"away from the {uncertainty.n_centers:,} centres (marked)"
    )
    posterior = (
        "the exact Gaussian-process posterior"
        if uncertainty.kind == "exact GP"
        else "the DTC posterior of the model's centres"
    )
    shown = (
        f"The shaded band holds a new observation with probability {COVERAGE:.0%} (mean ± {Z:.3g} std)"
        if data.d == 1
        else "The map is the standard deviation of a new observation"
    )
    return (
        f"{shown} under {posterior} whose mean is this fit, with the noise level σ̂ = {noise}{unit} estimated "
        f"from the training residuals (n − df − 1, df = {readable(uncertainty.effective_dof, 4)}); it grows "
        f"{where}."
    )

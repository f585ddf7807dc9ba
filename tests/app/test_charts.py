"""The app's figures as plain data (krr_app.charts.figures, no Streamlit): one legend rule for every figure,
and the fit figure Explore sends once per finished run — what it draws and how many bytes it takes.

Whether the legend really stays clear of the x-axis titles is seen in chromium
(test_browser_teach.py::test_legends_leave_the_x_axis_titles_clear)."""

from __future__ import annotations

import base64
import json

import numpy as np
import pandas as pd
import plotly.io as pio
import pytest
from plotly.colors import get_colorscale

from krr_app.charts import data as data_charts, figures as charts, fit as fit_charts, leverage as leverage_charts
from krr_app.charts import tuning as tuning_charts
from krrcore import datasets
from krrcore.stream import IterationRecord
from krr_app.jobs.surface import GRID_2D, FitSurface, grid_axes


def _surface(data, f) -> FitSurface:
    """``f`` (of the two features) on the plotting grid the workers use, as a worker returns it."""
    axes = grid_axes(np.concatenate([data.X_train, data.X_test]), GRID_2D)
    points = np.stack(np.meshgrid(*axes), -1).reshape(-1, 2)
    return FitSurface(axes=axes, values=f(points[:, 0], points[:, 1])[:, None])


def _moons_boundary(x1, x2):
    """A smooth f whose zero set winds between the two moons, spanning about ±1.5 like a fit's."""
    return np.tanh(2 * (x2 - 0.8 * np.sin(2 * x1)))


@pytest.fixture(scope="module")
def moons():
    return datasets.load("moons")  # 500 rows, 400 of them training points


@pytest.fixture(scope="module")
def moons_figure(moons):
    return fit_charts.fit_figure(moons, _surface(moons, _moons_boundary))


def _colours(scale) -> list[str]:
    """A colour scale's colours, in order (its positions print differently once plotly validated them)."""
    return [colour for _, colour in scale]


def _sent(fig) -> dict:
    """The figure as st.plotly_chart sends it."""
    return json.loads(pio.to_json(fig, validate=False))


def _figures():
    """One of each figure the app draws, from the smallest inputs that give it a legend."""
    sine, clusters = datasets.load("sine1d", n=100), datasets.load("clustered_outliers", n=200)
    moons = datasets.load("moons", n=100)
    penalties = [1e-4, 1e-3, 1e-2]
    scores = pd.DataFrame({"index": range(4), "exact": [0.1, 0.2, 0.3, 0.4], "approximate": [0.12, 0.18, 0.3, 0.5]})
    yield "fit, 1-D", fit_charts.fit_figure(sine, _surface_1d(sine))
    yield "fit, 2-D binary", fit_charts.fit_figure(moons, _surface(moons, _moons_boundary))
    yield "fit, 2-D regression", fit_charts.fit_figure(clusters, _surface(clusters, lambda a, b: a * b))
    yield "convergence", charts.convergence_figure([])
    yield (
        "spectra",
        charts.spectra_figure(charts.spectra_frame({"K + λnI": {"eigenvalues": [3.0, 2.0, 1.0], "method": "exact"}})),
    )
    yield (
        "kappa",
        charts.kappa_figure(
            pd.DataFrame(
                {"system": "K + λnI", "method": "exact", "penalty": penalties, "condition_number": [100.0, 10.0, 2.0]}
            ),
            "penalty",
            current=1e-3,
        ),
    )
    yield (
        "askotch",
        charts.askotch_figure(
            pd.DataFrame({"block": [0, 1], "kappa_block": [10.0, 20.0], "kappa_preconditioned": [1.5, 2.0]})
        ),
    )
    yield "score histogram", leverage_charts.score_histogram(scores)
    yield "score scatter", leverage_charts.score_scatter(scores, {"q05": 0.8, "q95": 1.2})
    yield (
        "path",
        leverage_charts.path_figure(pd.DataFrame({"penalty": penalties, "d_eff": [9.0, 5.0, 2.0], "size": [12, 8, 4]})),
    )
    yield "centres", leverage_charts.centers_figure(moons.X_train, ("x1", "x2"), np.arange(5))
    yield "target", data_charts.target_figure(moons)
    yield (
        "feature scales",
        data_charts.feature_scales_figure(pd.DataFrame({"feature": ["x1", "x2"], "std (original units)": [1.0, 2.0]})),
    )
    yield "relevance", data_charts.relevance_figure(["x1", "x2", "x3"], [0.5, 1e-14, 0.2])
    frame = tuning_charts.tuning_frame(
        [
            IterationRecord(
                i,
                0.1 * i,
                1.0,
                objective=1.0 / (i + 1),
                val_metric=0.5,
                extras={"stage": min(i, 2), "sigma": 1.0 + i, "penalty": 1e-3},
            )
            for i in range(4)
        ]
    )
    yield "tuning steps", tuning_charts.progress_figure(frame, "gcv")
    grid = {
        "log10_sigma": [0.0, 0.5],
        "log10_penalty": [-3.0, -2.0],
        "values": [[1.0, 2.0], [0.5, 0.7]],
        "best_log10_penalty": [-3.0, -3.0],
        "objective": "gcv",
    }
    yield "tuning map", tuning_charts.map_figure(grid, frame)
    yield (
        "d_eff",
        data_charts.deff_figure(
            {"gaussian": pd.DataFrame({"penalty": penalties, "d_eff": [9.0, 5.0, 2.0], "method": "exact"})}, n=80
        ),
    )


def _surface_1d(data) -> FitSurface:
    grid = np.linspace(-2, 2, 50)
    return FitSurface(axes=(grid,), values=np.sin(grid)[:, None])


def test_every_figure_puts_its_legend_in_a_row_at_the_bottom_of_the_figure():
    """Placed in the figure's own (container) coordinates, a legend makes plotly reserve its height
    at the figure's bottom and draw the x axes' tick labels and titles above it. A legend at y < 0
    in plot (paper) coordinates is placed a share of the plot's height below the axis instead,
    whatever the tick labels and title need: it covered the x-axis title in narrow columns."""
    seen = []
    for name, fig in _figures():
        legend = fig.layout.legend
        assert (legend.orientation, legend.yref, legend.yanchor, legend.y) == ("h", "container", "bottom", 0), name
        assert fig.layout.margin.b == charts.MARGIN["b"], name  # no fixed room guessed for the legend
        seen.append(name)
    assert len(seen) == 17


def test_the_decision_surface_and_its_boundary_at_f_equals_zero(moons, moons_figure):
    surface, boundary, points = moons_figure.data
    f = _surface(moons, _moons_boundary).values[:, 0].reshape(GRID_2D, GRID_2D)
    # The surface: f's values (to float32's precision), coloured symmetrically about f = 0.
    bound = np.abs(f).max()
    assert _colours(surface.colorscale) == _colours(get_colorscale("RdBu")) and surface.contours.coloring == "heatmap"
    assert (surface.zmin, surface.zmax) == (-bound, bound) and surface.colorbar.title.text == "f(x)"
    np.testing.assert_allclose(surface.z, f, rtol=1e-6, atol=1e-7)
    # The boundary: one black line at 0, named in the legend, its hover left to the surface.
    assert boundary.name == "decision boundary f(x) = 0" and boundary.showlegend is not False
    assert (boundary.contours.start, boundary.contours.end, boundary.contours.coloring) == (0, 0, "none")
    assert (boundary.line.color, boundary.line.width, boundary.hoverinfo) == ("black", 3, "skip")
    # Its grid crosses zero where f does: plotly interpolates a crossing linearly between
    # neighbouring grid values, so compare those positions along both axes.
    z = np.asarray(boundary.z, dtype=np.float64)
    clear = np.abs(f) > bound / 32767  # rounding may send values closer to 0 than that to 0
    assert np.array_equal(np.sign(z[clear]), np.sign(f[clear]))
    crossings = 0
    for a, b in ((f, z), (f.T, z.T)):
        where = np.sign(a[:, :-1]) != np.sign(a[:, 1:])
        at_f = a[:, :-1][where] / (a[:, :-1][where] - a[:, 1:][where])
        at_z = b[:, :-1][where] / (b[:, :-1][where] - b[:, 1:][where])
        np.testing.assert_allclose(at_z, at_f, atol=1e-3)  # of one grid step
        crossings += where.sum()
    assert crossings > GRID_2D  # the boundary runs across the whole grid
    assert points.name == "training points" and len(points.x) == moons.n_train


def test_the_decision_surface_message_is_small(moons_figure):
    """Explore sends this figure once per finished run (to every student's browser in a class).
    The 80 × 80 grid went twice as float64: 2 × 68 kB of base64, 195 kB in all with the points
    (measured for Two moons' default 500 rows). Now the surface goes as float32 (34 kB) and the
    boundary's grid as int16 (17 kB): 82 kB in all, under the 100 kB asserted."""
    sent = _sent(moons_figure)
    surface, boundary, points = sent["data"]
    assert (surface["z"]["dtype"], boundary["z"]["dtype"]) == ("f4", "i2")
    assert {points[k]["dtype"] for k in ("x", "y")} == {"f4"} and points["marker"]["color"]["dtype"] == "f4"
    assert len(pio.to_json(moons_figure, validate=False)) < 100_000


def test_a_grid_with_gaps_keeps_them_for_the_boundary(moons):
    """int16 has no NaN: a surface with undefined points sends the boundary's grid as float32, gaps kept."""

    def with_gap(x1, x2):
        f = _moons_boundary(x1, x2)
        f[:10] = np.nan
        return f

    _, boundary, _ = _sent(fit_charts.fit_figure(moons, _surface(moons, with_gap)))["data"]
    assert boundary["z"]["dtype"] == "f4"
    z = np.frombuffer(base64.b64decode(boundary["z"]["bdata"]), dtype=np.float32)
    assert np.isnan(z[:10]).all() and np.isfinite(z[10:]).all()


def test_the_regression_surface_is_sent_as_float32_in_the_targets_units():
    clusters = datasets.load("clustered_outliers", n=200)
    fig = fit_charts.fit_figure(clusters, _surface(clusters, lambda a, b: a * b))
    surface, points = fig.data
    grid = _surface(clusters, lambda a, b: a * b)
    expected = clusters.to_original_units(grid.values[:, 0]).reshape(GRID_2D, GRID_2D)
    assert (
        _colours(surface.colorscale) == _colours(get_colorscale("Viridis"))
        and surface.colorbar.title.text == clusters.target_name
    )
    np.testing.assert_allclose(surface.z, expected, rtol=1e-6)
    assert _sent(fig)["data"][0]["z"]["dtype"] == "f4"


def test_the_diagnostic_pages_first_pictures_are_images_of_their_tables():
    """Conditioning's spectra and the Leverage page's scores as SVG images (krr_app.charts.images):
    one line per system, open markers where the values are estimates, one marker per point."""
    import re

    from krr_app.charts import images as image_charts

    frame = charts.spectra_frame(
        {
            "K + λnI": {"eigenvalues": [4.0, 2.0, 1.0], "method": "exact"},
            "W": {"eigenvalues": [3.0, 1.0], "method": "lanczos"},
        }
    )
    markdown = image_charts.spectra_image(frame)
    assert markdown.startswith("![Eigenvalue spectra: K + λnI, W](data:image/svg+xml;base64,")
    svg = base64.b64decode(re.search(r"base64,([^)]+)\)", markdown).group(1)).decode()
    assert svg.count("<polyline") == 2 and svg.count('fill="none" stroke=') == 2 + 2  # W's two open markers
    assert "W — estimate, lanczos" in svg and ">K + λnI<" in svg
    scores = pd.DataFrame(
        {"index": range(5), "exact": [0.1, 0.2, 0.3, 0.4, 0.5], "approximate": [0.12, 0.18, 0.3, 0.5, 0.45]}
    )
    svg = base64.b64decode(
        re.search(r"base64,([^)]+)\)", image_charts.scores_image(scores, {"q05": 0.8, "q95": 1.2})).group(1)
    ).decode()
    # The points as one path of five dots, the legend's marker a circle.
    assert svg.count('class="dots"') == 1 and svg.count("h0") == 5 and svg.count("<circle") == 1
    assert svg.count("<polygon") == 1
    assert "R-ACC 5–95% band [0.80, 1.20]" in svg

"""A run's pictures of its model: the fitted function or decision surface (1-D and 2-D data), while
it computes and when it is done, with the uncertainty band or map when the run set up the posterior,
and Compare's fits side by side on one colour scale. The figures are :mod:`krr_app.charts.fit`'s
and :mod:`krr_app.charts.uncertainty`'s; the live picture's updates are
:mod:`krr_app.parts.live_chart`'s."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from krr_app.charts import fit as fit_charts, uncertainty as uncertainty_charts
from krr_app.jobs.runs import Run
from krr_app.jobs.surface import FitSurface, plotting_grid
from krr_app.parts.live_chart import LIVE_FIGURE_MARK
from krr_app.parts.views import fit_target, plot
from krr_app.teaching import links
from krr_app.text import plain
from krrcore.numbers import readable


#: The height :func:`fit_slot` keeps for a fit before there is one: its heading, the figure
#: (:func:`krr_app.charts.fit.fit_figure`'s 420 px) and the finished run's caption below it, as
#: many lines as it takes in a 262 px column (a 1,000 px window; 545 px in all there, 523 at 1,400).
#: At 540 a caption of three lines made the finished fit 5 px taller than the running one, and the
#: chart below moved.
FIT_SLOT_HEIGHT = 570


def fit_slot(parent, key: str):
    """An ``st.empty`` in ``parent`` for a run's fit that holds :data:`FIT_SLOT_HEIGHT` from the
    start, so the parts below it stay where they are when the fit arrives, and do not move when
    the running figure is replaced by the finished one."""
    box = parent.container(key=key)
    box.html(f"<style>.st-key-{key} {{ min-height: {FIT_SLOT_HEIGHT}px; }}</style>")
    return box.empty()


def fit_chart(run: Run, key: str, *, title: bool = True) -> None:
    """The fitted function / decision surface of a run (1-D and 2-D data only): the finished
    model's, or while the run computes its latest picture, which the live chart then keeps
    current (:func:`krr_app.parts.live_chart.fit_panel`). ``title``: a line naming what is drawn."""
    surface = run.surface if not run.active else live_surface(run)
    if surface is None:
        return
    if run.active:
        figure = fit_charts.fit_figure(run.data, surface)
        # The live chart moves only a figure marked as this run's running one: the finished
        # figure, drawn in the same place by the rerun a run's end asks for, is left as drawn.
        figure.update_layout(meta={LIVE_FIGURE_MARK: run.id})
    else:  # the figure is built once per run from the worker's grid
        if "fit_figure" not in run.cache:
            run.cache["fit_figure"] = fit_charts.fit_figure(run.data, surface)
        figure = run.cache["fit_figure"]
    heading = (
        "Fitted function"
        if run.data.d == 1
        else ("Prediction surface" if run.data.task == "regression" else "Decision surface")
    )
    with st.container(key=fit_target(key)):
        if title:
            st.markdown(f"**{heading}** over the data")
        # The band's figure under a key of its own: drawn under the running figure's key, the browser
        # kept showing the running figure (the band's traces never arrived).
        banded = not run.active and surface.uncertainty is not None
        plot(figure, key=f"{key}_band" if banded else key, filename=f"krr-fit-{run.id}")
        if not run.active:
            pictures_caption(run)
    if not run.active and surface.uncertainty is not None:
        uncertainty_chart(run, key)


def uncertainty_chart(run: Run, key: str) -> None:
    """What the run's posterior says (:mod:`krr_app.charts.uncertainty`): the 1-D band is in the fit's
    figure already, the 2-D map is drawn here; then the sentence on what it means and the library's
    account of the noise level."""
    unsure = run.surface.uncertainty
    if run.data.d == 2:
        with st.container(key=f"{key}_uncertainty_box"):
            st.markdown("**Uncertainty map** — where the model is unsure")
            if "uncertainty_map" not in run.cache:
                run.cache["uncertainty_map"] = uncertainty_charts.uncertainty_map(run.data, run.surface)
            plot(run.cache["uncertainty_map"], key=f"{key}_uncertainty", filename=f"krr-uncertainty-{run.id}")
    st.caption(plain(uncertainty_charts.meaning(run.data, unsure), limit=None))
    st.caption(
        f"Noise level {plain(unsure.noise_source, limit=None)}. Posterior set-up and the grid's standard "
        f"deviations: {readable(unsure.seconds, 3)} s on the worker, after the solver's last record."
    )


def pictures_caption(run: Run) -> None:
    """What drawing the fit while the solver ran cost the worker (outside the solver's time)."""
    count, seconds = run.timings.get("frames", 0), run.timings.get("frame_seconds", 0.0)
    wall = run.timings.get("wall_seconds", math.nan)
    if count and math.isfinite(wall) and wall > 0:
        st.caption(pictures_text(count, seconds, wall))


def pictures_text(count: int, seconds: float, wall: float) -> str:
    """The sentence :func:`pictures_caption` writes (the app benchmark reads it back from the page)."""
    return (
        f"Drawn while the solver ran: {count:.0f} pictures, {readable(seconds, 3)} s on the worker "
        f"({seconds / wall:.1%} of the run's {readable(wall, 3)} s; not in the solver time)."
    )


#: Runs whose fits Compare draws side by side (two to a row).
SIDE_BY_SIDE_RUNS = 4


def side_by_side_runs(runs: list[Run], settings, selected: list[str]) -> list[Run]:
    """The runs whose fits Compare shows: those selected (else the most recent), on the sidebar's
    1-D or 2-D data, started and not failed; at most SIDE_BY_SIDE_RUNS, oldest first."""
    if settings.dataset is None or settings.dataset.d not in (1, 2):
        return []
    usable = [
        r
        for r in runs
        if r.config.data == settings.data
        and r.status != "error"
        and (r.surface is not None or (r.active and r.status == "running"))
    ]
    chosen = [r for r in usable if r.id in selected] or usable
    return chosen[-SIDE_BY_SIDE_RUNS:]


#: The side-by-side slider's key (its URL parameter) and its widest range (the sidebar's iterations).
ITERATION_KEY, MAX_ITERATION = "cmp_iteration", 100_000


def keep_iteration_choice() -> None:
    """Check a link's or a lesson step's ``cmp_iteration`` on every Compare run, so a lesson's value
    waits in the session for the slider, which is drawn only once the runs have finished."""
    if ITERATION_KEY not in st.session_state:
        links.check(st.slider, ITERATION_KEY, {"min_value": 0, "max_value": MAX_ITERATION, "value": 0})


def fits_side_by_side(runs: list[Run], *, key: str) -> None:
    """The runs' fits, two to a row: while a run computes, its latest picture (the live chart keeps
    it current); once all have finished, every fit after the same iteration, chosen with a slider
    (a run that stopped earlier shows its last iterate)."""
    st.subheader("The fits, side by side")
    finished = not any(r.active for r in runs)
    if finished:
        last = max(r.records[-1].iteration for r in runs if r.records)
        if st.session_state.get(ITERATION_KEY, 0) > max(last, 1):  # runs of another batch
            st.session_state[ITERATION_KEY] = max(last, 1)
        iteration = links.widget(
            st.slider,
            "Iteration",
            min_value=0,
            max_value=max(last, 1),
            value=last,
            key=ITERATION_KEY,
            persist=False,
            help="Every fit as it was after this iteration (the pictures a run keeps: "
            "every iteration of a short run, evenly spaced ones of a long run).",
        )
    else:
        st.caption(
            "Each fit is redrawn as its solver iterates; once all have finished, a slider shows them "
            "all after the same iteration."
        )
    if finished:  # every fit after the slider's iteration, on one colour scale
        pictures = {r.id: r.surface.at(iteration) for r in runs}
        surfaces = {r.id: FitSurface(axes=r.surface.axes, values=pictures[r.id][1]) for r in runs}
        color_range = fit_charts.shared_color_range(runs[0].data, surfaces.values())
    for row in range(0, len(runs), 2):
        for col, run in zip(st.columns(2), runs[row : row + 2]):
            with col:
                if finished:
                    shown, surface = pictures[run.id][0], surfaces[run.id]
                    with st.container(key=fit_target(f"{key}_{run.id}")):
                        st.markdown(
                            f"**{run.label}** "
                            + (
                                "— the fitted model (no pictures were kept while it ran)"
                                if shown is None
                                else f"after iteration {shown:,}" + (" (its last)" if shown < iteration else "")
                            )
                        )
                        plot(
                            fit_charts.fit_figure(run.data, surface, color_range=color_range),
                            key=f"{key}_{run.id}",
                            filename=f"krr-fit-{run.id}-t{shown}",
                        )
                else:
                    st.markdown(f"**{run.label}**")
                    fit_chart(run, key=f"{key}_{run.id}", title=False)


def live_surface(run: Run) -> FitSurface | None:
    """The grid predictions of an active run's latest picture (zero before the first) on the
    plotting grid the worker uses; None when the data are not 1-D or 2-D."""
    data = run.data
    if data is None or data.d not in (1, 2):
        return None
    axes, points = plotting_grid(np.concatenate([data.X_train, data.X_test]))
    frame = run.frame
    values = frame.values if frame is not None else np.zeros((len(points), 1))
    return FitSurface(axes=axes, values=values)

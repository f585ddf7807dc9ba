"""Explore: one solver on one problem, live — the page a student starts on.

Run hands the sidebar's configuration to the session's registry, which runs it on a Dask worker
(never in this process); while it runs, the live chart (:mod:`krr_app.parts.live_chart`) draws the progress
bar, the convergence chart and, for 1-D and 2-D data, the fit as the worker pictures the current
iterate, without rerunning the page; Stop cancels it on the worker. A configuration already run is shown at
once from the session's registry.

The data are drawn before any run (:mod:`krr_app.charts.preview`), and a small problem
(:func:`krr_app.jobs.config.is_small`) runs by itself on every change unless "Run on every change" is
switched off — as in the TensorFlow Playground, a student sees the effect of every knob at once.

"Show uncertainty" (1-D and 2-D data, ``?uncertainty=true``) fits with the library's posterior set up
on the worker and draws the 90% band around the fit (1-D) or the map of the predictive standard
deviation (2-D); a solver without a posterior is refused with the library's reason.
"""

import streamlit as st

from krr_app import explain
from krr_app.charts import preview
from krr_app.jobs.config import SMALL_TEXT, is_small, problems, uncertainty_refusal, with_uncertainty
from krr_app.parts import fit_views, sidebar, state, views
from krr_app.settings import AUTO_RUN_WAIT_SECONDS
from krr_app.teaching import links
from krr_app.text import plain
from krrcore.full_system import storage_advice

RUN_KEY = "explore_run"  # session_state handle of the last run started here (tests wait on it)

data = sidebar.data()
registry = state.session_runs()
dataset = data.dataset

st.title("Explore")
st.caption(
    "Pick data, a kernel, λ and a solver in the sidebar: small problems run by themselves on every change, "
    "larger ones when you press **Run**; the convergence chart grows with every iteration. Every setting "
    "is in the URL — copy it to share this exact view."
)

# The page's parts in order. The data's picture is drawn first — before the rest of the sidebar
# (sidebar.current) and before a run is started or waited for, so it is the first thing a new
# visitor's browser gets to draw — and stays: a finished run's fit goes beside it (1-D and 2-D
# data), so the picture a student sees first is never replaced by a chart that still has to load
# plotly. What a run brings (its progress, convergence chart, metric tiles) goes below the
# picture, so Run never moves the picture a student is looking at down the page.
head = st.container()
fit_slot = refusal_slot = None
wants_uncertainty = False
if dataset is not None:
    data_col, fit_col = st.columns(2) if dataset.d in (1, 2) else (st.container(), None)
    with data_col:
        st.markdown(f"**The data** — {plain(preview.summary(dataset), limit=None)}")  # names a table's target
        # An image, not a chart (no plotly to load first), sent as Markdown (see preview.data_image_markdown).
        st.markdown(state.data_picture(dataset, data.spec))
    if fit_col is not None:
        with fit_col:  # the band (1-D) or the map (2-D) needs the plotting grid: 1-D and 2-D data only
            wants_uncertainty = links.widget(
                st.toggle, "Show uncertainty", value=False, key="uncertainty", help=explain.HELP["uncertainty"]
            )
            refusal_slot = st.empty()
    fit_slot = fit_views.fit_slot(fit_col, "explore_fit_slot") if fit_col is not None else None
live_slot, metrics_slot = st.container(key="explore_live_slot"), st.container()

settings = sidebar.current()
config = settings.config() if settings.data is not None else None
weighted = dataset is not None and getattr(dataset, "weight_train", None) is not None  # a table's weight column
if config is not None and dataset is not None and wants_uncertainty:
    # The posterior is set up in the fit on the worker, so it is part of the run's configuration.
    config = with_uncertainty(config, True, dataset.task, weighted)
    refusal = uncertainty_refusal(config.solver, dataset.task, weighted, config.loss)
    if refusal:
        refusal_slot.info(refusal)
issues = (
    problems(config, dataset.n_train if dataset is not None else None, weighted=weighted) if config is not None else []
)
can_run = dataset is not None and config is not None and not issues
small = can_run and is_small(config, dataset.n_train + dataset.n_test)
run = registry.get(config) if config is not None else None
previous = state.page_run(RUN_KEY, run)


def _stop_active():
    active = st.session_state.get(RUN_KEY)
    if active is not None:
        active.stop()


with head:
    views.data_messages(settings)
    views.dropped_runs_note(registry)
    views.show_problems(issues)
    if config is not None and dataset is not None and config.info.problem == "full":
        st.caption(storage_advice(dataset.n_train, 4 if config.dtype == "float32" else 8, config.memory_budget))
    if can_run:
        views.estimate_caption(config, dataset)
    # One row of controls as wide as their labels, wrapping when it must: fixed columns cut the
    # labels to "…" at 1,000 px. Stop is drawn once the run is known, into its place in the row.
    controls = st.container(horizontal=True, vertical_alignment="center", key="explore_controls")
    with controls:
        clicked = st.button(
            "Run",
            type="primary",
            disabled=not can_run,
            icon=":material/play_arrow:",
            help=None if can_run else "Fix the messages above first.",
            key="run",
        )
    with controls:
        step_clicked = st.button(
            "Step",
            disabled=not can_run or (run is not None and run.active and not run.stepped),
            icon=":material/skip_next:",
            key="step",
            help=explain.HELP["step"],
        )
        col_stop = st.container(width="content")
    with controls:
        auto_run = links.widget(
            st.toggle,
            "Run on every change",
            value=True,
            key="auto_run",
            persist=False,
            help=f"{explain.HELP['auto_run']} Small means {SMALL_TEXT}.",
        )
    with controls:
        x_axis = links.widget(
            st.radio,
            "x axis",
            options=["iteration", "seconds"],
            key="x_axis",
            horizontal=True,
            help=explain.HELP["x_axis"],
            label_visibility="collapsed",
            persist=False,
        )
    if auto_run and can_run and not small:
        st.caption(f"This problem is not small ({SMALL_TEXT} run by themselves): press **Run**.")

# Run on a configuration that is already running (e.g. started by itself on the last change) does
# not start it a second time; on a paused stepped run it lets it go on. Step starts a stepped run,
# which pauses after its first iteration, and advances a paused one by one iteration.
running_here = run is not None and run.active
if running_here and run.stepped and clicked:
    run.resume()
elif running_here and run.stepped and step_clicked:
    run.step()
stepping = can_run and step_clicked and not running_here
started = stepping or (can_run and ((clicked and not running_here) or (auto_run and small and run is None)))
if started:
    if previous is not None and previous.active and previous.config != config:
        # A new run replaces the one in progress, as in TF Playground; one replaced before its
        # first iteration (a knob moved on quickly) leaves nothing worth a row in Compare.
        if previous.records:
            previous.stop()
        else:
            registry.remove([previous.id])
    first_run = previous is None
    run = registry.start(config, dataset, stepped=stepping)
    st.session_state[RUN_KEY] = run
    state.show_run_in_link(run)
    previous = run
    # Most small runs end within this wait: drawn complete, not as a progress bar first (a click
    # that started the session's first run included: its chart comes in this page run, not half a
    # second later with the live view's first look). Not a first run that started by itself: the
    # page that just loaded sends its controls and the data's picture alone, and the run's charts
    # follow with the live view's next look (plotly.js, evaluated by the browser ahead of the
    # picture, held the first picture back).
    if small and not stepping and (clicked or not first_run):
        run.wait(AUTO_RUN_WAIT_SECONDS)

# Drawn after a click started a run, so it is enabled for the whole run (the live chart below does
# not rerun the page; the rerun it asks for when the run ends disables it again).
with col_stop:
    st.button(
        "Stop",
        disabled=previous is None or not previous.active,
        icon=":material/stop:",
        key="stop",
        on_click=_stop_active,
        help="Stops after the current iteration (direct solvers cannot be interrupted).",
    )

shown = run
if shown is None and previous is not None and previous.id in {r.id for r in registry.runs()}:
    shown = previous
    if config is not None:
        live_slot.caption("Showing the last run (made with other settings) — press **Run** for the current ones.")

draws_fit = (
    shown is not None
    and fit_slot is not None
    and shown.status != "error"
    and config is not None
    and shown.config.data == config.data
)
if shown is None:
    if can_run:
        with live_slot:  # where the run's progress and chart will be: Run replaces them in place
            st.markdown("Nothing has run with these settings yet. Press **Run**.")
            views.empty_convergence_chart(x_axis, key="explore_convergence")
    views.explanation("krr", "lambda", "M", "falkon", title="What is being solved?")
else:

    def _render(runs):  # a finished run (views.live draws an active one)
        (current,) = runs
        views.status_message(current)
        if current.records:
            views.convergence_chart([current], x_axis, key="explore_convergence")

    # The fit beside the data: the finished model, or while the run computes its latest picture,
    # which the live chart redraws in place (the same figure). The live chart is sent first (its
    # slot is below): building a large data set's figure takes a while, and the chart's looks
    # start when it arrives.
    fits = {shown.id: "explore_fit"} if draws_fit else {}
    with live_slot:
        views.live(lambda: [shown], _render, key="explore_live", x=x_axis, fits=fits)
    if draws_fit:
        with fit_slot.container():
            fit_views.fit_chart(shown, key="explore_fit")
    if not shown.active and shown.metrics:
        with metrics_slot:
            views.metric_cards(shown)
    if not shown.active:
        views.trace_download([shown], key="explore_csv", filename=f"krr-trace-{shown.id}.csv")
    views.reproduce(shown.config, key="explore_notebook")
    views.explanation("residual", "falkon", "askotch", "lambda", "d_eff", "condition")

if fit_slot is not None and not draws_fit:  # 1-D and 2-D data with no fit of these data to draw
    fit_slot.caption("The fitted function appears here when a run on these data has started.")

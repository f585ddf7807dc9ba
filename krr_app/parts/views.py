"""Page building blocks shared by every page: status, metrics, charts, polling, and the diagnostic
pages' bounded inputs; the URL-bound inputs, CSV downloads and "last valid result" of
:mod:`krr_app.parts.inputs`, re-exported here.

All functions here run on the script thread and only read runs (see :mod:`krr_app.jobs.runs`).
"""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from krrcore.diagnostics.data import subsample

from krr_app import explain, units
from krr_app.charts import figures as charts
from krr_app.jobs.executor import format_bytes, started_executor
from krr_app.jobs.runs import Run
from krr_app.parts import background, state
from krr_app.parts.inputs import bound_number, bound_widget, download_csv, kernel_key  # noqa: F401  (re-exported)
from krr_app.parts.inputs import last_valid, remember, require_data, target_rule_note  # noqa: F401  (re-exported)
from krr_app.parts.live_chart import convergence_panel, fit_panel, live_chart, x_title
from krr_app.settings import EMPTY_CHART_DELAY_SECONDS, FIRST_PICTURE_WAIT_SECONDS, STREAM_POLL_SECONDS
from krr_app.teaching import teacher
from krr_app.teaching.snippet import notebook_json, reproduce_snippet
from krr_app.text import plain
from krrcore.numbers import readable

#: Plotly's toolbar saves a PNG of every chart; this names the file and doubles the resolution.
PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def plot(fig, key: str, filename: str) -> None:
    """A plotly chart whose toolbar camera button downloads ``filename``.png."""
    config = {**PLOT_CONFIG, "toImageButtonOptions": {**PLOT_CONFIG["toImageButtonOptions"], "filename": filename}}
    st.plotly_chart(fig, key=key, config=config)


def data_messages(settings) -> None:
    """The sidebar's data message, as the solver pages show it: an info while no data is chosen,
    an error when the chosen data failed (a lesson's text is drawn above every page by the sidebar)."""
    if settings.data_error:
        (st.info if settings.data is None else st.error)(settings.data_error)
    elif settings.dataset is not None:
        target_rule_note(settings)


def estimate_caption(config, dataset) -> None:
    """What a run of ``config`` will need, before it runs (krrcore's estimate from the parameters),
    next to what one worker may use."""
    estimate = config.memory_estimate(dataset)
    if estimate is None:
        return
    text = f"Estimated for this run: about {format_bytes(estimate.peak_bytes)} at its peak"
    if estimate.parts:
        top = estimate.parts[0]
        text += f" (largest: {top.name}, {format_bytes(top.bytes)})"
    iterations = config.maxiter or 1
    seconds = estimate.seconds_for(iterations)
    if seconds is not None:
        text += f", about {readable(seconds, 2)} s of computing on one core"
    executor = started_executor()
    limit = executor.worker_memory_limit if executor is not None else None
    if limit:
        text += f"; a worker may use {format_bytes(limit)}"
    st.caption(text + ".")


def dropped_runs_note(registry) -> None:
    """Which finished runs this tab no longer keeps (it keeps the newest MAX_RUNS_PER_SESSION)."""
    if registry.dropped:
        last = registry.dropped[-3:]
        more = len(registry.dropped) - len(last)
        st.caption(
            f"This tab keeps its {registry.max_runs} most recent runs; dropped the oldest: "
            + "; ".join(plain(label, None) for label in last)
            + (f" and {more} earlier" if more else "")
            + "."
        )


def show_problems(messages: list[str]) -> None:
    """krrcore's and the config's messages, which may quote what a user entered: shown as text."""
    for message in messages:
        st.error(plain(message, None))


def status_message(run: Run) -> None:
    """One line saying how a finished run ended (an active one is drawn by :func:`live`)."""
    records = run.records
    iterations = records[-1].iteration if records else 0
    seconds = run.timings.get("solver_seconds", math.nan)
    summary = f"{iterations:,} iteration{'s' if iterations != 1 else ''}, {readable(seconds, 3)} s solver time"
    if run.queue_seconds is not None:
        summary += f" after {run.queue_seconds:.1f} s in the queue"
    # A run's label and message may quote a user's input (a krrcore error on an uploaded table):
    # shown as text (krr_app.text).
    label, message = plain(run.label, None), plain(run.message, None)
    if run.status == "done":
        st.success(f"**{label}** finished — {message}: {summary}.")
        advice = getattr(run.estimator, "residual_advice_", "")
        if advice:  # FALKON ended far from the Nyström solution (krrcore's text, no user strings)
            st.warning(advice, icon=":material/warning:")
    elif run.status == "stopped":
        st.warning(f"**{label}** stopped — {message}: {summary}. The model is the last iterate.")
    elif run.status == "error":
        st.error(f"**{label}** failed: {message}")


def metric_cards(run: Run) -> None:
    """Final test/train metrics, time and memory as st.metric cards."""
    task = run.data.task
    m = run.metrics
    unit = units.unit_of(run.data)  # "RMSE 22,670 salary": the target's name where it has no unit
    if task == "regression":
        cards = [
            ("Test RMSE", m.get("test_rmse"), lambda v: readable(v, unit=unit)),
            ("Test MAE", m.get("test_mae"), lambda v: readable(v, unit=unit)),
            ("Train RMSE", m.get("train_rmse"), lambda v: readable(v, unit=unit)),
        ]
    else:
        cards = [
            ("Test error", m.get("test_classification_error"), "{:.2%}".format),
            ("Train error", m.get("train_classification_error"), "{:.2%}".format),
        ]
        if task == "binary":
            cards.append(("Test AUC", m.get("test_auc"), "{:.4f}".format))
    peak = run.peak_memory_bytes
    cards += [
        ("Solver time", run.timings.get("solver_seconds"), lambda v: readable(v, 3, "s")),
        ("Wall time", run.timings.get("wall_seconds"), lambda v: readable(v, 3, "s")),
        ("Peak memory", None if peak is None else peak / 2**20, lambda v: readable(round(v), unit="MB")),
    ]
    cols = st.columns(len(cards))
    for col, (label, value, fmt) in zip(cols, cards):
        shown = "—" if value is None or not math.isfinite(value) else fmt(value)
        col.metric(
            label,
            shown,
            help="Growth of the worker's resident memory during the run (a worker runs one run at a time)."
            if label == "Peak memory"
            else None,
        )


def convergence_chart(runs: list[Run], x: str, key: str) -> None:
    """The convergence figure, rebuilt only when a run has new records: a poll that finds nothing
    new (a queued run, a slow iteration) reuses the session's last figure for this chart."""
    signature = (x, tuple((run.id, run.status, len(run.records)) for run in runs))
    figures = st.session_state.setdefault("_krr_figures", {})
    if key not in figures or figures[key][0] != signature:
        figure = charts.convergence_figure(runs, x)
        figure.update_xaxes(title_text=x_title(runs, x))  # a logistic run's iterations are Newton steps
        figures[key] = (signature, figure)
    plot(figures[key][1], key=key, filename=f"krr-convergence-vs-{x}")


#: session_state: the deferred page parts that are due (see :func:`after_first_picture`), and the
#: session's page runs so far (counted by :func:`krr_app.parts.sidebar.render`).
_DUE_PARTS = "_krr_parts_due"
PAGE_RUNS_KEY = "_krr_page_runs"


def empty_convergence_chart(x: str, key: str) -> None:
    """The convergence chart's empty panels before any run (drawn with the live chart's ``key``):
    it shows a student what Run will draw, and it makes a new visitor's browser fetch,
    evaluate and first draw plotly.js before Run is pressed instead of after it (Streamlit loads
    plotly.js with the first plotly chart; docs/measurements.md gives the seconds). Not in the
    page's first message (:func:`after_first_picture`)."""
    if after_first_picture(key):
        convergence_chart([], x, key=key)


def after_first_picture(key: str) -> bool:
    """Whether the plotly part ``key`` of a page is due: not in a session's first page run.

    The browser starts fetching plotly.js as soon as a chart arrives and evaluates it on the thread
    that paints, so beside the data's picture it can hold that picture back. The first page run
    registers a fragment whose browser timer fires once, EMPTY_CHART_DELAY_SECONDS later, and asks
    for one full rerun, which draws the part and no longer registers the fragment (the browser
    drops a timer on a full rerun): no polling after. Once due, a part is drawn at once, and so is
    every part after the session's first page run (the browser has the page's scripts by then)."""
    due = st.session_state.setdefault(_DUE_PARTS, set())
    if key in due or st.session_state.get(PAGE_RUNS_KEY, 0) > 1:
        return True
    armed = f"{key}_armed"

    @st.fragment(run_every=EMPTY_CHART_DELAY_SECONDS, key=f"{key}_later")
    def _later():
        if st.session_state.get(armed):  # the timer, not the page run that registered it
            st.session_state[_DUE_PARTS] = due | {key}
            st.rerun()

    st.session_state[armed] = False
    _later()
    st.session_state[armed] = True
    return False


def trace_download(runs: list[Run], key: str, filename: str, label: str = "Download trace (CSV)") -> None:
    download_csv(charts.traces_frame(runs), key=key, filename=filename, label=label)


def fit_target(key: str) -> str:
    """The key of the container :func:`krr_app.parts.fit_views.fit_chart` draws ``key``'s figure in (the live chart's
    fit panel finds the figure there)."""
    return f"{key}_box"


def reproduce(run_config, *, key: str) -> None:
    """The run as krrcore code, and as a Jupyter notebook to download (:mod:`krr_app.teaching.snippet`),
    written only while the expander is open (``st.code`` makes a new visitor's browser fetch and
    compile a 1.5 MB highlighter, in front of the page's first picture)."""
    box = st.expander("Reproduce in Python", key=reproduce_key(key), on_change="rerun")
    if not box.open:
        return
    with box:
        st.caption("The same run with krrcore alone, generated from the configuration that keys this run:")
        st.code(reproduce_snippet(run_config), language="python")
        st.download_button(
            "Download as a Jupyter notebook",
            notebook_json(run_config),
            key=key,
            file_name=f"krr-{run_config.solver}-{run_config.data.name}.ipynb",
            mime="application/x-ipynb+json",
            on_click="ignore",
            icon=":material/download:",
        )


def reproduce_key(key: str) -> str:
    """The session_state key of the expander :func:`reproduce` draws with ``key``."""
    return f"{key}_open"


def live(
    runs_getter, render, *, key: str, x: str = "iteration", fits: dict[str, str] | None = None, panels=None
) -> None:
    """Render ``render(runs)`` when no run is active; while one is, draw the live chart
    (:func:`krr_app.parts.live_chart.live_chart`): the convergence panels of the runs, and for each run
    id in ``fits`` the pictures of its model in the fit figure drawn with :func:`fit_chart` under
    that key. It asks the server for new records and pictures itself and reruns the page once
    when a run ends, so the final results and the buttons follow. A look is a JSON request, not a
    fragment rerun: a rerun redraws the whole page in the browser (docs/measurements.md, "The app
    against the library", has the seconds). ``panels(runs)``: the page's own panels instead of the
    convergence ones (the Tune page's, :func:`krr_app.parts.live_chart.tuning_steps_panel`).
    """
    runs = runs_getter()
    if not any(r.active for r in runs):
        render(runs)
        return
    columns = 1 if teacher.presenting() else 2
    panels = panels(runs) if panels is not None else [convergence_panel(runs, x, columns=columns)]
    panels += [fit_panel(run, fit_target(fits[run.id])) for run in runs if fits and run.id in fits]
    live_chart(runs, panels, key=key)


def pending(result, waiting: list, *, draw: bool = True) -> bool:
    """Whether ``result`` is still computing on the workers (:class:`krr_app.parts.background.Pending`); then it
    joins ``waiting`` (for :func:`stream_in`) and, with ``draw``, its place on the page says so."""
    if not isinstance(result, background.Pending):
        return False
    if result.key not in {p.key for p in waiting}:
        waiting.append(result)
    if draw:
        st.caption(f"{result.what}: computing on the workers — drawn here as soon as it is ready.")
    return True


def first_picture(*calls) -> None:
    """Start the diagnostics ``calls`` (each a krr_app.parts.state function call) that make a page's first
    picture, ahead of computations queued before (:func:`krr_app.parts.background.first_picture_calls`), and
    wait up to FIRST_PICTURE_WAIT_SECONDS for them: results that are nearly in come with this page
    run instead of a rerun later (an error is left to the page's own call). In a session's first
    page run the page's other computations then wait for its next run
    (:func:`krr_app.parts.background.rest_waits`)."""
    keys = []
    for call in calls:
        try:
            with background.first_picture_calls():
                result = call()
        except ValueError:
            continue
        if isinstance(result, background.Pending):
            keys.append(result.key)
    if keys:
        state.results.wait_for(keys, FIRST_PICTURE_WAIT_SECONDS)
    background.rest_waits(st.session_state.get(PAGE_RUNS_KEY, 0) <= 1)


def stream_in(waiting: list) -> None:
    """Rerun the page as soon as one of the ``waiting`` results is in, so it is drawn, or at the
    first look when none of them has started (they wait for this rerun: the first picture is in,
    :func:`krr_app.parts.background.rest_waits`). A fragment looks every STREAM_POLL_SECONDS; the page run
    that draws the last one registers none."""
    if not waiting:
        return
    keys = [p.key for p in waiting]
    in_page_run = True

    @st.fragment(run_every=STREAM_POLL_SECONDS)
    def _look():
        started = [key for key in keys if state.results.started(key)]
        if any(state.results.ready(key) for key in started) or not (started or in_page_run):
            st.rerun()

    _look()
    in_page_run = False


def server_load() -> None:
    """Where runs execute and how many wait for a worker (see krr_app.jobs.executor)."""
    executor = started_executor()
    if executor is None:
        st.caption("The workers are starting…")
        return
    st.caption(
        f"Runs execute on the {executor.describe()}, one run per worker at a time. "
        f"This server's runs computing now: {executor.computing()}, waiting for a worker: "
        f"{executor.waiting()}."
    )


def explanation(*keys: str, title: str = "What am I looking at?") -> None:
    """An expander with the texts ``keys`` of :data:`krr_app.explain.TEXT`, written only while it
    is open (opening it reruns the page): a closed expander's content is still laid out by the
    browser, and these texts' formulas (KaTeX) were the costliest part of a page load, in front of
    Explore's first picture."""
    box = st.expander(title, key=explanation_key(*keys), on_change="rerun")
    if box.open:
        with box:
            for key in keys:
                st.markdown(explain.TEXT[key])


def explanation_key(*keys: str) -> str:
    """The session_state key of the expander :func:`explanation` draws for ``keys``."""
    return "explain_" + "_".join(keys)


# -- the diagnostic pages (Conditioning, Leverage scores, Dataset): bounded inputs and κ labels; the
# URL-bound inputs, CSV downloads and "keep what was computed" are krr_app.parts.inputs'.


def points_used(dataset, *, key: str, default: int, maximum: int, help: str, centres: int = 0) -> int:
    """How many training points the page computes on (a URL-bound number, at most ``maximum``);
    by default at least 2 × ``centres`` (the sidebar's M), so M centres fit among them with room."""
    top = min(dataset.n_train, maximum)
    default = max(default, 2 * centres)
    value = bound_number(
        "Training points used", key, min(default, top), min_value=2, max_value=max(top, 2), step=100, help=help
    )
    return int(min(value, top))


def training_rows(dataset, spec, rows: int, seed: int = 0) -> tuple[np.ndarray, tuple, str]:
    """The first ``rows`` training points of a seeded subsample, the cache key naming them, a caption."""
    X = subsample(dataset.X_train, rows, seed)
    caption = (
        f"Computed on all n = {len(X):,} training points."
        if len(X) == dataset.n_train
        else f"Computed on a seeded random subsample of n = {len(X):,} of the {dataset.n_train:,} training "
        "points (n in λn below is this n)."
    )
    return X, (spec, len(X), seed), caption


def format_kappa(value: float) -> str:
    return "∞" if not math.isfinite(value) else readable(value, 3)


def kappa_label(method: str) -> str:
    return "exact" if method == "exact" else f"estimate ({method}, lower bound)"

"""Tune: σ (one, or one per feature) and λ found by gradient, on the workers, and applied to Explore.

The run is a run like any other (:func:`krrcore.registry.get_solver` "falkon_cv": FalkonCV, one
record per evaluation of the objective, then the refit), so the registry, Stop and the live chart
work for it unchanged. It starts at the sidebar's σ (the Gaussian kernel's; the median heuristic
otherwise), λ and M. A finished run shows the objective and the test error per step, the path of
(log σ, log λ) over a map of the objective (:func:`krrcore.tuning.validation_map`, computed on a
worker), the features' relevance 1/σ_j with one σ per feature, and "Apply to Explore", which moves
Explore (and its link) to the tuned σ, λ and M.
"""

import math

import streamlit as st

from krr_app import explain, units
from krr_app import settings as limits
from krr_app.charts import data as data_charts, tuning as tuning_charts
from krr_app.jobs.config import format_number, make_config, problems
from krr_app.parts import live_chart, sidebar, state, views
from krr_app.teaching import links
from krrcore.numbers import readable
from krrcore.tuning import OBJECTIVES

RUN_KEY = "tune_run"  # session_state handle of the last tuning run started here (tests wait on it)
EXPLORE = "app_pages/explore.py"

settings = sidebar.current()
st.title("Tune")
st.caption(
    "How good can a kernel model be here, and with which σ and λ? Instead of a hand-made grid, the tuner "
    "follows the gradient of a tuning objective from the sidebar's σ and λ, choosing λ exactly at every σ. "
    "It runs on the workers like any run; press **Apply to Explore** to take its σ, λ and M there."
)
dataset = views.require_data(settings)
registry = state.session_runs()

col_objective, col_ard, col_M, col_steps = st.columns([2, 1, 1, 1], vertical_alignment="bottom")
with col_objective:
    objective = links.widget(
        st.selectbox,
        "Objective",
        options=list(OBJECTIVES),
        key="tune_objective",
        format_func=lambda o: tuning_charts.OBJECTIVE_TITLES[o],
        help=explain.HELP["tune_objective"],
        url_keys=True,
    )
with col_ard:
    ard = links.widget(st.toggle, "One σ per feature (ARD)", value=False, key="tune_ard", help=explain.HELP["tune_ard"])
with col_M:
    find_M = links.widget(
        st.toggle,
        "Find M too",
        value=False,
        key="tune_find_M",
        help="M doubles from a quarter of FALKON's √n·log n, keeping the centres already chosen, "
        "until the validated error stops improving by more than 1%; the curve of validated "
        "error against M is drawn. Off: the sidebar's M.",
    )
with col_steps:
    steps = int(
        links.widget(
            st.number_input,
            "Max steps",
            value=30,
            min_value=3,
            max_value=limits.TUNE_MAX_STEPS,
            step=1,
            key="tune_steps",
            help=explain.HELP["tune_steps"],
        )
    )
st.caption(tuning_charts.objective_text(objective))

# Where the search starts: the sidebar's Gaussian σ, else the median heuristic; the sidebar's λ and M.
if settings.kernel == "gaussian" and settings.kernel_params.get("sigma"):
    sigma0 = float(settings.kernel_params["sigma"])
else:
    sigma0 = state.median_sigma(dataset.X_train, (settings.data,))
    st.caption(
        f"The sidebar's kernel is {settings.kernel}: the tuner tunes a Gaussian kernel, starting from the "
        f"median heuristic σ = {readable(sigma0, 3)}."
    )
config = make_config(
    settings.data,
    kernel="gaussian",
    kernel_params={"sigma": sigma0},
    penalty=settings.penalty,
    solver="falkon_cv",
    M=settings.M,
    maxiter=settings.maxiter,
    solver_seed=settings.solver_seed,
    memory_budget=settings.memory_budget,
    solver_params={"objective": objective, "ard": bool(ard), "max_steps": steps, **({"M": "auto"} if find_M else {})},
)
issues = problems(config, dataset.n_train, weighted=getattr(dataset, "weight_train", None) is not None)
views.show_problems(issues)
can_run = not issues
run = registry.get(config)
previous = state.page_run(RUN_KEY, run)


def _stop_active():
    active = st.session_state.get(RUN_KEY)
    if active is not None:
        active.stop()


def _map(run_config, data) -> dict | None:
    """The map of the tuning objective over (σ, λ) around the run's start, on a worker
    (:func:`krr_app.parts.state.tuning_map`, cached: computed once, before the run starts)."""
    params = dict(run_config.solver_params)
    try:
        return state.tuning_map(
            data.X_train,
            data.y_train,
            (run_config.data,),
            run_config.M,
            params.get("objective", "gcv"),
            run_config.solver_seed,
            float(dict(run_config.kernel_params)["sigma"]),
        )
    except ValueError as exc:
        st.error(f"The map of the objective cannot be computed: {exc}")
        return None


col_run, col_stop, _ = st.columns([1, 1, 5])
with col_run:
    clicked = st.button(
        "Tune",
        type="primary",
        disabled=not can_run,
        icon=":material/tune:",
        key="tune_start",
        help=None if can_run else "Fix the messages above first.",
    )
if clicked and can_run and not (run is not None and run.active):
    if previous is not None and previous.active:
        previous.stop()
    _map(config, dataset)  # first, so the live chart draws the path over it from the first step
    run = registry.start(config, dataset)
    st.session_state[RUN_KEY] = previous = run
    state.show_run_in_link(run)
with col_stop:
    st.button(
        "Stop",
        disabled=previous is None or not previous.active,
        icon=":material/stop:",
        key="tune_stop",
        on_click=_stop_active,
        help="Stops the search after its current step; the model is refitted at the best point found so far.",
    )
st.caption(
    f"Starts at σ = {format_number(sigma0)}, λ = {format_number(settings.penalty)} with "
    + ("M found by doubling" if find_M else f"M = {settings.M:,} centres (the sidebar's)")
    + f", on n = {dataset.n_train:,} training points. The answer is chosen and checked on held-out training "
    "rows (k folds); the test split is never read by the tuning, only shown."
)

shown = run if run is not None else previous
if shown is None:
    st.markdown("Nothing has been tuned with these settings yet. Press **Tune**.")
    views.explanation("tune_objective", "tune_ard", title="What does the tuner minimise?")
    st.stop()
if shown is not run:
    st.caption("Showing the last tuning run (made with other settings) — press **Tune** for the current ones.")


def _apply(estimator) -> None:
    """Explore at the tuned values: σ (with ARD the best single σ, which Explore's one σ can hold),
    λ, M and FALKON (FALKON-BLESS when the tuner kept BLESS centres)."""
    sigma = estimator.sigma_ if isinstance(estimator.sigma_, float) else estimator.single_sigma_
    values = {
        "kernel": "gaussian",
        "sigma": float(f"{sigma:.6g}"),
        "log10_penalty": round(math.log10(estimator.penalty_), 4),
        "M": int(estimator.centers_.shape[0]),
        "solver": "falkon_bless" if estimator.centers_choice_ == "bless" else "falkon",
    }
    links.set_pending(values, "the tuned values", "explore")
    # The values travel as pending widget values (checked like a link's); the sidebar's controls
    # write them to Explore's URL, so its link carries the tuned σ, λ and M.
    st.switch_page(EXPLORE, query_params={"dataset": st.query_params.get("dataset", settings.data.name)})


def _render(runs):
    (current,) = runs
    views.status_message(current)
    if not current.records:
        return
    frame = tuning_charts.tuning_frame(current.records)
    metric = current.records[-1].metric or "mse"
    estimator = current.estimator
    if estimator is not None and current.status != "error":
        start = frame.iloc[0]
        started = f"Started from σ = {start['σ (geometric mean)']:.3g}, λ = {start['λ']:.2g}."
        cols = st.columns(5)
        cols[0].metric(
            "Tuned σ" if isinstance(estimator.sigma_, float) else "Tuned σ (geometric mean)",
            format_number(float(frame["σ (geometric mean)"].iloc[-1])),
            help=started
            if isinstance(estimator.sigma_, float)
            else "The geometric mean of the per-feature σ_j over the features in use (switched-off "
            "features left out); the relevance chart shows each one. " + started,
        )
        cols[1].metric("Tuned λ", format_number(estimator.penalty_), help=started)
        test = current.metrics.get("test_rmse", current.metrics.get("test_classification_error"))
        unit = units.unit_of(current.data) if "test_rmse" in current.metrics else ""
        validated = getattr(estimator, "validation_error_", math.nan)
        if math.isfinite(validated) and validated > 0:
            spread = estimator.validation_stderr_ / (2 * math.sqrt(validated))
            rows = len(estimator.validation_rows_)
            folds = estimator.validation_folds_
            cols[2].metric(
                "Validated RMSE",
                f"{readable(math.sqrt(validated), 4)} ± {readable(spread, 2, unit)}",
                help=f"Root mean squared error on {rows:,} held-out training rows "
                f"({f'{folds} folds, each fitted without its rows' if folds > 1 else 'one held-out part'}),"
                " ± its standard error: what the tuner chose by and how sure it is.",
            )
        else:
            cols[2].metric(
                f"Objective ({tuning_charts.OBJECTIVE_TITLES[estimator.objective]})",
                readable(estimator.objective_value_, 4),
            )
        cols[3].metric(
            "Test RMSE" if "test_rmse" in current.metrics else "Test error",
            "—" if test is None else readable(test, 4, unit),
        )
        cols[4].metric("Centres", f"{int(estimator.centers_.shape[0]):,} {estimator.centers_choice_}")
        st.caption(f"**Why it stopped.** {tuning_charts.stop_words(estimator.stop_reason_)}")
        if getattr(estimator, "disagreement_", ""):
            st.info(estimator.disagreement_, icon=":material/balance:")
        if getattr(estimator, "bound_note_", ""):
            st.warning(estimator.bound_note_, icon=":material/vertical_align_bottom:")
        if st.button(
            "Apply to Explore",
            type="primary",
            icon=":material/arrow_forward:",
            key="tune_apply",
            help="Explore's σ, λ, M and solver become the tuned ones (with one σ per feature: the best "
            "single σ, which Explore's one σ can hold); its link then carries them.",
        ):
            _apply(estimator)
    views.plot(
        tuning_charts.progress_figure(frame, dict(current.config.solver_params).get("objective", "gcv"), metric),
        key="tune_progress",
        filename=f"krr-tuning-{current.id}",
    )
    if estimator is not None and getattr(estimator, "M_curve_", None):
        st.markdown("**Validated error against M** — M doubled until the error stopped improving")
        views.plot(
            tuning_charts.m_curve_figure(estimator.M_curve_, int(estimator.centers_.shape[0])),
            key="tune_M_curve",
            filename=f"krr-tuning-M-{current.id}",
        )
    grid = _map(current.config, current.data)
    st.markdown("**Where the search went** — the objective over (λ, σ), its valley, and the path")
    if grid is not None and grid["rows"] < current.data.n_train:
        st.caption(
            f"The map is computed on a seeded subsample of {grid['rows']:,} training points (the search used "
            "all of them)."
        )
    views.plot(tuning_charts.map_figure(grid, frame), key="tune_map", filename=f"krr-tuning-map-{current.id}")
    if estimator is not None and not isinstance(estimator.sigma_, float):
        st.markdown("**Relevance of each feature** (1/σ_j): how strongly the model moves with it")
        views.plot(
            data_charts.relevance_figure(current.data.feature_names, estimator.relevance_),
            key="tune_relevance",
            filename=f"krr-relevance-{current.id}",
        )
    views.download_csv(frame, key="tune_csv", filename=f"krr-tuning-{current.id}.csv", label="Download steps (CSV)")


def _panels(runs):
    """While the run computes: its steps, and its path over the map (computed now, on a worker)."""
    (current,) = runs
    title = tuning_charts.OBJECTIVE_TITLES[dict(current.config.solver_params).get("objective", "gcv")]
    return [
        live_chart.tuning_steps_panel(current, title),
        live_chart.tuning_map_panel(
            current, _map(current.config, current.data), f"Where the search goes — {title} over (λ, σ), darker is lower"
        ),
    ]


views.live(lambda: [shown], _render, key="tune_live", panels=_panels)
views.explanation("tune_objective", "tune_ard", title="What does the tuner minimise?")

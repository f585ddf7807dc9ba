"""Compare: several solvers, or one solver at several M, λ or B, on the same cached problem.

Runs go to the session's registry (the same one Explore uses), run one after another so their
timings are comparable, and stay until removed: their curves are overlaid against iterations and
against seconds, with a table of final test error, time and memory, and CSV downloads.
"""

import streamlit as st

from krr_app import explain
from krr_app.charts import figures as charts
from krr_app.jobs.config import SWEEP_DEFAULTS, SWEEP_LABELS, parse_sweep_values, problems, solver_keys, with_value
from krr_app.parts import fit_views, sidebar, solver_controls, state, views
from krr_app.teaching import links
from krr_app.text import plain
from krrcore.numbers import readable

settings = sidebar.current()
registry = state.session_runs()
dataset = settings.dataset

st.title("Compare")
st.caption(
    "Run several solvers — or one solver at several values of a knob — on the same data, and "
    "overlay their convergence. Runs stay in this session until you remove them."
)
views.data_messages(settings)
views.dropped_runs_note(registry)


def _reset_sweep_values():
    st.session_state["sweep_values"] = SWEEP_DEFAULTS[st.session_state["sweep_param"]]


configs, input_error = [], None
MODES = {"solvers": "Several solvers", "sweep": "One solver, several values"}
mode = links.widget(
    st.radio,
    "Compare",
    options=list(MODES),
    key="cmp_mode",
    horizontal=True,
    format_func=MODES.get,
    persist=False,
    url_keys=True,
)
if settings.data is not None:
    if mode == "solvers":
        chosen = links.widget(
            st.multiselect,
            "Solvers",
            options=solver_keys(),
            key="cmp_solvers",
            format_func=solver_controls.solver_label,
            persist=False,
            default=["falkon", "nystrom_cg"],
            help=explain.HELP["solver"],
            url_keys=True,
        )
        configs = [settings.config(solver=key) for key in chosen]
    else:
        base = settings.config()
        options = [
            k
            for k in SWEEP_DEFAULTS
            if (k == "penalty")
            or (k == "M" and base.M is not None)
            or (k == "maxiter" and base.maxiter is not None)
            or (k in base.info.knobs and k != "M")
        ]
        if st.session_state.get("sweep_param", options[0]) not in options:  # the sidebar's solver changed
            st.session_state.pop("sweep_param")
        col_param, col_values = st.columns([1, 2])
        with col_param:
            param = links.widget(
                st.selectbox,
                f"Vary ({base.info.label}, the sidebar's solver)",
                options=options,
                index=options.index("M") if "M" in options else 0,
                key="sweep_param",
                format_func=SWEEP_LABELS.get,
                on_change=_reset_sweep_values,
                persist=False,
                url_keys=True,
            )
        with col_values:
            text = links.widget(
                st.text_input,
                "Values (comma-separated)",
                value=SWEEP_DEFAULTS[param],
                key="sweep_values",
                persist=False,
            )
        values, input_error = parse_sweep_values(text, param)
        configs = [with_value(base, param, v) for v in values]

if input_error:
    st.error(plain(input_error, None))
issues = {}
for config in configs:
    weighted = dataset is not None and getattr(dataset, "weight_train", None) is not None
    found = problems(config, dataset.n_train if dataset is not None else None, weighted=weighted)
    if found:
        issues[config] = found
for config, found in issues.items():
    st.error(f"**{plain(config.label(), None)}**: {plain(' '.join(found), None)}")
runnable = [c for c in configs if c not in issues] if dataset is not None else []

col_run, col_stop, col_load = st.columns([2, 1, 4], vertical_alignment="center")
with col_run:
    run_all = st.button(
        f"Run {len(runnable)} configuration{'s' if len(runnable) != 1 else ''}",
        type="primary",
        disabled=not runnable,
        icon=":material/play_arrow:",
        key="cmp_run",
    )
if run_all:
    for config in runnable:
        existing = registry.get(config)
        if existing is None or existing.status != "done":  # a finished run is reused as is
            state.show_run_in_link(registry.start(config, dataset))
with col_stop:  # drawn after the click so it is enabled while the batch runs
    st.button(
        "Stop all",
        key="cmp_stop",
        disabled=not registry.active(),
        icon=":material/stop:",
        on_click=lambda: [r.stop() for r in registry.active()],
    )
with col_load:
    views.server_load()

# The side-by-side slider appears once a batch has finished; a link's or a lesson step's iteration
# for it is checked now, and kept until it does.
fit_views.keep_iteration_choice()
st.divider()
runs = registry.runs()
if not runs:
    st.markdown("No runs yet in this session. Choose solvers or values above and press **Run**.")
    views.explanation("compare", "falkon", "condition")
    st.stop()


def _render(current):  # finished runs (views.live draws the batch while one is active)
    tab_iter, tab_time = st.tabs(["Against iterations", "Against seconds"])
    with tab_iter:
        views.convergence_chart(current, "iteration", key="cmp_iter")
    with tab_time:
        views.convergence_chart(current, "seconds", key="cmp_time")
    number = st.column_config.NumberColumn
    table = charts.summary_frame(current)
    for column in [c for c in table.columns if c.startswith(("test RMSE", "test MAE"))]:
        table[column] = table[column].map(readable)  # errors in the target's units, as the tiles write them
    st.dataframe(
        table,
        hide_index=True,
        key="cmp_table",
        column_config={
            "id": None,
            "test classification error": number(format="percent"),
            "test AUC": number(format="%.4f"),
            "solver s": number(format="%.2f"),
            "wall s": number(format="%.2f"),
            "peak memory MB": number(format="%.0f"),
        },
    )


# The fits side by side (1-D and 2-D data): moving while the batch runs, then at one iteration.
side_by_side = fit_views.side_by_side_runs(runs, settings, st.session_state.get("cmp_selected") or [])
views.live(registry.runs, _render, key="cmp_live", fits={r.id: f"cmp_fit_{r.id}" for r in side_by_side})
if side_by_side:
    fit_views.fits_side_by_side(side_by_side, key="cmp_fit")
for run in runs:
    if run.status == "error":
        st.error(f"**{plain(run.label, None)}** failed: {plain(run.message, None)}")

col_remove, col_downloads = st.columns([2, 1])
with col_remove:
    labels = {r.id: f"{r.label} [{r.id[:4]}]" for r in runs}
    selected = st.multiselect(
        "Select runs",
        list(labels),
        format_func=labels.get,
        key="cmp_selected",
        placeholder="Pick runs to remove or download",
    )
    col_a, col_b = st.columns(2)
    col_a.button(
        "Remove selected",
        disabled=not selected,
        key="cmp_remove",
        on_click=lambda: (registry.remove(st.session_state["cmp_selected"]), st.session_state.update(cmp_selected=[])),
    )
    col_b.button(
        "Remove all",
        key="cmp_remove_all",
        on_click=lambda: (registry.remove([r.id for r in registry.runs()]), st.session_state.update(cmp_selected=[])),
    )
with col_downloads:
    chosen_runs = [r for r in runs if r.id in selected] or runs
    which = "selected" if selected else "all"
    views.trace_download(
        chosen_runs, key="cmp_csv", filename=f"krr-compare-traces-{which}.csv", label=f"Traces of {which} runs (CSV)"
    )
    st.download_button(
        f"Table of {which} runs (CSV)",
        charts.summary_frame(chosen_runs, None).to_csv(index=False),
        file_name=f"krr-compare-summary-{which}.csv",
        mime="text/csv",
        key="cmp_table_csv",
        on_click="ignore",
        icon=":material/download:",
    )
views.explanation("compare", "falkon", "askotch", "d_eff", "condition")

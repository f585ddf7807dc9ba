"""The sidebar's solver section: the solver, its loss on classification data (squared, or
logistic where the solver has a logistic model), its iteration count and knobs, and the advanced
settings (dtype, seed, memory budget) — each bound to the URL through
:func:`krr_app.teaching.links.widget`. :func:`krr_app.parts.sidebar.render` draws it."""

from __future__ import annotations

import streamlit as st

from krrcore.registry import SOLVERS

from krr_app import explain
from krr_app.jobs.config import APP_MAX_N, INT_KNOBS, LOGISTIC_SOLVERS, LOSSES, knob_default, solver_keys
from krr_app.parts.inputs import number
from krr_app.teaching import links

DEFAULT_SOLVER = "falkon"


def apply_defaults() -> None:
    """On a solver change: its own iteration count and knob defaults (a FALKON t is not an ASkotch t)."""
    solver = st.session_state.get("solver")
    if solver not in SOLVERS:
        return
    info = SOLVERS[solver]
    if info.iterative:
        st.session_state["maxiter"] = min(int(knob_default(solver, "maxiter")), 10_000)
    for knob in info.knobs:
        if knob in INT_KNOBS and knob != "maxiter":
            st.session_state[knob] = knob_default(solver, knob)
    if solver not in LOGISTIC_SOLVERS:
        st.session_state["loss"] = "squared"  # the others fit the squared loss alone


def solver_label(key: str) -> str:
    """A solver's name in lists."""
    return SOLVERS[key].label


CLASSIFICATION_TASKS = ("binary", "multiclass")


def loss_refusal(solver: str, task: str | None) -> str | None:
    """Why the logistic loss cannot run here (None: it can)."""
    if task not in CLASSIFICATION_TASKS:
        return f"the logistic loss is for classification data (this data's task: {task or 'unknown'})"
    if solver not in LOGISTIC_SOLVERS:
        names = ", ".join(SOLVERS[k].label for k in LOGISTIC_SOLVERS)
        return f"the logistic loss runs with {names}, not {SOLVERS[solver].label}"
    return None


def loss_section(solver: str, task: str | None, shown) -> str:
    """The loss of a classification run: squared (every solver) or logistic (LOGISTIC_SOLVERS).
    A link's ``loss=logistic`` where it cannot run is refused with the reason, not dropped silently."""
    refusal = loss_refusal(solver, task)
    given = st.query_params.get_all("loss")
    if refusal and given and given[-1] == "logistic" and "loss" not in st.session_state:
        links.add_note(links.Note("loss", given[-1], f"is refused: {refusal} — using the squared loss"))
        del st.query_params["loss"]
    if task not in CLASSIFICATION_TASKS or not shown("loss"):
        return "squared"
    if refusal and st.session_state.get("loss") == "logistic":
        st.session_state["loss"] = "squared"
    loss = links.widget(
        st.radio,
        "Loss",
        options=list(LOSSES),
        key="loss",
        horizontal=True,
        help=explain.HELP["loss"],
        disabled=refusal is not None,
    )
    if refusal:
        st.caption(f"Squared loss: {refusal}.")
    elif loss == "logistic":
        st.caption(
            "Logistic FALKON: Newton steps along a decreasing λ path, each a weighted FALKON solve, at "
            "λ/4 (Marteau-Ferey, Bach, Rudi 2019). Max iterations counts Newton steps."
        )
    return loss if refusal is None else "squared"


def section(shown, task: str | None = None) -> dict:
    st.subheader("Solver")
    keys = solver_keys()
    solver = links.widget(
        st.selectbox,
        "Solver",
        options=keys,
        index=keys.index(DEFAULT_SOLVER) if DEFAULT_SOLVER in keys else 0,
        format_func=solver_label,
        key="solver",
        help=explain.HELP["solver"],
        on_change=apply_defaults,
        url_keys=True,
    )
    info = SOLVERS[solver]
    st.caption(f"{info.description} *({info.reference})*")
    out = {"solver": solver, "solver_params": {}, "loss": loss_section(solver, task, shown)}
    label, minimum, _, help_text = INT_KNOBS["maxiter"]
    maxiter_default = knob_default(solver, "maxiter") if info.iterative else INT_KNOBS["maxiter"][2]
    out["maxiter"] = int(
        number(
            label,
            "maxiter",
            min(int(maxiter_default), 10_000),
            min_value=minimum,
            max_value=100_000,
            step=10,
            help=help_text,
            disabled=not info.iterative,
        )
    )
    out["eval_train"] = links.widget(
        st.checkbox,
        "Track the training error too",
        value=False,
        key="eval_train",
        help=explain.HELP["eval_train"],
        disabled=not info.iterative,
    )
    for knob in info.knobs:
        if knob in INT_KNOBS and knob != "maxiter" and shown(knob):
            label, minimum, _, help_text = INT_KNOBS[knob]
            value = number(
                label, knob, knob_default(solver, knob), min_value=minimum, max_value=APP_MAX_N, step=1, help=help_text
            )
            if value is not None:  # None: the solver's automatic choice
                out["solver_params"][knob] = int(value)
    advanced = [key for key in ("dtype", "solver_seed", "budget_mb") if shown(key)]
    if advanced:
        with st.expander("Advanced", expanded=len(advanced) < 3):
            if "dtype" in advanced:
                out["dtype"] = links.widget(
                    st.radio,
                    "dtype",
                    options=["float64", "float32"],
                    key="dtype",
                    horizontal=True,
                    help=explain.HELP["dtype"],
                )
            if "solver_seed" in advanced:
                out["solver_seed"] = int(
                    number("Solver seed", "solver_seed", 0, min_value=0, step=1, help=explain.HELP["solver_seed"])
                )
            if "budget_mb" in advanced:
                budget = number(
                    "Memory budget (MB, 0 = automatic)",
                    "budget_mb",
                    0,
                    min_value=0,
                    step=64,
                    help=explain.HELP["budget"],
                )
                out["memory_budget"] = int(budget) * 2**20 if budget else None
    return out

"""The shared sidebar: data, kernel, λ, M and solver controls, every one bound to the URL.

``app.py`` renders it once per script run, before the page, so all pages share one set of
controls and a link reproduces the view (every control is bound to the URL: the widget key is
the query parameter's name). Every control is drawn through :func:`krr_app.teaching.links.widget`, which checks the
link's value first and names what it refuses or adjusts. ``persist_state="session"`` keeps a
value while its widget is hidden (e.g. ``noise`` while a data set without noise is selected).
Pages read the result with :func:`current`; the data section is drawn first and a page may draw
what needs only the data (:func:`data`) before the rest of the sidebar follows. In a lesson
(``?lesson=<name>``, see :mod:`krr_app.teaching.lessons`) the controls the lesson does not use are hidden
and take their defaults.
"""

from __future__ import annotations

import inspect
import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from krrcore.datasets import DATASETS
from krrcore.kernels import KERNELS

from krr_app.jobs.spec import frozen
from krr_app import explain
from krr_app.jobs.config import (
    APP_MAX_M,
    APP_MAX_N,
    INT_KNOBS,
    LOGISTIC_SOLVERS,
    DataSpec,
    RunConfig,
    format_number,
    make_config,
)
from krr_app.parts import background, solver_controls, state, upload, views
from krr_app.parts.inputs import number
from krr_app.teaching import lessons, links, teacher

CSV_OPTION = upload.CSV_OPTION
DEFAULT_DATASET = "moons" if "moons" in DATASETS else next(iter(DATASETS))
DEFAULT_M = 100
LOG10_PENALTY_RANGE = (-12.0, 1.0)
SETTINGS_KEY = "_krr_settings"
DATA_KEY = "_krr_data"
FINISH_KEY = "_krr_sidebar_rest"  # this script run's rest of the sidebar, until a page asks for it
#: session_state: the uploaded table (its DataSpec's key) whose suggested σ and λ were applied.
TABLE_SUGGESTED_KEY = "_krr_csv_suggested"
#: Choices for kernel parameters that only take a few values.
KERNEL_CHOICES = {"nu": (0.5, 1.5, 2.5), "p": (1, 2)}


@dataclass
class Settings:
    """Everything the sidebar decided, as plain values plus the loaded dataset (read-only)."""

    lesson: lessons.Lesson | None
    data: DataSpec | None
    dataset: object | None
    data_error: str | None
    kernel: str
    kernel_params: dict
    penalty: float
    M: int
    solver: str
    maxiter: int
    dtype: str = "float64"
    solver_seed: int = 0
    memory_budget: int | None = None
    solver_params: dict = field(default_factory=dict)
    eval_train: bool = False
    loss: str = "squared"  # "logistic" only on classification data with a LOGISTIC_SOLVERS solver

    @property
    def advanced(self) -> bool:
        return self.lesson is None

    def config(self, solver: str | None = None) -> RunConfig:
        """The RunConfig of ``solver`` (default: the sidebar's) on this problem (the logistic loss
        for the solvers that fit it, when chosen; the squared loss for the others)."""
        solver = solver or self.solver
        return make_config(
            self.data,
            kernel=self.kernel,
            kernel_params=self.kernel_params,
            penalty=self.penalty,
            solver=solver,
            M=self.M,
            maxiter=self.maxiter,
            dtype=self.dtype,
            solver_seed=self.solver_seed,
            memory_budget=self.memory_budget,
            solver_params=self.solver_params,
            eval_train=self.eval_train,
            loss=self.loss if solver in LOGISTIC_SOLVERS else "squared",
        )


class DataChoice:
    """The sidebar's data section: the spec, the dataset (None if it could not be loaded) and why
    not. An uploaded table's dataset is built when first asked for (:class:`krr_app.parts.upload.Table`),
    so a page can show the table's columns before its preprocessing is fitted."""

    def __init__(self, spec: DataSpec | None, dataset=None, error: str | None = None):
        self.spec, self._dataset, self._error = spec, dataset, error

    @property
    def table(self) -> upload.Table | None:
        return self._dataset if isinstance(self._dataset, upload.Table) else None

    @property
    def dataset(self):
        return self.table.dataset if self.table is not None else self._dataset

    @property
    def error(self) -> str | None:
        return self._error or (self.table.error if self.table is not None else None)


def data() -> DataChoice:
    """The data chosen in this script run's sidebar, before the rest of it is drawn (:func:`render`)."""
    if DATA_KEY not in st.session_state:
        raise RuntimeError("the sidebar has not been rendered: run the app through app.py")
    return st.session_state[DATA_KEY]


def finish() -> None:
    """Draw the rest of the sidebar if no page has asked for it in this script run (the router
    calls it after the page; a no-op when :func:`current` has drawn it)."""
    rest = st.session_state.pop(FINISH_KEY, None)
    if rest is not None:
        rest()


def current() -> Settings:
    """The settings of this script run, drawing the rest of the sidebar first if the page is the
    first to ask (pages call this; see :func:`render`)."""
    finish()
    if SETTINGS_KEY not in st.session_state:
        raise RuntimeError("the sidebar has not been rendered: run the app through app.py")
    return st.session_state[SETTINGS_KEY]


# -- defaults and callbacks ----------------------------------------------------------------------
def _kernel_defaults(kernel: str) -> dict:
    params = inspect.signature(KERNELS[kernel].__init__).parameters
    return {k: p.default for k, p in params.items() if k != "self" and p.default is not inspect.Parameter.empty}


def _log10_penalty(penalty: float) -> float:
    lo, hi = LOG10_PENALTY_RANGE
    return min(hi, max(lo, round(math.log10(penalty) * 4) / 4))


def _apply_dataset_suggestions() -> None:
    """On a dataset change: its default n and knobs, and its suggested kernel, σ and λ.

    These equal the widgets' defaults for the new dataset, so they stay out of the URL and a link
    rebuilds them from ``dataset`` alone."""
    name = st.session_state.get("dataset")
    info = DATASETS.get(name)
    if info is None:
        return
    st.session_state["n"] = info.default_n
    for knob, value in info.knob_defaults.items():
        st.session_state[knob] = value
    suggested = info.suggested_kernel
    kernel = suggested.pop("name", "gaussian")
    st.session_state["kernel"] = kernel
    for param, value in suggested.items():
        st.session_state[param] = value
    st.session_state["log10_penalty"] = _log10_penalty(info.suggested_penalty)
    st.session_state["M"] = suggested_M(info.name)


def suggested_M(name: str | None) -> int:
    """The M the sidebar starts from on data set ``name``: its catalogue entry's, else DEFAULT_M
    (an uploaded table included)."""
    info = DATASETS.get(name)
    return (info.suggested_M if info is not None else None) or DEFAULT_M


def _set_median_sigma(dataset, data_key: tuple) -> None:
    value = state.median_sigma(dataset.X_train, data_key)
    st.session_state["sigma"] = float(f"{value:.4g}")


# -- sections ------------------------------------------------------------------------------------
def _dataset_label(name: str) -> str:
    if name == CSV_OPTION:
        return "Upload a table…"
    info = DATASETS[name]
    return info.title if info.available else f"{info.title} (needs {', '.join(info.requires)})"


#: Largest values of kernel parameters a link or the box may set: (γxᵀx' + c)^degree past 20 leaves
#: float64's range on standardised data with a few features (a degree of 1000 overflows at once).
KERNEL_MAXIMA = {"degree": 20}


def _data_section() -> tuple[DataSpec | None, object | None, str | None]:
    st.subheader("Data")
    options = [*DATASETS, CSV_OPTION]
    name = links.widget(
        st.selectbox,
        "Dataset",
        options=options,
        index=options.index(DEFAULT_DATASET),
        format_func=_dataset_label,
        key="dataset",
        help=explain.HELP["dataset"],
        on_change=_apply_dataset_suggestions,
        url_keys=True,
    )
    if name == CSV_OPTION:
        return upload.section()
    info = DATASETS[name]
    st.caption(info.description)
    n = number(
        "n (points, train + test)",
        "n",
        info.default_n,
        min_value=4,
        max_value=min(info.max_n, APP_MAX_N),
        step=100,
        help=explain.HELP["n"],
    )
    knobs = {}
    for knob, default in info.knob_defaults.items():
        is_int = isinstance(default, int) and not isinstance(default, bool)
        knobs[knob] = number(
            knob.replace("_", " ").capitalize(),
            knob,
            default,
            min_value=1 if is_int else 0.0,
            step=1 if is_int else 0.01,
            format=None if is_int else "%.3g",
            help=info.noise_help or explain.HELP["noise"],
        )
    seed = number("Data seed", "seed", 0, min_value=0, step=1, help=explain.HELP["seed"])
    spec = DataSpec(name=name, n=int(n), seed=int(seed), knobs=frozen(knobs))
    try:
        return spec, state.load_spec(spec), None
    except (ValueError, ImportError, OSError) as exc:
        return spec, None, f"Could not load {info.title}: {exc}"


def _apply_table_suggestions(dataset, key: tuple) -> None:
    """A newly built table (or a new target or column choice) gets its suggested σ and λ, as a
    built-in data set does on selection (:func:`_apply_dataset_suggestions`); later edits are the user's."""
    if st.session_state.get(TABLE_SUGGESTED_KEY) == key:
        return
    st.session_state[TABLE_SUGGESTED_KEY] = key
    suggested = dict(dataset.suggested_kernel)
    st.session_state["kernel"] = suggested.pop("name", "gaussian")
    for param, value in suggested.items():
        st.session_state[param] = float(f"{value:.4g}") if isinstance(value, float) else value
    st.session_state["log10_penalty"] = _log10_penalty(dataset.suggested_penalty)


def _suggestions(dataset) -> tuple[dict, float]:
    """The dataset's suggested kernel (name and parameters) and λ: the model section's defaults."""
    if dataset is None:
        return {"name": "gaussian"}, 1e-4
    return dict(dataset.suggested_kernel), dataset.suggested_penalty


def _model_section(spec, dataset, shown) -> tuple[str, dict, float, int]:
    st.subheader("Model")
    suggested, suggested_penalty = _suggestions(dataset)
    kernels = list(KERNELS)
    kernel = links.widget(
        st.selectbox,
        "Kernel",
        options=kernels,
        index=kernels.index(suggested.get("name", "gaussian")),
        key="kernel",
        help=explain.HELP["kernel"],
    )
    params = {}
    for name, default in _kernel_defaults(kernel).items():
        if kernel == suggested.get("name") and name in suggested:
            default = suggested[name]
        if name == "sigma":
            col_sigma, col_button = st.columns([3, 2], vertical_alignment="bottom")
            with col_sigma:
                params["sigma"] = number(
                    "σ (bandwidth)",
                    "sigma",
                    float(default),
                    min_value=1e-6,
                    step=0.05,
                    format="%.4g",
                    help=explain.HELP["sigma"],
                )
            with col_button:
                st.button(
                    "Median",
                    key="median_sigma",
                    help=explain.HELP["median"],
                    disabled=dataset is None or teacher.locked("median_sigma"),
                    on_click=_set_median_sigma,
                    args=(dataset, _data_key(spec)),
                    width="stretch",
                )
        elif not shown(name):
            params[name] = default
        elif name in KERNEL_CHOICES:
            choices = KERNEL_CHOICES[name]
            params[name] = links.widget(st.selectbox, name, options=choices, index=choices.index(default), key=name)
        else:
            is_int = isinstance(default, int)
            params[name] = number(
                name,
                name,
                default,
                min_value=1 if is_int else 0.0,
                step=1 if is_int else 0.1,
                max_value=KERNEL_MAXIMA.get(name),
            )
    log10_penalty = links.widget(
        st.slider,
        "log₁₀ λ (regularisation)",
        min_value=LOG10_PENALTY_RANGE[0],
        max_value=LOG10_PENALTY_RANGE[1],
        value=_log10_penalty(suggested_penalty),
        step=0.25,
        key="log10_penalty",
        help=explain.HELP["lambda"],
    )
    penalty = 10.0**log10_penalty
    st.caption(f"λ = {format_number(penalty)} — the system solved is (K + λnI) c = y")
    default_M = DEFAULT_M if spec is None or spec.is_csv else suggested_M(spec.name)
    M = number("M (Nyström centres)", "M", default_M, min_value=1, max_value=APP_MAX_M, step=10, help=explain.HELP["M"])
    return kernel, params, penalty, int(M)


@contextmanager
def _as_router():
    """Draw as the router does, also while a page runs (:func:`current`): Streamlit tells a page's
    widgets from the router's by the script running them, and a widget of the page's would get a new
    identity on another page — its value (a link's M, say) would not follow the user there."""
    ctx = get_script_run_ctx()
    if ctx is None:
        yield
        return
    with ctx.run_with_active_hash(ctx.pages_manager.main_script_hash):
        yield


def _data_key(spec: DataSpec | None) -> tuple:
    return (
        ()
        if spec is None
        else (spec.name, spec.n, spec.seed, spec.knobs, spec.csv_digest, spec.csv_target, spec.csv_options)
    )


def render(*, page: str, solver_section: bool = True) -> None:
    """Draw the sidebar's data section for ``page`` (a key of :data:`krr_app.teaching.lessons.PAGES`), and
    keep the rest — the model and solver controls, and above the page the link's notes and the
    lesson — for :func:`current`, which the page calls once it has drawn what needs the data alone
    (:func:`data`). Explore draws the data's picture first, so it reaches a new visitor's browser
    ahead of some twenty widgets whose scripts the browser must first fetch, compile and lay out.
    Each part goes in a container reserved here, so the page looks the same whatever the order."""
    st.session_state.pop(SETTINGS_KEY, None)
    st.session_state[views.PAGE_RUNS_KEY] = st.session_state.get(views.PAGE_RUNS_KEY, 0) + 1
    background.rest_waits(False)
    links.read_url_once()
    teacher.apply(teacher.teacher_view())
    lesson = lessons.sync(page)
    above_page = st.container()
    with st.sidebar:
        if lesson is not None:
            st.info(f"**Lesson: {lesson.title}** — the controls it does not use are hidden.")
        spec, dataset, data_error = _data_section()
        if data_error:
            st.warning(data_error)
        rest = st.container()
    choice = DataChoice(spec, dataset, data_error)
    st.session_state[DATA_KEY] = choice

    def shown(key: str) -> bool:
        return lesson is None or key in lesson.keys

    def draw_rest() -> None:
        dataset, data_error = choice.dataset, choice.error  # an uploaded table is built here at the latest
        with _as_router(), rest:
            if choice.table is not None and choice.table.error:
                st.warning(choice.table.error)  # found while building the table
            if choice.table is not None and dataset is not None:
                _apply_table_suggestions(dataset, (spec.csv_digest, spec.csv_target, spec.csv_options))
            kernel, kernel_params, penalty, M = _model_section(spec, dataset, shown)
            solver = (
                solver_controls.section(shown, getattr(dataset, "task", None))
                if solver_section
                else {
                    "solver": st.session_state.get("solver", solver_controls.DEFAULT_SOLVER),
                    "maxiter": INT_KNOBS["maxiter"][2],
                }
            )
            if lesson is None:
                lessons.index()
            views.explanation("krr", "sigma", "lambda", "M", title="What do these knobs mean?")
        links.settle_pending(page)
        with above_page:
            links.show_notes()
            lessons.panel(lesson)
        st.session_state[SETTINGS_KEY] = Settings(
            lesson=lesson,
            data=spec,
            dataset=dataset,
            data_error=data_error,
            kernel=kernel,
            kernel_params=kernel_params,
            penalty=penalty,
            M=M,
            **solver,
        )

    st.session_state[FINISH_KEY] = draw_rest

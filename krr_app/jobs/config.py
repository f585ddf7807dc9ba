"""The plain configuration of one run: what keys the caches, labels a run and writes the snippet.

Everything here is a hashable value (str, int, float, tuples), never an array or a tensor, so a
:class:`RunConfig` is the single key for the run registry and ``st.cache_*`` functions, and the
"reproduce in Python" snippet is generated from the same object that keyed the run.
"""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass, field, replace

from krrcore.kernels import KERNELS
from krrcore.numbers import LARGEST, SMALLEST, readable
from krrcore.registry import SOLVERS, SolverInfo, get_solver
from krrcore.solvers.params import PENALTY_REASON, is_valid_penalty
from krrcore.solvers.refusals import std_refusal

from krrcore.solvers.logistic import matching_penalty

from krr_app.jobs.spec import LOGISTIC_SOLVERS, LOSSES, DataSpec, FitSpec, Params, frozen  # noqa: F401  (DataSpec re-exported)
from krr_app.settings import APP_MAX_M, APP_MAX_N, AUTO_RUN_MAX_M, AUTO_RUN_MAX_N  # noqa: F401  (re-exported)
from krr_app.settings import EXACT_KRR_MAX_N


#: Integer solver knobs the UI knows how to show: label, minimum, fallback default, help text.
#: The default actually used is the solver's own (:func:`knob_default`). A knob a future solver
#: adds that is not listed here keeps the solver's default.
INT_KNOBS: dict[str, tuple[str, int, int, str]] = {
    "maxiter": ("Max iterations t", 1, 20, "Iterations of the solver. FALKON needs about log(1/ε) of them."),
    "blocks": (
        "Blocks B (empty: automatic)",
        1,
        10,
        "ASkotch splits the n points into B blocks and updates one block per step.",
    ),
    "rank": ("Preconditioner rank r", 1, 50, "Rank of the randomized Nyström preconditioner (ASkotch, NyströmPCG)."),
}


@dataclass(frozen=True)
class RunConfig:
    """One solver on one problem. Build it with :func:`make_config` so irrelevant knobs are dropped."""

    data: DataSpec
    kernel: str
    kernel_params: Params
    penalty: float
    solver: str
    M: int | None = None
    maxiter: int | None = None
    dtype: str = "float64"
    solver_seed: int = 0
    memory_budget: int | None = None  # bytes
    solver_params: Params = field(default=())
    eval_train: bool = False  # also record the training error every iteration
    loss: str = "squared"  # "logistic": LogisticFalkon at matching_penalty(penalty) (classification data)
    uncertainty: bool = False  # also set up the posterior: predictive std on the plotting grid

    @property
    def info(self) -> SolverInfo:
        return get_solver(self.solver)

    def fit_spec(self, run_id: str) -> FitSpec:
        """This configuration as the plain spec a worker runs (:func:`krr_app.jobs.worker.run_fit`)."""
        return FitSpec(
            run_id=run_id,
            data=self.data,
            solver=self.solver,
            kernel=self.kernel,
            kernel_params=self.kernel_params,
            params=frozen(self.estimator_kwargs()),
            loss=self.loss,
        )

    def memory_estimate(self, dataset):
        """What this run will hold and take on ``dataset`` (:meth:`krrcore.solvers.base.KRRBase.memory_estimate`),
        from the parameters alone; None when the parameters themselves are invalid (the run says why)."""
        k = 1 if dataset.y_train.ndim == 1 else dataset.y_train.shape[1]
        try:
            return (
                self.fit_spec("estimate")
                .build_estimator()
                .memory_estimate(dataset.n_train, dataset.d, k, n_val=dataset.n_test)
            )
        except (ValueError, ImportError):
            return None

    def kernel_kwargs(self) -> dict:
        return dict(self.kernel_params)

    def estimator_kwargs(self) -> dict:
        """Constructor parameters besides ``kernel``: only those the solver accepts, no Nones."""
        candidates = {
            # the logistic loss at the λ that regularises as the squared loss's λ does (λ/4)
            "penalty": matching_penalty(self.penalty) if self.loss == "logistic" else self.penalty,
            "M": self.M,
            "maxiter": self.maxiter,
            "dtype": self.dtype,
            "seed": self.solver_seed,
            "memory_budget": self.memory_budget,
            "eval_train": True if self.eval_train else None,
            "uncertainty": True if self.uncertainty else None,
            **dict(self.solver_params),
        }
        accepted = accepted_params(self.solver)
        return {k: v for k, v in candidates.items() if v is not None and (k == "penalty" or k in accepted)}

    def label(self, vary: tuple[str, ...] = ()) -> str:
        """Short human label: the solver plus the knobs named in ``vary`` (all main knobs if empty),
        and "float32" when it is not float64 (two runs differing only in dtype must not look alike)."""
        knobs = {
            "M": self.M,
            "λ": self.penalty,
            "σ": self.kernel_kwargs().get("sigma"),
            "t": self.maxiter,
            **dict(self.solver_params),
        }
        shown = [f"{k}={format_number(v)}" for k, v in knobs.items() if v is not None and (not vary or k in vary)]
        loss = ["logistic loss"] if self.loss == "logistic" else []
        extra = ([self.dtype] if self.dtype != "float64" else []) + (["± std"] if self.uncertainty else [])
        return " · ".join([self.info.label, *loss, *shown, *extra])

    def as_dict(self) -> dict:
        """Flat plain dict (for tables and CSV downloads)."""
        out = {
            "dataset": self.data.csv_filename if self.data.is_csv else self.data.name,
            "n": self.data.n,
            "data_seed": self.data.seed,
            **{f"data_{k}": v for k, v in self.data.knobs},
            "kernel": self.kernel,
            **{f"kernel_{k}": v for k, v in self.kernel_params},
            "solver": self.solver,
            "loss": self.loss,
        }
        out.update(self.estimator_kwargs())
        return out


def format_number(value) -> str:
    """Short and exact enough for labels, links and code: 0.5, 1e-6, 3.16e-5, 250, 12000 (the
    :func:`krrcore.numbers.readable` rule without thousands commas, so it reads back as a number)."""
    if isinstance(value, float):
        if value != 0 and not SMALLEST <= abs(value) < LARGEST:
            text = f"{value:.0e}" if math.isclose(value, float(f"{value:.0e}"), rel_tol=1e-9) else f"{value:.2e}"
            return re.sub(r"e([+-])0*(\d)", lambda m: f"e{m.group(1).replace('+', '')}{m.group(2)}", text)
        return readable(value, grouping=False)
    return str(value)


_ACCEPTED: dict[str, frozenset[str]] = {}


def accepted_params(solver: str) -> frozenset[str]:
    """Constructor parameter names of a solver."""
    if solver not in _ACCEPTED:
        cls = get_solver(solver).estimator
        _ACCEPTED[solver] = frozenset(inspect.signature(cls.__init__).parameters) - {"self"}
    return _ACCEPTED[solver]


def knob_default(solver: str, knob: str):
    """A solver knob's starting value: the registry's default, else the constructor's (None can
    mean "automatic", e.g. ASkotch's blocks), else :data:`INT_KNOBS`' fallback."""
    info = get_solver(solver)
    defaults = dict(info.defaults)
    if knob in defaults:
        return defaults[knob]
    try:
        parameter = inspect.signature(info.estimator.__init__).parameters.get(knob)
    except ImportError:
        parameter = None
    if parameter is not None and parameter.default is not inspect.Parameter.empty:
        return parameter.default
    return INT_KNOBS[knob][2] if knob in INT_KNOBS else None


def kernel_param_names(kernel: str) -> tuple[str, ...]:
    """The constructor parameters of a kernel in ``KERNELS`` (e.g. ('sigma',) for the Gaussian)."""
    cls = KERNELS[kernel]
    return tuple(p for p in inspect.signature(cls.__init__).parameters if p != "self")


def make_config(
    data: DataSpec,
    *,
    kernel: str,
    kernel_params: dict,
    penalty: float,
    solver: str,
    M: int | None = None,
    maxiter: int | None = None,
    dtype: str = "float64",
    solver_seed: int = 0,
    memory_budget: int | None = None,
    solver_params: dict | None = None,
    eval_train: bool = False,
    loss: str = "squared",
    uncertainty: bool = False,
) -> RunConfig:
    """A normalised RunConfig: knobs the solver ignores are set to None, so that e.g. moving the M
    slider does not make exact KRR look like a new, not-yet-run configuration. ``loss``: one of
    :data:`~krr_app.jobs.spec.LOSSES`; "logistic" only with :data:`~krr_app.jobs.spec.LOGISTIC_SOLVERS`
    (the page offers it on classification data alone)."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
    if loss == "logistic" and solver not in LOGISTIC_SOLVERS:
        raise ValueError(f"the logistic loss runs with {', '.join(LOGISTIC_SOLVERS)}, not {solver!r}")
    info = get_solver(solver)
    accepted = accepted_params(solver)
    names = kernel_param_names(kernel)
    kparams = frozen({k: v for k, v in kernel_params.items() if k in names})
    extra = frozen({k: v for k, v in (solver_params or {}).items() if k in accepted and k in info.knobs})
    return RunConfig(
        data=data,
        kernel=kernel,
        kernel_params=kparams,
        penalty=float(penalty),
        solver=solver,
        M=int(M) if (M is not None and "M" in accepted) else None,
        maxiter=int(maxiter) if (maxiter is not None and info.iterative and "maxiter" in accepted) else None,
        dtype=dtype if "dtype" in accepted else "float64",
        solver_seed=int(solver_seed) if "seed" in accepted else 0,
        memory_budget=memory_budget if "memory_budget" in accepted else None,
        solver_params=extra,
        eval_train=bool(eval_train) and info.iterative and "eval_train" in accepted,
        loss=loss,
        uncertainty=bool(uncertainty) and "uncertainty" in accepted,
    )


def weight_refusal(solver: str) -> str | None:
    """Why ``solver`` cannot fit a table's weight column (None: it fits weighted KRR); the reason is
    the solver's own (``_SAMPLE_WEIGHT_REFUSAL``, as its ``fit`` would raise it)."""
    reason = getattr(get_solver(solver).estimator, "_SAMPLE_WEIGHT_REFUSAL", None)
    if reason is None:
        return None
    return (
        f"{get_solver(solver).label} does not take sample weights: {reason}. Pick another solver, or give the "
        f"weight column another role on the Dataset page."
    )


def uncertainty_refusal(solver: str, task: str, weighted: bool = False, loss: str = "squared") -> str | None:
    """Why a run of ``solver`` on data of ``task`` gives no predictive standard deviation (None: it
    gives one, from :mod:`krrcore.solvers.uncertainty`); the solver's reason is the library's own.
    ``weighted``: the data carry sample weights, whose posterior the library does not give;
    ``loss="logistic"``: the posterior is the squared loss's (a Gaussian likelihood)."""
    if loss != "squared":
        return (
            "No uncertainty with the logistic loss: the band is the Gaussian-process posterior of the squared "
            "loss, which a logistic model does not have. Choose the squared loss for the band."
        )
    if weighted and "uncertainty" in accepted_params(solver):
        return (
            "No uncertainty with a weight column: the posterior and its noise estimate are those of unweighted "
            "KRR. Give the weight column another role on the Dataset page for the band."
        )
    if "uncertainty" not in accepted_params(solver):
        return f"{get_solver(solver).label} gives no predictive uncertainty: {std_refusal(get_solver(solver).make())}."
    if task == "multiclass":
        return (
            "No uncertainty map for several classes: the model has one output per class, each with its own "
            "spread, and the map shows one; pick a regression or two-class data set."
        )
    return None


def with_uncertainty(config: RunConfig, wanted: bool, task: str, weighted: bool = False) -> RunConfig:
    """``config`` fitted with the posterior set up when ``wanted`` and the solver and data allow it
    (:func:`uncertainty_refusal`); otherwise without."""
    allowed = uncertainty_refusal(config.solver, task, weighted, config.loss) is None
    return replace(config, uncertainty=bool(wanted) and allowed)


def with_value(config: RunConfig, name: str, value) -> RunConfig:
    """The same configuration with one knob changed (Compare's sweeps): 'M', 'penalty' or a solver knob."""
    if name in ("M", "penalty", "maxiter"):
        return replace(config, **{name: value})
    params = dict(config.solver_params)
    params[name] = value
    return replace(config, solver_params=frozen(params))


#: What Compare's sweep can vary, with the values it offers first.
SWEEP_DEFAULTS = {
    "M": "20, 50, 100, 200",
    "penalty": "1e-8, 1e-6, 1e-4, 1e-2",
    "maxiter": "5, 10, 20, 40",
    "blocks": "2, 5, 10",
    "rank": "10, 50, 100",
}
SWEEP_LABELS = {
    "M": "M (centres)",
    "penalty": "λ",
    "maxiter": "max iterations t",
    "blocks": "B (blocks)",
    "rank": "r (preconditioner rank)",
}


def parse_sweep_values(text: str, name: str) -> tuple[list, str | None]:
    """Comma-separated sweep values for knob ``name``: (values, None), or ([], a sentence naming
    the bad value). λ must be > 0; the other knobs are whole numbers ≥ 1. Duplicates are dropped."""
    values = []
    for item in [t.strip() for t in text.replace(";", ",").split(",") if t.strip()]:
        try:
            value = float(item)
        except ValueError:
            return [], f"'{item}' is not a number: write values separated by commas, e.g. {SWEEP_DEFAULTS[name]}"
        if name == "penalty":
            if not is_valid_penalty(value):
                return [], f"λ = {item} cannot be used: λ must be > 0 ({PENALTY_REASON})."
            values.append(value)
        elif not (math.isfinite(value) and value == int(value) and value >= 1):
            return [], f"{SWEEP_LABELS[name]} must be a whole number ≥ 1, got {item}"
        else:
            values.append(int(value))
    if not values:
        return [], "Enter at least one value."
    return list(dict.fromkeys(values)), None


def _solver_size_problem(config: RunConfig, n_train: int) -> str | None:
    """The solver's own check of its size knobs (ASkotch's blocks and rank, NyströmPCG's rank)
    against n, run before Run instead of at the start of the run."""
    estimator = config.info.make(**config.estimator_kwargs())
    check = getattr(estimator, "check_sizes", None)
    if check is None:
        return None
    try:
        check(n_train)
    except ValueError as exc:
        knobs = ", ".join(f"{k} = {v}" for k, v in config.solver_params) or "its default knobs"
        return f"{config.info.label} cannot run with {knobs} on n = {n_train:,} training points: {exc}."
    return None


def problems(config: RunConfig, n_train: int | None, *, weighted: bool = False) -> list[str]:
    """Reasons this configuration cannot run, as sentences for the page (empty when it can);
    ``weighted``: the data carry a weight column (refused by the solvers that take no weights)."""
    out = []
    if weighted and weight_refusal(config.solver):
        out.append(weight_refusal(config.solver))
    if not is_valid_penalty(config.penalty):
        out.append(f"λ must be > 0 (got {config.penalty:g}): {PENALTY_REASON}.")
    sigma = config.kernel_kwargs().get("sigma")
    if sigma is not None and not (sigma > 0):
        out.append(f"σ must be > 0 (got {sigma:g}).")
    if n_train is not None:
        if config.M is not None and config.M > n_train:
            out.append(f"M = {config.M} centres, but there are only n = {n_train} training points: choose M ≤ n.")
        if config.solver == "exact" and n_train > EXACT_KRR_MAX_N:
            out.append(
                f"Exact KRR is offered up to n = {EXACT_KRR_MAX_N:,} training points here (n = {n_train:,}): "
                "lower n, or use a Nyström solver."
            )
        size_problem = _solver_size_problem(config, n_train)
        if size_problem:
            out.append(size_problem)
    if config.M is not None and config.M < 1:
        out.append(f"M must be at least 1 (got {config.M}).")
    if config.M is not None and config.M > APP_MAX_M:
        out.append(
            f"M = {config.M:,} is above this server's limit of {APP_MAX_M:,} centres (an M×M float64 "
            f"matrix alone would take {8 * config.M**2 / 2**30:.1f} GiB)."
        )
    return out


def is_small(config: RunConfig, n_points: int) -> bool:
    """Small enough to run on every change (:data:`SMALL_TEXT`): ``n_points`` (train + test)
    ≤ AUTO_RUN_MAX_N and, for a Nyström solver, M ≤ AUTO_RUN_MAX_M."""
    return n_points <= AUTO_RUN_MAX_N and (config.M is None or config.M <= AUTO_RUN_MAX_M)


#: What "small" means, in the words the page uses.
SMALL_TEXT = f"n ≤ {AUTO_RUN_MAX_N:,} points and M ≤ {AUTO_RUN_MAX_M:,} centres"


def solver_keys() -> list[str]:
    """All registered solvers, in the registry's order (a new entry appears without UI changes)."""
    return list(SOLVERS)

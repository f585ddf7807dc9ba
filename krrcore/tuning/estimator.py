"""FalkonCV: FALKON whose σ (one, or one per feature) and λ are tuned inside ``fit``.

The scikit-learn face of :mod:`krrcore.tuning`, named like scikit-learn's ``RidgeCV`` and
``LassoCV``: an estimator whose ``fit`` chooses its own hyperparameters and then refits on all the
data, so it sits at the end of a ``Pipeline`` and inside ``cross_val_score`` like any regressor.
``Falkon`` keeps its meaning (a solver at given σ and λ); tuning is a separate estimator with its
own parameters, declared once here. Its stages (:mod:`krrcore.tuning.stages`) and its choice of
the answer on held-out rows (:mod:`krrcore.tuning.choice`) are mixins in their own modules.
"""

from __future__ import annotations

import math
import numbers
import threading
import warnings

import numpy as np
import torch

from ..centers import center_count, select_centers
from ..diagnostics.suggest import theory_penalty
from ..kernels import GaussianKernel, median_heuristic
from ..memory import CostModel, storage_budget
from ..ops import operator_bytes
from ..solvers.base import KRRBase, Seeded, Step
from ..solvers.params import (
    BOOLEAN,
    CALLBACKS,
    COUNT,
    METRIC_NAMES,
    NON_NEGATIVE,
    NONE,
    PENALTIES,
    TIMEOUTS,
    Checked,
    Instance,
    Integer,
    Options,
    ParameterError,
    param,
)
from ..solvers.falkon import Falkon
from ..stream import Stopper, Timer
from .objectives import (
    OBJECTIVES,
    sigma_value,
    tuning_problem,
)
from .validation import Checker, draw_folds, fold_count
from .stages import StagedSearch
from .choice import HeldOutChoice, typical_sigma
from .search import PENALTY_BOUNDS, Point, Search, StopSearch, run_in_thread

#: Fewest rows FalkonCV tunes on (a hold-out split needs rows on both sides).
MIN_SAMPLES = 5
#: What each record's ``extras["stage"]`` means.
STAGES = {0: "start", 1: "scan of σ", 2: "one σ", 3: "one σ per feature", 4: "BLESS centres", 5: "final fit"}
#: ``M="auto"``: the fewest centres it starts from, and the default tolerance: a doubling of M that
#: lowers the validated error by less than this fraction ends the growth.
AUTO_M_FIRST, M_TOLERANCE = 32, 0.01
#: ``M="auto"`` stops after this many doublings in a row that bring less than the tolerance (one
#: level's validated error moves with the noise of its held-out rows; the M kept is the best level).
M_PATIENCE = 2
#: How one M's search went (its lines, its choice, ARD's pruning): told for the kept M only.
SEARCH_NEWS = (
    "converged",
    "chosen on",
    "the objective's own line",
    "switched off",
    "L-BFGS-B stopped",
    "this M's scan",
)
#: hypergradient="auto" takes FALKON's CG (hold-out objective) when rows × M² exceeds this: about
#: 10⁵ rows at M = 1,000, where one direct evaluation (two passes of 2nM² flops) takes a minute here.
CG_ABOVE = 1e11
#: tune_rows="auto": the search reads at most this many rows (a seeded subsample); the final fit all.
AUTO_TUNE_ROWS = 20_000
#: M×M float64 matrices a tuning step holds (sums, factors, eigenvectors, their gradients).
MM_MATRICES = 16


def _check_fraction(fraction) -> None:
    """``validation_fraction``: a share of the rows, strictly between 0 and 1."""
    if isinstance(fraction, (bool, np.bool_)) or not isinstance(fraction, numbers.Real) or not 0 < fraction < 1:
        raise ValueError(f"validation_fraction must be a number between 0 and 1 (exclusive), got {fraction!r}")


class FalkonCV(StagedSearch, HeldOutChoice, Seeded):
    """FALKON with σ, λ (and optionally the centres) tuned by gradient inside ``fit``.

    Parameters
    ----------
    kernel : GaussianKernel or None
        Where the search starts: its σ (one, or one per feature with ``ard``). None: the median
        heuristic (:func:`~krrcore.kernels.median_heuristic`). Only the Gaussian kernel is tuned.
    penalty : float or None
        The starting λ (default 1/√n, FALKON Thm. 3; with ``penalty_search="profile"`` only the
        first record uses it).
    M : int or "auto"
        Nyström centres (as :class:`~krrcore.solvers.falkon.Falkon`'s). "auto": doubled from a
        quarter of FALKON's √n log n (keeping the centres already chosen: uniform ones nest, one
        seeded permutation; each M's search starts from the last M's σ and λ, and skips its line in σ
        where its scan does not beat the M kept by ``M_tolerance``) until the validated
        error falls by less than ``M_tolerance`` (relative) in :data:`M_PATIENCE` doublings in a row
        (the best M is kept), M reaches n, or the memory budget or ``timeout`` says stop;
        ``M_curve_`` holds (M, validated error).
    M_tolerance : the relative improvement a doubling of M must bring (default 1%).
    objective : "gcv" | "holdout" | "compreg"
        What the tuning minimises (:data:`krrcore.tuning.OBJECTIVES`). GCV by default: it needs
        no held-out rows and scores every row, so it is steadier than the hold-out fifth on small
        tables (concrete, 824 rows, and digits: the hold-out choice's test error was 11% and 32%
        above the best point of a 10 × 10 grid of FALKON fits, GCV's 1.6% below and 4.6% above;
        ``python -m benchmarks --case tune``); the hold-out objective's gradient pass is cheaper
        (O(nMd) against O(nM²)) on large tables.
    ard : bool
        One σ per feature (automatic relevance determination), tuned after the single σ.
    penalty_search : "profile" | "gradient"
        "profile": λ is minimised exactly at every σ (closed form in λ); "gradient": log λ moves
        with log σ in the descent.
    centers : "auto" | "uniform" | "bless"
        "auto": uniform centres, compared at the end with BLESS centres where the uniform ones
        leave an error larger than the regularisation (Tr(K − K̃)/n > λ; the Nyström error must stay
        within λ, Rudi, Camoriano, Rosasco 2015); BLESS is kept when it lowers the objective by
        more than one standard error of the per-row differences (compreg: by more than 1%).
    tune_centers : bool
        Also move the centres' positions by gradient.
    validation_fraction : share of the rows held out by the hold-out objective (seeded split), and
        by the check with ``validation_folds=1``.
    validation_folds : "auto" or int
        The rows the answer is chosen and checked on (:mod:`krrcore.tuning.validation`): k folds,
        each fitted without its rows (every row checked once), or 1: one held-out part. "auto": 5
        below 5,000 tuning rows, else 1. The hold-out objective is checked on its own held-out
        rows. Every candidate (the start, each objective's choice, the held-out rows' optimum)
        competes there (:meth:`_choose`); ``validation_error_`` ± ``validation_stderr_`` is the
        winner's error, on ``validation_rows_``.
    tune_rows : int, None or "auto"
        Tune on a seeded subsample of this many rows (None: all); the final fit uses all rows.
        "auto": at most :data:`AUTO_TUNE_ROWS` (each evaluation of the direct route costs O(nM²);
        σ and the per-sample λ found on 20,000 rows carry over to more).
    max_steps, tol, timeout : stopping rule of the search (see :mod:`krrcore.tuning.search`):
        evaluations; the relative improvement of the objective below which a step counts as none
        (0.1%: finer differences of a tuning objective are noise in test error); seconds.
    hypergradient : "auto" | "direct" | "cg"
        "direct": the sums K_nMᵀK_nM and an M×M eigenproblem per evaluation, λ in closed form
        (:mod:`krrcore.tuning.objectives`; O(nM²)). "cg": FALKON's conjugate gradient for the model
        and its adjoint, ``maxiter`` iterations each (:mod:`krrcore.tuning.implicit`; O(nM) per
        iteration, the hold-out objective, λ moved by gradient). "auto": "cg" for the hold-out
        objective when rows × M² exceeds :data:`CG_ABOVE` (where a direct evaluation costs more than
        a few FALKON fits), "direct" otherwise.
    solver : "auto" | "direct" | "falkon"
        The final fit on all rows at the tuned values. "direct": the Nyström solution by the
        search's own closed form (O(nM² + M³); :meth:`_direct_solution`) — exactly the model the
        objective scored; "falkon": :class:`Falkon` with ``maxiter`` iterations (at a small tuned λ
        FALKON may need more, and says so); "auto": direct when the tuning ran on all rows (each of
        its evaluations cost as much as the direct solve), FALKON when it ran on ``tune_rows``.
    maxiter, seed, dtype, device, memory_budget : of the final fit (``dtype`` is the fitted model's;
        the tuning's sums are float64).
    callback : f(record) -> bool, True stops the search; ``iter_fit(..., stop_event=)`` too.

    Fitted: ``validation_error_``, ``validation_stderr_``, ``validation_rows_`` (indices into X),
    ``validation_folds_``, ``candidates_`` (name, σ, λ, validated error, chosen), ``disagreement_``
    and ``bound_note_`` (the warnings' sentences, "" when none), ``M_curve_`` (``M="auto"``),
    ``sigma_`` (float, or an array with ``ard``), ``single_sigma_`` (the best single σ:
    ``sigma_`` without ARD, the first stage's with it), ``penalty_``, ``kernel_``,
    ``centers_`` and ``coef_`` (the model ``predict`` uses), ``final_solver_`` ("direct" or
    "falkon"), ``estimator_`` (the final :class:`Falkon`, compact, when it made the model; else
    None), ``centers_choice_`` ("uniform", "bless" or "optimised"), ``centers_comparison_``
    (objective with each kind, when compared),
    ``objective_value_``, ``path_`` (σ and λ at every record), ``trace_`` (one record per
    evaluation, then one for the final fit), ``stop_reason_``, ``converged_``, ``n_iter_``.
    """

    _SAMPLE_WEIGHT_REFUSAL = (
        "its tuning objectives (and their gradients) are those of the unweighted loss; tune unweighted, "
        "then fit Falkon with the weights"
    )

    # The constructor is written from these declarations (krrcore.solvers.params); kernel, penalty,
    # dtype, device and memory_budget come from KRRBase and seed from Seeded. maxiter and tol mean
    # other things here than on the iterative solvers (the final fit's iterations; the search's
    # relative improvement), so FalkonCV, which is no IterativeKRR, declares its own runtime knobs.
    kernel: GaussianKernel | None = param(
        None,
        NONE
        | Instance(
            GaussianKernel, "a GaussianKernel (where the search starts; FalkonCV tunes the Gaussian kernel's σ)"
        ),
        positional=True,
    )
    penalty: float | None = param(None, NONE | PENALTIES, positional=True)
    M: int | str = param(500, COUNT | Options("auto"), positional=True)
    objective: str = param("gcv", Options(*OBJECTIVES))
    ard: bool = param(False, BOOLEAN)
    penalty_search: str = param("profile", Options("profile", "gradient"))
    centers: str = param("auto", Options("auto", "uniform", "bless"))
    tune_centers: bool = param(False, BOOLEAN)
    validation_fraction: float = param(0.2, Checked(_check_fraction, "a number between 0 and 1"))
    validation_folds: int | str = param("auto", Options("auto") | COUNT)
    tune_rows: int | str | None = param("auto", NONE | Options("auto") | Integer(MIN_SAMPLES))
    M_tolerance: float = param(M_TOLERANCE, NON_NEGATIVE)
    max_steps: int = param(40, COUNT)
    tol: float = param(1e-3, NON_NEGATIVE)
    timeout: float | None = param(None, TIMEOUTS)
    hypergradient: str = param("auto", Options("auto", "direct", "cg"))
    solver: str = param("auto", Options("auto", "direct", "falkon"))
    maxiter: int = param(20, Integer(0))
    callback: object = param(None, CALLBACKS)
    metric: str = param("auto", METRIC_NAMES)

    _compact_attributes = KRRBase._compact_attributes + (
        "sigma_",
        "single_sigma_",
        "penalty_",
        "kernel_",
        "estimator_",
        "final_solver_",
        "centers_choice_",
        "centers_comparison_",
        "objective_value_",
        "path_",
        "validation_error_",
        "validation_stderr_",
        "validation_rows_",
        "validation_folds_",
        "M_curve_",
        "candidates_",
        "disagreement_",
        "bound_note_",
    )

    # -- parameters ----------------------------------------------------------------------------
    def _kernel(self):
        """The tuned kernel (``kernel_``) once there is one, measured from ``x_origin_`` as every
        estimator's (:meth:`KRRBase._kernel`); before it, the given one."""
        if not hasattr(self, "kernel_"):
            return self.kernel if self.kernel is not None else GaussianKernel(1.0)
        origin = vars(self).get("x_origin_")
        return self.kernel_ if origin is None else self.kernel_.centered_at(origin)

    def _in_data_units(self, Z: torch.Tensor) -> torch.Tensor:
        """Centres the search placed in its coordinates (X − ``x_origin_``) as points of X, in
        the fit's dtype: what ``centers_`` holds, as every estimator's."""
        origin = vars(self).get("x_origin_")
        return (Z if origin is None else Z + origin.to(Z)).to(self._dtype())

    def _validate_params(self) -> None:
        """The declared parameters, then the one check that reads two of them."""
        super()._validate_params()
        if self.hypergradient == "cg" and self.objective != "holdout":
            raise ParameterError(
                f"hypergradient='cg' tunes the hold-out objective (GCV and compreg need traces of "
                f"the direct solve), got objective={self.objective!r}"
            )

    def _tune_rows(self, n: int) -> int:
        """Rows the search reads out of n (``tune_rows``)."""
        if self.tune_rows is None:
            return n
        return min(n, AUTO_TUNE_ROWS if self.tune_rows == "auto" else int(self.tune_rows))

    def _route(self, rows: int) -> str:
        """The hypergradient's route on ``rows`` tuning rows: "direct" or "cg" (see ``hypergradient``)."""
        if self.hypergradient != "auto":
            return self.hypergradient
        M = self._center_count(rows)
        return "cg" if self.objective == "holdout" and rows * M * M > CG_ABOVE else "direct"

    def _center_count(self, n: int) -> int:
        if self.M == "auto":  # the estimate before the fit: up to FALKON's √n log n (the third level)
            levels = self._levels(n)
            return levels[min(2, len(levels) - 1)]
        return center_count("uniform", self.M, n)

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """The direct route: its M×M float64 matrices, its kernel blocks, and per evaluation two
        blocked passes (the sums G = K_nMᵀK_nM, then the gradient) and a few M³ factorisations.
        The CG route: a float64 FALKON fit's parts, and per evaluation two of its fits' passes."""
        M, d = self._center_count(n), model.d
        rows = self._tune_rows(n)
        if model.itemsize != 8:
            model.hold("float64 copy of the tuning rows", rows * (d + k) * 8)
        model.hold("centres", M * d * 8)
        model.setup += model.entry_seconds(min(rows, 2000) ** 2 / 2, torch.float64)  # median heuristic
        if self._route(rows) == "cg":
            falkon = Falkon(
                M=M, maxiter=self.maxiter, dtype="float64", device=self.device, memory_budget=self.memory_budget
            ).memory_estimate(rows, d, k)
            for part in falkon.parts:
                model.hold(f"FALKON's {part.name}", part.bytes, part.kind)
            if falkon.seconds_per_iteration is not None:
                model.iteration += 2 * (falkon.setup_seconds + self.maxiter * falkon.seconds_per_iteration)
            return falkon.suggestion or "lower M or tune on fewer rows"
        model.hold(f"tuning's M×M float64 matrices ({MM_MATRICES} of {M:,}×{M:,})", MM_MATRICES * M * M * 8)
        block = operator_bytes(rows, M, itemsize=8, budget_bytes=model.scratch_bytes, d=d, n_rhs=k)
        model.hold("kernel block and its gradient weights (3 blocks)", 3 * block, "scratch")
        cached = min(rows * M * 8, max(model.limit_bytes // 2 - model.stored_bytes, 0))
        model.hold("cached K_nM blocks (read again by the gradient's pass)", cached)
        model.iteration += 2 * model.entry_seconds(rows * M, torch.float64) + model.flop_seconds(
            4 * rows * M * M + 30 * M**3, torch.float64
        )
        M_fit = model.largest_fitting(MM_MATRICES * M * M * 8, MM_MATRICES * 8)
        return (
            f"lower M to at most {M_fit:,} (the search holds {MM_MATRICES} M×M matrices), tune on fewer rows, "
            f"or use the CG route (objective='holdout', hypergradient='cg')"
        )

    # -- the fit -----------------------------------------------------------------------------------
    def iter_fit(self, X, y, X_val=None, y_val=None, *, sample_weight=None, stop_event: threading.Event | None = None):
        """Generator of records: the start, one per evaluation of the search, the BLESS comparison
        (when made) and the final fit; afterwards the estimator is fitted at the best point.
        ``sample_weight`` is refused: the tuning objectives are the unweighted ones."""
        if sample_weight is not None:
            raise ParameterError(f"FalkonCV does not take sample_weight: {self._SAMPLE_WEIGHT_REFUSAL}")
        X, Y, recorder = self._start_fit(
            X, y, X_val, y_val, stop_event=stop_event, timeout=self.timeout, metric=self.metric
        )
        if X.shape[0] < MIN_SAMPLES:
            raise ValueError(f"FalkonCV needs at least {MIN_SAMPLES} samples to tune on, got n_samples={X.shape[0]}")
        for kind, item in run_in_thread(lambda emit: self._tune(X, Y, recorder, emit, stop_event)):
            if kind == "record":
                yield item
        self.n_iter_ = len(self.trace_) - 1
        for category, message in self._notes:  # said here, on the caller's thread
            warnings.warn(message, category, stacklevel=2)

    def _tune(self, X, Y, recorder, emit, stop_event) -> None:
        """The whole tuning, on a thread of its own (the search drives the evaluations; each record
        goes out through ``emit`` as it is made): at each M (one, or doubling with ``M="auto"``)
        the search, then the candidates' contest on the held-out rows (:meth:`_choose`); then the
        BLESS comparison and the final fit on all rows."""
        timer = Timer()
        dtype = self._dtype()
        # The search measures X from x_origin_: its expanded distances cancel under a large offset.
        origin = vars(self).get("x_origin_")
        X64, Y64 = (X.double() if origin is None else X.double() - origin.to(X.device)), Y.double()
        self._X64 = X64
        problem, scale, rows, held = tuning_problem(
            X64,
            Y64,
            self.objective,
            tune_rows=self._tune_rows(X.shape[0]),
            validation_fraction=self.validation_fraction,
            seed=self.seed_,
            memory_budget=self.memory_budget,
        )
        self._scale = scale
        sigma0 = self.kernel.sigma if self.kernel is not None else median_heuristic(X64[rows], seed=self.seed_)
        ls0 = torch.log(torch.as_tensor(sigma0, dtype=torch.float64))
        if ls0.ndim == 1 and not self.ard:
            raise ValueError(f"sigma has {ls0.numel()} per-feature lengths but ard=False: pass one σ, or ard=True")
        if ls0.ndim == 1 and ls0.numel() != X.shape[1]:
            raise ValueError(f"sigma has {ls0.numel()} per-feature lengths but X has {X.shape[1]} features")
        penalty0 = self.penalty if self.penalty is not None else theory_penalty(len(rows))
        bounds = PENALTY_BOUNDS[dtype]
        spec = "bless" if self.centers == "bless" else "uniform"
        stopper = Stopper(stop_event, self.callback, self.timeout)
        self.path_, self._seen, self._notes = [], [], []
        stage = {"code": 0}

        def report(point: Point, residual: float) -> None:
            sigma = sigma_value(point.log_sigma)
            self.kernel_ = GaussianKernel(sigma)
            self.centers_ = self._in_data_units(point.centers).clone()  # new: the recorder's K(X_val, ·) is redone
            self.coef_ = (point.alpha * scale).to(dtype)
            value = point.value * (scale**2 if self.objective != "compreg" else 1.0)
            geo = typical_sigma(point.log_sigma)
            # One σ per feature: each L-BFGS-B step is checked only if it ends as the answer (_choose).
            checked = search.checked(point) if stage["code"] != 3 else None
            extras = {
                "sigma": geo,
                "penalty": math.exp(point.log_penalty),
                "log10_sigma": math.log10(geo),
                "log10_penalty": point.log_penalty / math.log(10),
                "objective": value,
                "stage": stage["code"],
                "M": int(point.centers.shape[0]),
                "residual_kind": "relative hypergradient norm",
                **point.extras,
            }
            if checked is not None:
                extras["validated"] = float(checked.mean()) * scale**2
            if stage["code"] in (0, 1, 2, 3):
                offers = search.proposals(point) if stage["code"] != 3 else {}
                self._seen.append((point, checked, offers, stage["code"]))
            rec = recorder.record(len(self.trace_), Step(residual=residual, objective=value, extras=extras), timer)
            self.trace_.append(rec)
            self.path_.append(
                {
                    "sigma": sigma if isinstance(sigma, float) else sigma.tolist(),
                    "penalty": math.exp(point.log_penalty),
                    "objective": value,
                    "stage": stage["code"],
                    "M": int(point.centers.shape[0]),
                    "validated": extras.get("validated", math.nan),
                }
            )
            emit(("record", rec))
            if stopper.should_stop(rec):
                raise StopSearch(stopper.reason)
            timer.resume()

        cg = self._route(problem.X.shape[0] + (0 if problem.X_val is None else problem.X_val.shape[0])) == "cg"
        checker = None
        if self.objective == "holdout":  # its own held-out rows check it (the CG route's too)
            self.validation_rows_, self.validation_folds_ = held.numpy().copy(), 1
        else:
            n_tune = problem.X.shape[0]
            k = fold_count(self.validation_folds, n_tune)
            checker = Checker(
                problem.X, problem.Y, draw_folds(n_tune, k, self.validation_fraction, self.seed_), self.memory_budget
            )
            self.validation_rows_, self.validation_folds_ = rows[checker.rows].numpy().copy(), k
        search = Search(
            self.objective,
            problem,
            penalty_bounds=bounds,
            profile=self.penalty_search == "profile" and not cg,
            max_steps=int(self.max_steps),
            tol=float(self.tol),
            report=report,
            cg_maxiter=int(self.maxiter) if cg else None,
            checker=checker,
        )
        levels = self._levels(problem.X.shape[0])
        # The stop reason tells the kept M's search; of the other M's only what stopped them.
        messages, self.M_curve_, chosen, scalar_best, kept = [], [], None, None, []
        self._kept_validated = None
        log_sigma, log_penalty = ls0, math.log(min(max(penalty0, bounds[0]), bounds[1]))
        for level, M in enumerate(levels):
            level_messages = []
            kernel = GaussianKernel(sigma_value(log_sigma))
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="M=.* centres requested")  # said by the final fit
                Z = select_centers(spec, X64, M, self.seed_, kernel=kernel).centers  # uniform: nested in M
            search.max_steps = search.steps + int(self.max_steps)
            search.best, self._seen = None, []
            stop_level = self._search(
                search, Point(log_sigma, log_penalty, Z), stage, report, level_messages, stopper, first=level == 0
            )
            scalar_best = self._scalar_best or scalar_best
            point, errors = self._choose(search, level_messages)
            error = float(errors.mean()) * scale**2 if errors is not None else math.nan
            if self.M == "auto":
                self.M_curve_.append((int(Z.shape[0]), error))
            if chosen is None or error < chosen[2] * (1.0 - self.M_tolerance):
                chosen, misses = (point, errors, error, (self.candidates_, self.disagreement_)), 0
                self._kept_validated = None if errors is None else float(errors.mean())
                kept = level_messages
                if len(levels) > 1 and kept:
                    kept = [f"M = {int(Z.shape[0]):,}: {kept[0]}", *kept[1:]]
            else:
                messages.extend(m for m in level_messages if not m.startswith(SEARCH_NEWS))
                misses += 1
                if misses >= M_PATIENCE:
                    messages.append(
                        f"M = {Z.shape[0]:,} lowered the validated error by less than M_tolerance = "
                        f"{self.M_tolerance:g} (relative), as did the {M_PATIENCE - 1} doubling(s) before: "
                        f"M = {chosen[0].centers.shape[0]:,} kept"
                    )
                    break
            log_sigma, log_penalty = point.log_sigma, point.log_penalty
            if stop_level or stopper.reason:
                break
            if level + 1 < len(levels):
                limit = self._level_limit(levels[level + 1], timer)
                if limit:
                    messages.append(limit)
                    break
        if self.M == "auto" and self.M_curve_ and not stopper.reason and self.M_curve_[-1][0] == levels[-1]:
            if chosen[0].centers.shape[0] != levels[-1] and misses < M_PATIENCE:  # else said above
                messages.append(f"M = {levels[-1]:,} is every tuning row: M = {chosen[0].centers.shape[0]:,} kept")
        messages[:0] = kept
        best, errors = chosen[:2]
        self.candidates_, self.disagreement_ = chosen[3]
        self.single_sigma_ = typical_sigma((scalar_best or best).log_sigma)
        self.centers_choice_ = "optimised" if self.tune_centers else spec
        self.centers_comparison_ = {}
        if self.centers == "auto" and not self.tune_centers and not stopper.reason:
            best, errors = self._compare_centers(search, best, errors, stage, report, messages)
        self._validated(best, errors, scale, bounds, ls0)
        self.stop_reason_ = "; ".join(messages)
        self.converged_ = any(m.startswith("converged") for m in messages) and not stopper.reason
        self._final_fit(X, Y, X64, Y64, best, scale, recorder, timer, stage, emit)

    def _levels(self, n_fit: int) -> list[int]:
        """The values of M tried: ``M``, or with ``M="auto"`` doubling from a quarter of FALKON's
        √n log n (Rudi, Carratino, Rosasco 2017, Thm. 3) up to the n fitted rows."""
        if self.M != "auto":
            return [int(self.M)]
        M = max(min(AUTO_M_FIRST, n_fit), math.ceil(math.sqrt(n_fit) * math.log(max(n_fit, 2)) / 4))
        levels = [min(M, n_fit)]
        while levels[-1] < n_fit:
            levels.append(min(2 * levels[-1], n_fit))
        return levels

    def _level_limit(self, M: int, timer: Timer) -> str:
        """Why the search cannot go on to M centres (memory or the time budget), or ""."""
        budget = storage_budget(self.memory_budget, torch.device("cpu"))
        if MM_MATRICES * M * M * 8 > budget:
            return (
                f"M = {M:,} would need {MM_MATRICES} M×M matrices ({MM_MATRICES * M * M * 8 / 2**30:.2g} GiB), "
                f"beyond the memory budget: M kept"
            )
        # Each doubling costs about four times the last level (passes of O(nM²)).
        if self.timeout is not None and timer.pause() * 4 > self.timeout - timer.pause():
            timer.resume()
            return f"a search at M = {M:,} would not end within timeout={self.timeout:g} s: M kept"
        timer.resume()
        return ""

    @property
    def relevance_(self) -> np.ndarray:
        """1/σ_j per feature (a single σ repeated without ARD): a feature's influence on the kernel."""
        sigma = np.atleast_1d(np.asarray(self.sigma_, dtype=float))
        return 1.0 / (np.repeat(sigma, self.n_features_in_) if sigma.size == 1 else sigma)

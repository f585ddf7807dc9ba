"""FalkonCV: FALKON whose σ (one, or one per feature) and λ are tuned inside ``fit``.

The scikit-learn face of :mod:`krrcore.tuning`, named like scikit-learn's ``RidgeCV`` and
``LassoCV``: an estimator whose ``fit`` chooses its own hyperparameters and then refits on all the
data, so it sits at the end of a ``Pipeline`` and inside ``cross_val_score`` like any regressor.
``Falkon`` keeps its meaning (a solver at given σ and λ); tuning is a separate estimator with its
own parameters, declared once here.
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
    PenaltyProfile,
    gaussian_block,
    nystrom_leftover,
    row_stats,
    sigma_value,
    tuning_problem,
)
from .validation import Checker, draw_folds, fold_count
from .search import LOG_SIGMA_RANGE, Point, Search, StopSearch, run_in_thread

#: The smallest λ the tuner tries, by the fitted model's dtype, and the largest. Below about 1e-7
#: float64 Nyström solutions stop being numbers of the problem: on diamonds (σ = 4.5, M = 500) and
#: concrete (σ = 3.1, M = 400) the closed form, a Cholesky solve and 300 FALKON iterations agree to
#: 2% in test error from λ = 1e-7 up, and disagree by 15% to 4× below — while GCV, computed from
#: the same rounded numbers, keeps falling. float32 kernel values resolve no finer than about 1e-6
#: (krrcore.preconditioner's resolution floor).
PENALTY_BOUNDS = {torch.float64: (1e-7, 10.0), torch.float32: (1e-6, 10.0)}
#: Fewest rows FalkonCV tunes on (a hold-out split needs rows on both sides).
MIN_SAMPLES = 5
#: What each record's ``extras["stage"]`` means.
STAGES = {0: "start", 1: "scan of σ", 2: "one σ", 3: "one σ per feature", 4: "BLESS centres", 5: "final fit"}
#: The scan that starts the search: σ × 2^s for these s, each with its best λ (L-BFGS-B then starts
#: from the best; the objective can have several valleys in σ, and a descent finds the nearest).
SCAN = (-2.0, -1.0, 1.0, 2.0)
#: With ``M="auto"``, the scan at each larger M around the σ the last M chose (log2 shifts), and the
#: golden-section probes of the single σ at the first M (half as many at the next ones).
SCAN_NEXT, LINE_PROBES = (-0.5, 0.5), 8
#: ``M="auto"``: the fewest centres it starts from, and the default tolerance: a doubling of M that
#: lowers the validated error by less than this fraction ends the growth.
AUTO_M_FIRST, M_TOLERANCE = 32, 0.01
#: ``M="auto"`` stops after this many doublings in a row that bring less than the tolerance (one
#: level's validated error moves with the noise of its held-out rows; the M kept is the best level).
M_PATIENCE = 2
#: Objectives' choices whose held-out errors differ by more than this many standard errors of the
#: rows' differences disagree (:class:`TuningDisagreement`).
DISAGREE = 2.0
#: How the candidates of FalkonCV._choose are named in sentences.
NAMES = {
    "gcv choice": "GCV",
    "compreg choice": "the complexity-regularised objective",
    "holdout choice": "the hold-out optimum",
    "start": "the start",
}
#: λ within this factor of the search's bounds is "on the bound" (:class:`TuningBoundWarning`).
BOUND_FACTOR = 1.05


class TuningDisagreement(UserWarning):
    """The tuning objectives' choices differ on the held-out rows by more than their noise: the
    message says which each chose and which one ``tune`` returns."""


class TuningBoundWarning(UserWarning):
    """The tuned σ or λ ended on the search's bound: the message says what to do."""


def stderr_of_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """Standard error of the mean of a − b (paired per-row errors on the same held-out rows)."""
    difference = a - b
    return float(difference.std()) / math.sqrt(difference.numel()) if difference.numel() > 1 else 0.0


#: BLESS centres replace uniform ones when they lower the objective by more than one standard error
#: of the per-row differences (both are averages over the same rows), or, for compreg (no average of
#: rows), by more than this fraction.
CENTERS_MARGIN = 0.01
#: ARD's pruning (FalkonCV._prune): a switched-off feature's σ is multiplied by this (its kernel
#: factor is then 1 to double precision even where α is large); at most MAX_PRUNED features are
#: tried; objectives without held-out rows keep a feature off when they rise by at most PRUNE_TOL.
OFF_FACTOR, MAX_PRUNED, PRUNE_TOL = 1e12, 64, 1e-3
#: hypergradient="auto" takes FALKON's CG (hold-out objective) when rows × M² exceeds this: about
#: 10⁵ rows at M = 1,000, where one direct evaluation (two passes of 2nM² flops) takes a minute here.
CG_ABOVE = 1e11
#: tune_rows="auto": the search reads at most this many rows (a seeded subsample); the final fit all.
AUTO_TUNE_ROWS = 20_000
#: M×M float64 matrices a tuning step holds (sums, factors, eigenvectors, their gradients).
MM_MATRICES = 16


def typical_sigma(log_sigma) -> float:
    """One σ for the records, the path and the pictures: σ itself, or with one per feature their
    geometric mean over the features in use — a feature switched off (σ_j at least √OFF_FACTOR
    times the smallest σ) would carry the mean off by a factor up to OFF_FACTOR^(1/d)."""
    log_sigma = torch.as_tensor(log_sigma, dtype=torch.float64)
    if log_sigma.ndim == 0:
        return float(torch.exp(log_sigma))
    on = log_sigma < log_sigma.min() + math.log(OFF_FACTOR) / 2
    return float(torch.exp(log_sigma[on].mean()))


def _check_fraction(fraction) -> None:
    """``validation_fraction``: a share of the rows, strictly between 0 and 1."""
    if isinstance(fraction, (bool, np.bool_)) or not isinstance(fraction, numbers.Real) or not 0 < fraction < 1:
        raise ValueError(f"validation_fraction must be a number between 0 and 1 (exclusive), got {fraction!r}")


class FalkonCV(Seeded):
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
        seeded permutation; each M's search starts from the last M's σ and λ) until the validated
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
        if hasattr(self, "kernel_"):
            return self.kernel_
        return self.kernel if self.kernel is not None else GaussianKernel(1.0)

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
            raise ValueError(
                "FalkonCV does not take sample_weight: its tuning objectives (and their gradients) "
                "are those of the unweighted loss; tune unweighted, then fit Falkon with the weights"
            )
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
        X64, Y64 = X.double(), Y.double()
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
            self.centers_ = point.centers.to(dtype).clone()  # a new tensor: the recorder's K(X_val, ·) is redone
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
        messages, self.M_curve_, chosen, scalar_best = [], [], None, None
        log_sigma, log_penalty = ls0, math.log(min(max(penalty0, bounds[0]), bounds[1]))
        for level, M in enumerate(levels):
            kernel = GaussianKernel(sigma_value(log_sigma))
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="M=.* centres requested")  # said by the final fit
                Z = select_centers(spec, X64, M, self.seed_, kernel=kernel).centers  # uniform: nested in M
            search.max_steps = search.steps + int(self.max_steps)
            search.best, self._seen = None, []
            stop_level = self._search(
                search, Point(log_sigma, log_penalty, Z), stage, report, messages, stopper, first=level == 0
            )
            scalar_best = self._scalar_best or scalar_best
            point, errors = self._choose(search, messages)
            error = float(errors.mean()) * scale**2 if errors is not None else math.nan
            if self.M == "auto":
                self.M_curve_.append((int(Z.shape[0]), error))
            if chosen is None or error < chosen[2] * (1.0 - self.M_tolerance):
                chosen, misses = (point, errors, error, (self.candidates_, self.disagreement_)), 0
            else:
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

    def _search(self, search: Search, start: Point, stage, report, messages, stopper, first: bool) -> bool:
        """One M's search from ``start``: the start, a scan of σ (λ best at each), the single σ
        (golden-section search of the profiled objective, or L-BFGS-B where λ or the centres move by
        gradient, or on the CG route), then ARD and its pruning. True when a budget ended it."""
        self._scalar_best = None
        try:
            stage["code"] = 0 if first else 1
            start = search.value_at(start)
            search.best = start
            report(start, 1.0)
            stage["code"] = 1
            base = start.log_sigma.mean() if start.log_sigma.ndim else start.log_sigma
            Z = start.centers
            scanned = [
                search.probe(Point(base + shift * math.log(2.0), start.log_penalty, Z))
                for shift in ((0.0, *SCAN) if first else SCAN_NEXT)
            ]
            # The best σ at an end of the scan: the scan goes on outwards (up to LOG_SIGMA_RANGE).
            while True:
                ends = sorted(scanned, key=lambda p: float(p.log_sigma))
                i = min(range(len(ends)), key=lambda j: ends[j].value)
                if 0 < i < len(ends) - 1:
                    break
                step = math.log(2.0) * (1 if i else -1)
                t = ends[i].log_sigma + step
                if abs(float(t - base)) > LOG_SIGMA_RANGE:
                    break
                scanned.append(search.probe(Point(t, start.log_penalty, Z)))
            first_stage = max(2, int(self.max_steps) // 3) if self.ard else None
            line = search.profile and search.cg_maxiter is None and not (self.tune_centers and not self.ard)
            stage["code"] = 2
            if line:
                probes, low, high = (
                    LINE_PROBES if first else LINE_PROBES // 2,
                    float(base) - LOG_SIGMA_RANGE,
                    float(base) + LOG_SIGMA_RANGE,
                )
                messages.append(search.line(scanned, probes, low, high))
                overruled = self._held_out_line_points(search)
                if overruled:  # the held-out rows prefer other values: their own optimum in σ, too
                    messages.append(search.line(overruled, probes, low, high, held_out=True))
            else:
                messages.append(
                    search.run(search.best, tune_centers=self.tune_centers and not self.ard, steps=first_stage)
                )
            self._scalar_best = search.best
            if self.ard and not messages[-1].startswith("reached max_steps") and not stopper.reason:
                stage["code"] = 3
                best = search.best
                ard = (
                    best.log_sigma.expand(search.problem.X.shape[1]).clone()
                    if best.log_sigma.ndim == 0
                    else best.log_sigma
                )
                messages.append(search.run(Point(ard, best.log_penalty, best.centers), tune_centers=self.tune_centers))
                if not stopper.reason and search.best.log_sigma.ndim == 1:
                    self._prune(search, self._scalar_best, messages)
        except StopSearch as stop:
            messages.append(str(stop))
            return True
        return bool(stopper.reason) or messages[-1].startswith("reached max_steps")

    def _held_out_line_points(self, search: Search) -> list[Point]:
        """The scalar-σ points seen so far with the held-out error at their best λ, when the
        hold-out optimum among them beats the search's own choice by more than one standard error
        (else []: the search's answer stands, and the line would cost probes for nothing)."""
        if search.checker is None:
            return []
        points, best_held, own = [], None, None
        for point, checked, offers, _ in self._seen:
            if point.log_sigma.ndim or "holdout" not in offers:
                continue
            point.extras = {**point.extras, "held_out": offers["holdout"][1]}
            points.append(point)
            if best_held is None or offers["holdout"][1] < best_held[0]:
                best_held = (offers["holdout"][1], offers["holdout"][2])
            if point is search.best:
                own = checked
        if own is None or best_held is None:
            return []
        gap = float(own.mean()) - best_held[0]
        return points if gap > stderr_of_difference(own, best_held[1]) else []

    def _choose(self, search: Search, messages: list) -> tuple[Point, torch.Tensor | None]:
        """The answer of one M's search, chosen and checked on the held-out rows.

        Candidates: the start; the search's own best (its objective's choice); at every σ the
        search evaluated, each closed-form objective's best λ (GCV, compreg) and the held-out rows'
        best λ (the hold-out optimum: over the scan it is the best cell of a coarse (σ, λ) map,
        with λ exact). The lowest held-out error wins, unless the search's own choice is within one
        standard error of the rows' differences from it and no worse than the start (Breiman's
        one-standard-error rule: the objective that scored every fitted row is steadier than the
        held-out rows on small tables). So the answer is never worse on the held-out rows than the
        start. Where the search's own objective is overruled by more than :data:`DISAGREE` standard
        errors, the objectives disagree beyond the noise: said in ``disagreement_`` and by
        :class:`TuningDisagreement`."""
        if not self._seen or self._seen[0][1] is None:
            self.candidates_, self.disagreement_ = [], ""
            return search.best, None
        start = self._seen[0]
        own = next((s for s in self._seen if s[0] is search.best), None)
        if own is not None and own[1] is None:  # an ARD step: checked now that it is the search's answer
            own = (own[0], search.checked(own[0]), own[2], own[3])
        candidates = {"start": (start[0], start[1])}
        if own is not None:
            candidates[f"{self.objective} choice"] = (own[0], own[1])
        for name in ("gcv", "compreg", "holdout"):
            if name == self.objective and own is not None:
                continue
            offers = [(s[2][name][1], s) for s in self._seen if name in s[2]]
            if not offers:
                continue
            _, s = min(offers, key=lambda o: o[0])
            lam = s[2][name][0]
            point = Point(s[0].log_sigma, math.log(lam), s[0].centers, alpha=None)
            candidates[f"{name} choice"] = (point, s[2][name][2])
        means = {k: float(e.mean()) for k, (_, e) in candidates.items()}
        winner = min(means, key=means.get)
        label = f"{self.objective} choice" if f"{self.objective} choice" in candidates else winner
        own_errors = candidates[label][1]
        spread = stderr_of_difference(own_errors, candidates[winner][1])
        if label != winner and (means[label] - means[winner] > spread or means[label] > means["start"]):
            label = winner
        self.candidates_ = [
            {
                "name": k,
                "sigma": typical_sigma(p.log_sigma),
                "penalty": math.exp(p.log_penalty),
                "validated": means[k] * self._scale**2,
                "chosen": k == label,
            }
            for k, (p, _) in candidates.items()
        ]
        chosen, errors = candidates[label]
        if chosen.alpha is None:
            search.value_at(chosen)  # α at the chosen λ (same σ and centres: the stats are recomputed once)
        own_label = f"{self.objective} choice"
        self.disagreement_ = ""
        if own_label in candidates and label != own_label:
            gap = means[own_label] - means[label]
            noise = stderr_of_difference(candidates[own_label][1], errors)
            if gap > DISAGREE * noise:
                s2 = self._scale**2
                own_point = candidates[own_label][0]
                self.disagreement_ = (
                    f"{NAMES[own_label]} chose σ = {typical_sigma(own_point.log_sigma):.3g}, "
                    f"λ = {math.exp(own_point.log_penalty):.2g} (validated error {means[own_label] * s2:.3g}), "
                    f"but {NAMES[label]} at σ = {typical_sigma(chosen.log_sigma):.3g}, "
                    f"λ = {math.exp(chosen.log_penalty):.2g} "
                    f"has {means[label] * s2:.3g} ± {float(errors.std()) / math.sqrt(len(errors)) * s2:.2g} on the "
                    f"{len(errors):,} held-out rows, lower by {gap / noise:.0f} standard errors: tune returns "
                    f"the latter."
                )
        folds = len(search.checker.blocks) if search.checker is not None else 1
        messages.append(
            f"chosen on {len(errors):,} held-out rows ({f'{folds} folds' if folds > 1 else 'one part'}): "
            f"{NAMES[label]}'s σ and λ (validated error {means[label] * self._scale**2:.4g}, "
            f"{len(candidates)} candidates)"
        )
        return chosen, errors

    def _validated(self, best: Point, errors, scale: float, bounds, ls0) -> None:
        """The checked error of the answer and its standard error (units of y's mean square), and
        the warnings: objectives in disagreement, σ or λ on the search's bound."""
        s2 = scale**2
        if errors is None:
            self.validation_error_ = self.validation_stderr_ = math.nan
        else:
            self.validation_error_ = float(errors.mean()) * s2
            self.validation_stderr_ = float(errors.std()) / math.sqrt(len(errors)) * s2 if len(errors) > 1 else math.nan
        if getattr(self, "disagreement_", ""):
            self._notes.append((TuningDisagreement, self.disagreement_))
        lam = math.exp(best.log_penalty)
        self.bound_note_ = ""
        if lam <= bounds[0] * BOUND_FACTOR:
            self.bound_note_ = (
                f"λ = {lam:.2g} is the search's lower bound for {str(self._dtype()).replace('torch.', '')} "
                f"(float64 allows {PENALTY_BOUNDS[torch.float64][0]:g}, float32 {PENALTY_BOUNDS[torch.float32][0]:g}): "
                f"the data ask for less regularisation than the bound gives; try a larger M (more centres resolve "
                f"finer detail), or dtype='float64' if the model is float32."
            )
        elif lam >= bounds[1] / BOUND_FACTOR:
            self.bound_note_ = (
                f"λ = {lam:.2g} is the search's upper bound: at this σ the targets look like noise to "
                f"the model; check the target column, or start from another σ."
            )
        log_s = best.log_sigma.double()
        base = float(ls0.mean())
        if float((log_s - base).abs().max()) >= LOG_SIGMA_RANGE - 1e-6 and log_s.ndim == 0:
            self.bound_note_ += (" " if self.bound_note_ else "") + (
                f"σ = {typical_sigma(log_s):.3g} is at the edge of the search's range (a factor "
                f"{math.exp(LOG_SIGMA_RANGE):.0f} from the start): start from a σ further out "
                f"(kernel=GaussianKernel(σ)), or rescale the features."
            )
        if self.bound_note_:
            self._notes.append((TuningBoundWarning, self.bound_note_))

    def _prune(self, search: Search, scalar: Point, messages: list) -> None:
        """Occam's razor for ARD. The objective barely moves with the σ of a feature it does not
        need once that σ is large (the gradient vanishes as (Δx/σ)²), so the search leaves such σ_j
        wherever they stalled — and at a small λ a large σ_j still lets a feature act linearly. So
        each feature whose σ grew past the single-σ optimum (the largest first, at most
        :data:`MAX_PRUNED` of them) is switched off in turn — σ_j × :data:`OFF_FACTOR`, where it
        cannot act at all — and stays off when the objective rises by at most one standard error
        of the per-row errors it averages (Breiman's one-standard-error rule: validation rows for
        the hold-out objective, GCV's rescaled training residuals; :data:`PRUNE_TOL` relative for
        compreg, which is no average of rows)."""
        best = search.best
        order = [
            int(j)
            for j in torch.argsort(best.log_sigma, descending=True)
            if float(best.log_sigma[j]) > float(scalar.log_sigma)
        ][:MAX_PRUNED]
        off = []
        for j in order:
            errors = search.row_errors(best)
            allowed = (
                best.value * (1 + PRUNE_TOL)
                if errors is None
                else best.value + float(errors.std()) / math.sqrt(len(errors))
            )
            log_sigma = best.log_sigma.clone()
            log_sigma[j] += math.log(OFF_FACTOR)
            point = Point(
                log_sigma, search.profiled_penalty(log_sigma, best.centers), best.centers, extras={"pruned_feature": j}
            )
            search.value_at(point)
            search.report(point, math.nan)
            if point.value <= allowed:
                best = search.best = point
                off.append(j)
        if off:
            rule = f"{PRUNE_TOL:.1%}" if self.objective == "compreg" else "one standard error of its per-row errors"
            messages.append(
                f"switched off feature(s) {off} (σ × {OFF_FACTOR:g}): without them the objective rose by "
                f"less than {rule}"
            )

    def _compare_centers(self, search: Search, best: Point, errors, stage, report, messages):
        """BLESS centres at the tuned σ against the uniform ones, where the uniform ones leave a
        Nyström error above λ (``centers="auto"``), at the same M, on the held-out rows (each at the
        λ the same rule gives it: the held-out rows' best for BLESS). BLESS's are kept where they
        lower the held-out error by more than noise: one standard error of the rows' differences
        (without held-out rows, the objective's per-row errors; compreg: :data:`CENTERS_MARGIN`).
        Returns (the point, its held-out errors)."""
        sigma = sigma_value(best.log_sigma)
        leftover = nystrom_leftover(search.problem.X, best.centers, sigma, seed=self.seed_)  # Tr(K − K̃)/n
        lam = math.exp(best.log_penalty)
        if leftover <= lam:
            return best, errors
        stage["code"] = 4
        Z = select_centers("bless", self._X64, best.centers.shape[0], self.seed_, kernel=GaussianKernel(sigma)).centers
        offers = search.proposals(Point(best.log_sigma, 0.0, Z)) if errors is not None else {}
        if search.cg_maxiter is not None:
            log_lam = best.log_penalty
        elif "holdout" in offers:
            log_lam = math.log(offers["holdout"][0])
        else:
            log_lam = search.profiled_penalty(best.log_sigma, Z)
        candidate = search.value_at(Point(best.log_sigma, log_lam, Z, extras={"centres_bless": 1}))
        bless_errors = search.checked(candidate)
        if errors is not None and bless_errors is not None:
            uniform_value, bless_value = float(errors.mean()), float(bless_errors.mean())
            margin = stderr_of_difference(bless_errors, errors)
            rule = f"one standard error of the held-out rows' differences, {margin:.3g}"
            what = "held-out error"
        else:
            uniform_value, bless_value = best.value, candidate.value
            uniform_rows, bless_rows = search.row_errors(best), search.row_errors(candidate)
            if uniform_rows is None or bless_rows is None:
                margin, rule = best.value * CENTERS_MARGIN, f"{CENTERS_MARGIN:.0%}"
            else:
                margin = stderr_of_difference(bless_rows, uniform_rows)
                rule = f"one standard error of the rows' differences, {margin:.3g}"
            what = "objective"
        self.centers_comparison_ = {
            "uniform": uniform_value,
            "bless": bless_value,
            "nystrom_error": leftover,
            "penalty": lam,
            "margin": margin,
            "measured": what,
        }
        try:
            report(candidate, math.nan)
        except StopSearch as stop:
            messages.append(str(stop))
        if bless_value < uniform_value - margin:
            self.centers_choice_ = "bless"
            messages.append(
                f"BLESS centres kept: {what} {bless_value:.4g} against {uniform_value:.4g} with uniform "
                f"ones (lower by more than {rule}), whose Nyström error Tr(K − K̃)/n = {leftover:.3g} "
                f"exceeds λ = {lam:.3g}"
            )
            return candidate, bless_errors
        messages.append(
            f"uniform centres kept: BLESS ones gave {what} {bless_value:.4g} against {uniform_value:.4g}, "
            f"not lower by more than {rule}"
        )
        return best, errors

    def _final_fit(self, X, Y, X64, Y64, best: Point, scale: float, recorder, timer, stage, emit) -> None:
        """The model on all rows at the best point: this estimator's ``centers_`` and ``coef_``
        (X64, Y64: the float64 rows the search already made, which the direct solution reads)."""
        sigma = sigma_value(best.log_sigma)
        self.sigma_ = sigma if isinstance(sigma, float) else sigma.numpy()
        self.penalty_ = math.exp(best.log_penalty)
        self.kernel_ = GaussianKernel(sigma)
        self.objective_value_ = best.value * (scale**2 if self.objective != "compreg" else 1.0)
        all_rows = self._tune_rows(X.shape[0]) >= X.shape[0]
        self.final_solver_ = self.solver if self.solver != "auto" else ("direct" if all_rows else "falkon")
        timer.resume()
        self.estimator_ = None
        if self.final_solver_ == "direct":
            residual, iterations = self._direct_solution(X64, Y64, best, sigma)
        else:
            centers = {"uniform": "uniform", "bless": "bless"}.get(self.centers_choice_, best.centers.numpy())
            final = Falkon(
                self.kernel_,
                self.penalty_,
                int(best.centers.shape[0]),
                maxiter=self.maxiter,
                centers=centers,
                seed=self.seed_,
                dtype=self.dtype,
                device=self.device,
                memory_budget=self.memory_budget,
            )
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="M=.* centres requested")  # said once, by the search
                final.fit(X, Y[:, 0] if self._y_was_1d else Y)
            self.estimator_ = final.compact()
            self.centers_, self.coef_ = final.centers_, final.coef_
            residual, iterations = final.trace_[-1].residual, final.n_iter_
        stage["code"] = 5
        extras = {
            "sigma": typical_sigma(best.log_sigma),
            "penalty": self.penalty_,
            "stage": 5,
            "objective": self.objective_value_,
            "residual_kind": f"final fit ({'direct Nyström solve' if self.final_solver_ == 'direct' else 'FALKON'})",
            "final_iterations": iterations,
        }
        extras["log10_sigma"], extras["log10_penalty"] = math.log10(extras["sigma"]), math.log10(self.penalty_)
        rec = recorder.record(
            len(self.trace_), Step(residual=residual, objective=self.objective_value_, extras=extras), timer
        )
        self.trace_.append(rec)
        emit(("record", rec))

    def _direct_solution(self, X64, Y64, best: Point, sigma) -> tuple[float, int]:
        """The Nyström solution on all rows by the search's own closed form (:class:`PenaltyProfile`:
        K_MM's Cholesky factor, then the eigenvalues of the features' Gram matrix), which stays
        accurate at small λ where a Cholesky factor of K_nMᵀK_nM + λnK_MM does not (its solution
        moved with the BLAS threads by 20% in test error at λ = 6e-8 on concrete, M = 400). Returns
        the relative residual of (K_nMᵀK_nM + λnK_MM)α = K_nMᵀY and 1 (one solve)."""
        Z = best.centers.double()
        stats = row_stats(X64, Y64, Z, sigma, self.memory_budget)
        Kmm = gaussian_block(Z, Z, best.log_sigma)
        alpha = PenaltyProfile("gcv", stats, Kmm).alpha(self.penalty_)
        H_alpha = stats.G @ alpha + self.penalty_ * stats.n * (Kmm @ alpha)
        self.centers_, self.coef_ = Z.to(self._dtype()), alpha.to(self._dtype())
        return float(torch.linalg.norm(H_alpha - stats.R) / torch.linalg.norm(stats.R)), 1

    @property
    def relevance_(self) -> np.ndarray:
        """1/σ_j per feature (a single σ repeated without ARD): a feature's influence on the kernel."""
        sigma = np.atleast_1d(np.asarray(self.sigma_, dtype=float))
        return 1.0 / (np.repeat(sigma, self.n_features_in_) if sigma.size == 1 else sigma)

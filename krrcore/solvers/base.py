"""The estimator contract shared by every solver.

* scikit-learn style: ``__init__`` stores parameters untouched; fitted attributes end in ``_``;
  ``fit(X, y, X_val=None, y_val=None)`` takes numpy, pandas or torch; ``predict`` returns the
  same kind of array it was given, and raises ``NotFittedError`` before ``fit``; ``n_features_in_``
  is checked; scikit-learn's own estimator checks pass (tests/test_sklearn_contract.py).
* ``converged_`` says whether a fit reached ``tol`` (or working precision); a fit that ends on
  ``maxiter`` or a stall with ``tol`` unmet also warns with ``ConvergenceWarning``.
* ``fit(..., progress=True)`` draws a tqdm progress bar from the same record stream.
* Classifiers are these regressors behind one mixin (:mod:`krrcore.solvers.classifiers`).
* ``penalty`` is always λ of (K + λnI) (per-sample regularisation, the papers' convention).
* Every solver has ``iter_fit(X, y, X_val=None, y_val=None, stop_event=None)``, a generator of
  :class:`~krrcore.stream.IterationRecord`, and ``fit`` drains it into ``trace_``.
  Iterative solvers implement two hooks, ``_setup`` and ``_steps``; :meth:`IterativeKRR.iter_fit`
  owns the loop that times, evaluates, records, stops, and detects NaN or a stalled residual.
  Direct solvers implement ``_solve``; :meth:`DirectKRR.iter_fit` yields its single record.
  Both build records with one :class:`_Recorder`, so every solver's stream is evaluated alike.
"""
from __future__ import annotations

import functools
import math
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._validation import as_tensor, check_features, check_int, check_positive, check_X_y
from ..device import default_device, resolve_dtype
from ..kernels import GaussianKernel, Kernel
from ..linalg import residual_and_objective
from ..memory import SLOW_FIT_SECONDS, CostModel, MemoryEstimate, SlowFitWarning, scratch_budget
from ..metrics import DEFAULT_METRIC, METRICS
from ..ops import KernelOperator
from ..rows import rows_of
from ..stream import IterationRecord, SolverDivergedError, Stopper, Timer


def target_scale(Y: torch.Tensor) -> float:
    """The power of two the solvers multiply ``Y`` by: 1 while the squares of Y's entries (inner
    products, norms, objectives) stay well inside its dtype's range, else the one that brings
    max|Y| into [1/2, 1) — y ≈ 1e160 would otherwise overflow ‖y‖² to inf and the residual to NaN.
    A power of two is exact in floating point, and the KRR solution is linear in y, so the solve is
    the same one, scaled."""
    peak = float(Y.abs().max()) if Y.numel() else 0.0
    if peak == 0.0 or not math.isfinite(peak):
        return 1.0
    info = torch.finfo(Y.dtype)
    # Margins: n terms per inner product, and the iterates' own growth on the way.
    if math.sqrt(info.tiny) * 1e3 <= peak <= math.sqrt(info.max) / (1e3 * max(1, Y.numel())):
        return 1.0
    return math.ldexp(1.0, -math.frexp(peak)[1])


@dataclass
class Step:
    """What a solver reports after an (outer) iteration or a direct solve; the base class turns it
    into a record.

    Lazy values: ``residual`` and ``objective`` may each be a number or a zero-argument callable
    returning one. ``iter_fit`` (through :class:`_Recorder`) calls a callable only after it has
    paused the solver timer, and counts its run time in the record's ``eval_seconds``; an exact evaluation
    that costs more than an iteration (the O(n²d) float64 residual of the full-KRR solvers) thus
    never inflates ``seconds``, which counts solver work only, as ASkotch's plots do. The callable
    must read the iterate when it is called (the solver's generator is suspended then).
    :meth:`deferred` builds a step whose residual and objective come from one such evaluation.
    """

    residual: float | Callable[[], float]
    objective: float | Callable[[], float] = math.nan
    iteration: int | None = None        # for solvers that report every k inner iterations
    extras: dict = field(default_factory=dict)

    @classmethod
    def deferred(cls, evaluate: Callable[[], tuple[float, float]], *, iteration: int | None = None,
                 extras: dict | None = None) -> "Step":
        """A step whose residual and objective are ``evaluate() -> (residual, objective)``, called once
        after the timer pauses."""
        once = functools.cache(evaluate)
        return cls(residual=lambda: once()[0], objective=lambda: once()[1], iteration=iteration,
                   extras=extras or {})

    def values(self) -> tuple[float, float]:
        """(residual, objective) as floats, evaluating lazy values (call it with the timer paused)."""
        return tuple(float(v() if callable(v) else v) for v in (self.residual, self.objective))


def validation_cache_bytes(n_val: int, n_centres: int, itemsize: int, scratch_bytes: int) -> int:
    """Bytes of K(X_val, centres) a fit keeps for its records: all of it when it fits one scratch
    budget (:mod:`krrcore.memory`; the blocked prediction of every record would allocate that much
    anyway), else none. Kept, a record's validation metric costs one product with it instead of
    n_val × n_centres kernel evaluations."""
    need = n_val * n_centres * itemsize
    return int(need) if need <= scratch_bytes else 0


def distributed_backend(data):
    """:mod:`krrcore.distributed` when ``data`` lives on a Dask cluster (a sharded array, or a Dask
    collection to shard), else None: the one place a fit chooses between here and a cluster. The
    package is imported only then; every later operation on the rows goes through
    :func:`krrcore.rows.rows_of`."""
    if rows_of(data).local and type(data).__module__.partition(".")[0] != "dask":
        return None
    from .. import distributed

    return distributed


class PointOutputs:
    """The outputs of an estimator that is being fitted on fixed points X (a validation set, a
    plotting grid), called once per record: K(X, centres_) is kept across calls while the centres
    stay the same (:func:`validation_cache_bytes`), so a call costs one product with it instead of
    |X| × n_centres kernel evaluations. The estimator's current ``coef_`` is read at each call."""

    def __init__(self, estimator: "KRRBase", X: torch.Tensor):
        self.estimator, self.X = estimator, X
        self._operator, self._centres = None, None

    @property
    def kept_bytes(self) -> int | None:
        """Bytes of K(X, centres) held when all of it is kept (None before a call, or when it is not)."""
        op = self._operator
        if op is None or op.cached_rows != op.n:
            return None
        return op.n * op.M * op.dtype.itemsize

    def __call__(self) -> torch.Tensor:
        est = self.estimator
        centres = est.centers_
        if not rows_of(centres).local:         # rows kept elsewhere: predicted where they live
            return est._predict_tensor(self.X)
        if self._centres is not centres:
            keep = validation_cache_bytes(self.X.shape[0], centres.shape[0], self.X.element_size(),
                                          est._block_budget())
            self._operator = None if not keep else KernelOperator(
                est._kernel(), self.X, centres, memory_budget=getattr(est, "memory_budget", None),
                n_rhs=est.coef_.shape[1], cache_bytes=keep)
            self._centres = centres
        if self._operator is None:
            return est._predict_tensor(self.X)
        return self._operator.matvec(est.coef_)


class _Recorder:
    """Turns a solver's :class:`Step` into an :class:`IterationRecord`: one fit's validation data,
    metric and timing rules, shared by :class:`IterativeKRR` and :class:`DirectKRR`.

    ``record`` pauses the solver timer, then evaluates (lazy step values, train/validation
    metric) on a timer of its own: that time is the record's ``eval_seconds``, never ``seconds``.
    """

    def __init__(self, estimator: "KRRBase", X: torch.Tensor, Y: torch.Tensor, X_val, y_val):
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together")
        if X_val is not None:
            X_val, Y_val, _ = check_X_y(X_val, y_val, dtype=X.dtype, device=X.device, X_name="X_val", y_name="y_val")
            check_features(X_val, X.shape[1], "X_val", type(estimator).__name__)
            if Y_val.shape[1] != Y.shape[1]:
                raise ValueError(f"y_val has {Y_val.shape[1]} outputs but y has {Y.shape[1]}")
        else:
            Y_val = None
        self.estimator = estimator
        self.X, self.Y, self.X_val, self.Y_val = X, Y, X_val, Y_val
        # Targets kept elsewhere stay there: a few distinct rows tell the task.
        self.metric_name = estimator._metric_name(rows_of(Y).target_rows(Y))
        self.metric_fn = METRICS[self.metric_name]
        self.eval_train = bool(getattr(estimator, "eval_train", False))
        self._validation_outputs = None if X_val is None else PointOutputs(estimator, X_val)
        self.target_scale = 1.0          # the solver's targets are Y · target_scale (see _start_fit)

    def record(self, iteration: int, step: Step, timer: Timer) -> IterationRecord:
        seconds = timer.pause()
        t_eval = Timer()
        residual, objective = step.values()
        scale = self.target_scale            # relative residuals do not change with it; the objective is quadratic
        rec = IterationRecord(iteration=iteration, seconds=seconds, residual=residual,
                              objective=objective / scale / scale, metric=self.metric_name, extras=dict(step.extras))

        def predict(X):
            return self.estimator._predict_tensor(X) / scale
        if self.eval_train:
            rec.train_metric = self.metric_fn(self.Y, predict(self.X))
        if self.X_val is not None:
            rec.val_metric = self.metric_fn(self.Y_val, self._validation_outputs() / scale)
        rec.eval_seconds = t_eval.pause()
        return rec


class KRRBase(RegressorMixin, BaseEstimator):
    """Shared parameter handling, input conversion and prediction from (centres_, coef_).

    Subclasses set ``centers_`` (the points the predictor expands over: X itself for full KRR)
    and ``coef_`` (M×k), and ``d_weights_`` is folded into ``coef_`` already.
    """

    # -- parameter checks ------------------------------------------------------------------
    def _kernel(self) -> Kernel:
        kernel = self.kernel if self.kernel is not None else GaussianKernel(1.0)
        if not isinstance(kernel, Kernel):
            raise ValueError(f"kernel must be a krrcore.kernels.Kernel, got {type(kernel).__name__}")
        return kernel

    def _dtype(self) -> torch.dtype:
        return resolve_dtype(getattr(self, "dtype", "float64"))

    def _device(self) -> torch.device:
        device = getattr(self, "device", None)
        return torch.device(device) if device is not None else default_device()

    def _penalty(self) -> float:
        lam = check_positive(self.penalty, "penalty", allow_zero=True)
        if lam == 0:
            raise ValueError("penalty must be > 0: with λ = 0 the system K + λnI is singular in general")
        return lam

    def _prepare_fit(self, X, y):
        X, Y, was_1d = check_X_y(X, y, dtype=self._dtype(), device=self._device())
        self.n_features_in_ = X.shape[1]
        self._y_was_1d = was_1d
        return X, Y

    # -- the record stream -------------------------------------------------------------------
    def _metric_name(self, Y: torch.Tensor) -> str:
        """Metric of the stream's train/validation values: ``metric``, or by the targets for "auto"."""
        metric = getattr(self, "metric", "auto")
        if metric != "auto":
            if metric not in METRICS:
                raise ValueError(f"metric must be 'auto' or one of {sorted(METRICS)}, got {metric!r}")
            return metric
        values = torch.unique(Y)
        is_pm1 = values.numel() <= 2 and bool(((values == 1) | (values == -1)).all())
        is_onehot = Y.shape[1] > 1 and bool(((Y == 0) | (Y == 1)).all())
        task = "multiclass" if is_onehot else ("binary" if is_pm1 else "regression")
        return DEFAULT_METRIC[task]

    def fit(self, X, y, X_val=None, y_val=None, *, stop_event: threading.Event | None = None,
            progress: bool = False):
        """Fit by draining :meth:`iter_fit` (its records are in ``trace_``); returns self.

        ``progress=True`` shows a tqdm bar (terminal or notebook) fed by the same records:
        iterations out of ``maxiter``, the residual and the validation metric.
        """
        records = self.iter_fit(X, y, X_val, y_val, stop_event=stop_event)
        if progress:
            from ..progress import progress_bar

            records = progress_bar(records, total=getattr(self, "maxiter", None), desc=type(self).__name__)
        for _ in records:
            pass
        return self

    def iter_fit(self, X, y, X_val=None, y_val=None, *, stop_event: threading.Event | None = None):
        """Generator of :class:`IterationRecord`; after it ends the estimator is fitted. When it
        ends and what it records: ``_records`` of :class:`IterativeKRR` and :class:`DirectKRR`.

        Targets so large or so small that their squares leave the dtype's range are solved scaled
        (:func:`target_scale`); the coefficients are scaled back when the generator ends, however it
        ends, and ``predict`` answers in the targets' units meanwhile.
        """
        self._target_scale = 1.0
        try:
            yield from self._records(X, y, X_val, y_val, stop_event=stop_event)
        finally:
            if self._target_scale != 1.0 and isinstance(getattr(self, "coef_", None), torch.Tensor):
                self.coef_ = self.coef_ / self._target_scale
            self._target_scale = 1.0

    def _records(self, X, y, X_val, y_val, *, stop_event):
        raise NotImplementedError

    def _start_fit(self, X, y, X_val, y_val) -> tuple[torch.Tensor, torch.Tensor, _Recorder]:
        """Checked training tensors and the recorder of this fit; resets ``trace_`` and ``stop_reason_``.

        Before the solver allocates anything, its :meth:`memory_estimate` is checked
        (``memory_estimate_``): :class:`~krrcore.memory.MemoryLimitError` past the memory limit,
        :class:`~krrcore.memory.TimeLimitError` when set-up plus one iteration would exceed
        ``timeout``, and a :class:`~krrcore.memory.SlowFitWarning` past a minute.
        """
        distributed = distributed_backend(X)
        if distributed is not None:
            X, Y, estimate = distributed.start_fit(self, X, y)
        else:
            X, Y = self._prepare_fit(X, y)
            estimate = self.memory_estimate(X.shape[0], X.shape[1], Y.shape[1],
                                            n_val=0 if X_val is None else len(X_val))
        self.memory_estimate_ = estimate.check(timeout=getattr(self, "timeout", None))
        first = estimate.seconds_for(1)
        if first is not None and first > SLOW_FIT_SECONDS:
            faster = f"; to go faster: {estimate.suggestion}" if estimate.suggestion else ""
            warnings.warn(f"{estimate.describe()} Set-up and the first iteration may take a while{faster}.",
                          SlowFitWarning, stacklevel=3)
        recorder = _Recorder(self, X, Y, X_val, y_val)
        if isinstance(Y, torch.Tensor):
            recorder.target_scale = self._target_scale = target_scale(Y)
            if self._target_scale != 1.0:
                Y = Y * self._target_scale
        self.trace_ = []
        self.stop_reason_ = ""
        return X, Y, recorder

    # -- resources ---------------------------------------------------------------------------
    def memory_estimate(self, n: int, d: int, n_outputs: int = 1, *, n_val: int = 0) -> MemoryEstimate:
        """Peak memory (and, on a CPU, time) of fitting this estimator, as configured, on ``n`` points
        with ``d`` features and ``n_outputs`` targets — from the parameters alone, allocating nothing.
        ``n_val``: validation points given to ``fit``, with the kernel rows its records keep
        (:func:`validation_cache_bytes`).

        What it stores is checked against the storage budget of ``memory_budget`` (krrcore's one
        policy, :mod:`krrcore.memory`), its whole peak against the free memory; a front end with a
        limit of its own compares ``peak_bytes`` with it. ``fit`` runs the same estimate first and
        refuses what does not fit (:meth:`~krrcore.memory.MemoryEstimate.check`).
        """
        n, d = check_int(n, "n"), check_int(d, "d")
        k = check_int(n_outputs, "n_outputs")
        device, dtype = self._device(), self._dtype()
        model = CostModel(d=d, dtype=dtype, device=device, memory_budget=getattr(self, "memory_budget", None),
                          scratch_blocks=self._kernel().scratch_blocks)
        model.hold("training data X, y", n * (d + k) * model.itemsize, "data")
        suggestion = self._estimate_resources(model, n, k)
        n_val = check_int(n_val, "n_val", minimum=0)
        if n_val:
            model.hold("validation data X_val, y_val", n_val * (d + k) * model.itemsize, "data")
            model.hold("validation kernel rows K(X_val, centres)",
                       validation_cache_bytes(n_val, self._center_count(n), model.itemsize, model.scratch_bytes),
                       "scratch")
        return model.build(type(self).__name__, n, k, suggestion)

    def _center_count(self, n: int) -> int:
        """How many centres the fitted model expands over: n for full KRR (Nyström solvers: M)."""
        return n

    def _block_budget(self) -> int:
        """Bytes one blocked kernel product may use (:func:`krrcore.memory.scratch_budget`)."""
        return scratch_budget(getattr(self, "memory_budget", None), self._device())

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """Add this solver's parts and seconds to ``model``; return the suggestion if it does not fit.

        Every krrcore solver overrides this; the default (for a user's subclass) counts the data only.
        """
        return ""

    #: How the solver runs on rows sharded on a Dask cluster (:mod:`krrcore.distributed`): "nystrom"
    #: (its products are K_nM's), "full" (those of K + λnI), or None: it does not.
    _sharded_kind = None

    def _hold_model(self, model: CostModel, n: int, k: int) -> None:
        """Add to ``model`` what a fit on n rows holds wherever its rows are (M×M matrices, CG
        vectors): on a cluster, the client's part. Solvers with a ``_sharded_kind`` override it."""

    def _hold_rows(self, model: CostModel, rows: int, n: int, k: int) -> None:
        """Add to ``model`` what a fit on n rows allocates for ``rows`` of them where they are (kernel
        block buffers over them): on a cluster, a worker's part for its shard. Nyström solvers
        override it."""

    # -- scikit-learn's contract ---------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True          # y may be (n, k): k right-hand sides, one solve
        tags.target_tags.single_output = True
        return tags

    # -- prediction ------------------------------------------------------------------------
    def _predict_tensor(self, X: torch.Tensor) -> torch.Tensor:
        return rows_of(self.centers_).expansion(self.centers_, self._kernel(), X, self.coef_,
                                                getattr(self, "memory_budget", None))

    #: Fitted attributes that prediction and a run's summary need; :meth:`compact` keeps only these
    #: (``classes_`` for the classifiers of :mod:`krrcore.solvers.classifiers`).
    _compact_attributes = ("centers_", "coef_", "n_features_in_", "_y_was_1d", "trace_", "stop_reason_", "n_iter_",
                           "converged_", "classes_")

    def compact(self):
        """A copy with the same parameters that keeps only what ``predict`` and the run summary need
        (``centers_``, ``coef_``, ``trace_``, ...): no kernel matrix, K_nM block or preconditioner.
        It is what a worker sends back; tensors are copied so a view never drags its base along."""
        check_is_fitted(self)
        twin = clone(self)
        for name in self._compact_attributes:
            if hasattr(self, name):
                value = getattr(self, name)
                setattr(twin, name, value.detach().clone() if isinstance(value, torch.Tensor) else value)
        return twin

    def _outputs(self, X) -> torch.Tensor:
        """The model's (n, k) outputs on checked X; raises ``NotFittedError`` before ``fit``."""
        check_is_fitted(self)
        Xt = as_tensor(X, "X", dtype=self.coef_.dtype, device=self.coef_.device)
        check_features(Xt, self.n_features_in_, "X", type(self).__name__)
        return self._predict_tensor(Xt) / getattr(self, "_target_scale", 1.0)     # mid-fit: scaled targets

    def predict(self, X):
        out = self._outputs(X)
        if self._y_was_1d:
            out = out[:, 0]
        return out if isinstance(X, torch.Tensor) else out.detach().cpu().numpy()


class IterativeKRR(KRRBase):
    """Base of iterative solvers: one loop, one stream.

    Subclasses implement ``_setup(X, Y)`` (fitted attributes, preconditioner; sets ``centers_``
    and a zero ``coef_``) and ``_steps(X, Y)``, a generator that updates ``coef_`` and yields a
    :class:`Step` per reported iteration. Parameters read here: ``maxiter``, ``tol``,
    ``callback``, ``timeout``, ``eval_train``, ``stall_patience``.
    """

    def _records(self, X, y, X_val, y_val, *, stop_event: threading.Event | None):
        """Generator of :class:`IterationRecord` (:meth:`iter_fit`); after it ends the estimator is fitted.

        Iteration 0 is the state after set-up (its ``seconds`` include the set-up time).
        Ends on: ``maxiter``; residual ≤ ``tol``; a residual below the working-precision floor
        ``residual_floor_`` (10·eps of the dtype the residual is evaluated in, see
        :meth:`_residual_dtype`: beyond it further iterations only move round-off); ``stop_event``
        set; ``callback(record)`` returning True; ``timeout``; a stalled residual.
        ``stop_reason_`` says which; a stalled run keeps its best iterate (smallest residual);
        ``converged_`` is True when the run reached ``tol`` or working
        precision. When ``tol`` is set and the run ends on ``maxiter`` or a stall short of it, a
        ``ConvergenceWarning`` says so (a stop asked for — ``stop_event``, ``callback``,
        ``timeout`` — does not warn). A diverging run (:meth:`krrcore.stream.Stopper.divergence`: a
        NaN or infinite residual, or one grown by orders of magnitude over its best) raises
        :class:`SolverDivergedError` naming the settings to change, leaving the best iterate in
        ``coef_`` and the records so far in ``trace_``. After the loop, unless a
        stop was asked for, :meth:`_finish` may add records (FALKON's float64 refinement).
        """
        maxiter = check_int(self.maxiter, "maxiter", minimum=0)
        tol = getattr(self, "tol", None)
        tol = None if tol is None else check_positive(tol, "tol", allow_zero=True)
        patience = check_int(getattr(self, "stall_patience", 50), "stall_patience")
        X, Y, recorder = self._start_fit(X, y, X_val, y_val)
        self.converged_ = False
        stopper = Stopper(stop_event, getattr(self, "callback", None), getattr(self, "timeout", None))
        timer = Timer()
        self._setup(X, Y)
        floor_dtype = self._residual_dtype(X)
        self.residual_floor_ = 10 * torch.finfo(floor_dtype).eps

        rec = recorder.record(0, self._initial_step(X, Y), timer)
        stopper.divergence(rec)
        self.trace_.append(rec)
        yield rec
        if maxiter == 0:
            self.stop_reason_ = "maxiter=0: no iterations run"
            return
        best, since_best, best_iteration = rec.residual, 0, 0
        best_coef = self.coef_.clone()
        timer.resume()
        iteration = 0
        for step in self._steps(X, Y):
            iteration = step.iteration if step.iteration is not None else iteration + 1
            rec = recorder.record(iteration, step, timer)
            diverged = stopper.divergence(rec, self.residual_floor_, bool(torch.isfinite(self.coef_).all()))
            if diverged:
                self.coef_ = best_coef
                self.stop_reason_ = (f"{diverged}; kept the best iterate (iteration {best_iteration}, residual "
                                     f"{best:.3g}). {self._divergence_advice()}")
                raise SolverDivergedError(f"{type(self).__name__} {self.stop_reason_}")
            self.trace_.append(rec)
            yield rec
            if rec.residual < best * (1 - 1e-6):
                best, since_best, best_iteration, best_coef = rec.residual, 0, iteration, self.coef_.clone()
            else:
                since_best += 1
            short_of_tol = False
            if tol is not None and rec.residual <= tol:
                self.stop_reason_ = f"converged: residual {rec.residual:.3g} <= tol {tol:g}"
                self.converged_ = True
            elif rec.residual < self.residual_floor_:
                self.stop_reason_ = (f"converged to working precision: residual {rec.residual:.3g} is below "
                                     f"10·eps of {str(floor_dtype).removeprefix('torch.')} "
                                     f"({self.residual_floor_:.2g}); more iterations would only move round-off")
                self.converged_ = True
            elif iteration >= maxiter:
                self.stop_reason_ = f"reached maxiter={maxiter}"
                short_of_tol = tol is not None
            elif stopper.should_stop(rec):
                self.stop_reason_ = stopper.reason
            elif since_best >= patience:
                # Round-off can carry the iterate away from its best (float32 drift): keep the best.
                self.coef_ = best_coef
                self.stop_reason_ = (f"stalled: the residual has not improved for {patience} iterations; "
                                     f"the model is the best iterate, from iteration {best_iteration} "
                                     f"(residual {best:.3g})")
                short_of_tol = tol is not None
                if best_iteration == 0:     # no step ever helped: the model is the starting point (zero)
                    warnings.warn(f"{type(self).__name__} never improved on its starting point (the zero model) "
                                  f"in {iteration} iterations. {self._divergence_advice()}", ConvergenceWarning,
                                  stacklevel=2)
            if short_of_tol:
                warnings.warn(f"{type(self).__name__} did not reach tol={tol:g}: {self.stop_reason_} with "
                              f"residual {rec.residual:.3g}; raise maxiter or tol", ConvergenceWarning, stacklevel=2)
            if self.stop_reason_:
                break
            timer.resume()
        else:
            self.stop_reason_ = self.stop_reason_ or "solver finished"
        self.n_iter_ = iteration
        if stopper.reason:              # a stop asked for ends the fit here
            return
        timer.resume()
        for step in self._finish(X, Y):
            rec = recorder.record(step.iteration, step, timer)
            self.trace_.append(rec)
            yield rec
            timer.resume()

    #: What to change when this solver's iterates diverge, each with its value now (``{name}``:
    #: a parameter or fitted attribute): the advice of :class:`SolverDivergedError`.
    DIVERGENCE_ADVICE: tuple[str, ...] = ("raise penalty (now {penalty!r})", "use dtype='float64' (now {dtype!r})")

    def _divergence_advice(self) -> str:
        """'Lower lr_scale (now 4) or raise batch_size (now 1).': the settings that cure a divergence."""
        parts = []
        for template in self.DIVERGENCE_ADVICE:
            try:
                parts.append(template.format(**vars(self)))
            except (KeyError, AttributeError):      # a subclass without that setting
                continue
        if not parts:
            return "Change the solver's settings."
        text = ", ".join(parts[:-1]) + (" or " if len(parts) > 1 else "") + parts[-1]
        return text[0].upper() + text[1:] + "."

    def _set_eval_every(self, default: int) -> None:
        """``eval_every_``: the ``eval_every`` parameter, or the solver's ``default`` when it is None."""
        eval_every = getattr(self, "eval_every", None)
        self.eval_every_ = default if eval_every is None else check_int(eval_every, "eval_every")

    def _report_due(self, iteration: int) -> bool:
        """Whether ``iteration`` gets a record: every ``eval_every_`` iterations and at ``maxiter``."""
        return iteration % self.eval_every_ == 0 or iteration == self.maxiter

    def _residual_dtype(self, X) -> torch.dtype:
        """The dtype the reported residual is computed in, which sets the working-precision floor:
        float64 for the solvers whose ``residual`` option is "float64" (ASkotch, Skotch, NystromPCG,
        CG: recomputed in float64 even for float32 solves), else the solve's dtype (FALKON's CG
        residual, the "estimate" modes). A solver evaluating otherwise overrides this."""
        return torch.float64 if getattr(self, "residual", None) == "float64" else X.dtype

    def _finish(self, X, Y):
        """Steps after the loop has stopped, each with its ``iteration`` (FALKON's float64 refinement
        of a float32 solve); not run when a stop was asked for. None by default."""
        return iter(())

    def _initial_step(self, X, Y) -> Step:
        """Residual of the starting point (coef_ = 0): 1.0 for relative residuals."""
        return Step(residual=1.0)

    def _setup(self, X, Y) -> None:
        raise NotImplementedError

    def _steps(self, X, Y):
        raise NotImplementedError


class DirectKRR(KRRBase):
    """Base of direct solvers: one factorisation, one record.

    Subclasses implement ``_solve(X, Y) -> Step``: set ``centers_`` and ``coef_`` and return a
    :class:`Step` whose residual is the relative residual of the linear system just solved, as a
    lazy value (so its cost is evaluation time). :meth:`iter_fit` gives the same stream as an
    iterative solver's, with a single record: the app, the tests and the benchmarks need no
    special case for direct solvers.
    """

    def _records(self, X, y, X_val, y_val, *, stop_event: threading.Event | None):
        """Generator of exactly one :class:`IterationRecord` (iteration 1): ``seconds`` is the solve
        time, ``residual`` the solved system's relative residual, ``val_metric`` filled when
        validation data is given. ``stop_event`` is accepted for a uniform signature; a direct
        solve cannot be interrupted. Sets ``trace_``, ``stop_reason_``, ``n_iter_`` = 1 and
        ``converged_`` = True.
        """
        X, Y, recorder = self._start_fit(X, y, X_val, y_val)
        timer = Timer()
        step = self._solve(X, Y)
        rec = recorder.record(1, step, timer)
        del step                         # it may hold the system matrix for its residual
        self.trace_.append(rec)
        self.n_iter_ = 1
        self.converged_ = True
        self.stop_reason_ = "direct solve finished"
        yield rec

    def _solve(self, X, Y) -> Step:
        raise NotImplementedError

    def _solved_system_step(self, A: torch.Tensor, b: torch.Tensor, constant: float = 0.0) -> Step:
        """The step after solving A coef_ = b: residual and objective of the model's coefficients in
        float64 against A as given (without the jitter the factorisation may have added), one
        product with A, evaluated lazily."""
        def evaluate():
            c = self.coef_.double()
            return residual_and_objective(A @ c, c, b, constant)

        return Step.deferred(evaluate, extras={"residual_kind": "direct solve (float64, system without jitter)"})

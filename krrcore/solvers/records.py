"""What a fit streams: a solver's :class:`Step`, turned into an :class:`~krrcore.stream.IterationRecord`
by one :class:`Recorder` for every solver, iterative or direct, so every stream is timed and
evaluated alike (:mod:`krrcore.solvers.loops` runs the loops).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .._validation import check_features, check_X_y
from ..metrics import DEFAULT_METRIC, METRICS
from ..ops import KernelOperator
from ..rows import rows_of
from ..stream import IterationRecord, Timer


@dataclass
class Step:
    """What a solver reports after an (outer) iteration or a direct solve; the base class turns it
    into a record.

    Lazy values: ``residual`` and ``objective`` may each be a number or a zero-argument callable
    returning one. ``iter_fit`` (through :class:`Recorder`) calls a callable only after it has
    paused the solver timer, and counts its run time in the record's ``eval_seconds``; an exact evaluation
    that costs more than an iteration (the O(n²d) float64 residual of the full-KRR solvers) thus
    never inflates ``seconds``, which counts solver work only, as ASkotch's plots do. The callable
    must read the iterate when it is called (the solver's generator is suspended then).
    :meth:`deferred` builds a step whose residual and objective come from one such evaluation.
    """

    residual: float | Callable[[], float]
    objective: float | Callable[[], float] = math.nan
    iteration: int | None = None  # for solvers that report every k inner iterations
    extras: dict = field(default_factory=dict)

    @classmethod
    def deferred(
        cls, evaluate: Callable[[], tuple[float, float]], *, iteration: int | None = None, extras: dict | None = None
    ) -> "Step":
        """A step whose residual and objective are ``evaluate() -> (residual, objective)``, called once
        after the timer pauses."""
        once = functools.cache(evaluate)
        return cls(residual=lambda: once()[0], objective=lambda: once()[1], iteration=iteration, extras=extras or {})

    def values(self) -> tuple[float, float]:
        """(residual, objective) as floats, evaluating lazy values (call it with the timer paused)."""
        return tuple(float(v() if callable(v) else v) for v in (self.residual, self.objective))


def validation_cache_bytes(n_val: int, n_centers: int, itemsize: int, scratch_bytes: int) -> int:
    """Bytes of K(X_val, centres) a fit keeps for its records: all of it when it fits one scratch
    budget (:mod:`krrcore.memory`; the blocked prediction of every record would allocate that much
    anyway), else none. Kept, a record's validation metric costs one product with it instead of
    n_val × n_centres kernel evaluations."""
    need = n_val * n_centers * itemsize
    return int(need) if need <= scratch_bytes else 0


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


def stream_metric(Y: torch.Tensor, metric: str = "auto") -> str:
    """Metric of the stream's train/validation values: ``metric``, or by the targets for "auto"."""
    if metric != "auto":
        if metric not in METRICS:
            raise ValueError(f"metric must be 'auto' or one of {sorted(METRICS)}, got {metric!r}")
        return metric
    values = torch.unique(Y)
    is_pm1 = values.numel() <= 2 and bool(((values == 1) | (values == -1)).all())
    is_onehot = Y.shape[1] > 1 and bool(((Y == 0) | (Y == 1)).all())
    task = "multiclass" if is_onehot else ("binary" if is_pm1 else "regression")
    return DEFAULT_METRIC[task]


class PointOutputs:
    """The outputs of an estimator that is being fitted on fixed points X (a validation set, a
    plotting grid), called once per record: K(X, centres_) is kept across calls while the centres
    stay the same (:func:`validation_cache_bytes`), so a call costs one product with it instead of
    |X| × n_centres kernel evaluations. The estimator's current ``coef_`` is read at each call."""

    def __init__(self, estimator, X: torch.Tensor):
        self.estimator, self.X = estimator, X
        self._operator, self._centers = None, None

    @property
    def kept_bytes(self) -> int | None:
        """Bytes of K(X, centres) held when all of it is kept (None before a call, or when it is not)."""
        op = self._operator
        if op is None or op.cached_rows != op.n:
            return None
        return op.n * op.M * op.dtype.itemsize

    def __call__(self) -> torch.Tensor:
        est = self.estimator
        centers = est.centers_
        if not rows_of(centers).local:  # rows kept elsewhere: predicted where they live
            return est._predict_tensor(self.X)
        if self._centers is not centers:
            keep = validation_cache_bytes(self.X.shape[0], centers.shape[0], self.X.element_size(), est._block_budget())
            self._operator = (
                None
                if not keep
                else KernelOperator(
                    est._kernel(),
                    self.X,
                    centers,
                    memory_budget=est.memory_budget,
                    n_rhs=est.coef_.shape[1],
                    cache_bytes=keep,
                )
            )
            self._centers = centers
        if self._operator is None:
            return est._predict_tensor(self.X)
        out = self._operator.matvec(est.coef_)
        intercept = getattr(est, "intercept_", None)  # an unpenalised offset (LogisticFalkon's b)
        return out if intercept is None else out + intercept.to(out.dtype)


class IteratePredictions:
    """A fitting estimator's current iterate predicted on fixed ``points`` (n_points, d): call it
    between the records of ``iter_fit`` (the generator suspended, so outside the solver's timer) for
    the (n_points, k) outputs as numpy in the targets' units, the offset (``intercept_``) at the
    starting point. The points' kernel rows are kept once evaluated when the memory policy allows
    (:class:`PointOutputs`).

    :meth:`cost` is what the next call will take in seconds: measured by the last call, or the
    memory policy's estimate (:class:`~krrcore.memory.CostModel`) for |points| × centres kernel
    evaluations before the first, and for reading the kept rows once they are kept.
    ``kept_now`` says whether the last call was the one that evaluated and kept the rows: a
    one-off cost that no later call repeats."""

    def __init__(self, estimator, points):
        self.estimator, self.points = estimator, points
        self._outputs: PointOutputs | None = None
        self._cost: float | None = None
        self.kept_now = False

    def _model(self):
        from ..memory import CostModel

        coef = self.estimator.coef_
        return CostModel(d=self.points.shape[1], dtype=coef.dtype, device=coef.device)

    def cost(self) -> float:
        if self._cost is not None:
            return self._cost
        coef = self.estimator.coef_
        if not bool((coef != 0).any()):
            return 0.0
        centers = getattr(self.estimator, "centers_", None)
        return self._model().entry_seconds(len(self.points) * (len(centers) if centers is not None else 0))

    def __call__(self):
        import time

        est = self.estimator
        coef = est.coef_
        scale = getattr(est, "_target_scale", 1.0)  # mid-fit, the solver's targets are scaled
        if not bool(torch.any(coef != 0)):  # the starting point: f = b (0 without an offset), no kernel to evaluate
            start = torch.zeros((len(self.points), coef.shape[1]), dtype=torch.float64)
            intercept = getattr(est, "intercept_", None)
            return (start if intercept is None else start + intercept.double().cpu() / scale).numpy()
        if self._outputs is None:
            self._outputs = PointOutputs(est, torch.as_tensor(self.points, dtype=coef.dtype, device=coef.device))
        fresh = self._outputs.kept_bytes is None
        start = time.perf_counter()
        values = (self._outputs() / scale).detach().cpu().numpy().reshape(len(self.points), -1)
        self._cost = time.perf_counter() - start
        kept = self._outputs.kept_bytes
        self.kept_now = fresh and kept is not None
        if self.kept_now:  # the rows were evaluated and kept: the next calls read them
            self._cost = self._model().stream_seconds(kept)
        return values


class Recorder:
    """Turns a solver's :class:`Step` into an :class:`IterationRecord`: one fit's validation data,
    metric and timing rules, shared by :class:`IterativeKRR` and :class:`DirectKRR`.

    ``record`` pauses the solver timer, then evaluates (lazy step values, train/validation
    metric) on a timer of its own: that time is the record's ``eval_seconds``, never ``seconds``.
    """

    def __init__(
        self,
        estimator,
        X: torch.Tensor,
        Y: torch.Tensor,
        X_val,
        y_val,
        *,
        metric: str = "auto",
        eval_train: bool = False,
    ):
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
        self.metric_name = stream_metric(rows_of(Y).target_rows(Y), metric)
        self.metric_fn = METRICS[self.metric_name]
        self.eval_train = bool(eval_train)
        self._validation_outputs = None if X_val is None else PointOutputs(estimator, X_val)
        self.target_scale = 1.0  # the solver's targets are Y · target_scale (see KRRBase._start_fit)

    def record(self, iteration: int, step: Step, timer: Timer) -> IterationRecord:
        seconds = timer.pause()
        t_eval = Timer()
        residual, objective = step.values()
        scale = self.target_scale  # relative residuals do not change with it; the objective is quadratic
        rec = IterationRecord(
            iteration=iteration,
            seconds=seconds,
            residual=residual,
            objective=objective / scale / scale,
            metric=self.metric_name,
            extras=dict(step.extras),
        )

        def predict(X):
            return self.estimator._predict_tensor(X) / scale

        if self.eval_train:
            rec.train_metric = self.metric_fn(self.Y, predict(self.X))
        if self.X_val is not None:
            rec.val_metric = self.metric_fn(self.Y_val, self._validation_outputs() / scale)
        rec.eval_seconds = t_eval.pause()
        return rec

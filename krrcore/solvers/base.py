"""The estimator contract shared by every solver.

* scikit-learn style: ``__init__`` stores parameters untouched; fitted attributes end in ``_``;
  ``fit(X, y, X_val=None, y_val=None)`` takes numpy, pandas or torch; ``predict`` returns the
  same kind of array it was given, and raises ``NotFittedError`` before ``fit``; ``n_features_in_``
  is checked; scikit-learn's own estimator checks pass (tests/core/test_sklearn_contract.py).
* Parameters are declared once, with their constraints (:mod:`krrcore.solvers.params`): those every
  estimator has on :class:`KRRBase`, ``seed`` on :class:`Seeded`, the iterative solvers' runtime
  knobs on :class:`IterativeKRR`; every subclass is made a dataclass of its parameters, so
  ``__init__`` is written from the declarations. ``fit`` validates them all before any work.
* ``converged_`` says whether a fit reached ``tol`` (or working precision); a fit that ends on
  ``maxiter`` or a stall with ``tol`` unmet also warns with ``ConvergenceWarning``.
* ``fit(..., progress=True)`` draws a tqdm progress bar from the same record stream.
* Classifiers are these regressors behind one mixin (:mod:`krrcore.solvers.classifiers`).
* ``penalty`` is always λ of (K + λnI) (per-sample regularisation, the papers' convention).
* ``fit(..., sample_weight=w)`` fits weighted KRR, (1/n) Σ wᵢ (f(xᵢ) − yᵢ)² + λ‖f‖² with the
  weights rescaled to mean 1 (:func:`krrcore._validation.check_sample_weight`: integer weights give
  the model of repeated rows, zero weights that of the data without them). A solver that cannot
  solve the weighted system says why (``_SAMPLE_WEIGHT_REFUSAL``).
* Every solver has ``iter_fit(X, y, X_val=None, y_val=None, stop_event=None)``, a generator of
  :class:`~krrcore.stream.IterationRecord`, and ``fit`` drains it into ``trace_``.
  Iterative solvers implement two hooks, ``_setup`` and ``_steps``; :meth:`IterativeKRR.iter_fit`
  owns the loop that times, evaluates, records, stops, and detects NaN or a stalled residual.
  Direct solvers implement ``_solve``; :meth:`DirectKRR.iter_fit` yields its single record.
  Both build records with one :class:`~krrcore.solvers.records.Recorder`, so every solver's stream
  is evaluated alike.
"""

from __future__ import annotations

import contextlib
import copy
import math
import threading
import warnings
from typing import ClassVar

import torch
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._validation import as_tensor, check_feature_names, check_features, check_sample_weight, check_X_y, feature_names
from ..device import default_device, resolve_dtype
from ..kernels import GaussianKernel, Kernel
from ..linalg import residual_and_objective
from ..memory import warn_if_slow
from ..rows import rows_of
from ..stream import SolverDivergedError, Stopper, Timer
from .params import (
    BOOLEAN,
    CALLBACKS,
    CENTERS,
    COUNT,
    DEVICES,
    DTYPES,
    KERNELS,
    MEMORY_BUDGETS,
    METRIC_NAMES,
    PENALTIES,
    TIMEOUTS,
    TOLERANCE,
    Integer,
    ParameterError,
    Seed,
    check_stop_event,
    param,
    parameters,
    resolve_seed,
    validate,
)
from .records import Recorder, Step, target_scale
from .refusals import UncertaintyError, std_refusal
from .resources import EstimatedResources

__all__ = [
    "ConcurrentFitError",
    "ModelWarning",
    "OffsetWarning",
    "check_model_not_zero",
    "PenaltyWarning",
    "choose_origin",
    "check_penalty_scale",
    "fit_guard",
    "KRRBase",
    "Seeded",
    "NystromCenters",
    "IterativeKRR",
    "DirectKRR",
    "Step",
    "distributed_backend",
]


def distributed_backend(data):
    """:mod:`krrcore.distributed` when ``data`` lives on a Dask cluster (a sharded array, or a Dask
    collection to shard), else None: the one place a fit chooses between here and a cluster. The
    package is imported only then; every later operation on the rows goes through
    :func:`krrcore.rows.rows_of`."""
    if rows_of(data).local and type(data).__module__.partition(".")[0] != "dask":
        return None
    from .. import distributed

    return distributed


class ConcurrentFitError(RuntimeError):
    """``fit`` called on an estimator that another thread is fitting: the two fits would write
    one set of attributes and leave a model that is neither. Fit a ``sklearn.base.clone`` instead."""


#: Estimators being fitted now (by ``id``) and the thread fitting each, with its nesting depth (a
#: classifier's ``iter_fit`` wraps its regressor's).
_FITTING: dict[int, list] = {}
_FITTING_LOCK = threading.Lock()


@contextlib.contextmanager
def fit_guard(estimator):
    """Around a fit: refuses a second thread's fit of the same instance (:class:`ConcurrentFitError`),
    and when the fit fails leaves the estimator exactly as it was before — the fitted model it had,
    or unfitted — so a refused or failed refit never leaves a half-written model behind. Two
    outcomes keep what the fit wrote: a generator closed early (a stop the caller asked for, the
    iterate so far is the model) and :class:`SolverDivergedError` (documented: it keeps the best
    iterate and the records so far)."""
    key, me = id(estimator), threading.get_ident()
    with _FITTING_LOCK:
        entry = _FITTING.get(key)
        if entry is not None and entry[0] != me:
            raise ConcurrentFitError(
                f"{type(estimator).__name__} is being fitted by another thread: one instance "
                f"fits one data set at a time; fit sklearn.base.clone(model) in each thread"
            )
        outermost = entry is None
        if outermost:
            _FITTING[key] = entry = [me, 0]
        entry[1] += 1
    state = dict(vars(estimator)) if outermost else None
    try:
        yield
    except (GeneratorExit, SolverDivergedError):
        raise
    except BaseException:
        if outermost:
            vars(estimator).clear()
            vars(estimator).update(state)
        raise
    finally:
        with _FITTING_LOCK:
            entry[1] -= 1
            if entry[1] == 0:
                _FITTING.pop(key, None)


class OffsetWarning(UserWarning):
    """X lies far from the origin against its spread, where the kernel cannot be moved to it."""


#: The data's mean is moved to the origin when it lies this many times its spread away from it.
OFFSET_RATIO = 10.0


def choose_origin(kernel: Kernel, X: torch.Tensor, name: str) -> torch.Tensor | None:
    """The point a translation-invariant kernel measures from (``x_origin_``): the training mean when
    it lies more than :data:`OFFSET_RATIO` times the data's spread from 0 (X + 1e8: the expanded
    distances would otherwise cancel to noise), else None (nothing changes). A kernel that is not
    translation invariant (linear, polynomial) cannot be moved, and such data is named in an
    :class:`OffsetWarning`; so is an offset that the dtype itself cannot resolve."""
    if not X.is_floating_point() or X.shape[0] < 2:
        return None
    X64 = X.double()
    return origin_from_moments(kernel, X64.mean(0), X64.std(0), X.dtype, name)


def origin_from_moments(kernel: Kernel, mean: torch.Tensor, std: torch.Tensor, dtype, name: str):
    """:func:`choose_origin` from X's column means and standard deviations (float64), which sharded
    data give without being gathered (:meth:`krrcore.distributed.ShardedArray.moments`)."""
    spread = float(torch.linalg.norm(std))
    offset = float(torch.linalg.norm(mean))
    if offset <= OFFSET_RATIO * spread:
        return None
    kind = str(dtype).removeprefix("torch.")
    if spread == 0.0:
        return None  # every row the same point: nothing to measure
    if offset * torch.finfo(dtype).eps > 1e-3 * spread:
        warnings.warn(
            f"{name}: X lies {offset:.3g} from 0 against a spread of {spread:.3g}; {kind} resolves "
            f"only {offset * torch.finfo(dtype).eps:.2g} at that distance, so the features have lost "
            f"digits before any kernel is computed: centre X before fitting (X - X.mean(0)) or use "
            f"dtype='float64'",
            OffsetWarning,
            stacklevel=5,
        )
    if not kernel.translation_invariant:
        warnings.warn(
            f"{name}: X lies {offset:.3g} from 0 against a spread of {spread:.3g}, and "
            f"{type(kernel).__name__} is not translation invariant, so krrcore cannot move it: its "
            f"values are dominated by the offset; centre X before fitting (X - X.mean(0), or "
            f"sklearn's StandardScaler)",
            OffsetWarning,
            stacklevel=5,
        )
        return None
    return mean.cpu()


class ModelWarning(UserWarning):
    """The fitted model is not what the fit's report says: zero on the data it was fitted to."""


def check_model_not_zero(estimator, X: torch.Tensor, Y: torch.Tensor) -> None:
    """After a fit: the model on (up to 256 of) its own training rows. A residual ‖f(X) − y‖ of at
    least 0.97‖y‖ means the fit is no better than the zero model on the very data it was fitted to
    — a kernel degenerate on these X (PolynomialKernel(degree=30): a few rows of huge norm carry all
    of K) or a penalty that drowns it — whatever the solver's own residual said: ``converged_``
    becomes False, ``stop_reason_`` says so and a :class:`ModelWarning` names the kernel and penalty."""
    if not isinstance(Y, torch.Tensor) or not isinstance(getattr(estimator, "coef_", None), torch.Tensor):
        return
    if not getattr(estimator, "_squared_loss", True):  # its outputs are not fitted to Y in norm
        return
    rows = slice(0, min(256, X.shape[0]))
    target = Y[rows].double()
    norm = float(torch.linalg.norm(target))
    if norm == 0.0:
        return
    with torch.no_grad():
        outputs = estimator._predict_tensor(X[rows]).double()
    ratio = float(torch.linalg.norm(outputs - target)) / norm
    if ratio >= ZERO_MODEL_RATIO:
        summary = (
            f"the model is no better than zero on its training data (‖f(X) − y‖ / ‖y‖ = {ratio:.3g}, "
            f"‖f(X)‖ / ‖y‖ = {float(torch.linalg.norm(outputs)) / norm:.2g}, first {rows.stop} rows)"
        )
        estimator.converged_ = False
        estimator.stop_reason_ = f"{estimator.stop_reason_}; but {summary}"
        warnings.warn(
            f"{type(estimator).__name__}: {summary}: kernel={estimator._kernel()!r} with "
            f"penalty={estimator.penalty!r} does not fit these data; lower the penalty, or use a kernel "
            f"whose values are of one scale on X",
            ModelWarning,
            stacklevel=4,
        )


#: A fit whose training residual is at least this fraction of ‖y‖ explains (almost) nothing.
ZERO_MODEL_RATIO = 0.97


class PenaltyWarning(UserWarning):
    """``penalty`` so small or so large against the kernel's scale that the dtype cannot tell the
    regularised system from an unregularised one, or the model from zero."""


def check_penalty_scale(estimator, X: torch.Tensor) -> None:
    """λn against the kernel's scale s = max k(x, x) over (up to 4,096 of) the training rows, in the
    fit's dtype: λn overflowing the dtype, or a kernel whose values do, is refused (the system would
    hold inf); λn below eps·s warns that the regularisation is lost in round-off (K + λnI is then
    K, singular in general: the solution is unstable); λn above s/eps is refused, since K would be
    lost in round-off (the model is zero to working precision). Each names ``penalty`` and the value
    that would do."""
    if getattr(estimator, "penalty", None) is None:
        return  # a penalty the fit chooses (FalkonCV's tuning): checked as it goes
    name = type(estimator).__name__
    lam, n = estimator._penalty(), X.shape[0]
    info = torch.finfo(X.dtype)
    kind = str(X.dtype).removeprefix("torch.")
    lam_n = lam * n
    if lam_n > info.max:
        raise ParameterError(
            f"penalty={lam:g} makes λn = {lam_n:.3g} (n={n:,}) beyond {kind}'s range ({info.max:.3g}): lower penalty"
        )
    with torch.no_grad():
        diag = estimator._kernel().diag(X[:4096])
    scale = float(diag.abs().max())
    if not math.isfinite(scale):
        raise ParameterError(
            f"kernel={estimator._kernel()!r} overflows {kind} on these X (k(x, x) = {scale}): "
            f"scale X down, or choose a kernel whose values stay finite"
        )
    if scale == 0.0:
        raise ParameterError(
            f"kernel={estimator._kernel()!r} is zero on the diagonal of these X (k(x, x) = 0): "
            f"the model would be zero; choose another kernel"
        )
    eps = info.eps
    if lam_n < eps * scale:
        warnings.warn(
            f"{name}: penalty={lam:g} gives λn = {lam_n:.3g}, below {kind}'s round-off of the kernel "
            f"(eps·max k(x, x) = {eps * scale:.3g}): the regularisation is lost and the system is "
            f"singular to working precision, so the model may be unstable; raise penalty to at least "
            f"{eps * scale / n:.2g}"
            + (
                f" (max k(x, x) = {scale:.3g}: a kernel whose values span that many orders of magnitude "
                f"is degenerate on these X; scale X or lower the degree)"
                if scale > 1e8
                else ""
            ),
            PenaltyWarning,
            stacklevel=4,
        )
    elif lam_n > scale / eps:
        raise ParameterError(
            f"{name}: penalty={lam:g} gives λn = {lam_n:.3g}, beyond max k(x, x) / eps = "
            f"{scale / eps:.3g}: the kernel would be lost in round-off next to λnI and the model "
            f"would be zero to working precision; lower penalty below {scale / eps / n:.2g}"
        )


@parameters
class KRRBase(EstimatedResources, RegressorMixin, BaseEstimator):
    """Shared parameters, input conversion and prediction from (centres_, coef_).

    Subclasses set ``centers_`` (the points the predictor expands over: X itself for full KRR)
    and ``coef_`` (M×k), and ``d_weights_`` is folded into ``coef_`` already.

    Parameters: ``kernel`` (a :class:`~krrcore.kernels.Kernel`; None: Gaussian of σ = 1),
    ``penalty`` (λ of K + λnI), ``dtype`` ("float64" or "float32"), ``device`` (None: CUDA when
    available, else the CPU), ``memory_budget`` (bytes, or None for krrcore's defaults,
    :mod:`krrcore.memory`).
    """

    kernel: Kernel | None = param(None, KERNELS, positional=True)
    penalty: float = param(1e-3, PENALTIES, positional=True)
    dtype: str = param("float64", DTYPES)
    device: str | None = param(None, DEVICES)
    memory_budget: int | None = param(None, MEMORY_BUDGETS)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        parameters(cls)  # every estimator is a dataclass of its declared parameters

    def _validate_params(self) -> None:
        """Every parameter against its declaration (:func:`krrcore.solvers.params.validate`)."""
        validate(self)

    # -- parameters, resolved --------------------------------------------------------------
    def _kernel(self) -> Kernel:
        """The kernel, measured from ``x_origin_`` when the fit set one (:func:`choose_origin`)."""
        kernel = self.kernel if self.kernel is not None else GaussianKernel(1.0)
        origin = vars(self).get("x_origin_")
        return kernel if origin is None else kernel.centered_at(origin)

    def _dtype(self) -> torch.dtype:
        return resolve_dtype(self.dtype)

    def _device(self) -> torch.device:
        return torch.device(self.device) if self.device is not None else default_device()

    def _penalty(self) -> float:
        return float(self.penalty)

    def _prepare_fit(self, X, y):
        names = feature_names(X)
        X, Y, was_1d = check_X_y(X, y, dtype=self._dtype(), device=self._device())
        self.n_features_in_ = X.shape[1]
        vars(self).pop("x_origin_", None)
        origin = choose_origin(self.kernel if self.kernel is not None else GaussianKernel(1.0), X, type(self).__name__)
        if origin is not None:
            self.x_origin_ = origin
        if names is not None:
            self.feature_names_in_ = names
        else:
            vars(self).pop("feature_names_in_", None)
        self._y_was_1d = was_1d
        return X, Y

    def _origin_from_moments(self, mean: torch.Tensor, std: torch.Tensor, dtype) -> None:
        """``x_origin_`` from X's column means and standard deviations (:func:`origin_from_moments`),
        or none: the start of a sharded fit gives them (:mod:`krrcore.distributed`)."""
        vars(self).pop("x_origin_", None)
        origin = origin_from_moments(self._kernel(), mean, std, dtype, type(self).__name__)
        if origin is not None:
            self.x_origin_ = origin

    # -- the record stream -------------------------------------------------------------------
    def fit(
        self,
        X,
        y,
        X_val=None,
        y_val=None,
        *,
        sample_weight=None,
        stop_event: threading.Event | None = None,
        progress: bool = False,
    ):
        """Fit by draining :meth:`iter_fit` (its records are in ``trace_``); returns self.

        ``sample_weight`` (n,): weighted KRR, (1/n) Σ wᵢ (f(xᵢ) − yᵢ)² + λ‖f‖² with the weights
        rescaled to mean 1, so that λ keeps its per-sample meaning (integer weights = repeated rows,
        zero weights = rows left out). ``progress=True`` shows a tqdm bar (terminal or notebook) fed
        by the same records: iterations out of ``maxiter``, the residual and the validation metric.
        """
        records = self.iter_fit(X, y, X_val, y_val, sample_weight=sample_weight, stop_event=stop_event)
        if progress:
            from ..progress import progress_bar

            records = progress_bar(records, total=self._progress_total(), desc=type(self).__name__)
        for _ in records:
            pass
        return self

    #: The factor the targets of the fit under way are scaled by (:func:`target_scale`).
    _target_scale = 1.0

    def iter_fit(self, X, y, X_val=None, y_val=None, *, sample_weight=None, stop_event: threading.Event | None = None):
        """Generator of :class:`IterationRecord`; after it ends the estimator is fitted. When it
        ends and what it records: ``_records`` of :class:`IterativeKRR` and :class:`DirectKRR`;
        ``sample_weight`` as in :meth:`fit`.

        Targets so large or so small that their squares leave the dtype's range are solved scaled
        (:func:`target_scale`); the coefficients are scaled back when the generator ends, however it
        ends, and ``predict`` answers in the targets' units meanwhile. A fit that fails leaves the
        estimator as it was (:func:`fit_guard`).
        """
        with fit_guard(self):
            self._target_scale = 1.0
            self._fit_sample_weight = sample_weight
            try:
                yield from self._records(X, y, X_val, y_val, stop_event=stop_event)
                # What predict uses from now on: set_params after fit changes the next fit, not this model.
                self.fit_kernel_ = copy.copy(self._kernel())
            finally:
                if self._target_scale != 1.0 and isinstance(getattr(self, "coef_", None), torch.Tensor):
                    self.coef_ = self.coef_ / self._target_scale
                self._target_scale = 1.0
                self.__dict__.pop("_fit_sample_weight", None)

    #: Why this solver refuses ``sample_weight`` (None: it solves the weighted system).
    _SAMPLE_WEIGHT_REFUSAL: ClassVar[str | None] = None

    #: The fit's weights, (n, 1) float64 normalised to mean 1, or None (unweighted): set by
    #: :meth:`_start_fit` for the solver's set-up.
    _weights = None

    def _records(self, X, y, X_val, y_val, *, stop_event):
        raise NotImplementedError

    def _progress_total(self) -> int | None:
        """How many records the progress bar expects (None: not known)."""
        return None

    def _start_fit(
        self,
        X,
        y,
        X_val,
        y_val,
        *,
        stop_event=None,
        timeout: float | None = None,
        metric: str = "auto",
        eval_train: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor, Recorder]:
        """Checked parameters, training tensors and the recorder of this fit; resets ``trace_``,
        ``stop_reason_`` and sets ``seed_`` (the integer seed the fit uses, when it has a ``seed``).

        Every parameter is validated first (:mod:`krrcore.solvers.params`), then ``stop_event``, then
        ``sample_weight`` (``_weights``: normalised to mean 1; refused with the reason by a solver
        that cannot solve the weighted system, and on rows kept on a Dask cluster).
        Before the solver allocates anything, its :meth:`memory_estimate` is checked
        (``memory_estimate_``): :class:`~krrcore.memory.MemoryLimitError` past the memory limit,
        :class:`~krrcore.memory.TimeLimitError` when set-up plus one iteration would exceed
        ``timeout``, and a :class:`~krrcore.memory.SlowFitWarning` past a minute.
        """
        self._validate_params()
        check_stop_event(stop_event)
        vars(self).pop("fit_kernel_", None)  # the records of this fit predict with its own kernel
        self._resolve_seed()
        sample_weight = self.__dict__.get("_fit_sample_weight")
        weighted = sample_weight is not None
        if weighted and self._SAMPLE_WEIGHT_REFUSAL:
            raise ParameterError(f"{type(self).__name__} does not take sample_weight: {self._SAMPLE_WEIGHT_REFUSAL}")
        distributed = distributed_backend(X)
        if distributed is not None:
            if weighted:
                raise ParameterError(
                    "sample_weight is not supported for rows kept on a Dask cluster: fit on local "
                    "arrays, or repeat the rows that weigh more"
                )
            X, Y, estimate = distributed.start_fit(self, X, y)
            self._weights = None
        else:
            X, Y = self._prepare_fit(X, y)
            self._weights = check_sample_weight(sample_weight, X.shape[0], device=X.device)
            estimate = self._memory_estimate(
                X.shape[0], X.shape[1], Y.shape[1], n_val=0 if X_val is None else len(X_val), weighted=weighted
            )
        self.memory_estimate_ = estimate.check(timeout=timeout)
        warn_if_slow(estimate, stacklevel=3)
        if distributed is None:
            check_penalty_scale(self, X)
        recorder = Recorder(self, X, Y, X_val, y_val, metric=metric, eval_train=eval_train)
        if isinstance(Y, torch.Tensor):
            recorder.target_scale = self._target_scale = target_scale(Y)
            if self._target_scale != 1.0:
                Y = Y * self._target_scale
        self.trace_ = []
        self.stop_reason_ = ""
        return X, Y, recorder

    def _resolve_seed(self) -> None:
        """Estimators with a ``seed`` fix the integer their fit uses here (:class:`Seeded`)."""

    # -- scikit-learn's contract ---------------------------------------------------------------
    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "coef_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True  # y may be (n, k): k right-hand sides, one solve
        tags.target_tags.single_output = True
        return tags

    # -- prediction ------------------------------------------------------------------------
    def _fitted_kernel(self) -> Kernel:
        """The kernel the model was fitted with (``fit_kernel_``): a later ``set_params(kernel=...)`` or
        ``kernel__sigma=...`` changes the next fit, never the fitted model's predictions."""
        return vars(self).get("fit_kernel_") or self._kernel()

    def _predict_tensor(self, X: torch.Tensor) -> torch.Tensor:
        return rows_of(self.centers_).expansion(self.centers_, self._fitted_kernel(), X, self.coef_, self.memory_budget)

    #: Fitted attributes that prediction and a run's summary need; :meth:`compact` keeps only these
    #: (``classes_`` for the classifiers of :mod:`krrcore.solvers.classifiers`).
    _compact_attributes = (
        "centers_",
        "coef_",
        "n_features_in_",
        "feature_names_in_",
        "x_origin_",
        "fit_kernel_",
        "_y_was_1d",
        "trace_",
        "stop_reason_",
        "n_iter_",
        "converged_",
        "classes_",
    )

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
        check_feature_names(X, getattr(self, "feature_names_in_", None), type(self).__name__)
        Xt = as_tensor(X, "X", dtype=self.coef_.dtype, device=self.coef_.device)
        check_features(Xt, self.n_features_in_, "X", type(self).__name__)
        return self._predict_tensor(Xt) / self._target_scale  # mid-fit: scaled targets

    def predict(self, X, return_std: bool = False):
        """The model's predictions; with ``return_std`` the pair (mean, standard deviation of a new
        observation) from the Gaussian-process posterior (:mod:`krrcore.solvers.uncertainty`: the
        estimators fitted with ``uncertainty=True``), refused with the reason elsewhere."""
        if return_std:
            return self._predict_with_std(X)
        out = self._outputs(X)
        if self._y_was_1d:
            out = out[:, 0]
        return out if isinstance(X, torch.Tensor) else out.detach().cpu().numpy()

    def _predict_with_std(self, X):
        raise UncertaintyError(f"{type(self).__name__}.predict(return_std=True) is not available: {std_refusal(self)}")


class Seeded(KRRBase):
    """An estimator that draws at random (centres, sketches, blocks): ``seed`` is an integer >= 0,
    None (fresh entropy), a ``numpy.random.Generator``, a ``numpy.random.RandomState`` or a
    ``torch.Generator`` (drawn from once per fit, as scikit-learn's ``random_state``). The
    integer a fit used is ``seed_``: refitting with ``seed=model.seed_`` repeats it."""

    seed: int | None = param(0, Seed())

    def _resolve_seed(self) -> None:
        self.seed_ = resolve_seed(self.seed)


class NystromCenters(Seeded):
    """An estimator on M Nyström centres: ``M`` (how many; ignored when ``centers`` is an array) and
    ``centers`` (a name of :data:`krrcore.centers.CENTER_SELECTORS`, a selector, or the centres)."""

    M: int = param(100, COUNT, positional=True)
    centers: object = param("uniform", CENTERS)


class IterativeKRR(Seeded):
    """Base of iterative solvers: one loop, one stream.

    Subclasses implement ``_setup(X, Y)`` (fitted attributes, preconditioner; sets ``centers_``
    and a zero ``coef_``) and ``_steps(X, Y)``, a generator that updates ``coef_`` and yields a
    :class:`Step` per reported iteration. Their runtime knobs, declared here once: ``maxiter``,
    ``tol`` (stop when the residual is at most it), ``callback`` (f(record) -> True stops),
    ``timeout`` (seconds of solver time), ``eval_train`` (the training metric in every record),
    ``metric`` (of the records' train/validation values; "auto": by the targets) and
    ``stall_patience`` (iterations without improvement before a stall ends the run).
    """

    maxiter: int = param(100, Integer(0))
    tol: float | None = param(None, TOLERANCE)
    callback: object = param(None, CALLBACKS)
    timeout: float | None = param(None, TIMEOUTS)
    eval_train: bool = param(False, BOOLEAN)
    metric: str = param("auto", METRIC_NAMES)
    stall_patience: int = param(50, COUNT)

    #: Read by the loop; the solvers that offer them declare them as parameters: ``eval_every``
    #: (a record every so many iterations; None: the solver's own default) and ``residual``
    #: ("float64": the reported residual is recomputed in float64).
    eval_every = None
    residual = None

    def _progress_total(self) -> int:
        return self.maxiter

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
        X, Y, recorder = self._start_fit(
            X,
            y,
            X_val,
            y_val,
            stop_event=stop_event,
            timeout=self.timeout,
            metric=self.metric,
            eval_train=self.eval_train,
        )
        maxiter, tol, patience = self.maxiter, self.tol, self.stall_patience
        self.converged_ = False
        stopper = Stopper(stop_event, self.callback, self.timeout)
        timer = Timer()
        self._setup(X, Y)
        floor_dtype = self._residual_dtype(X)
        self.residual_floor_ = 10 * torch.finfo(floor_dtype).eps

        zero_targets = isinstance(Y, torch.Tensor) and not bool(Y.any())
        rec = recorder.record(0, Step(residual=0.0) if zero_targets else self._initial_step(X, Y), timer)
        stopper.divergence(rec)
        self.trace_.append(rec)
        yield rec
        if zero_targets:  # y = 0: the zero model, the starting point, is the exact solution
            self.n_iter_, self.converged_ = 0, True
            self.stop_reason_ = "converged: y is all zero, and the zero model solves the system exactly"
            return
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
                self.stop_reason_ = (
                    f"{diverged}; kept the best iterate (iteration {best_iteration}, residual "
                    f"{best:.3g}). {self._divergence_advice()}"
                )
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
                self.stop_reason_ = (
                    f"converged to working precision: residual {rec.residual:.3g} is below "
                    f"10·eps of {str(floor_dtype).removeprefix('torch.')} "
                    f"({self.residual_floor_:.2g}); more iterations would only move round-off"
                )
                self.converged_ = True
            elif iteration >= maxiter:
                self.stop_reason_ = f"reached maxiter={maxiter}"
                short_of_tol = tol is not None
            elif stopper.should_stop(rec):
                self.stop_reason_ = stopper.reason
            elif since_best >= patience:
                # Round-off can carry the iterate away from its best (float32 drift): keep the best.
                self.coef_ = best_coef
                self.stop_reason_ = (
                    f"stalled: the residual has not improved for {patience} iterations; "
                    f"the model is the best iterate, from iteration {best_iteration} "
                    f"(residual {best:.3g})"
                )
                short_of_tol = tol is not None
                if best_iteration == 0:  # no step ever helped: the model is the starting point (zero)
                    warnings.warn(
                        f"{type(self).__name__} never improved on its starting point (the zero model) "
                        f"in {iteration} iterations. {self._divergence_advice()}",
                        ConvergenceWarning,
                        stacklevel=2,
                    )
            if short_of_tol:
                warnings.warn(
                    f"{type(self).__name__} did not reach tol={tol:g}: {self.stop_reason_} with "
                    f"residual {rec.residual:.3g}; raise maxiter or tol",
                    ConvergenceWarning,
                    stacklevel=2,
                )
            if self.stop_reason_:
                break
            timer.resume()
        else:
            self.stop_reason_ = self.stop_reason_ or "solver finished"
        self.n_iter_ = iteration
        if stopper.reason:  # a stop asked for ends the fit here
            return
        timer.resume()
        for step in self._finish(X, Y):
            rec = recorder.record(step.iteration, step, timer)
            self.trace_.append(rec)
            yield rec
            timer.resume()
        if self.converged_:
            check_model_not_zero(self, X, Y)

    #: What to change when this solver's iterates diverge, each with its value now (``{name}``:
    #: a parameter or fitted attribute): the advice of :class:`SolverDivergedError`.
    DIVERGENCE_ADVICE: ClassVar[tuple[str, ...]] = (
        "raise penalty (now {penalty!r})",
        "use dtype='float64' (now {dtype!r})",
    )

    def _divergence_advice(self) -> str:
        """'Lower lr_scale (now 4) or raise batch_size (now 1).': the settings that cure a divergence."""
        parts = []
        for template in self.DIVERGENCE_ADVICE:
            try:
                parts.append(template.format(**vars(self)))
            except (KeyError, AttributeError):  # a subclass without that setting
                continue
        if not parts:
            return "Change the solver's settings."
        text = ", ".join(parts[:-1]) + (" or " if len(parts) > 1 else "") + parts[-1]
        return text[0].upper() + text[1:] + "."

    def _set_eval_every(self, default: int) -> None:
        """``eval_every_``: the ``eval_every`` parameter, or the solver's ``default`` when it is None."""
        self.eval_every_ = default if self.eval_every is None else self.eval_every

    def _report_due(self, iteration: int) -> bool:
        """Whether ``iteration`` gets a record: every ``eval_every_`` iterations and at ``maxiter``."""
        return iteration % self.eval_every_ == 0 or iteration == self.maxiter

    def _residual_dtype(self, X) -> torch.dtype:
        """The dtype the reported residual is computed in, which sets the working-precision floor:
        float64 for the solvers whose ``residual`` option is "float64" (ASkotch, Skotch, NystromPCG,
        CG: recomputed in float64 even for float32 solves), else the solve's dtype (FALKON's CG
        residual, the "estimate" modes). A solver evaluating otherwise overrides this."""
        return torch.float64 if self.residual == "float64" else X.dtype

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
        X, Y, recorder = self._start_fit(X, y, X_val, y_val, stop_event=stop_event)
        timer = Timer()
        step = self._solve(X, Y)
        rec = recorder.record(1, step, timer)
        del step  # it may hold the system matrix for its residual
        self.trace_.append(rec)
        self.n_iter_ = 1
        self.converged_ = True
        self.stop_reason_ = "direct solve finished"
        check_model_not_zero(self, X, Y)
        yield rec

    def _solve(self, X, Y) -> Step:
        raise NotImplementedError

    def _solved_system_step(
        self, A: torch.Tensor, b: torch.Tensor, constant: float = 0.0, *, coef: torch.Tensor | None = None
    ) -> Step:
        """The step after solving A coef_ = b (or A ``coef`` = b, when the system solved is in other
        variables than ``coef_``: ExactKRR's weighted form): residual and objective of those
        coefficients in float64 against A as given (without the jitter the factorisation may have
        added), one product with A, evaluated lazily."""

        def evaluate():
            c = (self.coef_ if coef is None else coef).double()
            return residual_and_objective(A @ c, c, b, constant)

        return Step.deferred(evaluate, extras={"residual_kind": "direct solve (float64, system without jitter)"})


NystromCentres = NystromCenters  # former spelling, kept so that code written against it still runs

"""The estimator contract shared by every solver.

* scikit-learn style: ``__init__`` stores parameters untouched; fitted attributes end in ``_``;
  ``fit(X, y, X_val=None, y_val=None)`` takes numpy, pandas or torch; ``predict`` returns the
  same kind of array it was given, and raises ``NotFittedError`` before ``fit``; ``n_features_in_``
  is checked; scikit-learn's own estimator checks pass (tests/core/test_sklearn_contract.py).
* Parameters are declared once, with their constraints (:mod:`krrcore.solvers.params`): those every
  estimator has on :class:`KRRBase`, ``seed`` on :class:`Seeded`, the iterative solvers' runtime
  knobs on :class:`~krrcore.solvers.loops.IterativeKRR`; every subclass is made a dataclass of its parameters, so
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
  The two loops that drain it, iterative and direct, live in :mod:`krrcore.solvers.loops`.
* The checks a fit runs on its input and its answer (one fit per instance at a time, a failed fit
  leaves the model as it was, far offsets, λ against the kernel's scale, a model no better than
  zero) live in :mod:`krrcore.solvers.checks`.
"""

from __future__ import annotations

import copy
import threading
from typing import ClassVar

import torch
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils.validation import check_is_fitted

from .._validation import as_tensor, check_feature_names, check_features, check_sample_weight, check_X_y, feature_names
from ..device import default_device, resolve_dtype
from ..kernels import GaussianKernel, Kernel
from ..memory import warn_if_slow
from ..rows import rows_of
from .params import (
    BOOLEAN,
    CENTERS,
    COUNT,
    DEVICES,
    DTYPES,
    KERNELS,
    MEMORY_BUDGETS,
    PENALTIES,
    ParameterError,
    Seed,
    check_stop_event,
    param,
    parameters,
    resolve_seed,
    validate,
)
from .checks import check_penalty_scale, choose_origin, fit_guard, origin_from_moments
from .records import Recorder, Step, target_scale
from .refusals import UncertaintyError, std_refusal
from .resources import EstimatedResources

__all__ = [
    "KRRBase",
    "Seeded",
    "NystromCenters",
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


@parameters
class KRRBase(EstimatedResources, RegressorMixin, BaseEstimator):
    """Shared parameters, input conversion and prediction from (centres_, coef_).

    Subclasses set ``centers_`` (the points the predictor expands over: X itself for full KRR)
    and ``coef_`` (M×k), and ``d_weights_`` is folded into ``coef_`` already.

    Parameters: ``kernel`` (a :class:`~krrcore.kernels.Kernel`; None: Gaussian of σ = 1),
    ``penalty`` (λ of K + λnI), ``dtype`` ("float64" or "float32"), ``device`` (None: CUDA when
    available, else the CPU), ``memory_budget`` (bytes, or None for krrcore's defaults,
    :mod:`krrcore.memory`), ``fit_intercept`` (an unpenalised offset per output, ``intercept_``:
    for the squared loss the training mean of y, weighted by ``sample_weight``, and the solver fits
    y − ``intercept_``, as scikit-learn's ``Ridge`` centres y; without it a Gaussian model falls to 0
    away from its centres, which on targets of 5,000 ± 700 is an error of 5,000 on every far row.
    :class:`~krrcore.solvers.logistic.LogisticFalkon` fits its offset with the model instead).
    """

    kernel: Kernel | None = param(None, KERNELS, positional=True)
    penalty: float = param(1e-3, PENALTIES, positional=True)
    dtype: str = param("float64", DTYPES)
    device: str | None = param(None, DEVICES)
    memory_budget: int | None = param(None, MEMORY_BUDGETS)
    fit_intercept: bool = param(True, BOOLEAN)

    #: The model's outputs are fitted to y in the squared loss: its offset is y's mean, subtracted
    #: before the solve (``fit_intercept``), and the zero-model check applies.
    _squared_loss: ClassVar[bool] = True

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
                    if self._squared_loss and isinstance(getattr(self, "intercept_", None), torch.Tensor):
                        self.intercept_ = self.intercept_ / self._target_scale
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
        if self._squared_loss:
            Y = self._remove_intercept(Y)
        if isinstance(Y, torch.Tensor):
            recorder.target_scale = self._target_scale = target_scale(Y)
            if self._target_scale != 1.0:
                Y = Y * self._target_scale
                self.intercept_ = self.intercept_ * self._target_scale  # the solver's units, as coef_
        self.trace_ = []
        self.stop_reason_ = ""
        return X, Y, recorder

    def _remove_intercept(self, Y):
        """Y − ``intercept_`` (``fit_intercept``: the column means of Y, weighted by the fit's
        ``_weights``; otherwise 0), in float64 on Y's device; sharded Y is shifted where it lives."""
        k = Y.shape[1]
        if not self.fit_intercept or Y.shape[0] == 0:
            device = Y.device if isinstance(Y, torch.Tensor) else "cpu"
            self.intercept_ = torch.zeros(k, dtype=torch.float64, device=device)
            return Y
        if not isinstance(Y, torch.Tensor):  # rows on a Dask cluster (never weighted)
            self.intercept_ = Y.moments()[0].double()
            return Y.shifted(self.intercept_)
        Y64 = Y.double()
        weights = self._weights
        self.intercept_ = Y64.mean(0) if weights is None else (weights * Y64).sum(0) / weights.sum()
        return (Y64 - self.intercept_).to(Y.dtype)

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

    def _expansion(self, X: torch.Tensor) -> torch.Tensor:
        """Σ_j k(x, c_j) α_j: the model without its offset, what the solver fits to Y − ``intercept_``."""
        return rows_of(self.centers_).expansion(self.centers_, self._fitted_kernel(), X, self.coef_, self.memory_budget)

    def _predict_tensor(self, X: torch.Tensor) -> torch.Tensor:
        out = self._expansion(X)
        intercept = getattr(self, "intercept_", None)  # absent on a model pickled before it existed
        return out if intercept is None else out + intercept.to(out)

    #: Fitted attributes that prediction and a run's summary need; :meth:`compact` keeps only these
    #: (``classes_`` for the classifiers of :mod:`krrcore.solvers.classifiers`).
    _compact_attributes = (
        "centers_",
        "coef_",
        "n_features_in_",
        "feature_names_in_",
        "x_origin_",
        "intercept_",
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


NystromCentres = NystromCenters  # former spelling, kept so that code written against it still runs

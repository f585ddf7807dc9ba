"""The checks a fit runs around itself, on its input and on its answer, shared by every solver.

* :func:`fit_guard` — one thread fits an instance at a time, and a failed fit leaves the estimator
  as it was.
* :func:`choose_origin` — where a translation-invariant kernel measures from when X lies far from 0
  (the expanded distance ‖x‖² + ‖z‖² − 2x·z cancels there).
* :func:`check_penalty_scale` — λn against the kernel's scale in the fit's dtype, before any work.
* :func:`check_model_not_zero` — the fitted model against the zero model on its own training rows.
"""

from __future__ import annotations

import contextlib
import math
import threading
import warnings

import torch

from ..kernels import Kernel
from ..stream import SolverDivergedError
from .params import ParameterError

__all__ = [
    "ConcurrentFitError",
    "ModelWarning",
    "OffsetWarning",
    "PenaltyWarning",
    "check_model_not_zero",
    "check_penalty_scale",
    "choose_origin",
    "origin_from_moments",
    "fit_guard",
]


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
    least 0.97‖y‖ (y less ``intercept_``, f without it: the model against y's mean) means the fit
    is no better than the zero model on the very data it was fitted to — a kernel degenerate on
    these X (PolynomialKernel(degree=30): a few rows of huge norm carry all of K) or a penalty that
    drowns it — whatever the solver's own residual said: ``converged_`` becomes False,
    ``stop_reason_`` says so and a :class:`ModelWarning` names the kernel and penalty."""
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
        outputs = estimator._expansion(X[rows]).double()  # against Y less intercept_: the mean's model
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

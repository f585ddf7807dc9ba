"""The per-iteration stream every solver emits, and how a run is stopped.

A solver's ``iter_fit(...)`` is a generator of :class:`IterationRecord` (a direct solver's yields
exactly one); ``fit`` drains it into ``trace_``. The app, the tests and the benchmarks all read these
records. ``seconds`` counts
solver time only: metric evaluation is timed separately (as ASkotch's plots do), so adding a
validation set never makes a solver look slower.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field


@dataclass
class IterationRecord:
    """One iteration of a solver: plain values only (JSON/CSV friendly)."""

    iteration: int
    seconds: float  # cumulative solver time, excluding evaluation
    residual: float  # the solver's own convergence measure (see `residual_kind`)
    objective: float = math.nan  # training objective, if the solver tracks it
    train_metric: float = math.nan
    val_metric: float = math.nan
    metric: str = ""  # name of train/val metric (e.g. "mse")
    eval_seconds: float = 0.0  # time spent on evaluation for this record
    extras: dict = field(default_factory=dict)

    def as_row(self) -> dict:
        row = asdict(self)
        extras = row.pop("extras")
        row.update({f"x_{k}": v for k, v in extras.items()})
        return row


class SolverDivergedError(RuntimeError):
    """A run diverged (a NaN/inf residual, or one grown by orders of magnitude over its best); the
    message says which, at what iteration, and the settings to change."""


#: A residual this many times the smallest one seen so far, and above the starting point's, means
#: the iterates are moving away from the solution (a step too large for the problem), not noise:
#: converging solvers, accelerated ones included, stay within a few times their best. (Below the
#: start it is not counted: unpreconditioned CG run past its convergence lets a 1e-11 residual
#: drift by orders of magnitude through round-off, to a model still far better than the start.)
DIVERGENCE_FACTOR = 1e4


class Stopper:
    """Stop conditions shared by all iterative solvers.

    * ``stop_event``: a ``threading.Event`` the caller sets (the app's Stop button);
    * ``callback(record) -> bool``: return True to stop;
    * ``timeout``: seconds of solver time.

    and the one rule that says a run diverged (:meth:`divergence`).
    """

    def __init__(self, stop_event: threading.Event | None = None, callback=None, timeout: float | None = None):
        self.stop_event = stop_event
        self.callback = callback
        self.timeout = timeout
        self.reason = ""
        self.best = math.inf  # smallest residual so far, and its iteration
        self.best_iteration = 0
        self.start = math.inf  # the first record's residual (the starting point's)

    def divergence(self, record: IterationRecord, floor: float = 0.0, finite: bool = True) -> str:
        """Why the run diverged at ``record`` ("" if it did not): its residual is NaN or infinite
        (or ``finite`` is False: the iterate is), or above the first record's and more than
        :data:`DIVERGENCE_FACTOR` times the best so far. ``floor`` (the working-precision
        residual) bounds the best from below, so round-off around a converged residual never counts."""
        residual = record.residual
        if not math.isfinite(residual) or not finite:
            return f"diverged at iteration {record.iteration}: the residual became {residual}"
        if self.start == math.inf:
            self.start = residual
        best = max(self.best, floor)
        if residual > DIVERGENCE_FACTOR * best and residual > self.start:
            return (
                f"diverged at iteration {record.iteration}: the residual grew to {residual:.3g}, "
                f"{residual / best:.2g} times its best ({self.best:.3g} at iteration {self.best_iteration})"
            )
        if residual < self.best:
            self.best, self.best_iteration = residual, record.iteration
        return ""

    def should_stop(self, record: IterationRecord) -> bool:
        if self.callback is not None and _asks_to_stop(self.callback, record):
            self.reason = "callback asked to stop"
        elif self.stop_event is not None and self.stop_event.is_set():
            self.reason = "stopped by the user"
        elif self.timeout is not None and record.seconds >= self.timeout:
            self.reason = f"time limit of {self.timeout:g} s reached"
        return bool(self.reason)


def _asks_to_stop(callback, record) -> bool:
    """``callback(record)`` as the yes/no it must be: None or a bool (numpy's included), an int, or a 0-d
    boolean array or tensor; anything else — an array, a string — is refused, since its truth has no one meaning)."""
    answer = callback(record)
    if answer is None or isinstance(answer, (bool, int)) or type(answer).__name__ == "bool_":
        return bool(answer)
    if getattr(answer, "shape", None) == () and str(getattr(answer, "dtype", "")) in ("bool", "torch.bool"):
        return bool(answer)  # a 0-d boolean array or tensor
    raise TypeError(f"callback must return True (stop), False or None, got {type(answer).__name__} {answer!r:.60}")


class Timer:
    """Accumulates solver time between ``pause()``/``resume()`` pairs around evaluations."""

    def __init__(self):
        self.total = 0.0
        self._t0 = time.perf_counter()
        self._running = True

    def pause(self) -> float:
        if self._running:
            self.total += time.perf_counter() - self._t0
            self._running = False
        return self.total

    def resume(self) -> None:
        if not self._running:
            self._t0 = time.perf_counter()
            self._running = True

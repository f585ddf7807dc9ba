"""The per-iteration stream every solver emits, and how a run is stopped.

A solver's ``iter_fit(...)`` is a generator of :class:`IterationRecord` (a direct solver's yields
exactly one); ``fit`` drains it into ``trace_``. The app, the tests and the benchmarks all read these records. ``seconds`` counts
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
    seconds: float                       # cumulative solver time, excluding evaluation
    residual: float                      # the solver's own convergence measure (see `residual_kind`)
    objective: float = math.nan          # training objective, if the solver tracks it
    train_metric: float = math.nan
    val_metric: float = math.nan
    metric: str = ""                     # name of train/val metric (e.g. "mse")
    eval_seconds: float = 0.0            # time spent on evaluation for this record
    extras: dict = field(default_factory=dict)

    def as_row(self) -> dict:
        row = asdict(self)
        extras = row.pop("extras")
        row.update({f"x_{k}": v for k, v in extras.items()})
        return row


class SolverDivergedError(RuntimeError):
    """A run produced NaN/inf or stalled; the message says which and at what iteration."""


class Stopper:
    """Stop conditions shared by all iterative solvers.

    * ``stop_event``: a ``threading.Event`` the caller sets (the app's Stop button);
    * ``callback(record) -> bool``: return True to stop;
    * ``timeout``: seconds of solver time.
    """

    def __init__(self, stop_event: threading.Event | None = None, callback=None, timeout: float | None = None):
        self.stop_event = stop_event
        self.callback = callback
        self.timeout = timeout
        self.reason = ""

    def should_stop(self, record: IterationRecord) -> bool:
        if self.callback is not None and self.callback(record):
            self.reason = "callback asked to stop"
        elif self.stop_event is not None and self.stop_event.is_set():
            self.reason = "stopped by the user"
        elif self.timeout is not None and record.seconds >= self.timeout:
            self.reason = f"time limit of {self.timeout:g} s reached"
        return bool(self.reason)


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

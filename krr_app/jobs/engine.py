"""The executor interface, with the queue every executor keeps, and the executor that runs in this
process (:class:`InProcessExecutor`, for tests whose point is the page rather than the cluster).

The app's engine, :class:`~krr_app.jobs.executor.DaskExecutor`, and the server's one executor
(:func:`~krr_app.jobs.executor.get_executor`) are in :mod:`krr_app.jobs.executor`, whose docstring
says how a run calls back into its :class:`~krr_app.jobs.runs.Run`.
"""

from __future__ import annotations

import concurrent.futures
import math
import os
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict


from krr_app.jobs.worker import StepGate, run_fit


def format_bytes(n_bytes: float) -> str:
    """'1.50 GiB' from a GiB on, '120 MiB' below."""
    return f"{n_bytes / 2**30:.2f} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.0f} MiB"


class Executor(ABC):
    """Runs :class:`~krr_app.jobs.runs.Run` objects somewhere and reports back through their callbacks."""

    def __init__(self):
        self._wall_seconds: list[float] = []  # recent runs, for queue estimates
        self._pending: OrderedDict[str, object] = OrderedDict()  # submitted, not started, in order
        self._computing: set[str] = set()  # started, not finished
        self._lock = threading.Lock()

    @property
    @abstractmethod
    def workers(self) -> int:
        """How many runs compute at once."""

    @property
    @abstractmethod
    def worker_memory_limit(self) -> int | None:
        """Bytes one run may use (a worker's memory limit), None if unknown."""

    @abstractmethod
    def submit(self, run) -> None: ...

    def call(self, fn, /, *args, **kwargs):
        """``fn(*args, **kwargs)`` where the runs execute, waiting for the result (a diagnostic
        page's computation; ``fn`` is a krrcore function, its arguments small)."""
        return self.submit_call(fn, *args, **kwargs).result()

    def submit_call(self, fn, /, *args, **kwargs):
        """Start :meth:`call`'s computation and return at once: a future with ``done()`` and
        ``result()`` (a page draws what is ready and streams the rest in). Here: computed now."""
        future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def submit_first(self, fn, /, *args, **kwargs):
        """:meth:`submit_call` for a page's first picture, which a new visitor waits for: ahead of
        the computations other pages queued before (here: the same)."""
        return self.submit_call(fn, *args, **kwargs)

    @abstractmethod
    def cancel(self, run) -> None:
        """Ask ``run`` to stop: a queued run is dropped, a running one stops after its iteration."""

    def steps(self, run) -> None:
        """Tell a stepped ``run`` how far it may go now (``run.step_limit``: records, or None to run on)."""

    def describe(self) -> str:
        return type(self).__name__

    def admission_problem(self, run) -> str | None:
        """Why ``run`` can never run here (its estimated peak exceeds what one worker may use),
        with the numbers and what to change; None when it fits (it may still wait for a worker)."""
        limit = self.worker_memory_limit
        estimate = run.estimate
        if limit is None or estimate is None or estimate.peak_bytes <= limit:
            return None
        parts = ", ".join(f"{p.name} {format_bytes(p.bytes)}" for p in estimate.dominant_parts())
        advice = estimate.suggestion or "lower n or M, use float32, or choose a solver that stores less"
        return (
            f"Refused before starting: this run needs about {format_bytes(estimate.peak_bytes)} at its peak "
            f"({parts}), and a worker of this server may use {format_bytes(limit)}. {advice[0].upper()}"
            f"{advice[1:]}."
        )

    def healthy(self) -> bool:
        """Whether runs can be sent (the cluster's scheduler answers)."""
        return True

    def close(self) -> None:
        pass

    # -- queue book-keeping shared by the executors ------------------------------------------
    def _queued(self, run) -> None:
        with self._lock:
            self._pending[run.id] = run

    def _left_queue(self, run) -> None:
        with self._lock:
            if self._pending.pop(run.id, None) is not None:
                self._computing.add(run.id)

    def _finished(self, run) -> None:
        with self._lock:
            self._pending.pop(run.id, None)
            self._computing.discard(run.id)
        wall = run.timings.get("wall_seconds", math.nan)
        if math.isfinite(wall):
            with self._lock:
                self._wall_seconds = (self._wall_seconds + [wall])[-20:]

    def queue_position(self, run) -> tuple[int, float | None]:
        """(position among runs waiting for a worker, 1 = next; estimated seconds until it
        starts: the recent runs' mean wall time per turn, or before any run finished krrcore's
        estimate of this run's time (``run.estimate``), None without either). 0 if not queued."""
        with self._lock:
            ids = list(self._pending)
            recent = list(self._wall_seconds)
        if run.id not in ids:
            return 0, None
        position = ids.index(run.id) + 1
        if recent:
            per_run = sum(recent) / len(recent)
        else:
            per_run = None if run.estimate is None else run.estimate.seconds_for(run.config.maxiter or 1)
        if per_run is None:
            return position, None
        return position, math.ceil(position / max(1, self.workers)) * per_run

    def waiting(self) -> int:
        """Runs of this server waiting for a worker."""
        with self._lock:
            return len(self._pending)

    def computing(self) -> int:
        """Runs of this server computing on a worker now."""
        with self._lock:
            return len(self._computing)


class InProcessExecutor(Executor):
    """A thread per run in this process (tests of the pages; no cluster)."""

    @property
    def workers(self) -> int:
        return 1

    @property
    def worker_memory_limit(self) -> int | None:
        return None

    def submit(self, run) -> None:
        self._queued(run)
        threading.Thread(target=self._execute, args=(run,), daemon=True, name=f"krr-run-{run.id}").start()

    def _execute(self, run) -> None:
        self._left_queue(run)
        run._started("in-process", os.getpid())
        steps = StepGate(lambda: run.step_limit) if run.stepped else None
        outcome = run_fit(
            run.spec(), emit=run._append, on_frame=run._frame, steps=steps, stop_event=run.stop_event, dataset=run.data
        )
        run._complete(outcome)
        self._finished(run)

    def cancel(self, run) -> None:
        run.stop_event.set()

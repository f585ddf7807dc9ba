"""Solver runs off the script thread: the run object, the per-session registry and the global cap.

How a run flows
---------------
1. The page builds a :class:`~krr_app.config.RunConfig` and calls ``registry.start(config, data)``.
2. The session's worker thread (one per browser session, see :class:`RunRegistry`) takes runs in
   order, waits for one of the server-wide solver slots (:data:`MAX_CONCURRENT_RUNS`), then
   drains ``estimator.iter_fit(...)`` and appends each :class:`~krrcore.stream.IterationRecord`
   to the :class:`Run`. It never calls ``st.*``: everything it produces is plain data on the run.
3. The page polls the run from an ``@st.fragment(run_every=...)`` while it is active, and shows
   the finished run (records, metrics, fitted model) afterwards. A finished run stays in the
   registry under its config, so going back to a configuration already run is instant.
4. Stop sets the run's ``threading.Event``; iterative solvers check it after every iteration.
   Closing the tab releases the session's registry (``st.cache_resource(scope="session",
   on_release=...)``), which stops all of the session's runs.

Why one worker per session, not one thread per run: a session's runs (Compare's batch, say)
execute one after another, so their "seconds" axes are not distorted by each other on 2 cores.
The server-wide semaphore is the seam for multi-user deployments: at most
``MAX_CONCURRENT_RUNS`` solvers compute at once, whatever the number of open tabs; others queue
(and can still be stopped while queued).
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
import uuid
from collections import OrderedDict, deque

from krrcore.kernels import make_kernel
from krrcore.metrics import evaluate
from krrcore.registry import get_solver
from krrcore.stream import IterationRecord, SolverDivergedError

from .config import RunConfig
from .settings import MAX_RUNS_PER_SESSION

log = logging.getLogger(__name__)

#: Solvers computing at once on this server (all sessions together). Env: KRR_MAX_CONCURRENT_RUNS.
MAX_CONCURRENT_RUNS = max(1, int(os.environ.get("KRR_MAX_CONCURRENT_RUNS", "2")))
_RUN_SLOTS = threading.BoundedSemaphore(MAX_CONCURRENT_RUNS)
_computing = 0                      # runs holding a slot right now (all sessions)
_computing_lock = threading.Lock()
#: How often a queued run re-checks its stop event while waiting for a slot (seconds).
_SLOT_POLL = 0.2

ACTIVE, FINISHED = ("queued", "running"), ("done", "stopped", "error")


def computing_runs() -> int:
    """How many solvers compute on this server right now (all sessions; at most MAX_CONCURRENT_RUNS)."""
    return _computing


def _count_computing(delta: int) -> None:
    global _computing
    with _computing_lock:
        _computing += delta


class Run:
    """One solver run: plain, thread-safe state written by the worker and read by the page.

    ``records`` is a list of IterationRecord; ``status`` one of queued, running, done, stopped,
    error; ``message`` the solver's stop reason or the error text; ``metrics`` the final train and
    test metrics; ``timings`` wall/solver/evaluation seconds; ``peak_memory_bytes`` the peak growth
    of the process's resident memory during the run (process-wide: a rough, honest upper bound).
    """

    def __init__(self, config: RunConfig, data=None):
        self.config = config
        self.data = data            # the Dataset it runs on (shared, read-only)
        self.id = uuid.uuid4().hex[:8]
        self.created = time.time()
        self.stop_event = threading.Event()
        self.finished_event = threading.Event()
        self._lock = threading.Lock()
        self._records: list[IterationRecord] = []
        self.status = "queued"
        self.message = ""
        self.estimator = None
        self.metrics: dict[str, float] = {}
        self.timings: dict[str, float] = {}
        self.peak_memory_bytes: int | None = None
        self.cache: dict = {}       # page-side derived data (e.g. the decision-surface grid)

    # -- read side (page) ------------------------------------------------------------------
    @property
    def records(self) -> list[IterationRecord]:
        with self._lock:
            return list(self._records)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def label(self) -> str:
        return self.config.label()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run finished (for tests and scripts; the page polls instead)."""
        return self.finished_event.wait(timeout)

    def stop(self) -> None:
        self.stop_event.set()

    # -- write side (worker) ---------------------------------------------------------------
    def _append(self, record: IterationRecord) -> None:
        with self._lock:
            self._records.append(record)

    def _finish(self, status: str, message: str = "") -> None:
        with self._lock:
            self.status = status
            self.message = message
        self.finished_event.set()


def _rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; 0 where unavailable)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class _PeakMemory:
    """Samples the process's resident memory every 20 ms while a run computes; reports the peak
    growth over the start. Process-wide, so concurrent runs inflate it: shown as an upper bound."""

    def __init__(self, interval: float = 0.02):
        self.interval = interval
        self.start = self.peak = 0
        self._done = threading.Event()

    def __enter__(self):
        self.start = self.peak = _rss_bytes()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="krr-memory-sampler")
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.wait(self.interval):
            self.peak = max(self.peak, _rss_bytes())

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())

    @property
    def growth(self) -> int:
        return max(0, self.peak - self.start)


def build_estimator(config: RunConfig):
    """The krrcore estimator for a configuration (the same call the reproduce snippet shows)."""
    kernel = make_kernel(config.kernel, **config.kernel_kwargs())
    return get_solver(config.solver).make(kernel=kernel, **config.estimator_kwargs())


def fit_records(estimator, data, stop_event: threading.Event):
    """IterationRecords of fitting ``estimator`` on ``data``, the test split as validation data.

    Every krrcore solver streams ``iter_fit`` (a direct solver yields a single record), so there is
    no special case here.
    """
    return estimator.iter_fit(data.X_train, data.y_train, data.X_test, data.y_test, stop_event=stop_event)


def final_metrics(estimator, data) -> dict[str, float]:
    """Train and test metrics of the fitted model; regression errors in the target's own units."""
    out = {}
    for split, X, y in (("test", data.X_test, data.y_test), ("train", data.X_train, data.y_train)):
        pred = estimator.predict(X)
        scores = evaluate(data.task, data.to_original_units(y), data.to_original_units(pred))
        out.update({f"{split}_{k}": v for k, v in scores.items()})
    return out


def execute(run: Run) -> None:
    """Run ``run`` to completion on this thread. Never raises, never calls Streamlit."""
    data = run.data
    if run.stop_event.is_set():
        run._finish("stopped", "stopped before it started")
        return
    while not _RUN_SLOTS.acquire(timeout=_SLOT_POLL):
        if run.stop_event.is_set():
            run._finish("stopped", "stopped while waiting for a free solver slot")
            return
    wall = time.perf_counter()
    _count_computing(+1)
    try:
        run.status = "running"
        with _PeakMemory() as memory:
            try:
                run.estimator = build_estimator(run.config)
                for record in fit_records(run.estimator, data, run.stop_event):
                    run._append(record)
                run.metrics = final_metrics(run.estimator, data)
            finally:
                run.peak_memory_bytes = memory.growth if memory.peak else None
                records = run.records
                run.timings = {
                    "wall_seconds": time.perf_counter() - wall,
                    "solver_seconds": records[-1].seconds if records else math.nan,
                    "eval_seconds": sum(r.eval_seconds for r in records),
                }
        reason = getattr(run.estimator, "stop_reason_", "") or "finished"
        stopped = run.stop_event.is_set() and run.config.info.iterative
        run._finish("stopped" if stopped else "done", reason)
    except SolverDivergedError as exc:
        run._finish("error", f"The solver diverged: {exc}. Try a larger λ, float64, or fewer iterations.")
    except (ValueError, ImportError) as exc:
        run._finish("error", str(exc))
    except MemoryError:
        run._finish("error", "Out of memory: lower n or M, or set a smaller memory budget.")
    except Exception as exc:  # a worker must never die silently: the page shows what happened
        log.exception("run %s (%s) failed", run.id, run.label)
        run._finish("error", f"{type(exc).__name__}: {exc}")
    finally:
        _count_computing(-1)
        _RUN_SLOTS.release()


class RunRegistry:
    """The runs of one browser session: keyed by config, bounded, executed one at a time in order.

    The page gets it from :func:`krr_app.state.session_runs` (a session-scoped
    ``st.cache_resource`` whose ``on_release`` calls :meth:`close` when the tab closes).
    """

    def __init__(self, max_runs: int = MAX_RUNS_PER_SESSION):
        self.max_runs = max_runs
        self._runs: OrderedDict[RunConfig, Run] = OrderedDict()
        self._queue: deque[Run] = deque()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self.closed = False

    def get(self, config: RunConfig) -> Run | None:
        with self._lock:
            return self._runs.get(config)

    def runs(self) -> list[Run]:
        """All kept runs, oldest first."""
        with self._lock:
            return list(self._runs.values())

    def by_id(self, run_id: str) -> Run | None:
        return next((r for r in self.runs() if r.id == run_id), None)

    def start(self, config: RunConfig, data) -> Run:
        """Queue a fresh run of ``config`` (an active run of the same config is returned as is)."""
        with self._lock:
            if self.closed:
                raise RuntimeError("this session has ended")
            current = self._runs.get(config)
            if current is not None and current.active:
                return current
            run = Run(config, data)
            self._runs.pop(config, None)
            self._runs[config] = run
            self._evict()
            self._queue.append(run)
            if self._worker is None:
                self._worker = threading.Thread(target=self._drain, daemon=True, name="krr-session-runs")
                self._worker.start()
            return run

    def remove(self, run_ids) -> None:
        """Forget runs (stopping those still active)."""
        ids = set(run_ids)
        with self._lock:
            for config, run in list(self._runs.items()):
                if run.id in ids:
                    run.stop()
                    del self._runs[config]

    def active(self) -> list[Run]:
        return [r for r in self.runs() if r.active]

    def close(self) -> None:
        """Stop every run of this session (the tab closed)."""
        with self._lock:
            self.closed = True
            runs = list(self._runs.values()) + list(self._queue)
        for run in runs:
            run.stop()

    def _evict(self) -> None:
        finished = [c for c, r in self._runs.items() if not r.active]
        for config in finished[: max(0, len(self._runs) - self.max_runs)]:
            del self._runs[config]

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._worker = None
                    return
                run = self._queue.popleft()
            execute(run)

"""A session's runs: the run object the pages read, and the per-session registry.

How a run flows
---------------
1. The page builds a :class:`~krr_app.jobs.config.RunConfig` and calls ``registry.start(config, data)``.
2. The registry hands the run to the server's executor (:mod:`krr_app.jobs.executor`: Dask workers by
   default) as soon as the session has fewer than ``SESSION_MAX_ACTIVE`` runs there; later runs
   of the session wait their turn in the session, in order. A run whose estimated peak memory
   (krrcore's ``memory_estimate``) exceeds what one worker may use is refused with the numbers.
3. The executor streams each :class:`~krrcore.stream.IterationRecord` into the run and finally
   completes it with a :class:`~krr_app.jobs.worker.FitOutcome`: trace, metrics, timings, the worker's
   peak memory, the compact model and the fit chart's grid. Nothing O(n²) or O(nM) comes back.
4. While it is active the page's live chart asks the server for new records
   (:mod:`krr_app.jobs.live_api`) and reruns the page once when it ends. Stop, a new
   Run on Explore, and closing the tab (``st.cache_resource(scope="session", on_release=...)``)
   cancel it: a queued run is dropped, a running one stops after its current iteration. A closed
   tab's runs first wait ``RELOAD_GRACE_SECONDS`` in :data:`HANDOVER`: a reload is a new session,
   and its link's ``?run=`` id reconnects it to them (:meth:`Handover.claim`).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict, deque

from krrcore.stream import IterationRecord
from krr_app.jobs import live_api
from krr_app.jobs.config import RunConfig
from krr_app.jobs.executor import ClusterUnavailable, get_executor, started_executor
from krr_app.jobs.surface import SurfaceFrame
from krr_app.settings import MAX_RUNS_PER_SESSION, RELOAD_GRACE_SECONDS, SESSION_MAX_ACTIVE

ACTIVE, FINISHED = ("queued", "running"), ("done", "stopped", "error")


class Run:
    """One solver run: plain, thread-safe state written by the executor and read by the page.

    ``records`` is a list of IterationRecord; ``status`` one of queued, running, done, stopped,
    error; ``message`` the solver's stop reason or the error text; ``metrics`` the final train and
    test metrics; ``timings`` wall/solver/evaluation seconds; ``peak_memory_bytes`` the growth of
    the worker's resident memory during the run (a worker runs one run at a time); ``estimator``
    the compact fitted model; ``surface`` the fit chart's predictions (1-D/2-D data) with the
    pictures kept while it was fitted; ``frame`` the latest picture of the model
    (:class:`krr_app.jobs.surface.SurfaceFrame`, streamed while the run computes, the final one after).
    """

    def __init__(self, config: RunConfig, data=None, *, stepped: bool = False):
        self.config = config
        self.data = data  # the page's Dataset (task, units, points for the charts)
        self.id = uuid.uuid4().hex[:12]
        self.created = time.time()
        self.started = self.ended = None
        self.worker = ""
        self.worker_pid: int | None = None
        self.waiting_in_session = False  # behind this session's earlier run (see RunRegistry)
        self.stop_event = threading.Event()
        self.finished_event = threading.Event()
        self._lock = threading.Lock()
        self._records: list[IterationRecord] = []
        self._on_finish: list = []
        self._stopper = None  # the registry's cancel (set when the run is registered)
        self._requeue = None  # the registry's requeue: a cluster lost it before it started
        self.requeued = False  # it was (once only)
        self._executor = None  # where it was submitted (Step and Run reach it there)
        self.status = "queued"
        self.message = ""
        self.estimator = None
        self.surface = None
        self.frame = None
        # A stepped run (Step) pauses after its record number step_limit (from 0) until Step allows
        # one more or Run lets it go on (None).
        self.stepped = stepped
        self.step_limit: int | None = 1 if stepped else None
        self.metrics: dict[str, float] = {}
        self.timings: dict[str, float] = {}
        self.peak_memory_bytes: float | None = None
        self.cache: dict = {}  # page-side derived data (e.g. the fit figure)
        # What the run will hold and take (krrcore's estimate, from the parameters alone).
        self.estimate = config.memory_estimate(data) if data is not None else None

    def spec(self):
        spec = self.config.fit_spec(self.id)
        return spec.reporting_every_iteration() if self.stepped else spec

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

    @property
    def queue_seconds(self) -> float | None:
        """Seconds between Run and a worker starting it (None while queued or if it never started)."""
        return None if self.started is None else self.started - self.created

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run finished (for tests and scripts; the page polls instead)."""
        return self.finished_event.wait(timeout)

    @property
    def paused(self) -> bool:
        """A stepped run waiting for Step or Run (its records reached its step limit)."""
        limit = self.step_limit
        return self.active and limit is not None and len(self.records) > limit

    def step(self) -> None:
        """A stepped run: one more record (one iteration: a stepped run reports every one), then
        pause again. A run started by Run is not stepped and goes on."""
        with self._lock:
            if self.step_limit is None:
                return
            self.step_limit += 1
        self._steps_changed()

    def resume(self) -> None:
        """A paused run goes on to its end (Run)."""
        with self._lock:
            self.step_limit = None
        self._steps_changed()

    def _steps_changed(self) -> None:
        if self.active and self._executor is not None:
            self._executor.steps(self)

    def stop(self) -> None:
        self.stop_event.set()
        if self.active and self._stopper is not None:
            self._stopper(self)

    # -- write side (executor) -------------------------------------------------------------
    def _started(self, worker: str, pid: int | None = None) -> None:
        with self._lock:
            if self.status == "queued":
                self.status, self.started, self.worker, self.worker_pid = "running", time.time(), worker, pid

    def _append(self, record: IterationRecord) -> None:
        with self._lock:
            if self.status in ACTIVE:
                self._records.append(record)

    def _frame(self, frame) -> None:
        """A newer picture of the model (an older one, arriving late, is ignored)."""
        with self._lock:
            if self.status in ACTIVE and (self.frame is None or frame.iteration > self.frame.iteration):
                self.frame = frame

    def _complete(self, outcome) -> None:
        """The worker's outcome: its trace is authoritative (a streamed record may still be in flight)."""
        with self._lock:
            self._records = list(outcome.trace)
            self.metrics, self.timings = outcome.metrics, outcome.timings
            self.peak_memory_bytes = outcome.peak_memory_bytes
            self.estimator, self.surface = outcome.model, outcome.surface
            if outcome.surface is not None and self._records:
                self.frame = SurfaceFrame(self._records[-1].iteration, outcome.surface.values.astype("float32"), 0.0)
            self.worker = outcome.worker or self.worker
        self._finish(outcome.status, outcome.message)

    def _fail(self, message: str, status: str = "error") -> None:
        self._finish(status, message)

    def _finish(self, status: str, message: str = "") -> None:
        with self._lock:
            if self.finished_event.is_set():
                return
            self.status, self.message, self.ended = status, message, time.time()
            callbacks = list(self._on_finish)
        self.finished_event.set()
        for callback in callbacks:
            callback(self)


class RunRegistry:
    """The runs of one browser session: keyed by config, bounded, at most ``max_active`` on the
    cluster at once, the rest waiting here in order.

    The page gets it from :func:`krr_app.parts.state.session_runs` (a session-scoped
    ``st.cache_resource`` whose ``on_release`` calls :meth:`close` when the tab closes).
    """

    def __init__(self, max_runs: int = MAX_RUNS_PER_SESSION, max_active: int = SESSION_MAX_ACTIVE):
        self.max_runs = max_runs
        self.max_active = max_active
        self._runs: OrderedDict[RunConfig, Run] = OrderedDict()
        self._waiting: deque[Run] = deque()
        self._dispatched: set[str] = set()
        self._lock = threading.Lock()
        self.dropped: list[str] = []  # labels of finished runs dropped to stay within max_runs
        self.closed = False

    def get(self, config: RunConfig) -> Run | None:
        with self._lock:
            return self._runs.get(config)

    def runs(self) -> list[Run]:
        """All kept runs, oldest first."""
        with self._lock:
            return list(self._runs.values())

    def start(self, config: RunConfig, data, *, stepped: bool = False) -> Run:
        """Queue a fresh run of ``config`` (an active run of the same config is returned as is);
        ``stepped``: it pauses after its first iteration (:meth:`Run.step`, :meth:`Run.resume`)."""
        with self._lock:
            if self.closed:
                raise RuntimeError("this session has ended")
            current = self._runs.get(config)
            if current is not None and current.active:
                return current
            run = Run(config, data, stepped=stepped)
            live_api.publish(run)  # the live chart asks for its records by id
            run._on_finish.append(self._on_finish)
            run._stopper = self._cancel
            run._requeue = self._requeue
            self._runs.pop(config, None)
            self._runs[config] = run
            self._evict()
            run.waiting_in_session = True
            self._waiting.append(run)
        self._dispatch()
        return run

    def position(self, run: Run) -> int:
        """1-based place of ``run`` among this session's runs waiting for their turn (0: not waiting)."""
        with self._lock:
            ids = [r.id for r in self._waiting]
        return ids.index(run.id) + 1 if run.id in ids else 0

    def remove(self, run_ids) -> None:
        """Forget runs (stopping those still active)."""
        ids = set(run_ids)
        with self._lock:
            doomed = [(c, r) for c, r in self._runs.items() if r.id in ids]
            for config, _ in doomed:
                del self._runs[config]
        for _, run in doomed:
            self._cancel(run)

    def active(self) -> list[Run]:
        return [r for r in self.runs() if r.active]

    def ids(self) -> set[str]:
        with self._lock:
            return {r.id for r in self._runs.values()}

    def release(self, grace: float = RELOAD_GRACE_SECONDS) -> None:
        """The tab closed: its runs go on for ``grace`` seconds, for a reload to claim them
        (:data:`HANDOVER`); unclaimed, they are stopped (:meth:`close`)."""
        if grace > 0 and self.runs():
            HANDOVER.hold(self, grace)
        else:
            self.close()

    def close(self) -> None:
        """Stop every run of this session (the tab closed for good)."""
        with self._lock:
            self.closed = True
            runs = list(self._runs.values())
        for run in runs:
            self._cancel(run)

    def _cancel(self, run: Run) -> None:
        with self._lock:
            waiting = run in self._waiting
            if waiting:
                self._waiting.remove(run)
        run.stop_event.set()
        executor = started_executor()  # never get_executor(): a tab closing must not wait for a cluster
        if waiting:
            run._fail("stopped before it started", status="stopped")
        elif run.active and executor is not None:
            executor.cancel(run)
        elif run.active:  # handed to a dispatcher still waiting for the cluster
            run._fail("stopped before it started", status="stopped")

    def _requeue(self, run: Run) -> None:
        """``run`` was lost with its cluster before a worker started it: nothing of it was computed,
        so it goes back to the front of this session's line, for the next (fresh) cluster."""
        with self._lock:
            self._dispatched.discard(run.id)
            closed = self.closed
            if not closed:
                run._executor, run.waiting_in_session = None, True
                self._waiting.appendleft(run)
        if closed:
            run._fail("stopped before it started", status="stopped")
            return
        self._dispatch()

    def _evict(self) -> None:
        finished = [c for c, r in self._runs.items() if not r.active]
        for config in finished[: max(0, len(self._runs) - self.max_runs)]:
            self.dropped.append(self._runs.pop(config).label)

    def _on_finish(self, run: Run) -> None:
        with self._lock:
            self._dispatched.discard(run.id)
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand waiting runs to the executor while this session is under its cap. While the
        executor is starting (the embedded cluster's first seconds, or a fresh one after its
        scheduler stopped), that happens on a thread of its own, so the page never waits for
        the cluster."""
        executor = started_executor()
        if executor is None or not executor.healthy():
            threading.Thread(target=self._dispatch_now, daemon=True, name="krr-dispatch").start()
        else:
            self._dispatch_now()

    def _dispatch_now(self) -> None:
        while True:
            with self._lock:
                if self.closed or not self._waiting or len(self._dispatched) >= self.max_active:
                    return
                run = self._waiting.popleft()
                run.waiting_in_session = False
                self._dispatched.add(run.id)
            try:
                executor = get_executor()
            except ClusterUnavailable as exc:
                run._fail(f"Runs cannot start: {exc}.")
                continue
            except Exception as exc:  # the cluster could not be started or reached
                run._fail(
                    f"Runs cannot start: no Dask cluster ({type(exc).__name__}: {exc}). "
                    "Check KRR_DASK_SCHEDULER, or unset it to use the embedded cluster."
                )
                continue
            refusal = executor.admission_problem(run)
            if run.stop_event.is_set():  # stopped (its tab closed) while the cluster started
                run._fail("stopped before it started", status="stopped")
            elif refusal:
                run._fail(refusal)
            else:
                run._executor = executor
                executor.submit(run)


class Handover:
    """The runs of closed tabs, each tab's registry kept ``grace`` seconds for a reload.

    A reload opens a new session on the same link; the link's ``?run=`` names a run of the old
    one, and :meth:`claim` hands that session's whole registry (every run, finished or not) to
    the new one. A registry nobody claims in time is closed: its runs stop. What became of a
    run id is remembered (bounded), so a late reload can say it in words."""

    REMEMBERED = 512

    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict[int, tuple[RunRegistry, threading.Timer]] = {}
        self._fates: OrderedDict[str, str] = OrderedDict()

    def hold(self, registry: RunRegistry, grace: float) -> None:
        timer = threading.Timer(grace, self._expire, (id(registry), grace))
        timer.daemon = True
        with self._lock:
            self._held[id(registry)] = (registry, timer)
        timer.start()

    def claim(self, run_id: str) -> RunRegistry | None:
        """The held registry holding run ``run_id``, now the caller's (None: no held tab has it)."""
        with self._lock:
            for key, (registry, timer) in list(self._held.items()):
                if run_id in registry.ids():
                    timer.cancel()
                    del self._held[key]
                    return registry
        return None

    def fate(self, run_id: str) -> str | None:
        """What happened to ``run_id`` if its tab's grace ran out (None when not known here)."""
        with self._lock:
            return self._fates.get(run_id)

    def _expire(self, key: int, grace: float) -> None:
        with self._lock:
            held = self._held.pop(key, None)
        if held is None:
            return
        registry = held[0]
        for run in registry.runs():
            if run.active:
                last = run.records[-1].iteration if run.records else None
                fate = f"stopped {grace:g} s after its tab was closed" + (
                    f", after iteration {last}" if last is not None else ", before its first iteration"
                )
            else:
                fate = (
                    f"over ({run.status}) before its tab was closed, and its result was kept {grace:g} s for a reload"
                )
            with self._lock:
                self._fates[run.id] = fate
                while len(self._fates) > self.REMEMBERED:
                    self._fates.popitem(last=False)
        registry.close()


#: The server's closed tabs, waiting for a reload.
HANDOVER = Handover()

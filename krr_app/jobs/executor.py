"""Where runs execute: the executor seam between the pages' runs and the workers.

:class:`DaskExecutor` is the app's engine: each run is one Dask task (:func:`krr_app.jobs.worker.dask_fit_task`)
on the embedded cluster or on the scheduler named by ``KRR_DASK_SCHEDULER``
(:func:`krrcore.distributed.connect`). Records stream back as worker events, Stop travels as a
``distributed.Event``, and the scheduler hands tasks to workers in submission order, one per
single-threaded worker: first come, first served, with no scheduler of our own.
:class:`~krr_app.jobs.engine.InProcessExecutor` runs the same :func:`krr_app.jobs.worker.run_fit` on a
thread of this process, for tests whose point is the page rather than the cluster; the interface both
implement, and the queue they share, is :class:`~krr_app.jobs.engine.Executor`.

Both call back into the :class:`~krr_app.jobs.runs.Run`: ``_started(worker)``, ``_append(record)``,
``_frame(picture)``, ``_complete(outcome)`` or ``_fail(message)``; none of them calls Streamlit. A
stepped run (the app's Step) reads ``run.step_limit`` through :meth:`Executor.steps`.

A scheduler that stops costs the runs computing on it, each with a message, and nothing else: a
run it held that no worker had started goes back to its tab's line (``DaskExecutor._requeued``),
the pages read the workers' description the executor last saw (never a call that waits for a dead
scheduler), and :func:`get_executor` replaces a stopped embedded cluster with a fresh one for the
next run, or, for an external scheduler, says that it is unreachable and where.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import math
import threading
import time
from collections import OrderedDict
from concurrent.futures import CancelledError

from krrcore.distributed import ClusterUnavailable
from krrcore.stream import IterationRecord

from krr_app import settings
from krr_app.jobs.engine import Executor, InProcessExecutor, format_bytes  # noqa: F401  (re-exported)
from krr_app.jobs.worker import RECORDS_TOPIC, dask_fit_task, frame_from_message, steps_name, stop_event_name

log = logging.getLogger(__name__)

#: Uploaded tables kept scattered on the cluster (by digest), oldest dropped first.
MAX_SCATTERED_TABLES = 8
#: Seconds the workers' description (how many, their memory limit) is reused before the scheduler
#: is asked again: the pages read it on every script run.
WORKER_INFO_SECONDS = 5.0


class DaskExecutor(Executor):
    """Runs as Dask tasks (see the module docstring)."""

    def __init__(self, connection):
        super().__init__()
        self.connection = connection
        self.client = connection.client
        self._futures: dict[str, object] = {}
        self._runs: dict[str, object] = {}
        self._tables: OrderedDict[str, object] = OrderedDict()
        self._worker_info: dict[str, dict] = {}
        self._worker_info_at = -math.inf
        self.client.subscribe_topic(RECORDS_TOPIC, self._on_event)
        self._workers_info()

    @classmethod
    def connect(cls, address: str | None = None) -> "DaskExecutor":
        from krrcore.distributed import LocalClusterShape, connect

        from krr_app.jobs.preload import PRELOAD

        shape = None if address else LocalClusterShape.for_this_machine(settings.DASK_WORKERS, settings.WORKER_THREADS)
        return cls(connect(address, shape=shape, preload=PRELOAD))

    def describe(self) -> str:
        kind = "embedded local cluster" if self.connection.embedded else "Dask scheduler"
        return f"{kind} at {self.connection.address}, {self.workers} worker{'s' if self.workers != 1 else ''}"

    def healthy(self) -> bool:
        return self.connection.alive()

    def _workers_info(self) -> dict[str, dict]:
        """The workers (address → nthreads, memory_limit, ...), asked of the scheduler at most every
        WORKER_INFO_SECONDS; while it does not answer, what it said last."""
        now = time.monotonic()
        if now - self._worker_info_at > WORKER_INFO_SECONDS:
            self._worker_info_at = now
            try:
                self._worker_info = self.connection.workers()
            except ClusterUnavailable:
                pass
        return self._worker_info

    @property
    def workers(self) -> int:
        return max(1, sum(w.get("nthreads", 1) for w in self._workers_info().values()))

    @property
    def worker_memory_limit(self) -> int | None:
        limits = [w.get("memory_limit") or 0 for w in self._workers_info().values()]
        return max(limits) if limits and max(limits) > 0 else None

    def _table_name(self, run) -> str | None:
        """The published name of the run's uploaded table on the cluster (scattered once per
        digest, and again if the worker holding it died), None for built-in data."""
        ref = run.config.data
        if ref.csv_digest is None:
            return None
        # one table per file and preprocessing choice (target, roles, missing-value rule, rows used)
        name = f"krr-table-{hashlib.sha256(repr(ref).encode()).hexdigest()[:32]}"
        with self._lock:
            future = self._tables.get(name)
        if future is None or future.status != "finished":
            future = self.client.scatter(run.data.arrays_only(), hash=False)
            self.client.publish_dataset(future, name=name, override=True)
            with self._lock:
                self._tables[name] = future
                evicted = []
                while len(self._tables) > MAX_SCATTERED_TABLES:
                    evicted.append(self._tables.popitem(last=False)[0])
            for old in evicted:
                self.client.unpublish_dataset(old)
        return name

    def submit(self, run) -> None:
        with self._lock:
            self._runs[run.id] = run
        self._queued(run)
        try:
            if run.stepped:
                self.steps(run)
            future = self.client.submit(
                dask_fit_task,
                run.spec(),
                self._table_name(run),
                run.stepped,
                key=f"krr-run-{run.id}",
                pure=False,
                retries=0,
            )
        except Exception as exc:
            self._forget(run)
            run._fail(f"Could not reach the cluster ({self.describe()}): {exc}")
            return
        with self._lock:
            self._futures[run.id] = future
        future.add_done_callback(self._on_done)

    #: Dask priority of a diagnostic page's computation: ahead of queued solver runs, as a person
    #: is waiting for it and it takes seconds, not minutes.
    CALL_PRIORITY = 10

    #: Dask priority of a page's first picture: ahead of the sections other visitors' pages queued.
    FIRST_PICTURE_PRIORITY = 20

    def submit_call(self, fn, /, *args, **kwargs):
        return self._submit(fn, args, kwargs, self.CALL_PRIORITY)

    def submit_first(self, fn, /, *args, **kwargs):
        return self._submit(fn, args, kwargs, self.FIRST_PICTURE_PRIORITY)

    def _submit(self, fn, args, kwargs, priority: int):
        if not self.healthy():
            raise self.connection.unavailable()
        return self.client.submit(fn, *args, **kwargs, pure=False, priority=priority)

    def steps(self, run) -> None:
        from distributed import Variable

        if not self.healthy():
            return  # the scheduler is gone: the run ends with its own message
        Variable(steps_name(run.id), client=self.client).set(run.step_limit)

    def cancel(self, run) -> None:
        run.stop_event.set()
        with self._lock:
            future = self._futures.get(run.id)
            queued = run.id in self._pending
        if future is None:
            return
        if not self.healthy():
            return  # the scheduler is gone: the run ends with its own message
        if queued:
            future.cancel()  # not started: the scheduler forgets it
        else:
            from distributed import Event

            Event(stop_event_name(run.id), client=self.client).set()

    # -- callbacks (client event loop / callback thread) --------------------------------------
    def _on_event(self, event) -> None:
        _, message = event
        run = self._runs.get(message.get("run"))
        if run is None:
            return
        if message["kind"] == "started":
            self._left_queue(run)
            run._started(message.get("worker", ""), message.get("pid"))
        elif message["kind"] == "records":
            for row in message["records"]:
                run._append(IterationRecord(**row))
        elif message["kind"] == "frame":
            run._frame(frame_from_message(message))

    def _on_done(self, future) -> None:
        run_id = future.key.removeprefix("krr-run-")
        run = self._runs.get(run_id)
        if run is None:
            return
        if future.cancelled() and self._requeued(run):
            return
        try:
            if _lost_scheduler(future):
                run._fail(self._explain_lost_scheduler())
            elif future.cancelled():
                run._fail("stopped while waiting for a worker", status="stopped")
            else:
                run._complete(future.result())
        except Exception as exc:
            run._fail(self._explain_failure(exc))
        finally:
            self._forget(run)
            self._release_stop_event(run_id)

    def _explain_failure(self, exc: BaseException) -> str:
        from distributed.scheduler import KilledWorker

        if isinstance(exc, KilledWorker):
            limit = self.worker_memory_limit
            memory = f" (a worker may use {limit / 2**30:.1f} GiB)" if limit else ""
            return (
                "The worker running this run stopped — killed, or out of memory" + memory + ". The cluster "
                "started a replacement and other runs were not affected: press Run to try again, or lower "
                "n or M, or use float32."
            )
        log.warning("run failed on the cluster: %r", exc)
        return f"The cluster could not complete this run: {type(exc).__name__}: {exc}"

    def _explain_lost_scheduler(self) -> str:
        if self.connection.embedded:
            return (
                f"The embedded Dask cluster's scheduler ({self.connection.address}) stopped during this run, and "
                f"the run with it. A fresh cluster starts for the next run: press Run to try again."
            )
        return (
            f"The Dask scheduler at {self.connection.address} went away during this run, and the run with it. "
            f"Start the scheduler again (or point KRR_DASK_SCHEDULER at a running one) and press Run."
        )

    def _release_stop_event(self, run_id: str) -> None:
        from distributed import Event, Variable

        if not self.healthy():
            return
        try:
            Event(stop_event_name(run_id), client=self.client).clear()
            Variable(steps_name(run_id), client=self.client).delete()
        except Exception:  # the scheduler is gone (server shutting down): nothing to release
            pass

    def _forget(self, run) -> None:
        self._finished(run)
        with self._lock:
            self._futures.pop(run.id, None)
            self._runs.pop(run.id, None)

    def abandon(self) -> None:
        """Fail every run this executor still holds (its scheduler stopped, and they with it): the
        client may not have told them yet, and will not once it is closed."""
        with self._lock:
            runs = list(self._runs.values())
        for run in runs:
            if not self._requeued(run):
                run._fail(self._explain_lost_scheduler())
                self._forget(run)

    def _requeued(self, run) -> bool:
        """Hand ``run`` back to its session if the scheduler went away before any worker started it
        (nothing was computed, so it waits for the fresh cluster rather than failing); once only."""
        if run.status != "queued" or run.stop_event.is_set() or self.healthy() or run._requeue is None or run.requeued:
            return False
        run.requeued = True
        log.info("run %s was lost with its scheduler before it started: queued again", run.id)
        self._forget(run)
        run._requeue(run)
        return True

    def close(self) -> None:
        self.connection.close()


def cluster_failure(exc: BaseException) -> ClusterUnavailable | None:
    """``exc`` as the cluster's failure, not the computation's (None otherwise): its scheduler could
    not be reached, or stopped with the computation (Dask then cancels its futures)."""
    if isinstance(exc, ClusterUnavailable):
        return exc
    if isinstance(exc, CancelledError):
        executor = _executor
        if isinstance(executor, DaskExecutor):
            return executor.connection.unavailable()
        return ClusterUnavailable("the Dask cluster lost the computation")
    return None


def _lost_scheduler(future) -> bool:
    """Whether Dask cancelled ``future`` because its client lost the scheduler."""
    exception = getattr(getattr(future, "_state", None), "exception", None)
    return future.cancelled() and getattr(exception, "reason", "") == "scheduler-connection-lost"


_executor: Executor | None = None
_executor_lock = threading.Lock()


def get_executor() -> Executor:
    """The server's executor, created on first use (the embedded cluster starts then). A stopped
    embedded cluster is replaced by a fresh one; an external scheduler that does not answer raises
    :class:`~krrcore.distributed.ClusterUnavailable`, naming its address (the client keeps trying
    to reconnect, and after it gave up a new one is made here)."""
    global _executor
    with _executor_lock:
        stale = _executor if isinstance(_executor, DaskExecutor) and not _executor.healthy() else None
        if stale is not None and not stale.connection.embedded and stale.client.status != "closed":
            raise stale.connection.unavailable()  # still reconnecting: not yet given up
        if stale is not None:
            log.warning("%s: starting again", stale.connection.unavailable())
            _executor = None
            stale.abandon()
            stale.close()
        if _executor is None:
            started = time.perf_counter()
            try:
                _executor = DaskExecutor.connect(settings.DASK_SCHEDULER)
            except (OSError, TimeoutError) as exc:
                if not settings.DASK_SCHEDULER:
                    raise
                raise ClusterUnavailable(
                    f"the Dask scheduler at {settings.DASK_SCHEDULER} is unreachable "
                    f"({type(exc).__name__}: {exc}): start it, or unset KRR_DASK_SCHEDULER to "
                    f"use an embedded cluster"
                ) from exc
            log.info("%s ready in %.1f s", _executor.describe(), time.perf_counter() - started)
        return _executor


_warming = threading.Event()


def started_executor() -> Executor | None:
    """The server's executor if it has started (a page that only shows numbers never waits for it)."""
    return _executor


def warm_up() -> None:
    """Start the executor in the background, so the first Run does not wait for the cluster — and
    start a fresh embedded cluster the same way when the one before stopped. The router calls it
    on every script run; with a healthy executor that costs a look at the scheduler's process."""
    executor = _executor
    needed = executor is None or (
        isinstance(executor, DaskExecutor) and executor.connection.embedded and not executor.healthy()
    )
    if needed and not _warming.is_set():
        _warming.set()
        threading.Thread(target=_warm, daemon=True, name="krr-executor-start").start()


def _warm() -> None:
    try:
        get_executor()
    except Exception as exc:  # each run that needs it says so, with the reason
        if not _closing.is_set():
            log.warning("the Dask cluster could not start: %s: %s", type(exc).__name__, exc)
    finally:
        _warming.clear()


_closing = threading.Event()


@atexit.register
def close_executor() -> None:
    """Close the server's executor and the cluster it started: the server is shutting down, or
    the interpreter exits (a script or AppTest that started the app's cluster). A cluster still
    starting is not waited for: its processes are ended."""
    global _executor
    _closing.set()
    if not _executor_lock.acquire(timeout=1.0):  # the cluster is starting: end its processes
        from krrcore.distributed.processes import end_embedded_clusters

        end_embedded_clusters()
        return
    try:
        executor, _executor = _executor, None
    finally:
        _executor_lock.release()
    if executor is not None:
        executor.close()


def use_executor(executor: Executor | None) -> Executor | None:
    """Replace the server's executor (tests); returns the previous one, which the caller closes."""
    global _executor
    with _executor_lock:
        previous, _executor = _executor, executor
    return previous

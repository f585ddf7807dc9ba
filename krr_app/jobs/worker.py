"""One fit described by plain values, run where the data is built: on a Dask worker or in-process.

A :class:`~krr_app.jobs.spec.FitSpec` names everything a run needs (the data by name and parameters, or an uploaded
CSV by its digest; the solver, kernel and constructor parameters), so a worker rebuilds a built-in
problem itself instead of receiving arrays; an uploaded table is sent once per worker. :func:`run_fit` is the
one code path of a run, used
by every executor: it streams each :class:`~krrcore.stream.IterationRecord` to ``emit``, stops on
``stop_event``, and returns a :class:`FitOutcome` holding only what a front end keeps: the trace,
the metrics, the timings, the worker's peak memory, the compact model (centres and
coefficients, see :meth:`~krrcore.solvers.base.KRRBase.compact`) and the predictions on a plotting
grid for 1-D/2-D data, with the predictive standard deviation there for a fit with
``uncertainty=True`` (:func:`~krr_app.jobs.surface.add_uncertainty`) — never K, K_nM, a preconditioner
or the posterior's factor. Given ``on_frame``, it also pictures the
current iterate on that grid while the solver runs (:class:`~krr_app.jobs.surface.LiveSurface`, outside
the solver's time); given a :class:`StepGate`, it waits after each record until the gate lets it go on.

:func:`dask_fit_task` is the Dask task around it: records travel in batches
(:class:`RecordBatches`) as worker events on :data:`RECORDS_TOPIC` (``Client.subscribe_topic``),
and a ``distributed.Event`` named by :func:`stop_event_name` carries Stop back to the worker
within :data:`STOP_POLL_SECONDS`; a stepped run reads how far it may go from a
``distributed.Variable`` named by :func:`steps_name`.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field

import numpy as np

from krrcore.memory import PeakMemory
from krrcore.metrics import evaluate
from krrcore.registry import get_solver
from krrcore.stream import IterationRecord, SolverDivergedError

from .spec import DataSpec, FitSpec
from .surface import FitSurface, LiveSurface, SurfaceFrame, add_uncertainty, fit_surface

log = logging.getLogger(__name__)

#: Worker event topic of the per-iteration records and the "started" notice.
RECORDS_TOPIC = "krr-run"
#: How often a worker looks at its run's distributed stop event (seconds).
STOP_POLL_SECONDS = 0.25
#: Records leave the worker in batches, at most this often (seconds); the first goes at once. Each
#: worker event wakes the worker's event loop, which competes with the solver for the GIL: one event
#: per record cost ~1.5 ms of solver time per iteration (20 iterations of the default Two moons fit
#: took 0.055 s on a worker against 0.025 s without events). The page looks twice a second.
RECORDS_EVERY_SECONDS = 0.2
#: Data sets a worker keeps built (all runs of that worker together).
DATA_CACHE_SIZE = 4
#: How often a paused stepped run looks whether it may go on (seconds), and how long it waits at
#: most before it stops by itself (it holds a worker meanwhile).
STEP_POLL_SECONDS = 0.1
STEP_WAIT_MAX_SECONDS = 600.0


def stop_event_name(run_id: str) -> str:
    return f"krr-stop-{run_id}"


def steps_name(run_id: str) -> str:
    """The ``distributed.Variable`` holding how many records a stepped run may produce."""
    return f"krr-steps-{run_id}"


class StepGate:
    """A run that goes on record by record (the app's Step): after its record number k (from 0,
    the state after set-up) the run waits while ``limit()`` is a number ≤ k; ``None`` lets it run
    on (the app's Run). ``before_wait`` is called before each pause (a worker sends the records
    and the picture it holds first). A pause ends on ``stop_event``, or after
    :data:`STEP_WAIT_MAX_SECONDS`, which sets ``stop_event`` and ``gave_up``."""

    def __init__(
        self, limit, *, before_wait=None, poll: float = STEP_POLL_SECONDS, max_wait: float = STEP_WAIT_MAX_SECONDS
    ):
        self.limit, self.before_wait, self.poll, self.max_wait = limit, before_wait, poll, max_wait
        self.gave_up = False

    def paused_at(self, k: int) -> bool:
        limit = self.limit()
        return limit is not None and k >= limit

    def wait(self, k: int, stop_event: threading.Event) -> None:
        """Return when record ``k``'s successor may be computed, or the run is to stop."""
        if not self.paused_at(k):
            return
        if self.before_wait is not None:
            self.before_wait()
        deadline = time.monotonic() + self.max_wait
        while self.paused_at(k) and not stop_event.wait(self.poll):
            if time.monotonic() > deadline:
                self.gave_up = True
                stop_event.set()


@dataclass
class FitOutcome:
    """What comes back from a run (small: O(M·d) or O(n·d) for full-KRR solvers, never O(n²))."""

    status: str  # "done", "stopped" or "error"
    message: str
    trace: list[IterationRecord] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    peak_memory_bytes: float = math.nan  # growth of the running process's resident memory
    model: object | None = None  # the compact fitted estimator (predict works)
    surface: FitSurface | None = None  # predictions on a plotting grid (d ≤ 2)
    worker: str = ""


_data_cache: OrderedDict = OrderedDict()
_data_lock = threading.Lock()


def load_data(ref: DataSpec, dataset=None):
    """The :class:`~krrcore.datasets.Dataset` of ``ref``, kept per process (LRU of
    :data:`DATA_CACHE_SIZE`): built from its name, or, for a CSV, the ``dataset`` sent with the run
    the first time this process sees its digest."""
    from krrcore import datasets

    key = ref
    with _data_lock:
        if key in _data_cache:
            _data_cache.move_to_end(key)
            return _data_cache[key]
    if ref.csv_digest is not None:
        if dataset is None:
            raise ValueError(f"the table {ref.csv_filename or ref.csv_digest[:12]} was not sent with the run")
        data = dataset
    else:
        data = datasets.load(ref.name, n=ref.n, seed=ref.seed, **dict(ref.knobs))
    with _data_lock:
        _data_cache[key] = data
        while len(_data_cache) > DATA_CACHE_SIZE:
            _data_cache.popitem(last=False)
    return data


def final_metrics(estimator, data) -> dict[str, float]:
    """Train and test metrics of the fitted model; regression errors in the target's own units."""
    out = {}
    for split, X, y in (("test", data.X_test, data.y_test), ("train", data.X_train, data.y_train)):
        pred = estimator.predict(X)
        scores = evaluate(data.task, data.to_original_units(y), data.to_original_units(pred))
        out.update({f"{split}_{k}": v for k, v in scores.items()})
    return out


def run_fit(
    spec: FitSpec,
    *,
    emit=None,
    on_frame=None,
    steps: StepGate | None = None,
    stop_event: threading.Event | None = None,
    dataset=None,
) -> FitOutcome:
    """Build the data and the estimator of ``spec``, fit it streaming records to ``emit``, and
    return the outcome. Never raises for a failed run: the outcome says what happened.

    ``on_frame``: called with a :class:`~krr_app.jobs.surface.SurfaceFrame` of the current iterate
    (1-D/2-D data) before the record it follows, when :class:`~krr_app.jobs.surface.LiveSurface` finds
    one due, and after every record of a stepped run (``steps``), which waits after each record
    until its gate lets it go on. The pictures' seconds are in ``timings["frame_seconds"]``."""
    stop_event = stop_event or threading.Event()
    wall = time.perf_counter()
    outcome = FitOutcome(status="error", message="")
    estimator = live = None
    try:
        data = load_data(spec.data, dataset)
        if stop_event.is_set():  # stopped while the data was being built
            outcome.status, outcome.message = "stopped", "stopped before it started"
            return outcome
        estimator = spec.build_estimator()
        grid_data = np.concatenate([data.X_train, data.X_test]) if data.d in (1, 2) else None
        live = LiveSurface(grid_data) if grid_data is not None and on_frame is not None else None
        with PeakMemory() as memory:
            try:
                for record in estimator.iter_fit(
                    data.X_train,
                    data.y_train,
                    data.X_test,
                    data.y_test,
                    sample_weight=getattr(data, "weight_train", None),  # a table's weight column
                    stop_event=stop_event,
                ):
                    outcome.trace.append(record)
                    k = len(outcome.trace) - 1
                    if live is not None and ((steps is not None and steps.paused_at(k)) or live.due(estimator)):
                        on_frame(live.capture(estimator, record.iteration))
                    if emit is not None:
                        emit(record)
                    if steps is not None:
                        steps.wait(k, stop_event)
                outcome.metrics = final_metrics(estimator, data)
            finally:
                outcome.trace = list(getattr(estimator, "trace_", outcome.trace)) or outcome.trace
        outcome.peak_memory_bytes = memory.extra_bytes
        outcome.model = estimator.compact()
        if live is not None and outcome.trace:
            outcome.surface = live.finish(estimator, outcome.trace[-1].iteration)
        elif grid_data is not None:
            outcome.surface = fit_surface(grid_data, outcome.model)
        if outcome.surface is not None and getattr(estimator, "posterior_", None) is not None:
            add_uncertainty(outcome.surface, estimator)
        # The posterior's factor is M×M (n×n for exact KRR): the grid's std is what comes back.
        outcome.model.__dict__.pop("posterior_", None)
        stopped = stop_event.is_set() and get_solver(spec.solver).iterative
        outcome.status = "stopped" if stopped else "done"
        outcome.message = getattr(estimator, "stop_reason_", "") or "finished"
        if steps is not None and steps.gave_up:
            outcome.message = (
                f"no Step or Run for {steps.max_wait / 60:g} minutes while paused (a paused run holds a worker)"
            )
    except SolverDivergedError as exc:
        outcome.message = f"The solver diverged: {exc}"  # the message names the settings to change
    except (ValueError, ImportError) as exc:
        outcome.message = str(exc)
    except MemoryError as exc:
        outcome.message = str(exc) or "Out of memory: lower n or M, or set a smaller memory budget."
    except Exception as exc:  # a run must never fail silently: the page shows what happened
        log.exception("run %s (%s) failed", spec.run_id, spec.solver)
        outcome.message = f"{type(exc).__name__}: {exc}"
    trace = outcome.trace
    outcome.timings = {
        "wall_seconds": time.perf_counter() - wall,
        "solver_seconds": trace[-1].seconds if trace else math.nan,
        "eval_seconds": sum(r.eval_seconds for r in trace),
        "frame_seconds": live.seconds if live is not None else 0.0,
        "frames": float(live.count) if live is not None else 0.0,
    }
    return outcome


def record_message(record: IterationRecord) -> dict:
    """An IterationRecord as a msgpack-safe dict (worker events carry only plain values)."""
    row = asdict(record)
    row["extras"] = {
        k: (float(v) if isinstance(v, (int, float, np.number)) else str(v)) for k, v in record.extras.items()
    }
    return row


class RecordBatches:
    """``emit`` and ``on_frame`` for :func:`run_fit` on a worker: collects records and logs them as
    one ``{"kind": "records"}`` event per :data:`RECORDS_EVERY_SECONDS`, followed by the latest
    picture of the model as a ``{"kind": "frame"}`` event (float32 bytes; the older pictures of the
    batch are not sent). :meth:`flush` sends what is held."""

    def __init__(self, log_event, run_id: str):
        self._log_event, self._run_id = log_event, run_id
        self._pending: list[dict] = []
        self._frame = None
        self._last = -math.inf

    def __call__(self, record: IterationRecord) -> None:
        self._pending.append(record_message(record))
        if time.perf_counter() - self._last >= RECORDS_EVERY_SECONDS:
            self.flush()

    def frame(self, frame) -> None:
        self._frame = frame

    def flush(self) -> None:
        if self._pending:
            self._log_event(RECORDS_TOPIC, {"run": self._run_id, "kind": "records", "records": self._pending})
            self._pending = []
        if self._frame is not None:
            values = np.ascontiguousarray(self._frame.values, dtype="<f4")
            self._log_event(
                RECORDS_TOPIC,
                {
                    "run": self._run_id,
                    "kind": "frame",
                    "iteration": self._frame.iteration,
                    "shape": list(values.shape),
                    "values": values.tobytes(),
                    "seconds": self._frame.seconds,
                },
            )
            self._frame = None
        self._last = time.perf_counter()


def frame_from_message(message: dict):
    """The :class:`~krr_app.jobs.surface.SurfaceFrame` of a ``{"kind": "frame"}`` worker event."""

    values = np.frombuffer(message["values"], dtype="<f4").reshape(message["shape"]).copy()
    return SurfaceFrame(message["iteration"], values, message["seconds"])


def dask_fit_task(spec: FitSpec, data_name: str | None = None, stepped: bool = False) -> FitOutcome:
    """The Dask task of one run (see the module docstring). ``data_name`` names an uploaded table
    published on the cluster (``Client.publish_dataset``); it is fetched by name, not passed as a
    dependency, so the run stays an ordinary task the scheduler hands to whichever worker frees
    first, and a worker fetches a table once. A ``stepped`` run goes as far as the
    ``distributed.Variable`` :func:`steps_name` allows (:class:`StepGate`)."""
    from distributed import Event, Variable, get_client, get_worker

    from krrcore.distributed.workers import set_torch_threads

    worker, client = get_worker(), get_client()
    set_torch_threads()
    dataset = None
    if data_name is not None and spec.data not in _data_cache:
        dataset = client.get_dataset(data_name).result()
    remote_stop, stop, finished = (
        Event(stop_event_name(spec.run_id), client=client),
        threading.Event(),
        threading.Event(),
    )

    def watch():
        while not finished.is_set():
            try:
                if remote_stop.wait(timeout=STOP_POLL_SECONDS):
                    stop.set()
                    return
            except Exception:  # the scheduler went away: the run ends with the worker
                return

    threading.Thread(target=watch, daemon=True, name=f"krr-stop-{spec.run_id}").start()
    worker.log_event(
        RECORDS_TOPIC, {"run": spec.run_id, "kind": "started", "worker": worker.address, "pid": os.getpid()}
    )
    emit = RecordBatches(worker.log_event, spec.run_id)
    steps = None
    if stepped:
        allowed = Variable(steps_name(spec.run_id), client=client)

        def limit():
            try:
                return allowed.get(timeout=STOP_POLL_SECONDS)
            except Exception:  # not set yet, or the scheduler went away: as far as the first step
                return 1

        steps = StepGate(limit, before_wait=emit.flush)
    try:
        outcome = run_fit(spec, emit=emit, on_frame=emit.frame, steps=steps, stop_event=stop, dataset=dataset)
    finally:
        emit.flush()
        finished.set()
    outcome.worker = worker.address
    return outcome

"""One fit described by plain values, run where the data is built: on a Dask worker or in-process.

A :class:`FitSpec` names everything a run needs (the data by name and parameters, or an uploaded
CSV by its digest; the solver, kernel and constructor parameters), so a worker rebuilds a built-in
problem itself instead of receiving arrays; an uploaded table is sent once per worker. :func:`run_fit` is the one code path of a run, used
by every executor: it streams each :class:`~krrcore.stream.IterationRecord` to ``emit``, stops on
``stop_event``, and returns a :class:`FitOutcome` holding only what a front end keeps: the trace,
the metrics, the timings, the worker's peak memory, the compact model (centres and
coefficients, see :meth:`~krrcore.solvers.base.KRRBase.compact`) and the predictions on a plotting
grid for 1-D/2-D data — never K, K_nM or a preconditioner.

:func:`dask_fit_task` is the Dask task around it: records travel in batches
(:class:`RecordBatches`) as worker events on :data:`RECORDS_TOPIC` (``Client.subscribe_topic``),
and a ``distributed.Event`` named by :func:`stop_event_name` carries Stop back to the worker
within :data:`STOP_POLL_SECONDS`.
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

from .kernels import make_kernel
from .memory import PeakMemory
from .metrics import evaluate
from .registry import get_solver
from .stream import IterationRecord, SolverDivergedError
from .surface import FitSurface, fit_surface

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


def stop_event_name(run_id: str) -> str:
    return f"krr-stop-{run_id}"


@dataclass(frozen=True)
class DataRef:
    """Which data: a :func:`krrcore.datasets.load` entry with its parameters, or an uploaded CSV
    identified by ``csv_digest`` (the sha256 of its bytes), read by :func:`krrcore.datasets.from_csv`
    where it was uploaded and sent with the run."""

    name: str
    n: int | None = None
    seed: int = 0
    knobs: tuple[tuple[str, object], ...] = ()
    csv_digest: str | None = None
    csv_target: str | None = None
    csv_filename: str | None = None


@dataclass(frozen=True)
class FitSpec:
    """One run: data, solver (a :data:`krrcore.registry.SOLVERS` key), kernel and parameters."""

    run_id: str
    data: DataRef
    solver: str
    kernel: str
    kernel_params: tuple[tuple[str, object], ...]
    params: tuple[tuple[str, object], ...]

    def build_estimator(self):
        kernel = make_kernel(self.kernel, **dict(self.kernel_params))
        return get_solver(self.solver).make(kernel=kernel, **dict(self.params))


@dataclass
class FitOutcome:
    """What comes back from a run (small: O(M·d) or O(n·d) for full-KRR solvers, never O(n²))."""

    status: str                                   # "done", "stopped" or "error"
    message: str
    trace: list[IterationRecord] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    peak_memory_bytes: float = math.nan           # growth of the running process's resident memory
    model: object | None = None                   # the compact fitted estimator (predict works)
    surface: FitSurface | None = None             # predictions on a plotting grid (d ≤ 2)
    worker: str = ""


_data_cache: OrderedDict = OrderedDict()
_data_lock = threading.Lock()


def load_data(ref: DataRef, dataset=None):
    """The :class:`~krrcore.datasets.Dataset` of ``ref``, kept per process (LRU of
    :data:`DATA_CACHE_SIZE`): built from its name, or, for a CSV, the ``dataset`` sent with the run
    the first time this process sees its digest."""
    from . import datasets

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


def run_fit(spec: FitSpec, *, emit=None, stop_event: threading.Event | None = None, dataset=None) -> FitOutcome:
    """Build the data and the estimator of ``spec``, fit it streaming records to ``emit``, and
    return the outcome. Never raises for a failed run: the outcome says what happened."""
    stop_event = stop_event or threading.Event()
    wall = time.perf_counter()
    outcome = FitOutcome(status="error", message="")
    estimator = None
    try:
        data = load_data(spec.data, dataset)
        if stop_event.is_set():      # stopped while the data was being built
            outcome.status, outcome.message = "stopped", "stopped before it started"
            return outcome
        estimator = spec.build_estimator()
        with PeakMemory() as memory:
            try:
                for record in estimator.iter_fit(data.X_train, data.y_train, data.X_test, data.y_test,
                                                 stop_event=stop_event):
                    outcome.trace.append(record)
                    if emit is not None:
                        emit(record)
                outcome.metrics = final_metrics(estimator, data)
            finally:
                outcome.trace = list(getattr(estimator, "trace_", outcome.trace)) or outcome.trace
        outcome.peak_memory_bytes = memory.extra_bytes
        outcome.model = estimator.compact()
        if data.d in (1, 2):
            outcome.surface = fit_surface(np.concatenate([data.X_train, data.X_test]), outcome.model)
        stopped = stop_event.is_set() and get_solver(spec.solver).iterative
        outcome.status = "stopped" if stopped else "done"
        outcome.message = getattr(estimator, "stop_reason_", "") or "finished"
    except SolverDivergedError as exc:
        outcome.message = f"The solver diverged: {exc}. Try a larger λ, float64, or fewer iterations."
    except (ValueError, ImportError) as exc:
        outcome.message = str(exc)
    except MemoryError as exc:
        outcome.message = str(exc) or "Out of memory: lower n or M, or set a smaller memory budget."
    except Exception as exc:  # a run must never fail silently: the page shows what happened
        log.exception("run %s (%s) failed", spec.run_id, spec.solver)
        outcome.message = f"{type(exc).__name__}: {exc}"
    trace = outcome.trace
    outcome.timings = {"wall_seconds": time.perf_counter() - wall,
                       "solver_seconds": trace[-1].seconds if trace else math.nan,
                       "eval_seconds": sum(r.eval_seconds for r in trace)}
    return outcome


def record_message(record: IterationRecord) -> dict:
    """An IterationRecord as a msgpack-safe dict (worker events carry only plain values)."""
    row = asdict(record)
    row["extras"] = {k: (float(v) if isinstance(v, (int, float, np.number)) else str(v))
                     for k, v in record.extras.items()}
    return row


class RecordBatches:
    """``emit`` for :func:`run_fit` on a worker: collects records and logs them as one
    ``{"kind": "records"}`` event per :data:`RECORDS_EVERY_SECONDS` (:meth:`flush` sends the rest)."""

    def __init__(self, log_event, run_id: str):
        self._log_event, self._run_id = log_event, run_id
        self._pending: list[dict] = []
        self._last = -math.inf

    def __call__(self, record: IterationRecord) -> None:
        self._pending.append(record_message(record))
        if time.perf_counter() - self._last >= RECORDS_EVERY_SECONDS:
            self.flush()

    def flush(self) -> None:
        if self._pending:
            self._log_event(RECORDS_TOPIC, {"run": self._run_id, "kind": "records", "records": self._pending})
            self._pending = []
        self._last = time.perf_counter()


def dask_fit_task(spec: FitSpec, data_name: str | None = None) -> FitOutcome:
    """The Dask task of one run (see the module docstring). ``data_name`` names an uploaded table
    published on the cluster (``Client.publish_dataset``); it is fetched by name, not passed as a
    dependency, so the run stays an ordinary task the scheduler hands to whichever worker frees
    first, and a worker fetches a table once."""
    from distributed import Event, get_client, get_worker

    from .distributed.workers import set_torch_threads

    worker, client = get_worker(), get_client()
    set_torch_threads()
    dataset = None
    if data_name is not None and spec.data not in _data_cache:
        dataset = client.get_dataset(data_name).result()
    remote_stop, stop, finished = Event(stop_event_name(spec.run_id), client=client), threading.Event(), threading.Event()

    def watch():
        while not finished.is_set():
            try:
                if remote_stop.wait(timeout=STOP_POLL_SECONDS):
                    stop.set()
                    return
            except Exception:       # the scheduler went away: the run ends with the worker
                return

    threading.Thread(target=watch, daemon=True, name=f"krr-stop-{spec.run_id}").start()
    worker.log_event(RECORDS_TOPIC, {"run": spec.run_id, "kind": "started", "worker": worker.address,
                                     "pid": os.getpid()})
    emit = RecordBatches(worker.log_event, spec.run_id)
    try:
        outcome = run_fit(spec, emit=emit, stop_event=stop, dataset=dataset)
    finally:
        emit.flush()
        finished.set()
    outcome.worker = worker.address
    return outcome

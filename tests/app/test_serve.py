"""Runs on Dask workers, as the app makes them: streaming, Stop, what comes back, a worker that
dies, the per-session cap, a separate scheduler started with the standard commands, and a
scheduler that stops (the embedded one killed, an external one gone mid-run).

The shared executor is the app's own (the embedded cluster, one per test session); the tests
that kill a worker or need a scheduler of their own start a separate one, so nothing they break
reaches the other tests.
"""

from __future__ import annotations

import math
import os
import pickle
import re
import signal
import time

import numpy as np
import pytest
from dask_processes import free_port, scheduler_and_workers

from krr_app.jobs import executor as executor_module
from krr_app.jobs.config import DataSpec, make_config
from krr_app.jobs.executor import DaskExecutor
from krr_app.jobs.runs import RunRegistry
from krr_app.parts import background
from krrcore import datasets
from krr_app.jobs import worker as remote
from krrcore.distributed import ClusterUnavailable
from krrcore.distributed.processes import processes_of, running
from krr_app.jobs.spec import FitSpec
from krr_app.jobs.worker import RecordBatches, run_fit

MOONS = DataSpec("moons", n=2000)


def _config(solver="falkon", **knobs):
    knobs = {"M": 100, "maxiter": 5, **knobs}
    return make_config(MOONS, kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=1e-6, solver=solver, **knobs)


@pytest.fixture(scope="module")
def moons():
    return datasets.load("moons", n=2000)


def _wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_run_streams_records_from_a_worker_and_matches_the_library(moons):
    run = RunRegistry().start(_config(), moons)
    assert run.wait(120) and run.status == "done", run.message
    assert run.worker.startswith("tcp://") and run.worker_pid != os.getpid()
    # The same fit through krrcore in this process: the same model, the same records.
    local = run_fit(_config().fit_spec("local"))
    assert [r.iteration for r in run.records] == [r.iteration for r in local.trace] == list(range(6))
    # The worker and this process may run torch on different thread counts, which reorders sums:
    # agreement to 1e-6, far below any difference between two models.
    np.testing.assert_allclose([r.residual for r in run.records], [r.residual for r in local.trace], rtol=1e-6)
    np.testing.assert_allclose(run.estimator.predict(moons.X_test), local.model.predict(moons.X_test), rtol=1e-6)
    assert run.metrics["test_classification_error"] == pytest.approx(local.metrics["test_classification_error"])
    assert run.surface is not None and run.surface.values.shape == (80 * 80, 1)


def test_records_leave_the_worker_in_batches_first_at_once_none_lost(monkeypatch):
    """One worker event per RECORDS_EVERY_SECONDS, not per record (each event costs the solver a
    wake-up of the worker's event loop); the first record goes at once, flush sends the rest."""
    now = [100.0]
    monkeypatch.setattr(remote.time, "perf_counter", lambda: now[0])
    events = []
    send = RecordBatches(lambda topic, message: events.append((topic, message)), "r1")
    local = run_fit(_config(maxiter=12).fit_spec("batches"))
    for record in local.trace:  # 13 records, one every 0.06 s of the fake clock
        send(record)
        now[0] += 0.06
    send.flush()
    batches = [message["records"] for _, message in events]
    assert {topic for topic, _ in events} == {remote.RECORDS_TOPIC}
    assert {message["run"] for _, message in events} == {"r1"}
    assert len(batches[0]) == 1  # the first chart does not wait
    per_batch = math.ceil(remote.RECORDS_EVERY_SECONDS / 0.06)
    assert [len(b) for b in batches[1:-1]] == [per_batch] * (len(batches) - 2)
    assert [row["iteration"] for b in batches for row in b] == [r.iteration for r in local.trace]
    send.flush()
    assert len(events) == len(batches)  # nothing left, nothing resent


def test_what_comes_back_is_small_and_the_server_stays_flat(moons):
    """A CG run keeps an n×n K on the worker; the outcome holds centres and coefficients only."""
    n = moons.n_train
    outcome = run_fit(_config("cg", maxiter=3).fit_spec("size"))
    assert outcome.status == "done", outcome.message
    assert len(pickle.dumps(outcome)) < 8 * n * n / 20, "the outcome carries an O(n²) buffer"
    assert not any(name.startswith("_K") or name == "preconditioner_" for name in vars(outcome.model))
    registry = RunRegistry(max_runs=4)
    before = _rss_bytes()
    for penalty in (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
        config = make_config(
            MOONS, kernel="gaussian", kernel_params={"sigma": 0.5}, penalty=penalty, solver="cg", maxiter=3
        )
        assert registry.start(config, moons).wait(120)
    grown = _rss_bytes() - before
    # Six runs, each with a 25 MB K on its worker: the web server's memory does not follow.
    assert grown < 8 * n * n, f"the server grew by {grown / 2**20:.0f} MB"
    assert len(registry.runs()) == 4 and len(registry.dropped) == 2


def test_stop_reaches_the_worker_within_a_second(moons):
    config = _config("nystrom_gd", maxiter=10**6, M=300)
    run = RunRegistry().start(config, moons)
    _wait_for(lambda: len(run.records) >= 5, 120, "five records from the worker")
    seen = len(run.records)
    clicked = time.perf_counter()
    run.stop()
    assert run.wait(1.0), "the worker did not stop the run within a second"
    print(f"stop → finished in {time.perf_counter() - clicked:.2f} s")
    assert run.status == "stopped" and "stopped by the user" in run.message
    assert len(run.records) >= seen and run.estimator is not None  # the last iterate is kept


def test_a_session_runs_one_at_a_time_and_queued_runs_can_be_stopped(moons):
    registry = RunRegistry(max_active=1)
    first = registry.start(_config("nystrom_gd", maxiter=10**6, M=300), moons)
    second = registry.start(_config(maxiter=3), moons)
    third = registry.start(_config(maxiter=4), moons)
    assert second.waiting_in_session and registry.position(second) == 1 and registry.position(third) == 2
    _wait_for(lambda: first.status == "running", 120, "the first run to start")
    assert second.status == "queued" and second.started is None
    third.stop()
    assert third.wait(1.0) and third.status == "stopped" and third.started is None
    first.stop()
    assert second.wait(120) and second.status == "done", second.message
    assert second.started >= first.ended


def test_queued_runs_know_their_place_in_line(moons):
    """More runs than workers: the later ones wait on the scheduler, each with its position."""
    executor = executor_module.get_executor()
    registries = [RunRegistry() for _ in range(executor.workers + 2)]
    runs = [
        r.start(_config("nystrom_gd", maxiter=10**6, M=300, solver_seed=i), moons) for i, r in enumerate(registries)
    ]
    try:
        _wait_for(lambda: sum(r.status == "running" for r in runs) == executor.workers, 120, "every worker busy")
        waiting = [r for r in runs if r.status == "queued"]
        assert len(waiting) == 2
        assert sorted(executor.queue_position(r)[0] for r in waiting) == [1, 2]
    finally:
        for registry in registries:
            registry.close()
    assert all(r.wait(30) for r in runs)
    assert {r.status for r in runs} == {"stopped"}


@pytest.fixture
def own_cluster():
    """A separate embedded cluster for a test that breaks workers; the app's executor points at it."""
    executor = DaskExecutor.connect()
    previous = executor_module.use_executor(executor)
    yield executor
    executor_module.use_executor(previous)
    executor.close()


def test_a_killed_worker_costs_only_its_run(own_cluster, moons):
    doomed = RunRegistry().start(_config("nystrom_gd", maxiter=10**6, M=300), moons)
    bystander = RunRegistry().start(_config("nystrom_gd", maxiter=400, M=300), moons)
    _wait_for(lambda: doomed.worker_pid is not None and len(doomed.records) >= 2, 120, "the run to compute")
    os.kill(doomed.worker_pid, signal.SIGKILL)
    assert doomed.wait(60), "the run of a killed worker never ended"
    assert doomed.status == "error" and "worker running this run stopped" in doomed.message
    assert bystander.wait(120) and bystander.status == "done", bystander.message
    # The cluster replaced the worker: the next run succeeds.
    _wait_for(
        lambda: len(own_cluster.connection.workers()) == own_cluster.connection.shape.n_workers,
        60,
        "the replacement worker",
    )
    again = RunRegistry().start(_config(maxiter=3), moons)
    assert again.wait(120) and again.status == "done", again.message


def test_a_fit_through_a_separate_scheduler_and_worker(moons, tmp_path):
    """`dask scheduler` and `dask worker` started as docs/serving.md says, on localhost."""
    with scheduler_and_workers(tmp_path, n_workers=1) as address:
        executor = DaskExecutor.connect(address)
        _wait_for(lambda: len(executor.connection.workers()) == 1, 60, "the worker to join")
        previous = executor_module.use_executor(executor)
        try:
            # The preload ran before any task: krrcore loaded on both sides (the first run waited
            # 4-16 s for the imports when it did not), the worker's threads from KRR_TORCH_THREADS.
            def loaded():  # sent by value: no closure over this test's names
                return "krr_app.jobs.worker" in __import__("sys").modules, __import__("torch").get_num_threads()

            assert list(executor.connection.client.run(loaded).values()) == [(True, 1)]
            assert executor.connection.client.run_on_scheduler(loaded)[0] is True
            assert "Dask scheduler at " + address in executor.describe()
            run = RunRegistry().start(_config(maxiter=4), moons)
            assert run.wait(120) and run.status == "done", run.message
            assert run.worker in executor.connection.workers() and len(run.records) == 5
        finally:
            executor_module.use_executor(previous)
            executor.close()


def test_run_fit_reports_bad_data_and_a_stop_before_the_start():
    bad = FitSpec("x", DataSpec("no-such-set"), "falkon", "gaussian", (("sigma", 1.0),), (("penalty", 1e-3),))
    outcome = run_fit(bad)
    assert outcome.status == "error" and "name must be one of" in outcome.message
    import threading

    stop = threading.Event()
    stop.set()
    outcome = run_fit(_config().fit_spec("early"), stop_event=stop)
    assert outcome.status == "stopped" and outcome.message == "stopped before it started" and not outcome.trace


class _SmallWorkers(executor_module.InProcessExecutor):
    """In-process runs, but workers that may use only 16 MiB each (admission is the point)."""

    @property
    def worker_memory_limit(self):
        return 16 * 2**20


def test_a_run_that_can_never_fit_a_worker_is_refused_with_the_numbers(moons):
    previous = executor_module.use_executor(_SmallWorkers())
    try:
        registry = RunRegistry()
        big = registry.start(_config(M=1500), moons)  # FALKON keeps an M×M float64 buffer: 18 MB
        assert big.wait(1.0) and big.status == "error"
        assert big.estimate.peak_bytes > 16 * 2**20
        assert "Refused before starting" in big.message and "a worker of this server may use 16 MiB" in big.message
        assert "M×M buffer" in big.message
        assert big.started is None and not big.records
        small = registry.start(_config(M=50, maxiter=2), moons)
        assert small.wait(60) and small.status == "done", small.message
    finally:
        executor_module.use_executor(previous)


def test_how_often_a_page_looks_follows_the_queue():
    """run_status.look_intervals: one user (or a queued run a free worker takes at once) looks every
    POLL_SECONDS; in a classroom a computing page looks every BUSY_POLL_SECONDS and a waiting one
    every quarter of its estimated wait, between QUEUED_POLL_SECONDS and QUEUED_POLL_MAX_SECONDS."""
    from types import SimpleNamespace

    from krr_app.jobs import run_status
    from krr_app.settings import BUSY_POLL_SECONDS, POLL_SECONDS, QUEUED_POLL_MAX_SECONDS, QUEUED_POLL_SECONDS

    class Busy:  # only what look_intervals and queue_text ask of an executor
        workers = 2

        def __init__(self, waiting, computing, wait_seconds=30.0):
            self.waiting, self.computing = (lambda: waiting), (lambda: computing)
            self.queue_position = lambda run: (waiting, wait_seconds)  # the run is last in line

    queued = [SimpleNamespace(status="queued", waiting_in_session=False)]
    running = SimpleNamespace(status="running", waiting_in_session=True)
    alone = (POLL_SECONDS, POLL_SECONDS)
    cases = [  # (executor, runs, expected (waiting, computing) intervals)
        (None, queued, (QUEUED_POLL_SECONDS, POLL_SECONDS)),  # the workers are starting
        (Busy(1, 0), queued, alone),
        (Busy(1, 1), queued, alone),
        (Busy(1, 0), [SimpleNamespace(status="queued", waiting_in_session=True)], (QUEUED_POLL_SECONDS, POLL_SECONDS)),
        (Busy(1, 1), [running, queued[0]], alone),
        (Busy(28, 2, 30.0), queued, (7.5, BUSY_POLL_SECONDS)),
        (Busy(28, 2, 400.0), queued, (QUEUED_POLL_MAX_SECONDS, BUSY_POLL_SECONDS)),
        (Busy(3, 2, 4.0), queued, (QUEUED_POLL_SECONDS, BUSY_POLL_SECONDS)),
        (Busy(3, 2, None), queued, (QUEUED_POLL_SECONDS, BUSY_POLL_SECONDS)),  # no estimate
        (Busy(2, 1, 30.0), [running, queued[0]], (7.5, BUSY_POLL_SECONDS)),
    ]
    previous = executor_module.use_executor(None)
    try:
        for executor, runs, expected in cases:
            executor_module.use_executor(executor)
            assert run_status.look_intervals(runs) == pytest.approx(expected), (executor and executor.waiting(), runs)
        # What the page says: a run a free worker takes now is not "number 1 in line".
        executor_module.use_executor(Busy(waiting=1, computing=1))
        assert run_status.queue_text(queued[0]) == "starting on a worker…"
        executor_module.use_executor(Busy(waiting=2, computing=1))
        assert run_status.queue_text(queued[0]) == "queued — number 2 in line for 2 workers, about 30 s…"
    finally:
        executor_module.use_executor(previous)


def test_the_queue_estimate_uses_krrcore_s_estimate_until_a_run_has_finished():
    from types import SimpleNamespace

    from krr_app.jobs.executor import InProcessExecutor

    executor = InProcessExecutor()  # one worker; its queue book-keeping is every executor's
    estimate = SimpleNamespace(seconds_for=lambda iterations: 0.5 + 0.1 * iterations)
    first, second = (
        SimpleNamespace(id=name, estimate=estimate, config=SimpleNamespace(maxiter=20)) for name in ("a", "b")
    )
    executor._queued(first)
    executor._queued(second)
    assert executor.queue_position(second) == (2, pytest.approx(2 * 2.5))
    executor._left_queue(first)
    executor._finished(SimpleNamespace(id="a", timings={"wall_seconds": 4.0}))
    assert executor.queue_position(second) == (1, pytest.approx(4.0))  # measured walls win


# -- a scheduler that stops: it costs the runs it held, each with a message, and nothing else -----------
ENDLESS = {"solver": "nystrom_gd", "maxiter": 10**6, "M": 300}


def _quick(fn):
    """``fn()`` and the seconds it took."""
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


@pytest.fixture
def app_executor():
    """The app's executor slot, emptied for the test (get_executor() then starts an embedded
    cluster of the test's own) and restored after it; every executor made meanwhile is closed."""
    previous = executor_module.use_executor(None)
    yield
    current = executor_module.use_executor(previous)
    if current is not None:
        current.close()


def test_a_killed_embedded_scheduler_costs_its_run_and_the_next_run_starts_a_fresh_cluster(app_executor, moons):
    """The runs computing on it fail with the message; one still waiting for a worker is not lost:
    it starts on the fresh cluster and finishes."""
    first = executor_module.get_executor()
    doomed = [RunRegistry().start(_config(**ENDLESS, solver_seed=i), moons) for i in range(first.workers)]
    _wait_for(lambda: all(len(r.records) >= 2 for r in doomed), 120, "every worker to compute")
    waiting = RunRegistry().start(_config(), moons)
    _wait_for(
        lambda: first.queue_position(waiting)[0] == 1 and waiting.id in first._futures,
        30,
        "the run to wait on the scheduler",
    )
    os.kill(first.connection.cluster.scheduler.process.pid, signal.SIGKILL)
    assert all(r.wait(30) for r in doomed), "a run of a dead scheduler never ended"
    for run in doomed:
        assert run.status == "error"
        assert run.message == (
            f"The embedded Dask cluster's scheduler ({first.connection.address}) stopped during "
            f"this run, and the run with it. A fresh cluster starts for the next run: press Run "
            f"to try again."
        )
    assert waiting.wait(180) and waiting.status == "done", waiting.message
    assert waiting.requeued and waiting.worker not in {r.worker for r in doomed}
    # The pages read the last known workers at once: no call waits for the dead scheduler.
    (workers, limit), seconds = _quick(lambda: (first.workers, first.worker_memory_limit))
    assert workers == 2 and limit and seconds < 0.5 and not first.healthy()
    again = RunRegistry().start(_config(), moons)
    assert again.wait(180) and again.status == "done", again.message
    fresh = executor_module.started_executor()
    assert fresh is not first and fresh.healthy() and fresh.connection.address != first.connection.address
    # The old cluster's processes are gone (asyncio may never note their exit: its loop was stopped).
    assert not any(running(p) for p in processes_of(first.connection.cluster))


def _slept(_):
    return "slept"


def test_a_diagnostic_the_killed_scheduler_took_starts_again_on_a_fresh_cluster(app_executor):
    """A diagnostic page's computation under way when the embedded scheduler is killed: the page's
    next look finds it started again on a fresh cluster (no message), then gets its result."""
    results = background.BackgroundResults(4)
    look = lambda: results.get(("slow section",), "A slow section", time.sleep, 3, then=_slept)  # noqa: E731
    first = executor_module.get_executor()
    assert isinstance(look(), background.Pending)
    os.kill(first.connection.cluster.scheduler.process.pid, signal.SIGKILL)
    _wait_for(lambda: results.ready(("slow section",)), 30, "the computation to end with its scheduler")
    assert isinstance(look(), background.Pending)
    fresh = executor_module.started_executor()
    assert fresh is not first and fresh.healthy() and fresh.connection.address != first.connection.address
    results.wait(60)
    assert look() == "slept"


def test_an_external_scheduler_gone_mid_run_is_named_and_a_restarted_one_is_used(
    app_executor, moons, tmp_path, monkeypatch
):
    """Its run fails naming the address; runs while it is gone fail at once saying it is unreachable
    (the pages never wait for it); the scheduler started again on its address takes the next run."""
    port = free_port()
    processes: list = []
    with scheduler_and_workers(tmp_path, n_workers=1, port=port, processes=processes) as address:
        monkeypatch.setattr(executor_module.settings, "DASK_SCHEDULER", address)
        executor = executor_module.get_executor()
        _wait_for(lambda: len(executor.connection.workers()) == 1, 60, "the worker to join")
        run = RunRegistry().start(_config(**ENDLESS), moons)
        _wait_for(lambda: len(run.records) >= 2, 120, "the run to compute")
        results = background.BackgroundResults(4)  # and a diagnostic page's computation
        look = lambda: results.get(("slow section",), "A slow section", time.sleep, 60)  # noqa: E731
        assert isinstance(look(), background.Pending)
        processes[0].kill()  # the scheduler goes away
        assert run.wait(30) and run.status == "error"
        assert run.message == (
            f"The Dask scheduler at {address} went away during this run, and the run with it. "
            f"Start the scheduler again (or point KRR_DASK_SCHEDULER at a running one) and press "
            f"Run."
        )
        refused, seconds = _quick(lambda: RunRegistry().start(_config(), moons))
        assert refused.wait(10) and refused.status == "error" and seconds < 2
        assert refused.message.startswith(
            f"Runs cannot start: the Dask scheduler at {address} is unreachable: start it again (dask scheduler)"
        )
        _, seconds = _quick(lambda: (executor.workers, executor.worker_memory_limit))
        assert seconds < 0.5
        with pytest.raises(ClusterUnavailable, match=f"the Dask scheduler at {address} is unreachable"):
            executor_module.get_executor().call(sum, [1, 2])
        _wait_for(lambda: results.ready(("slow section",)), 30, "the diagnostic to end with its scheduler")
        with pytest.raises(
            ValueError,
            match=re.escape(
                f"it could not run on the cluster: the Dask scheduler at {address} is unreachable: start it again"
            ),
        ):
            look()
        for process in processes[1:]:  # its worker goes too: both start again
            process.kill()
            process.wait(10)
    with scheduler_and_workers(tmp_path, n_workers=1, port=port):

        def reconnected():
            try:
                current = executor_module.get_executor()
            except ClusterUnavailable:
                return False
            return current.healthy() and len(current.connection.workers()) == 1

        _wait_for(reconnected, 90, "the client to reach the scheduler started again")
        run = RunRegistry().start(_config(), moons)
        assert run.wait(120) and run.status == "done", run.message

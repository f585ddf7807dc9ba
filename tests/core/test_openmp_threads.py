"""The tuner's helper thread gets the cores: the thread that waits frees its idle OpenMP workers
(:func:`krrcore.device.release_openmp_threads`). Counted as the operating system's threads of this
process (Linux's /proc/self/task), never timed."""

import os
import time

import pytest
import torch

from krrcore.device import _openmp_runtimes, release_openmp_threads
from krrcore.tuning.search import run_in_thread

pytestmark = pytest.mark.skipif(
    not os.path.isdir("/proc/self/task") or not _openmp_runtimes(),
    reason="needs Linux's /proc and an OpenMP runtime threadpoolctl can find",
)


def _tasks() -> int:
    return len(os.listdir("/proc/self/task"))


def _settled(expected: int, timeout: float = 5.0) -> int:
    """The thread count once it reaches ``expected`` (freed threads exit asynchronously), or the
    count at the timeout."""
    end = time.monotonic() + timeout
    while _tasks() != expected and time.monotonic() < end:
        time.sleep(0.01)
    return _tasks()


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _parallel_op():
    torch.exp(torch.ones(1_000_000, dtype=torch.float64))  # well above torch's grain: a parallel region


def test_release_frees_this_threads_openmp_workers_and_they_come_back(two_threads):
    _parallel_op()
    with_pool = _tasks()
    release_openmp_threads()
    assert _settled(with_pool - 1) == with_pool - 1  # one worker beside this thread, at 2 threads
    _parallel_op()
    assert _settled(with_pool) == with_pool


def test_the_waiting_thread_holds_no_openmp_workers_while_the_work_runs(two_threads):
    _parallel_op()
    with_pool = _tasks()
    seen = []

    def work(emit):
        # Before its own first parallel region: the caller's worker gone, this thread added.
        seen.append(_settled(with_pool))
        _parallel_op()
        emit("record")
        # The reader ran a parallel operation of its own before asking for more: freed again.
        seen.append(_settled(with_pool))

    received = []
    for item in run_in_thread(work):
        _parallel_op()
        received.append(item)
    assert received == ["record"]
    assert seen == [with_pool, with_pool]

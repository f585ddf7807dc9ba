"""Shared fixtures for the app tests: an AppTest of app.py with clean caches, a run waiter, and the
executor runs go to (the app's Dask executor, started once for the whole test session and closed
at its end; ``in_process`` swaps in the in-process one where the point of a test is the page)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# A test module may import another room's test module for its helpers (test_load drives
# test_browser's chromium): every room's folder is importable, whichever is collected first.
for _room in ("core", "app", "browser"):
    if str(ROOT / "tests" / _room) not in sys.path:
        sys.path.append(str(ROOT / "tests" / _room))
#: Generous: the first script run imports torch and plotly on a loaded 2-core machine.
APP_TIMEOUT = 120


def settle(at, timeout: float = 180.0):
    """Rerun until no diagnostic of the page is still computing on the workers: a page draws what is
    ready and reruns itself as the rest arrives (a fragment's timer, which AppTest does not tick)."""
    from krr_app.parts import state

    for _ in range(12):
        if not state.results.running():
            return at
        state.results.wait(timeout)
        at = at.run()
    raise AssertionError("the page's diagnostics did not settle")


def wait_for_runs(at, timeout: float = 180.0):
    """Block until every run of the AppTest session finished, then rerun the script.

    AppTest runs no browser, so nothing asks the live chart's endpoint: tests wait on the runs'
    events (through the session's registry handle) and rerun by hand, as the chart's trigger would.
    """
    registry = at.session_state["_krr_runs"]
    for run in registry.runs():
        assert run.wait(timeout), f"run {run.label} did not finish within {timeout} s"
    return at.run()


@pytest.fixture
def app():
    """``app(**query)``: a fresh AppTest of app.py (caches cleared), already run once with ``query``
    (a list value repeats the parameter)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    made = []

    def make(**query):
        from krr_app.parts import state

        st.cache_data.clear()
        st.cache_resource.clear()
        state.results.clear()
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=APP_TIMEOUT)
        at.query_params.update({k: v if isinstance(v, list) else str(v) for k, v in query.items()})
        made.append(at)
        return at.run()

    yield make
    for at in made:  # no solver thread outlives its test
        registry = at.session_state["_krr_runs"] if "_krr_runs" in at.session_state else None
        if registry is not None:
            registry.close()
            for run in registry.runs():
                run.wait(10)


@pytest.fixture(scope="session", autouse=True)
def _close_the_executor():
    """The embedded Dask cluster a test started ends with the test session."""
    yield
    from krr_app.jobs import executor

    previous = executor.use_executor(None)
    if previous is not None:
        previous.close()


@pytest.fixture
def in_process():
    """Runs execute on threads of the test process (for solvers defined in a test module, which
    Dask workers cannot import)."""
    from krr_app.jobs import executor

    previous = executor.use_executor(executor.InProcessExecutor())
    yield
    executor.use_executor(previous)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny problems: two threads on a shared 2-core machine were measured 16× slower than one.
    A test module opts in with ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def server(tmp_path_factory):
    """``(url, log path)`` of the browser tests' shared ``streamlit run app.py`` (tests/browser/shared_server.py)."""
    from shared_server import SHARED

    return SHARED.get(tmp_path_factory)


def pytest_runtest_teardown(item, nextitem):
    """The shared server stops when the browser tests are over: the tests after them run on a quiet machine."""
    from shared_server import HERE, SHARED

    if nextitem is None or HERE not in Path(str(nextitem.path)).resolve().parents:
        SHARED.stop()


def pytest_sessionfinish(session, exitstatus):
    from shared_server import SHARED

    SHARED.stop()

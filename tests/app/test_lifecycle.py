"""The server's life as a user meets it: Ctrl-C in the terminal, SIGTERM, the terminal closed,
``kill -9``, a scheduler killed. Real processes on 127.0.0.1: ``streamlit run app.py`` leading a
process group of its own (as a shell's foreground job), one visit through Streamlit's agent API
(``/_stcore/agent/interact``: a session, as a browser tab, without a browser) and a finished run,
so that the embedded Dask cluster is up. Every test is bounded in time and kills whatever is left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from krr_app.jobs.server import ServerFailed, running_app

ROOT = Path(__file__).resolve().parents[2]
#: A small FALKON run: seconds on a worker.
QUICK = {"dataset": ["moons"], "n": ["1000"], "M": ["100"], "maxiter": ["5"], "auto_run": ["false"]}
#: A run that lasts until stopped (Nyström GD keeps improving).
ENDLESS = {
    "dataset": ["moons"],
    "n": ["2000"],
    "M": ["300"],
    "solver": ["nystrom_gd"],
    "maxiter": ["100000"],
    "auto_run": ["false"],
}


def _alive(processes) -> list:
    out = []
    for p in processes:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.NoSuchProcess:
            pass
    return out


def _wait_gone(processes, seconds: float) -> list:
    """The processes still running after up to ``seconds``."""
    deadline = time.monotonic() + seconds
    while _alive(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    return _alive(processes)


def _kill(processes) -> None:
    for p in _alive(processes):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


class Agent:
    """One session of the app through Streamlit's agent API (what a browser tab does)."""

    def __init__(self, url: str):
        self.url, self.session = url, None

    def send(self, timeout: float = 180.0, **body) -> dict:
        if self.session:
            body["session_id"] = self.session
        request = urllib.request.Request(
            f"{self.url}/_stcore/agent/interact",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:
                    answer = json.loads(response.read())
            except urllib.error.HTTPError as exc:
                answer = json.loads(exc.read())
            self.session = answer.get("session_id", self.session)
            if answer.get("code") != "wait_timed_out" and answer.get("error", {}).get("code") != "wait_timed_out":
                return answer
            assert time.monotonic() < deadline, f"the app did not settle within {timeout} s"
            request = urllib.request.Request(
                f"{self.url}/_stcore/agent/interact",
                data=json.dumps({"session_id": self.session}).encode(),
                headers={"Content-Type": "application/json"},
                method="POST",
            )

    def text(self, answer: dict | None = None) -> str:
        """Every string the page shows (the element tree, flattened)."""
        answer = answer or self.send()
        return " ".join(_strings(answer.get("tree", [])))

    def wait_for(self, pattern: str, timeout: float = 120.0) -> str:
        """Rerun the session until its page shows ``pattern`` (the live chart's rerun, by hand)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if re.search(pattern, text):
                return text
            assert time.monotonic() < deadline, (
                f"{pattern!r} did not show within {timeout} s: {text[:2500]} … {text[-800:]}"
            )
            time.sleep(0.5)


def _strings(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return []


def _exception_boxes(answer: dict) -> list:
    found = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "exception":
                found.append(node)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(answer.get("tree", []))
    return found + ([answer] if answer.get("status") == "error" else [])


def _cluster(process) -> list:
    """The server's running Dask processes: scheduler, nannies and their workers."""
    out = []
    for p in _alive(psutil.Process(process.pid).children(recursive=True)):
        try:
            command = " ".join(p.cmdline())
        except psutil.Error:  # ended meanwhile
            continue
        if "dask" in command or "multiprocessing" in command:
            out.append(p)
    return out


@contextmanager
def _visited_server(tmp_path: Path):
    """A server with one visit whose run finished (its cluster is up); yields (url, process,
    agent, every process the server started)."""
    log = tmp_path / "server.log"
    try:
        with running_app(log, args=("--server.enableAgentApi", "true"), new_session=True, timeout=180) as (
            url,
            process,
        ):  # a busy machine starts it slowly
            agent = Agent(url)
            agent.send(query_params=QUICK)
            agent.send(trigger={"key": "run"})
            agent.wait_for(r"finished — ")
            started = psutil.Process(process.pid).children(recursive=True)
            try:
                yield url, process, agent, started
            finally:
                _kill(started)
    except ServerFailed as exc:
        pytest.fail(str(exc))


def _output(tmp_path: Path) -> str:
    return (tmp_path / "server.log").read_text(errors="replace")


@pytest.mark.parametrize("how", ["SIGINT to the group (Ctrl-C)", "SIGTERM to the server", "SIGHUP to the group"])
def test_a_signal_ends_the_server_and_every_process_it_started_within_5_s(tmp_path, how):
    with _visited_server(tmp_path) as (url, process, agent, started):
        assert len(_cluster(process)) >= 5, [p.cmdline() for p in started]  # scheduler, 2 nannies, 2 workers
        sent = time.monotonic()
        if how.startswith("SIGINT"):
            os.killpg(process.pid, signal.SIGINT)
        elif how.startswith("SIGTERM"):
            process.send_signal(signal.SIGTERM)
        else:
            os.killpg(process.pid, signal.SIGHUP)
        code = process.wait(30)
        exited = time.monotonic() - sent
        left = _wait_gone(started, max(0.0, 5.0 - exited))
        print(f"{how}: exit status {code} after {exited:.2f} s; processes left: {len(left)}")
        assert code == 0 and exited <= 5.0, (code, exited, _output(tmp_path)[-3000:])
        assert not left, [p.cmdline() for p in left]
        assert "Traceback" not in _output(tmp_path), _output(tmp_path)[-5000:]


def test_a_second_ctrl_c_exits_at_once(tmp_path):
    with _visited_server(tmp_path) as (url, process, agent, started):
        runner = Agent(url)  # a second tab, its run computing as the server stops
        runner.send(query_params=ENDLESS)
        runner.send(trigger={"key": "run"})
        runner.wait_for(r"iteration \d+ / 100000")
        os.killpg(process.pid, signal.SIGINT)
        time.sleep(0.1)
        sent = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(30)
        exited = time.monotonic() - sent
        print(f"second Ctrl-C: exit status {code} after {exited:.2f} s")
        assert code in (0, 130) and exited <= 1.5, (code, exited)
        assert not _wait_gone(started, 1.0)
        assert "Traceback" not in _output(tmp_path), _output(tmp_path)[-5000:]


def test_kill_9_of_the_server_leaves_no_process_of_its_cluster(tmp_path):
    """The cluster's processes end by themselves within 10 s of the server's death (each watches
    its parent); the check allows 15 s."""
    with _visited_server(tmp_path) as (url, process, agent, started):
        cluster = _cluster(process)
        killed = time.monotonic()
        process.kill()
        process.wait(10)
        left = _wait_gone(cluster, 15.0)
        print(f"kill -9: cluster processes gone after {time.monotonic() - killed:.1f} s; left: {len(left)}")
        assert not left, [p.cmdline() for p in left]
        assert time.monotonic() - killed <= 10.0


def _scheduler(process):
    return next(p for p in _cluster(process) if "distributed.Scheduler" in " ".join(p.cmdline()))


def test_a_killed_scheduler_costs_one_run_and_the_next_run_finishes(tmp_path):
    """The scheduler killed while idle: the next Run starts a fresh embedded cluster and finishes.
    Killed while a run computes: that run fails with a message, no page shows an exception box
    (that session, a new one, a diagnostic page), and the next Run finishes."""
    with _visited_server(tmp_path) as (url, process, agent, started):
        idle = _scheduler(process)
        idle.kill()
        pressed = time.monotonic()
        answer = agent.send(trigger={"key": "run"})
        assert not _exception_boxes(answer), _exception_boxes(answer)
        agent.wait_for(r"finished — ", timeout=120)
        print(f"Run right after the idle scheduler was killed: finished in {time.monotonic() - pressed:.1f} s")
        assert _alive([idle]) == []

        runner = Agent(url)
        runner.send(query_params=ENDLESS)
        runner.send(trigger={"key": "run"})
        runner.wait_for(r"iteration \d+ / 100000")
        busy = _scheduler(process)
        busy.kill()
        killed = time.monotonic()
        text = runner.wait_for(r"failed", timeout=60)
        assert "scheduler" in text and "stopped during this run" in text, text[-2000:]
        print(f"the computing run ended {time.monotonic() - killed:.1f} s after the scheduler was killed")
        other = Agent(url)  # a new tab
        for answer in (other.send(query_params=QUICK), other.send(page="conditioning"), agent.send(), runner.send()):
            assert not _exception_boxes(answer), _exception_boxes(answer)
        pressed = time.monotonic()
        answer = agent.send(trigger={"key": "run"})
        assert not _exception_boxes(answer)
        agent.wait_for(r"finished — ", timeout=120)
        print(f"Run after the computing scheduler was killed: finished in {time.monotonic() - pressed:.1f} s")
        assert _alive([busy]) == [] and _scheduler(process).pid not in (idle.pid, busy.pid)


# -- scripts and notebooks: nothing outlives the interpreter ------------------------------------------
def _marked(marker: str) -> list:
    """Processes whose environment holds ``KRR_TEST_MARK=marker`` (a script's cluster, after the
    script is gone: they are then nobody's children)."""
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("KRR_TEST_MARK") == marker and p.pid != os.getpid():
                out.append(p)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess, OSError):
            pass
    return out


APPTEST = """
import sys, time
from streamlit.testing.v1 import AppTest
from krr_app.jobs import executor
at = AppTest.from_file({app!r}, default_timeout=120)
at.query_params["auto_run"] = "false"
at.run()
assert not at.exception, at.exception
if sys.argv[1] == "started":           # the cluster up, then the interpreter exits without closing it
    deadline = time.time() + 120
    while executor.started_executor() is None and time.time() < deadline:
        time.sleep(0.2)
    assert executor.started_executor() is not None
print("script done", flush=True)
"""

LIBRARY = """
import os, sys
from krrcore.distributed import LocalClusterShape, connect
connection = connect(shape=LocalClusterShape(2, 1, 2**30))
assert len(connection.workers()) == 2
print("cluster up", flush=True)
if sys.argv[1] == "kill-9":
    os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize(
    "script, mode",
    [(APPTEST, "starting"), (APPTEST, "started"), (LIBRARY, "exit"), (LIBRARY, "kill-9")],
    ids=[
        "apptest-exits-while-the-cluster-starts",
        "apptest-exits-with-the-cluster-up",
        "library-exits-without-close",
        "library-killed",
    ],
)
def test_nothing_outlives_a_script_that_started_the_cluster(tmp_path, script, mode):
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KRR_TEST_MARK": marker}
    proc = subprocess.run(
        [sys.executable, "-c", script.format(app=str(ROOT / "app.py")), mode],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    ended = time.monotonic()
    try:
        assert proc.returncode == (-9 if mode == "kill-9" else 0), proc.stdout + proc.stderr[-5000:]
        left = _wait_gone(_marked(marker), 10.0)
        print(f"{mode}: processes left {time.monotonic() - ended:.1f} s after the script ended: {len(left)}")
        assert not left, [p.cmdline() for p in left]
        if mode != "kill-9":
            assert "Traceback" not in proc.stderr, proc.stderr[-5000:]
    finally:
        _kill(_marked(marker))

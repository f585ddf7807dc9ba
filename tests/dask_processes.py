"""Dask's own command-line processes for tests: `dask scheduler` and `dask worker`, started as
docs/serving.md says (separate processes on localhost, krrcore importable through PYTHONPATH, torch threads
from KRR_TORCH_THREADS) and always ended, even when the test fails."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def scheduler_and_workers(
    log_dir: Path,
    n_workers: int = 1,
    *,
    memory_limit: str | None = None,
    port: int | None = None,
    processes: list | None = None,
):
    """Start `dask scheduler` (on ``port``, default a free one) and ``n_workers`` `dask worker`
    processes (one thread each); yields the scheduler's address. ``processes``, if given, receives
    the ``Popen`` objects, the scheduler first. Every process is terminated (then waited for) on exit."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    log = open(log_dir / "cluster.log", "a")
    processes = [] if processes is None else processes
    processes.append(
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-dashboard",
                "--preload",
                "krr_app.jobs.preload",
            ],
            env=env,
            stdout=log,
            stderr=log,
        )
    )
    address = f"tcp://127.0.0.1:{port}"
    try:
        worker = [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--nthreads",
            "1",
            "--no-dashboard",
            "--preload",
            "krr_app.jobs.preload",
        ]
        if memory_limit is not None:
            worker += ["--memory-limit", memory_limit]
        for _ in range(n_workers):
            processes.append(subprocess.Popen(worker, env={**env, "KRR_TORCH_THREADS": "1"}, stdout=log, stderr=log))
        yield address
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.terminate()
        for process in processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        log.close()

"""The embedded cluster's processes: a Dask scheduler and nannies as ``python -m dask spec``
subprocesses (as Dask's ``SubprocessCluster`` starts them), each in a session of its own and each
ending when the process that started them is gone.

* A session of its own: a terminal's Ctrl-C or hang-up goes to its whole foreground process group;
  the cluster's processes are not in it, so only the process that started them hears it, and it
  ends them (:func:`kill`). Otherwise they died first and that process's shutdown waited the
  30 s connect timeout for a scheduler that was gone.
* Ending with their parent: the scheduler and each nanny run the preload
  (:mod:`krrcore.distributed.preload`) with ``--parent-pid``, which ends the process within half a second
  once its parent is gone, however it ended (``kill -9`` included) — as a Dask worker ends with
  its nanny, one level up.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
from distributed.core import Status
from distributed.deploy.spec import ProcessInterface, SpecCluster

log = logging.getLogger(__name__)


def embedded_cluster(n_workers: int, *, parent_pid: int, scheduler: dict, nanny: dict) -> SpecCluster:
    """A scheduler with the options ``scheduler`` and ``n_workers`` nannies with ``nanny`` (the
    worker's own options included), as subprocesses of ``parent_pid`` (this process): their
    preloads get ``--parent-pid``, the worker's does not (its parent is its nanny)."""
    watch = ["--parent-pid", str(parent_pid)]
    scheduler = {**scheduler, "preload_argv": [*scheduler.get("preload_argv", []), *watch]}
    nanny = {**nanny, "preload_nanny_argv": [*nanny.get("preload_nanny_argv", []), *watch]}
    worker = {"cls": NannyProcess, "options": {"worker_kwargs": nanny}}
    return SpecCluster(
        workers={i: worker for i in range(n_workers)},
        worker=worker,
        name="krrcore",
        scheduler={"cls": SchedulerProcess, "options": {"scheduler_kwargs": scheduler}},
        silence_logs=logging.WARN,
    )


def _spawn(*args: str):
    """``python -m dask spec ARGS`` in a session of its own. Dask's INFO lines (every connection,
    every worker) stay out of the starting process's output; warnings show."""
    env = {**os.environ, "DASK_LOGGING__DISTRIBUTED": os.environ.get("DASK_LOGGING__DISTRIBUTED", "warning")}
    return asyncio.create_subprocess_exec(sys.executable, "-m", "dask", "spec", *args, start_new_session=True, env=env)


class SchedulerProcess(ProcessInterface):
    """The scheduler process (as Dask's ``SubprocessScheduler``): its address is read from the
    scheduler file it writes, which is then removed."""

    def __init__(self, scheduler_kwargs: dict, timeout: float = 60.0):
        self.scheduler_kwargs = {
            "scheduler_file": os.path.join(tempfile.gettempdir(), f"krr-{uuid.uuid4()}.json"),
            **scheduler_kwargs,
        }
        self.timeout = timeout
        self.process = None
        super().__init__()

    async def start(self) -> None:
        spec = json.dumps({"cls": "distributed.Scheduler", "opts": self.scheduler_kwargs})
        self.process = await _spawn("--spec", spec)
        path = Path(self.scheduler_kwargs["scheduler_file"])
        deadline = time.monotonic() + self.timeout
        while self.process.returncode is None and time.monotonic() < deadline:
            try:
                self.address = json.loads(path.read_text())["address"]
                path.unlink(missing_ok=True)
                break
            except (OSError, ValueError, KeyError):  # not written yet, or half written
                await asyncio.sleep(0.1)
        else:
            status = self.process.returncode
            await self.close()
            raise RuntimeError(
                f"the embedded Dask scheduler did not start within {self.timeout:g} s "
                f"(exit status {status}; its log is above)"
            )
        await super().start()

    async def close(self) -> None:
        await _end(self.process)
        await super().close()


class NannyProcess(ProcessInterface):
    """One worker: a nanny process, which starts and watches its worker process."""

    def __init__(self, scheduler: str, name=None, worker_kwargs: dict | None = None):
        self.scheduler, self.name = scheduler, name
        self.worker_kwargs = dict(worker_kwargs or {})
        self.process = None
        super().__init__()

    async def start(self) -> None:
        spec = json.dumps({"cls": "distributed.Nanny", "opts": self.worker_kwargs})
        self.process = await _spawn(self.scheduler, "--spec", spec)
        await super().start()

    async def close(self) -> None:
        await _end(self.process)
        await super().close()


async def _end(process) -> None:
    if process is not None and process.returncode is None:
        kill([process])
        await process.wait()


def processes_of(cluster, workers: bool = True) -> list:
    """The cluster's subprocesses (``asyncio.subprocess.Process``), the scheduler first; none for
    a cluster that is not embedded (None)."""
    if cluster is None:
        return []
    out = [getattr(cluster.scheduler, "process", None)]
    if workers:
        out += [getattr(w, "process", None) for w in list(cluster.workers.values())]
    return [p for p in out if p is not None]


def running(process) -> bool:
    """Whether a subprocess still runs (an exited one not yet reaped is a zombie: it does not)."""
    try:
        return _alive(psutil.Process(process.pid))
    except psutil.NoSuchProcess:
        return False


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def kill(processes) -> None:
    """SIGKILL each process and its children (a nanny's worker), and wait up to 2 s for them to
    end. The event loop that started them reaps them."""
    victims = []
    for process in processes:
        try:
            tree = psutil.Process(process.pid)
            victims += [tree] + tree.children(recursive=True)  # the parent first: it cannot report its child's death
        except psutil.NoSuchProcess:
            continue
    for victim in victims:
        try:
            victim.kill()
        except psutil.NoSuchProcess:
            pass
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(_alive(v) for v in victims):
        time.sleep(0.05)


def forget(cluster) -> None:
    """Mark a cluster whose processes are gone as closed, so that Dask's exit hook does not try to
    close it again (it would wait 10 s for a scheduler that no longer exists)."""
    try:
        cluster.status = Status.closed
        cluster._loop_runner.stop()
    except Exception as exc:
        log.debug("stopping the embedded cluster's loop: %r", exc)


def end_embedded_clusters() -> int:
    """Kill the processes of every embedded cluster of this process that has not been closed,
    one still starting included, and mark it closed; returns how many there were. For a process
    that is ending and cannot wait for a start to finish."""
    ended = 0
    for cluster in list(SpecCluster._instances):
        if isinstance(getattr(cluster, "scheduler", None), SchedulerProcess) and cluster.status != Status.closed:
            kill(processes_of(cluster))
            forget(cluster)
            ended += 1
    return ended

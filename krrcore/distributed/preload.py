"""Dask preload for krrcore's scheduler, nannies and workers: ``--preload krrcore.distributed.preload``.

At start (:func:`dask_setup`): make ``krrcore`` importable when it was not pip-installed (the
embedded cluster runs from a checkout and passes ``--package-root``; Dask runs a preload file
from a copy, so the file cannot find the checkout itself, and imports nothing of krrcore before
that) — the scheduler needs it too, as it unpickles the tasks — and set a worker's torch intra-op
threads from ``KRR_TORCH_THREADS`` (:mod:`krrcore.distributed.workers`). Both import torch and the
kernel products at start: the scheduler unpickles the first task, a worker runs it, and neither should make
a user's first fit wait for torch to load (seconds on a busy machine). A front end whose tasks live
in a module of its own wraps :func:`setup` in a preload of its own that imports that module too.

``--parent-pid PID`` (the embedded cluster's scheduler and nannies): the process ends itself, and
its children, within :data:`WATCH_SECONDS` once PID is no longer its parent — the process that
started the cluster ended, however (``kill -9`` included) — as a Dask worker ends with its nanny.
A nanny imports nothing more: it runs no task.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

import click

#: How often a cluster process checks that the process which started it still runs.
WATCH_SECONDS = 0.5


def end_with_parent(parent_pid: int, interval: float = WATCH_SECONDS) -> threading.Thread:
    """Start a daemon thread that ends this process once ``parent_pid`` is no longer its parent
    (the parent died: the process was re-parented, to init or a subreaper)."""

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(interval)
        logging.getLogger(__name__).info("the process that started this Dask process (%d) is gone: ending", parent_pid)
        _end_process_tree()

    thread = threading.Thread(target=watch, name="krr-end-with-parent", daemon=True)
    thread.start()
    return thread


def _end_process_tree() -> None:
    """SIGKILL this process's children (a nanny's worker), then exit at once: nothing is left to
    report to, and a graceful close would wait for a scheduler that may be gone too."""
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.NoSuchProcess:
                pass
    finally:
        os._exit(0)


def setup(service, package_root: str | None = None, parent_pid: int | None = None) -> None:
    """What :func:`dask_setup` does, as a plain function (for a preload that adds to it)."""
    if parent_pid:
        end_with_parent(parent_pid)
    if package_root and package_root not in sys.path:
        sys.path.insert(0, package_root)
    from distributed import Nanny, Worker

    if isinstance(service, Nanny):
        return
    if isinstance(service, Worker):
        from krrcore.distributed.workers import set_torch_threads

        set_torch_threads()
    import krrcore.distributed.operators  # noqa: F401  (torch and the kernel products load now, not in the first fit)


@click.command()
@click.option("--package-root", default=None, help="Folder to put on sys.path so krrcore imports.")
@click.option("--parent-pid", type=int, default=None, help="End this process when this PID is no longer its parent.")
def dask_setup(service, package_root, parent_pid):
    setup(service, package_root, parent_pid)

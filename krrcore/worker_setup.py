"""Dask preload for krrcore's scheduler and workers: ``--preload krrcore.worker_setup``.

At start (:func:`dask_setup`): make ``krrcore`` importable when it was not pip-installed (the
embedded cluster runs from a checkout and passes ``--package-root``; Dask runs a preload file
from a copy, so the file cannot find the checkout itself, and imports nothing of krrcore before
that) — the scheduler needs it too, as it unpickles the tasks — and set a worker's torch intra-op
threads from ``KRR_TORCH_THREADS`` (:mod:`krrcore.distributed.workers`). Both import
:mod:`krrcore.remote` (torch and the solvers) at start: the scheduler unpickles the first task, a
worker runs it, and neither should make a user's first run wait for torch to load (seconds on a
busy machine).
"""
from __future__ import annotations

import sys

import click


@click.command()
@click.option("--package-root", default=None, help="Folder to put on sys.path so krrcore imports.")
def dask_setup(service, package_root):
    if package_root and package_root not in sys.path:
        sys.path.insert(0, package_root)
    from distributed import Worker

    if isinstance(service, Worker):
        from krrcore.distributed.workers import set_torch_threads

        set_torch_threads()
    import krrcore.remote  # noqa: F401  (torch and the solvers load now, not in the first run)

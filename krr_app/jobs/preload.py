"""Dask preload for the app's scheduler, nannies and workers: ``--preload krr_app.jobs.preload``.

krrcore's preload (:func:`krrcore.distributed.preload.setup`: the package root on ``sys.path``, the
end with the process that started the cluster, a worker's torch threads), then the app's run task
(:mod:`krr_app.jobs.worker`) imported at start: the scheduler unpickles the first run's task and a
worker runs it, and neither should make a visitor's first run wait for the imports. Dask runs a
preload file from a copy, so nothing of krrcore or krr_app is imported before the package root is
on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

#: This file, for :func:`krrcore.distributed.connect`'s ``preload`` (the embedded cluster).
PRELOAD = Path(__file__).resolve()


@click.command()
@click.option("--package-root", default=None, help="Folder to put on sys.path so krrcore and krr_app import.")
@click.option("--parent-pid", type=int, default=None, help="End this process when this PID is no longer its parent.")
def dask_setup(service, package_root, parent_pid):
    if package_root and package_root not in sys.path:
        sys.path.insert(0, package_root)
    from distributed import Nanny

    from krrcore.distributed.preload import setup

    setup(service, package_root, parent_pid)
    if not isinstance(service, Nanny):
        import krr_app.jobs.worker  # noqa: F401  (the run task loads now, not in the first run)

"""Dask preload for krrcore's scheduler and workers: ``--preload krrcore.worker_setup``.

At start (:func:`dask_setup`): make ``krrcore`` importable when it was not pip-installed (the
embedded cluster runs from a checkout and passes ``--package-root``; Dask runs a preload file
from a copy, so the file cannot find the checkout itself) — the scheduler needs it too, as it
unpickles the tasks — and set a worker's torch intra-op threads from ``KRR_TORCH_THREADS`` so
that workers × threads never exceeds the cores. Both import :mod:`krrcore.remote` (torch and the
solvers) at start: the scheduler unpickles the first task, a worker runs it, and neither should
make a user's first run wait for torch to load (seconds on a busy machine).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import click

#: Torch intra-op threads of a worker; unset keeps torch's own choice.
TORCH_THREADS_ENV = "KRR_TORCH_THREADS"
#: The folder holding the ``krrcore`` package.
PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent)


def set_torch_threads() -> int:
    """Apply ``KRR_TORCH_THREADS`` to this process; returns torch's thread count."""
    import torch

    raw = os.environ.get(TORCH_THREADS_ENV, "").strip()
    if raw:
        threads = max(1, int(raw))
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    return torch.get_num_threads()


@click.command()
@click.option("--package-root", default=None, help="Folder to put on sys.path so krrcore imports.")
def dask_setup(service, package_root):
    if package_root and package_root not in sys.path:
        sys.path.insert(0, package_root)
    from distributed import Worker

    if isinstance(service, Worker):
        set_torch_threads()
    import krrcore.remote  # noqa: F401  (torch and the solvers load now, not in the first run)

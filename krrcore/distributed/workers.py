"""What a Dask worker sets up for krrcore's tasks: torch's intra-op threads.

Dask's nanny starts workers with ``OMP_NUM_THREADS=1``; the embedded cluster passes
``KRR_TORCH_THREADS`` instead, so that workers × threads never exceeds the cores. The preload
(:mod:`krrcore.distributed.preload`) applies it when a worker starts, and every task on a shard applies
it again (:func:`use_worker_threads`), since a worker started without the preload has only its
thread slots to go by.
"""

from __future__ import annotations

import os

#: Torch intra-op threads of a worker; unset keeps torch's own choice.
TORCH_THREADS_ENV = "KRR_TORCH_THREADS"


def set_torch_threads() -> int:
    """Apply ``KRR_TORCH_THREADS`` to this process; returns torch's thread count."""
    import torch

    raw = os.environ.get(TORCH_THREADS_ENV, "").strip()
    if raw:
        threads = max(1, int(raw))
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    return torch.get_num_threads()


def use_worker_threads() -> None:
    """torch's threads = the worker's thread slots (``KRR_TORCH_THREADS`` wins)."""
    import torch

    if os.environ.get(TORCH_THREADS_ENV):
        set_torch_threads()
        return
    try:
        from distributed import get_worker

        threads = get_worker().state.nthreads
    except (ImportError, ValueError):
        return
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)

"""krrcore's one memory policy: how much memory a computation may use, and how to measure it.

Every solver and diagnostic that allocates in proportion to the data takes ``memory_budget``:
bytes, or None for the defaults below. A computation has two kinds of large allocation, and the
policy gives each its own default; a number given by the user bounds both:

* **scratch** — a blocked kernel product's reusable block buffer and per-block intermediates
  (:class:`krrcore.ops.KernelOperator`). Default: :data:`SCRATCH_FRACTION` of free memory, at
  most :data:`SCRATCH_CAP` (larger blocks stop paying off on a CPU well before that).
  :func:`scratch_budget` resolves it.
* **storage** — a matrix held for a whole computation: the n×n kernel matrix a solver stores, a
  Cholesky factor, the eigenvectors of an exact leverage-score computation. Default:
  :data:`STORAGE_FRACTION` of free memory. :func:`storage_budget` resolves it;
  :func:`check_fits` refuses a computation that would exceed it with a :class:`MemoryBudgetError`
  naming what was needed, what was allowed and what to do instead; :func:`fits` asks without
  raising (e.g. "store K or recompute it on the fly?").

Free memory (:func:`available_bytes`) is read at the time of the call: the GPU's free memory for a
CUDA device, the operating system's ``MemAvailable`` for the CPU. :class:`PeakMemory` measures
what a block of code really allocated (benchmarks, tests, the app's run report).
"""
from __future__ import annotations

import numbers
import os

import torch

from .device import default_device

#: Share of free memory a blocked kernel product's scratch may use when no budget is given.
SCRATCH_FRACTION = 0.10
#: Upper bound of the default scratch budget, in bytes.
SCRATCH_CAP = 1 << 30
#: Share of free memory a computation may hold in stored matrices when no budget is given.
STORAGE_FRACTION = 0.5


class MemoryBudgetError(ValueError):
    """A computation would need more memory than its budget allows; the message says how much,
    what was allowed and what to do instead."""


def available_bytes(device: torch.device | str | None = None) -> int:
    """Free memory on ``device`` now: the GPU's free memory, or the OS's MemAvailable for the CPU.

    ``device`` None means the default device (CUDA when available, else the CPU).
    """
    device = torch.device(device) if device is not None else default_device()
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return int(free)
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def check_memory_budget(memory_budget) -> int | None:
    """``memory_budget`` as given by a user: None, or a positive whole number of bytes."""
    if memory_budget is None:
        return None
    if isinstance(memory_budget, bool) or not isinstance(memory_budget, numbers.Real) or memory_budget <= 0 \
            or int(memory_budget) != memory_budget:
        raise ValueError(f"memory_budget must be a positive whole number of bytes or None, got {memory_budget!r}")
    return int(memory_budget)


def scratch_budget(memory_budget: int | None = None, device=None) -> int:
    """Bytes a blocked kernel product may use for scratch: ``memory_budget`` when given, else
    ``min(SCRATCH_FRACTION × free memory, SCRATCH_CAP)``."""
    given = check_memory_budget(memory_budget)
    if given is not None:
        return given
    return int(min(SCRATCH_FRACTION * available_bytes(device), SCRATCH_CAP))


def storage_budget(memory_budget: int | None = None, device=None) -> int:
    """Bytes a computation may hold in stored matrices: ``memory_budget`` when given, else
    ``STORAGE_FRACTION × free memory``."""
    given = check_memory_budget(memory_budget)
    if given is not None:
        return given
    return int(STORAGE_FRACTION * available_bytes(device))


def fits(need_bytes: int, memory_budget: int | None = None, device=None) -> bool:
    """Whether ``need_bytes`` of stored matrices fit :func:`storage_budget`."""
    return need_bytes <= storage_budget(memory_budget, device)


def gib(n_bytes: float) -> str:
    """Bytes as a short GiB figure for messages ("1.5 GiB", "0.00012 GiB")."""
    return f"{n_bytes / 2**30:.3g} GiB"


def check_fits(need_bytes: int, what: str, advice: str, memory_budget: int | None = None, device=None) -> None:
    """Raise :class:`MemoryBudgetError` when ``need_bytes`` exceed :func:`storage_budget`.

    ``what`` names the allocation ("ExactKRR (n=30000, two n×n float64 matrices)"), ``advice``
    what to do instead ("subsample, or use Falkon / NystromPCG").
    """
    limit = storage_budget(memory_budget, device)
    if need_bytes > limit:
        source = "memory_budget" if memory_budget is not None else f"{STORAGE_FRACTION:.0%} of free memory"
        raise MemoryBudgetError(f"{what} needs {gib(need_bytes)} but only {gib(limit)} may be used "
                                f"({source}): {advice}")


# ------------------------------------------------------------------------------------------------
# Measuring
# ------------------------------------------------------------------------------------------------
def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


class PeakMemory:
    """``with PeakMemory() as mem: ...`` then ``mem.extra_bytes``: peak resident memory of a block
    of code (Linux; NaN elsewhere).

    The process's resident high-water mark (VmHWM) is reset on entry by writing 5 to
    ``/proc/self/clear_refs``, so the figure belongs to the block, not to an earlier transient (an
    import, a previous solver). ``extra_bytes`` = peak during the block − resident size at its
    start: everything torch, BLAS and Python allocate, not only what we intend.
    """

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.start = _status_kib("VmRSS") * 1024
            self.supported = True
        except OSError:
            self.supported = False
        return self

    def __exit__(self, *exc):
        if self.supported:
            self.peak = _status_kib("VmHWM") * 1024
            self.extra_bytes = float(max(0, self.peak - self.start))
        else:
            self.peak = self.extra_bytes = float("nan")
        return False

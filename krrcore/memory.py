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

Before a fit allocates anything, its estimator's ``memory_estimate(n, d, n_outputs)`` gives a
:class:`MemoryEstimate`: the parts alive at its peak (stored matrices, scratch, data), checked
against the storage budget (what it stores) and the free memory (its whole peak), and, on a CPU,
the set-up and per-iteration seconds. ``fit`` checks it first: :class:`MemoryLimitError`
(with the numbers and what to change), :class:`TimeLimitError` past the solver's ``timeout``.
"""

from __future__ import annotations

import math
import warnings
import numbers
import os
from dataclasses import dataclass
from typing import NamedTuple

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


def worker_memory_left() -> int:
    """Bytes this process may still use: on a Dask worker, its memory limit minus its resident
    memory (the nanny restarts a worker past its limit), never more than the machine's free
    memory; elsewhere the free memory. The sharded products size their blocks from it."""
    free = available_bytes("cpu")
    try:
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError):
        limit = None
    if limit:
        import psutil

        free = min(free, max(int(limit) - psutil.Process().memory_info().rss, 0))
    return int(free)


def check_memory_budget(memory_budget) -> int | None:
    """``memory_budget`` as given by a user: None, or a positive whole number of bytes."""
    if memory_budget is None:
        return None
    if (
        isinstance(memory_budget, bool)
        or not isinstance(memory_budget, numbers.Real)
        or memory_budget <= 0
        or int(memory_budget) != memory_budget
    ):
        raise ValueError(f"memory_budget must be a positive whole number of bytes or None, got {memory_budget!r}")
    return int(memory_budget)


def scratch_budget(memory_budget: int | None = None, device=None, *, available: int | None = None) -> int:
    """Bytes a blocked kernel product may use for scratch: ``memory_budget`` when given, else
    ``min(SCRATCH_FRACTION × free memory, SCRATCH_CAP)``. ``available`` replaces the free memory
    of ``device`` (a Dask worker passes what its memory limit leaves, :mod:`krrcore.distributed`)."""
    given = check_memory_budget(memory_budget)
    if given is not None:
        return given
    free = available_bytes(device) if available is None else available
    return int(min(SCRATCH_FRACTION * free, SCRATCH_CAP))


def storage_budget(memory_budget: int | None = None, device=None, *, available: int | None = None) -> int:
    """Bytes a computation may hold in stored matrices: ``memory_budget`` when given, else
    ``STORAGE_FRACTION × free memory`` (``available`` as in :func:`scratch_budget`)."""
    given = check_memory_budget(memory_budget)
    if given is not None:
        return given
    free = available_bytes(device) if available is None else available
    return int(STORAGE_FRACTION * free)


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
        raise MemoryBudgetError(
            f"{what} needs {gib(need_bytes)} but only {gib(limit)} may be used ({source}): {advice}"
        )


def check_device_room(need_bytes: int, what: str, advice, device) -> None:
    """Raise :class:`MemoryBudgetError` when ``need_bytes`` exceed the free memory of ``device`` now:
    for one allocation checked just before it is made (FALKON's M×M preconditioner buffer).
    ``advice`` is what to do instead, or a function of the free bytes returning it."""
    free = available_bytes(device)
    if need_bytes > free:
        advice = advice(free) if callable(advice) else advice
        raise MemoryBudgetError(
            f"{what} needs {gib(need_bytes)} but {torch.device(device)} has {gib(free)} free: {advice}"
        )


# ---------------------------------------------------------------------------------------------
# Resource estimates: what a fit will hold and how long it will take, before anything is allocated
# ---------------------------------------------------------------------------------------------
#: Fits whose estimated set-up plus first iteration exceed this many seconds warn before starting.
SLOW_FIT_SECONDS = 60.0

#: CPU cost model of one kernel entry in a blocked pass (distances by GEMM, the kernel function,
#: the two mat-vecs of a fused product): base + per-feature seconds, by dtype. Measured with
#: ``benchmarks/bench_estimates.py --part 1`` on the development machine (2 cores, AVX-512, MKL;
#: cache-sized blocks, exp2); order of magnitude, for admission control and warnings, never for a
#: test's assertion.
_ENTRY_SECONDS = {torch.float32: (0.45e-9, 0.013e-9), torch.float64: (1.3e-9, 0.031e-9)}
#: Kernels without a GEMM form (L1 distances, ``scratch_blocks`` > 0) pay per feature instead.
_SCRATCH_FEATURE_SECONDS = 0.5e-9
#: Dense GEMM rate (field notes: 37 / 13 GFLOP/s on 2 cores).
_GEMM_FLOPS = {torch.float32: 37e9, torch.float64: 13e9}
#: Memory bandwidth for streaming a stored matrix through a mat-vec (bytes per second).
_STREAM_BYTES_PER_SECOND = 8e9


class MemoryLimitError(MemoryBudgetError, MemoryError):
    """A fit refused before allocating: what it would store exceeds the storage budget, or its
    whole peak exceeds the free memory.

    A :class:`MemoryBudgetError` (so a ``ValueError``: a choice of parameters that cannot work) and
    a ``MemoryError`` (what it is about): any of the three ``except`` clauses catches it. The message
    carries the numbers and what to change; ``estimate`` is the full :class:`MemoryEstimate`.
    """

    def __init__(self, message: str, estimate: "MemoryEstimate"):
        super().__init__(message)
        self.estimate = estimate


class TimeLimitError(ValueError):
    """A fit refused before starting: its estimated set-up and first iteration exceed ``timeout``."""

    def __init__(self, message: str, estimate: "MemoryEstimate"):
        super().__init__(message)
        self.estimate = estimate


class SlowFitWarning(UserWarning):
    """The estimated set-up plus first iteration of a fit exceeds :data:`SLOW_FIT_SECONDS`."""


def _size(n_bytes: float) -> str:
    return gib(n_bytes) if n_bytes >= 2**30 else f"{n_bytes / 2**20:.3g} MiB"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


#: What a part of an estimate is: "stored" (held through the computation: matrices, factors,
#: iterates, float64 copies; checked against the storage budget), "scratch" (kernel block buffers,
#: sized from the scratch budget) or "data" (the training data as the solver holds it).
PART_KINDS = ("stored", "scratch", "data")


class MemoryPart(NamedTuple):
    name: str
    bytes: int
    kind: str


@dataclass(frozen=True)
class MemoryEstimate:
    """What a fit of one estimator on n points will hold at its peak, and how long it will take.

    ``parts`` are the allocations alive at the peak, largest first (:class:`MemoryPart`);
    ``peak_bytes`` is their sum and ``stored_bytes`` the sum of the stored ones, which
    ``limit_bytes`` (the storage budget, :func:`storage_budget`) bounds; the whole peak must also fit
    ``available_bytes``, the free memory when the estimate was made. ``setup_seconds`` and
    ``seconds_per_iteration`` (solver work plus the amortised evaluation of the records) come from
    a CPU cost model and are None on other devices. ``suggestion`` says what to change.
    """

    solver: str
    n: int
    d: int
    n_outputs: int
    dtype: str
    parts: tuple[MemoryPart, ...]
    limit_bytes: int
    available_bytes: int
    setup_seconds: float | None = None
    seconds_per_iteration: float | None = None
    suggestion: str = ""

    @property
    def peak_bytes(self) -> int:
        return int(sum(p.bytes for p in self.parts))

    @property
    def stored_bytes(self) -> int:
        return int(sum(p.bytes for p in self.parts if p.kind == "stored"))

    @property
    def fits(self) -> bool:
        return self.stored_bytes <= self.limit_bytes and self.peak_bytes <= self.available_bytes

    def dominant_parts(self, count: int = 3) -> tuple[MemoryPart, ...]:
        return self.parts[:count]

    def seconds_for(self, iterations: int) -> float | None:
        """Estimated seconds of set-up plus ``iterations`` iterations (None off the CPU)."""
        if self.setup_seconds is None or self.seconds_per_iteration is None:
            return None
        return self.setup_seconds + iterations * self.seconds_per_iteration

    def describe(self) -> str:
        """One paragraph: the peak, its dominant parts, what is stored against which budget, the time."""
        parts = ", ".join(f"{p.name} {_size(p.bytes)}" for p in self.dominant_parts())
        text = (
            f"{self.solver} on n={self.n:,} points (d={self.d}, {self.dtype}) needs about "
            f"{_size(self.peak_bytes)} at its peak ({parts}), of which it stores {_size(self.stored_bytes)} "
            f"against a storage budget of {_size(self.limit_bytes)}"
        )
        if self.peak_bytes > self.available_bytes:
            text += f"; only {_size(self.available_bytes)} is free"
        if self.setup_seconds is not None and self.seconds_per_iteration:
            text += (
                f"; estimated set-up {_duration(self.setup_seconds)} and "
                f"{_duration(self.seconds_per_iteration)} per iteration on this CPU"
            )
        elif self.setup_seconds is not None:
            text += f"; estimated {_duration(self.setup_seconds)} on this CPU"
        return text + "."

    def check(self, *, timeout: float | None = None) -> "MemoryEstimate":
        """Raise :class:`MemoryLimitError` if the fit does not fit, :class:`TimeLimitError` if the
        estimated set-up plus one iteration exceeds ``timeout`` seconds; return self otherwise."""
        if not self.fits:
            raise MemoryLimitError(f"{self.describe()} Refused before allocating: {self.suggestion}.", self)
        first = self.seconds_for(1)
        if timeout is not None and first is not None and first > timeout:
            raise TimeLimitError(
                f"{self.describe()} Refused before starting: {self._first_part()} would take about "
                f"{_duration(first)}, beyond timeout={timeout:g} s; {self.suggestion}.",
                self,
            )
        return self

    def _first_part(self) -> str:
        """What :meth:`seconds_for` (1) counts: an iterative fit's set-up and first iteration, or
        the whole of a computation without iterations (a leverage path)."""
        return "set-up and one iteration" if self.seconds_per_iteration else "it"


def warn_if_slow(estimate: MemoryEstimate, stacklevel: int = 2) -> None:
    """A :class:`SlowFitWarning` when ``estimate``'s set-up plus first iteration exceeds
    :data:`SLOW_FIT_SECONDS` (``stacklevel`` as :func:`warnings.warn`'s, from the caller)."""
    first = estimate.seconds_for(1)
    if first is None or first <= SLOW_FIT_SECONDS:
        return
    faster = f"; to go faster: {estimate.suggestion}" if estimate.suggestion else ""
    what = "Set-up and the first iteration" if estimate.seconds_per_iteration else "It"
    warnings.warn(f"{estimate.describe()} {what} may take a while{faster}.", SlowFitWarning, stacklevel=stacklevel + 1)


class CostModel:
    """Builds a :class:`MemoryEstimate`: parts alive at the peak, set-up and per-iteration seconds.

    Time is counted in kernel entries (each costs a distance, the kernel function and its share
    of the products), dense flops and streamed bytes, converted with the CPU rates above.
    """

    def __init__(
        self,
        *,
        d: int,
        dtype: torch.dtype,
        device,
        memory_budget: int | None = None,
        scratch_blocks: int = 0,
        available: int | None = None,
    ):
        self.d, self.dtype, self.itemsize = d, dtype, torch.finfo(dtype).bits // 8
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        # ``available``: the memory this model may count on instead of the device's free memory
        # (a Dask worker's limit minus what it holds already).
        self.available = available
        self.limit_bytes = storage_budget(memory_budget, self.device, available=available)
        self.scratch_bytes = scratch_budget(memory_budget, self.device, available=available)
        self.scratch_blocks = scratch_blocks
        self.parts: dict[str, MemoryPart] = {}
        self.setup = 0.0
        self.iteration = 0.0

    def hold(self, name: str, n_bytes: float, kind: str = "stored") -> None:
        """An allocation alive at the peak (repeated names add up)."""
        if kind not in PART_KINDS:
            raise ValueError(f"kind must be one of {PART_KINDS}, got {kind!r}")
        if n_bytes > 0:
            previous = self.parts.get(name, MemoryPart(name, 0, kind)).bytes
            self.parts[name] = MemoryPart(name, previous + int(n_bytes), kind)

    @property
    def stored_bytes(self) -> int:
        return int(sum(p.bytes for p in self.parts.values() if p.kind == "stored"))

    def entry_seconds(self, entries: float, dtype: torch.dtype | None = None) -> float:
        dtype = dtype or self.dtype
        base, per_feature = _ENTRY_SECONDS[dtype]
        if self.scratch_blocks:
            per_feature = _SCRATCH_FEATURE_SECONDS
        return entries * (base + per_feature * self.d)

    def flop_seconds(self, flops: float, dtype: torch.dtype | None = None) -> float:
        return flops / _GEMM_FLOPS[dtype or self.dtype]

    def stream_seconds(self, n_bytes: float) -> float:
        return n_bytes / _STREAM_BYTES_PER_SECOND

    def largest_fitting(self, part_bytes: float, bytes_per_unit_sq: float) -> int:
        """Largest m whose m²·bytes_per_unit_sq, in place of ``part_bytes``, keeps the stored parts
        within the storage budget (the M or n a suggestion names)."""
        room = max(self.limit_bytes - (self.stored_bytes - part_bytes), 0.0)
        return int(math.isqrt(int(room // bytes_per_unit_sq)))

    def build(self, solver: str, n: int, n_outputs: int, suggestion: str) -> MemoryEstimate:
        parts = tuple(sorted(self.parts.values(), key=lambda p: -p.bytes))
        timed = self.device.type == "cpu"
        return MemoryEstimate(
            solver=solver,
            n=int(n),
            d=int(self.d),
            n_outputs=int(n_outputs),
            dtype=str(self.dtype).removeprefix("torch."),
            parts=parts,
            limit_bytes=self.limit_bytes,
            available_bytes=available_bytes(self.device) if self.available is None else self.available,
            setup_seconds=self.setup if timed else None,
            seconds_per_iteration=self.iteration if timed else None,
            suggestion=suggestion,
        )


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

"""The one place that decides device and dtype, and how a CPU computation on a helper thread gets
the cores; everything else follows its input tensors.

How much memory a computation may use is :mod:`krrcore.memory`."""

from __future__ import annotations

import functools

import torch


def default_device() -> torch.device:
    """CUDA when available, the CPU otherwise."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def resolve_dtype(dtype) -> torch.dtype:
    """Accept ``torch.float32``/``"float32"``/``np.float32``-like names; only float32/64."""
    if isinstance(dtype, torch.dtype):
        resolved = dtype
    else:
        resolved = {
            "float32": torch.float32,
            "float64": torch.float64,
            "single": torch.float32,
            "double": torch.float64,
        }.get(str(dtype).split(".")[-1])
    if resolved not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return resolved


@functools.cache
def _openmp_runtimes() -> tuple:
    """The OpenMP runtimes loaded in this process (torch's, and MKL's through it), as threadpoolctl
    finds them; empty where it finds none."""
    try:
        from threadpoolctl import ThreadpoolController

        return tuple(c.dynlib for c in ThreadpoolController().select(user_api="openmp").lib_controllers)
    except Exception:  # noqa: BLE001 — an unknown runtime only loses the release, never the result
        return ()


def release_openmp_threads() -> None:
    """Free the calling thread's idle OpenMP worker threads (``omp_pause_resource_all``, soft: they
    are made again by its next parallel region).

    Call it on a thread that hands its work to another and waits. Every thread that has run a
    parallel torch or MKL operation keeps its own pool of OpenMP workers; once a process holds more
    such threads than cores, GNU OpenMP stops spin-waiting between parallel regions, and each region
    then waits for a sleeping thread to wake: a helper thread's eigenproblems, triangular solves and
    FALKON fits run several times slower than the same work on the calling thread
    (``python -m benchmarks.bench_helper_thread``; docs/measurements.md)."""
    for runtime in _openmp_runtimes():
        pause = getattr(runtime, "omp_pause_resource_all", None)
        if pause is not None:
            pause(1)  # omp_pause_soft

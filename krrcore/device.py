"""The one place that decides device and dtype; everything else follows its input tensors.

How much memory a computation may use is :mod:`krrcore.memory`."""

from __future__ import annotations

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

"""The one place that decides device and dtype; everything else follows its input tensors."""
from __future__ import annotations

import os

import torch


def default_device() -> torch.device:
    """CUDA when available, the CPU otherwise."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def resolve_dtype(dtype) -> torch.dtype:
    """Accept ``torch.float32``/``"float32"``/``np.float32``-like names; only float32/64."""
    if isinstance(dtype, torch.dtype):
        resolved = dtype
    else:
        resolved = {"float32": torch.float32, "float64": torch.float64,
                    "single": torch.float32, "double": torch.float64}.get(str(dtype).split(".")[-1])
    if resolved not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return resolved


def available_memory_bytes(device: torch.device | str | None = None) -> int:
    """Free memory on ``device``: GPU free memory, or the OS's MemAvailable for the CPU."""
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


#: Fraction of free memory a blocked kernel product may use when no budget is given.
DEFAULT_BUDGET_FRACTION = 0.10
#: Upper bound of the default budget: larger blocks stop paying off well before this on a CPU.
DEFAULT_BUDGET_CAP = 1 << 30


def default_memory_budget(device: torch.device | str | None = None) -> int:
    """Default per-product memory budget in bytes: 10% of free memory, at most 1 GiB."""
    return int(min(DEFAULT_BUDGET_FRACTION * available_memory_bytes(device), DEFAULT_BUDGET_CAP))

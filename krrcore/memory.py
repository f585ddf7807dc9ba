"""Peak resident memory of a block of code (Linux), for benchmarks, tests and the app.

The process's resident high-water mark (VmHWM) is reset on entry by writing 5 to
``/proc/self/clear_refs``, so the figure belongs to the block, not to an earlier transient (an
import, a previous solver). ``extra_bytes`` = peak during the block − resident size at its start:
everything torch, BLAS and Python allocate, not only what we intend. Elsewhere it is NaN.
"""
from __future__ import annotations


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


class PeakMemory:
    """``with PeakMemory() as mem: ...`` then ``mem.extra_bytes`` (float; NaN if unsupported)."""

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

"""Shared benchmark plumbing: peak-memory measurement, the GEMM roof, table printing.

Peak memory is the process's resident-set high-water mark (VmHWM) after resetting it
(`/proc/self/clear_refs` ← 5, Linux), minus the resident size just before the measured call:
it counts every allocation torch, BLAS and Python make, not only the ones we intend.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch


def set_threads() -> int:
    """Use every core (2 here); benchmarks compare ratios measured in one run."""
    n = os.cpu_count() or 1
    torch.set_num_threads(n)
    return n


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


class PeakMemory:
    """Context manager: ``extra_bytes`` = peak RSS during the block − RSS at its start."""

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.supported = True
        except OSError:
            self.supported = False
        self.start = _status_kib("VmRSS") * 1024
        return self

    def __exit__(self, *exc):
        self.peak = _status_kib("VmHWM") * 1024
        self.extra_bytes = max(0, self.peak - self.start) if self.supported else float("nan")
        return False


def run_isolated(script: str, config: dict, timeout: float = 3600) -> dict:
    """Run ``script --child '<json config>'`` in a fresh interpreter and parse its last JSON line.

    A fresh process per configuration keeps the allocator's retained memory of one case out of
    the next case's peak-memory figure.
    """
    import json
    import subprocess

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, script, "--child", json.dumps(config)], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=root)
    if proc.returncode != 0:
        return {**config, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def child_config(argv=None) -> dict | None:
    """The config of a ``--child`` invocation, or None in the parent."""
    import json

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) >= 2 and argv[0] == "--child":
        return json.loads(argv[1])
    return None


def emit(result: dict) -> None:
    """A child's result: one JSON line on stdout."""
    import json

    print(json.dumps(result), flush=True)


def gemm_gflops(dtype=torch.float32, size: int = 2048, repeats: int = 3) -> float:
    """Measured matrix-multiply throughput: the compute roof for kernel passes."""
    a = torch.randn(size, size, dtype=dtype)
    b = torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * size ** 3 / best / 1e9


def timed(fn, repeats: int = 1):
    """(best seconds, last result) over ``repeats`` calls."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def print_table(rows: list[dict], title: str = "") -> None:
    """Plain fixed-width table (no dependency) of a list of dicts with the same keys."""
    if title:
        print(f"\n## {title}")
    if not rows:
        print("(no rows)")
        return
    cols = list(rows[0])
    text = [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(t[i]) for t in text)) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w) for c, w in zip(cols, widths)))
    for t in text:
        print("  ".join(v.rjust(w) for v, w in zip(t, widths)))


def _fmt(v) -> str:
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.3e}"
    return str(v)


def quick_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--quick", action="store_true", help="small sizes: checks the script runs, not a measurement")
    return p

"""Shared benchmark plumbing: isolated child processes, the GEMM roof, table printing.

Run every script as a module from the repository root (``python -m benchmarks.bench_falkon``), with
krrcore installed (``pip install -r requirements.txt``) or importable from there: no script edits
``sys.path``. Peak memory is :class:`krrcore.memory.PeakMemory`.
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


def run_isolated(module: str, config: dict, timeout: float = 3600) -> dict:
    """Run ``python -m <module> --child '<json config>'`` from the repository root in a fresh
    interpreter and parse its last JSON line. ``module`` is the calling script's ``__spec__.name``
    (e.g. "benchmarks.bench_falkon": scripts run as modules, so ``__name__`` is "__main__").

    A fresh process per configuration keeps the allocator's retained memory of one case out of
    the next case's peak-memory figure.
    """
    import json
    import subprocess

    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-m", module, "--child", json.dumps(config)], capture_output=True,
                          text=True, timeout=timeout, cwd=root)
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

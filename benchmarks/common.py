"""Shared benchmark plumbing: isolated child processes, the hardware floor, table printing.

Run every script as a module from the repository root (``python -m benchmarks.bench_falkon``, or
the whole suite with ``python -m benchmarks``), with krrcore installed (``pip install -r
requirements.txt``) or importable from there: no script edits ``sys.path``.

Peak memory is :class:`krrcore.memory.PeakMemory`: the process's resident set (RSS) high-water
mark, reset when a measured block starts — sampled by the kernel at every page fault, so it sees
torch, BLAS and peers alike (tracemalloc sees only Python's allocator) and misses no short peak,
as a polling thread could.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch


def find_chromium() -> tuple[str | None, str]:
    """(the Chrome/Chromium the app case drives and kaleido exports PNGs with, or None; where it
    was looked for). ``BROWSER_PATH`` first, as kaleido does, then ``chromium`` on the PATH."""
    override = os.environ.get("BROWSER_PATH")
    if override:
        if os.path.isfile(override) and os.access(override, os.X_OK):
            return override, f"BROWSER_PATH={override}"
        return None, f"BROWSER_PATH={override} is not an executable file"
    found = shutil.which("chromium")
    return found, (f"chromium at {found}" if found else "no chromium on the PATH and BROWSER_PATH unset")


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
    proc = subprocess.run(
        [sys.executable, "-m", module, "--child", json.dumps(config)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=root,
    )
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


#: False: :func:`call_isolated` runs in this process (the suite's --quick smoke run, where five
#: seconds of imports per child would dominate). Peak memory then still starts from each call.
ISOLATE = True


def call_isolated(func, config: dict, timeout: float = 3600) -> dict:
    """``func(config)`` in a fresh interpreter (see :func:`run_isolated`), or in this one when
    :data:`ISOLATE` is off; ``func`` is a module-level function returning a JSON-able dict. A
    failure comes back as the config plus ``error`` (the exception's last line)."""
    if not ISOLATE:
        try:
            return func(config)
        except Exception as exc:  # reported in the case's table, as a child's failure is
            return {**config, "error": f"{type(exc).__name__}: {exc}"}
    result = run_isolated(
        __spec__.name, {"call": f"{func.__module__}:{func.__qualname__}", "config": config}, timeout=timeout
    )
    return {**config, "error": result["error"]} if "error" in result else result


def _serve_call(request: dict) -> dict:
    import importlib

    module, name = request["call"].split(":")
    return getattr(importlib.import_module(module), name)(request["config"])


def pass_flops(n: int, M: int, d: int) -> float:
    """Floating-point work of one fused pass K_nMᵀ(K_nM v): distances GEMM (2nMd) + two mat-vecs (4nM)."""
    return 2.0 * n * M * d + 4.0 * n * M


def hardware_floor(kernel, X: torch.Tensor, C: torch.Tensor, memory_budget: int | None = None) -> dict:
    """The floor an iteration over K_nM = kernel(X, C) is measured against: one blocked pass
    K_nMᵀ(K_nM v) (distance GEMM + kernel function + two mat-vecs, nothing cached) at the same n, M,
    d and dtype, and the machine's GEMM rate in that dtype.

    ``floor_s`` is the best of three passes (one when a pass takes over two seconds); ``floor_GFLOP/s``
    counts the pass's GEMM and
    mat-vec flops (:func:`pass_flops`), so its ratio to ``GEMM_GFLOP/s`` says how far the pass is
    from compute-bound (exp and memory traffic are the rest).
    """
    from krrcore.ops import KernelOperator

    v = torch.randn(C.shape[0], 1, dtype=X.dtype, generator=torch.Generator().manual_seed(0)).to(X.device)
    KernelOperator(kernel, X[:256], C, block_rows=128).fused(v)  # warm BLAS workspaces
    op = KernelOperator(kernel, X, C, memory_budget=memory_budget)
    seconds, _ = timed(lambda: op.fused(v))
    if seconds < 2:
        seconds = min(seconds, timed(lambda: op.fused(v), repeats=2)[0])
    n, M, d = X.shape[0], C.shape[0], X.shape[1]
    return {
        "floor_s": seconds,
        "floor_GFLOP/s": pass_flops(n, M, d) / seconds / 1e9,
        "GEMM_GFLOP/s": gemm_gflops(X.dtype, device=X.device),
        "floor_block_rows": op.block_rows,
    }


def gemm_gflops(dtype=torch.float32, size: int = 2048, repeats: int = 3, device="cpu") -> float:
    """Measured matrix-multiply throughput on ``device``: the compute roof for kernel passes."""
    if torch.device(device).type == "cuda":
        size = max(size, 8192)  # a 2048² product does not fill a data-centre GPU
    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    best, _ = timed(lambda: torch.mm(a, b), repeats=repeats + 1)
    return 2 * size**3 / best / 1e9


def held_out_mse(model, X_test, y_test) -> float:
    """Test MSE of a fitted krrcore model, its predictions taken to the CPU in float64."""
    pred = torch.as_tensor(model.predict(X_test)).double().cpu().numpy().reshape(-1)
    return float(np.mean((pred - np.asarray(y_test, dtype=np.float64).reshape(-1)) ** 2))


def synchronize() -> None:
    """Wait for queued GPU work, so that a wall-clock interval covers it (no-op on the CPU)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def timed(fn, repeats: int = 1):
    """(best seconds, last result) over ``repeats`` calls, GPU work included."""
    best, out = float("inf"), None
    for _ in range(repeats):
        synchronize()
        t0 = time.perf_counter()
        out = fn()
        synchronize()
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


def markdown_table(rows: list[dict]) -> str:
    """The rows as a Markdown table (numbers to 3 significant digits), for NAME.md and docs/benchmarks.md."""
    columns = list(dict.fromkeys(k for row in rows for k in row))

    def cell(value):
        if isinstance(value, float):
            return "—" if math.isnan(value) else f"{value:,.3g}" if abs(value) < 1e3 else f"{value:,.0f}"
        return f"{value:,}" if isinstance(value, int) else str(value)

    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


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


if __name__ == "__main__":  # the child side of call_isolated
    emit(_serve_call(child_config()))

"""The same computations on the calling thread and on a helper thread, before and after the calling
thread frees its idle OpenMP workers (:func:`krrcore.device.release_openmp_threads`).

``python -m benchmarks.bench_helper_thread [--repeats R]``: a 400 × 400 symmetric eigenproblem (the
tuner's per-fold closed form), a triangular solve with one right-hand side (M = 1,000: FALKON's
preconditioner per iteration) and a FALKON fit (n = 20,000, d = 10, M = 1,000, 20 iterations), each
timed R times (median shown) on the calling thread, then on a new thread while the calling thread's
OpenMP pool is alive (it has run a parallel operation), then on a new thread after the release.
Prints a Markdown table. The tuner's search runs on such a helper thread
(:func:`krrcore.tuning.search.run_in_thread`), which releases the waiting thread's pool.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import warnings

import numpy as np

from benchmarks.common import set_threads


def _work():
    import torch

    from krrcore import Falkon, GaussianKernel

    rng = np.random.default_rng(0)
    X = rng.standard_normal((20_000, 10))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(20_000)
    A = torch.randn(400, 400, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    A = A @ A.T
    B = torch.randn(1000, 1000, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    L = torch.linalg.cholesky(B @ B.T + 1000 * torch.eye(1000, dtype=torch.float64))
    v = torch.ones(1000, 1, dtype=torch.float64)

    def falkon():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Falkon(GaussianKernel(3.0), 1e-6, M=1000, maxiter=20, seed=0).fit(X, y)

    return {
        "eigenproblem 400 × 400": (lambda: torch.linalg.eigh(A), 20),
        "triangular solve, M = 1,000": (lambda: torch.linalg.solve_triangular(L, v, upper=False), 200),
        "FALKON fit, n = 20,000, M = 1,000": (falkon, 1),
    }


def _timed(fn, inner: int, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def _on_helper(fn, inner: int, repeats: int) -> float:
    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("s", _timed(fn, inner, repeats)))
    thread.start()
    thread.join()
    return out["s"]


def measure(repeats: int) -> list[dict]:
    from krrcore.device import release_openmp_threads

    rows = []
    for name, (fn, inner) in _work().items():
        here = _timed(fn, inner, repeats)  # also leaves this thread's OpenMP pool alive
        alive = _on_helper(fn, inner, repeats)
        release_openmp_threads()
        released = _on_helper(fn, inner, repeats)
        rows.append({"computation": name, "calling": here, "alive": alive, "released": released})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    threads = set_threads()
    rows = measure(args.repeats)
    print(f"torch threads: {threads}; medians of {args.repeats} timings, milliseconds\n")
    print("| computation | calling thread | helper, caller's pool alive | helper, pool released | alive / released |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['computation']} | {r['calling'] * 1e3:.3g} | {r['alive'] * 1e3:.3g} | "
            f"{r['released'] * 1e3:.3g} | {r['alive'] / r['released']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

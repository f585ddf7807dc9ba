"""Every core used, steadily: FALKON at 1 and 2 threads, with the default memory budget and with
512 MiB, each fit in a fresh process; medians and spread over repeats.

``python -m benchmarks --case threads`` (Friedman-1, n = 200,000, d = 10, M = 2,000, σ = 3,
λ = 1e-6, 10 iterations, float32 and float64, five fits per cell; ``--quick``: n = 3,000, M = 100,
3 iterations, one fit per cell, in this process).

"Threads" means every pool in the process: torch's intra-op pool (``torch.set_num_threads``) and
every BLAS and OpenMP pool threadpoolctl sees (numpy's and scipy's OpenBLAS, the second OpenMP
runtime scikit-learn and scipy bring), so a 1-thread fit is one thread everywhere and a 2-thread
fit cannot be slowed by a pool that was left at the core count. Each row records the wall and
CPU seconds of the fit (CPU over wall: how many cores it kept busy; above the thread count, some
thread was spinning rather than working) and the set-up and per-iteration seconds.

Targets: two threads ≥ 1.6 × one thread in both dtypes; with 512 MiB at two threads the slowest
of five fits within 1.3 × of the median. Timings are of one machine and need it otherwise idle:
on a shared machine the spread measures the other users.
"""

from __future__ import annotations

import math
import statistics

from benchmarks.common import call_isolated

CONFIG = {"n": 200_000, "n_test": 10_000, "M": 2_000, "sigma": 3.0, "penalty": 1e-6, "maxiter": 10, "repeats": 5}
QUICK = {"n": 3_000, "n_test": 500, "M": 100, "maxiter": 3, "repeats": 1}
THREADS = (1, 2)
BUDGETS = (None, 512 * 2**20)
DTYPES = ("float32", "float64")


def fit_threads(cfg: dict) -> dict:
    """Child: one FALKON fit with every thread pool at ``cfg["threads"]``."""
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    from benchmarks.bench_speed import friedman, timed_fit
    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.falkon import Falkon

    threads, before = cfg["threads"], torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            X, y, X_test, y_test = friedman(cfg["n"], cfg["n_test"])

            def as_t(a):
                return torch.as_tensor(a, dtype=getattr(torch, cfg["dtype"]))

            model = Falkon(
                GaussianKernel(cfg["sigma"]),
                cfg["penalty"],
                M=cfg["M"],
                maxiter=cfg["maxiter"],
                dtype=cfg["dtype"],
                memory_budget=cfg["budget"],
                seed=0,
            )
            result = timed_fit(model, as_t(X), as_t(y), as_t(X_test), y_test)
            pools = sorted({f"{p['internal_api']}×{p['num_threads']}" for p in threadpool_info()})
    finally:
        torch.set_num_threads(before)  # --quick runs the fits in this process
    return {
        **{k: cfg[k] for k in ("n", "M", "dtype", "threads", "repeat")},
        "budget": "default" if cfg["budget"] is None else f"{cfg['budget'] >> 20} MiB",
        "pools": ", ".join(pools),
        **result,
    }


def measure(quick: bool, sizes=None) -> list[dict]:
    cfg = {**CONFIG, **(QUICK if quick else {})}
    if sizes:
        cfg["n"] = sizes[0]
    results = []
    for repeat in range(cfg["repeats"]):  # cells interleaved: a slow spell hits every cell alike
        for dtype in DTYPES:
            for budget in BUDGETS:
                for threads in THREADS:
                    run = {**cfg, "dtype": dtype, "budget": budget, "threads": threads, "repeat": repeat}
                    results.append(call_isolated(fit_threads, run, timeout=1800))
        print(f"  threads: repeat {repeat + 1} of {cfg['repeats']} done", flush=True)
    return results


def summarise(results: list[dict]):
    """(tables, figures, notes): per dtype, budget and thread count the median fit seconds, the
    fastest and slowest, slowest over median, CPU over wall seconds, and 2 threads over 1."""
    fits = [r for r in results if "fit_s" in r]
    rows = []
    for dtype in DTYPES:
        for budget in dict.fromkeys(r["budget"] for r in fits):
            cell = {
                t: [r for r in fits if r["dtype"] == dtype and r["budget"] == budget and r["threads"] == t]
                for t in THREADS
            }
            medians = {t: statistics.median(r["fit_s"] for r in rs) for t, rs in cell.items() if rs}
            for t, rs in cell.items():
                if not rs:
                    continue
                seconds = [r["fit_s"] for r in rs]
                rows.append(
                    {
                        "dtype": dtype,
                        "budget": budget,
                        "threads": t,
                        "fits": len(rs),
                        "iterations": rs[0]["iterations"],
                        "median s": medians[t],
                        "min s": min(seconds),
                        "max s": max(seconds),
                        "max / median": max(seconds) / medians[t],
                        "set-up s": statistics.median(r["setup_s"] for r in rs),
                        "s/iter": statistics.median(r["s_per_iter"] for r in rs),
                        "CPU / wall": statistics.median(r["cpu_s"] / r["fit_s"] for r in rs),
                        "speed-up vs 1 thread": medians[1] / medians[t] if 1 in medians else math.nan,
                        "test MSE": statistics.median(r["test_mse"] for r in rs),
                    }
                )
    pools = sorted({r["pools"] for r in fits})
    notes = (
        [f"thread pools in the fit's process (threadpoolctl, at the fit's limit): {'; '.join(pools)}"] if pools else []
    )
    notes.append(
        "Each fit in a fresh process (--quick: in this one); median, min and max over the cell's fits; "
        "CPU / wall: the fit's CPU seconds over its wall seconds; targets: 2 threads ≥ 1.6 × 1 thread, "
        "and at 512 MiB, 2 threads, max / median ≤ 1.3."
    )
    return {"summary": rows}, {}, notes

"""FALKON on rows sharded across Dask workers: seconds per iteration with 1 and 2
workers, where each iteration's time goes, and a projection to 8 and 64 workers.

Problem: the HIGGS look-alike (28 features), generated on the workers by seed and shard
(:func:`krrcore.sharded.generate`), n = 10⁶ rows, M = 2,000 uniform centres, float32, Gaussian
σ = 5, λ = 1e-6, a few FALKON iterations. Each worker count gets an embedded cluster of its own
(:func:`krrcore.distributed.connect`: p worker processes × 1 torch thread). ``--budget`` bounds each
worker's memory for kernel work (default 256 MiB): its K_nM cache then holds about 3% of the rows,
so an iteration is kernel evaluation, as it is at 10⁸ rows where no cache holds K_nM. A baseline
runs the same fit in this process with one thread and no Dask.

Measured per iteration, from :class:`krrcore.sharded.ProductTimes` and the record stream:
the iteration's solver seconds; the fused product's wall time on the client; the slowest shard's
compute time on its worker; the client's reduction (summing the shards' M-vectors); the client's
own work (preconditioner solves, CG updates) = iteration − product wall; communication and
scheduling = product wall − slowest shard − reduction. Per-worker throughput θ = kernel entries of
a shard ÷ its compute seconds.

Projection (strong scaling, printed with the model): T(p) = P + n·M/(p·θ) + R(p), with P the
client's own work per iteration, θ the 2-worker run's per-worker throughput, and R(p) one measured
round of p tasks as a product makes them (an M-vector sent to each, an M-vector back from each,
summed here), submitted round-robin to the 2 workers: the client's and the scheduler's cost of p
shards, measured rather than extrapolated; it assumes the workers' own compute runs in parallel on
their own cores and that a network adds its latency (localhost here) to each round.

Run: python -m benchmarks.bench_distributed [--quick] [--n N] [--M M] [--iterations K] [--workers 1 2]
on an otherwise idle machine: the workers' compute is meant to run in parallel on their own cores.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from benchmarks.common import print_table
from krrcore.distributed import LocalClusterShape, connect
from krrcore.kernels import GaussianKernel
from krrcore.solvers.falkon import Falkon

SIGMA, PENALTY, SEED = 5.0, 1e-6, 0


def _falkon(args) -> Falkon:
    return Falkon(
        GaussianKernel(SIGMA),
        PENALTY,
        M=args.M,
        maxiter=args.iterations,
        dtype="float32",
        memory_budget=args.budget,
        seed=SEED,
    )


def _per_iteration(trace) -> float:
    return (trace[-1].seconds - trace[0].seconds) / (len(trace) - 1)


def _echo(v):
    """A shard's part of a round without its compute: an M-vector back for an M-vector in."""
    return v * 1.0


def measure_rounds(connection, M: int, counts=(1, 2, 8, 64), repeats: int = 15) -> dict[int, float]:
    """Median seconds of a round of q tasks carrying a product's payload (M floats each way), gathered
    and summed in order here, for each q in ``counts`` (round-robin over the workers)."""
    client, workers = connection.client, sorted(connection.workers())
    v = torch.ones(M, 1, dtype=torch.float64)
    rounds = {}
    for q in counts:
        targets = [workers[i % len(workers)] for i in range(q)]
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            parts = client.gather([client.submit(_echo, v, workers=[w], pure=False) for w in targets])
            total = parts[0].clone()
            for part in parts[1:]:
                total.add_(part)
            samples.append(time.perf_counter() - start)
        rounds[q] = float(np.median(samples))
    return rounds


def run_sharded(args, workers: int) -> dict:
    """One fit on ``workers`` 1-thread workers; the figures of its iterations (set-up excluded)."""
    from krrcore import sharded

    start = time.perf_counter()
    connection = connect(shape=LocalClusterShape.for_this_machine(n_workers=workers, threads=1))
    try:
        started = time.perf_counter()
        data = sharded.generate("higgs_like", args.n, seed=SEED, cluster=connection, dtype="float32", n_test=2000)
        generated = time.perf_counter()
        model = _falkon(args)
        before = None
        for record in model.iter_fit(data.X, data.y):
            if record.iteration == 0:
                times = model.operator_.times
                before = (times.calls, times.wall, times.worker, times.worker_total, times.reduce)
        times = model.operator_.times
        calls = times.calls - before[0]
        wall, slowest, total, reduce = (
            (getattr(times, f) - b) / calls for f, b in zip(("wall", "worker", "worker_total", "reduce"), before[1:])
        )
        iteration = _per_iteration(model.trace_)
        error = float(np.mean(np.sign(model.predict(data.X_test)) != data.y_test[:, 0]))
        rows_per_shard = args.n / workers
        return {
            "setting": f"{workers} worker{'s' if workers > 1 else ''} × 1 thread",
            "workers": workers,
            "s/iter": iteration,
            "product wall": wall,
            "slowest shard": slowest,
            "reduce": reduce,
            "comm": max(wall - slowest - reduce, 0.0),
            "client work": max(iteration - wall, 0.0),
            "θ (entries/s/worker)": rows_per_shard * args.M / (total / workers),
            "cached rows": model.operator_.cached_rows,
            "test error": error,
            "cluster start s": started - start,
            "generate s": generated - started,
            "rounds": measure_rounds(connection, args.M) if workers == 2 else None,
        }
    finally:
        connection.close()


def run_local(args) -> dict:
    """The same fit in this process, one torch thread, no Dask (the data drawn here)."""
    from krrcore import datasets

    torch.set_num_threads(1)
    data = datasets.load("higgs_like", n=args.n + 2000, seed=SEED, test_fraction=2000 / (args.n + 2000))
    X = data.X_train.astype(np.float32)
    model = _falkon(args).fit(X, data.y_train)
    error = float(np.mean(np.sign(model.predict(data.X_test.astype(np.float32))) != data.y_test))
    return {
        "setting": "one process × 1 thread, no Dask",
        "workers": 0,
        "s/iter": _per_iteration(model.trace_),
        "cached rows": model.operator_.cached_rows,
        "test error": error,
    }


def project(results: list[dict], n: int, M: int) -> list[dict]:
    """T(p) = P + n·M/(p·θ) + R(p) from the measurements (see the module doc)."""
    two = next(r for r in results if r["workers"] == 2)
    theta = two["θ (entries/s/worker)"]
    client = float(np.mean([r["client work"] for r in results if r["workers"]]))
    rows = []
    for rows_n in (n, 100 * n):
        base = None
        for p, round_seconds in sorted(two["rounds"].items()):
            compute = rows_n * M / (p * theta)
            total = client + compute + round_seconds
            base = base or total
            rows.append(
                {
                    "n": rows_n,
                    "workers": p,
                    "s/iter": total,
                    "compute": compute,
                    "round R(p)": round_seconds,
                    "client": client,
                    "R share": round_seconds / total,
                    "speed-up": base / total,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n=20,000, M=200: checks the script runs")
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--M", type=int, default=2000)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--budget", type=int, default=256 * 2**20, help="memory_budget of each worker (bytes)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-local", action="store_true", help="skip the one-process baseline")
    parser.add_argument("--json", help="append the measured rows to this file (JSON lines)")
    args = parser.parse_args()
    if args.quick:
        args.n, args.M, args.iterations = 20_000, 200, 3
    print(
        f"HIGGS look-alike n={args.n:,}, M={args.M:,}, float32, σ={SIGMA}, λ={PENALTY}, {args.iterations} "
        f"iterations, memory_budget {args.budget / 2**20:.0f} MiB per worker"
    )
    results = [run_sharded(args, p) for p in args.workers]
    if not args.no_local:
        results.append(run_local(args))
    rounds = next((r.pop("rounds") for r in results if r.get("rounds")), None)
    for r in results:
        r.pop("rounds", None)
    print_table(results, "Measured (seconds per iteration; product = K_nMᵀ(K_nM v) over the shards)")
    if rounds:
        print_table(
            [{"tasks q": q, "round seconds": t} for q, t in rounds.items()],
            "A product's round without its compute: q tasks, M floats each way, summed here",
        )
    if args.json:
        with open(args.json, "a") as fh:
            for row in results:
                fh.write(json.dumps({**row, "n": args.n, "M": args.M, "rounds": rounds}) + "\n")
    if rounds:
        for r in results:
            if r["workers"] == 2:
                r["rounds"] = rounds
        print_table(
            project(results, args.n, args.M),
            "Projected: T(p) = client work + n·M/(p·θ) + R(p) (θ from 2 workers, R(p) measured)",
        )


if __name__ == "__main__":
    main()

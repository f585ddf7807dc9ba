"""The resource estimates against measurement, and what fits too large for this machine are told.

Part 1, the cost model's constant (``krrcore.memory._ENTRY_SECONDS``): seconds per kernel entry of
one blocked Gaussian pass (distances by GEMM, exp, two mat-vecs), float32 and float64, d = 10, 28,
435, n = 20,000 against M = 2,000 — beside the model's figure for the same pass.
Part 2, each solver's ``memory_estimate`` against a fit of 5 iterations on n = 20,000, d = 10
(Gaussian σ = 3, λ = 1e-6): estimated and measured set-up and seconds per iteration.
Part 3, fits too large for the machine (:func:`refusals`), fitted as a new user would (data
allocated, ``fit`` called): the seconds until the refusal and its message; for the cases that fit in
memory but take minutes per iteration, the refusal with ``timeout=60`` and the
:class:`~krrcore.memory.SlowFitWarning` without one (the
warning is turned into an error here, so nothing runs past it).
Run: python -m benchmarks.bench_estimates [--quick] [--part 1,2,3] [--threads T]
"""

from __future__ import annotations

import statistics
import textwrap
import time
import warnings

import numpy as np
import torch

from benchmarks.common import print_table, quick_parser, timed

PENALTY = 1e-6


def entry_cost(n: int, M: int) -> None:
    from krrcore.kernels import GaussianKernel
    from krrcore.memory import CostModel
    from krrcore.ops import KernelOperator

    rows = []
    for dtype in (torch.float32, torch.float64):
        for d in (10, 28, 435):
            X = torch.randn(n, d, dtype=dtype, generator=torch.Generator().manual_seed(0))
            op = KernelOperator(GaussianKernel(3.0), X, X[:M])
            v = torch.ones(M, 1, dtype=dtype)
            op.fused(v)
            seconds, _ = timed(lambda: op.fused(v), repeats=2)
            model = CostModel(d=d, dtype=dtype, device="cpu")
            rows.append(
                {
                    "dtype": str(dtype).removeprefix("torch."),
                    "d": d,
                    "measured_ns/entry": seconds / (n * M) * 1e9,
                    "model_ns/entry": model.entry_seconds(1) * 1e9,
                }
            )
    print_table(rows, f"One fused blocked pass K_nMᵀ(K_nM v), n = {n:,}, M = {M:,}: seconds per kernel entry")


def solvers(n: int, d: int) -> None:
    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.askotch import ASkotch
    from krrcore.solvers.exact import NystromKRR
    from krrcore.solvers.falkon import Falkon
    from krrcore.solvers.pcg import NystromPCG
    from krrcore.solvers.sketchysaga import SketchySAGA

    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    k = GaussianKernel(3.0)
    cases = [
        Falkon(k, PENALTY, M=2_000, maxiter=5),
        NystromKRR(k, PENALTY, M=2_000),
        NystromPCG(k, PENALTY, maxiter=5, kernel_storage="on_the_fly"),
        ASkotch(k, PENALTY, maxiter=5 * 100, eval_every=100),
        SketchySAGA(k, PENALTY, M=2_000, maxiter=5),
    ]
    rows = []
    for est in cases:
        estimate = est.memory_estimate(n, d)
        t0 = time.perf_counter()
        est.fit(X, y)
        wall = time.perf_counter() - t0
        trace = est.trace_
        steps = [(b.seconds - a.seconds) / max(b.iteration - a.iteration, 1) for a, b in zip(trace[1:], trace[2:])]
        rows.append(
            {
                "solver": type(est).__name__,
                "est_setup_s": estimate.setup_seconds,
                "setup_s": trace[0].seconds,
                "est_s/iter": estimate.seconds_per_iteration,
                "s/iter": statistics.median(steps) if steps else float("nan"),
                "fit_wall_s": wall,
                "est_peak_MiB": estimate.peak_bytes / 2**20,
            }
        )
    print_table(rows, f"Estimated against measured, n = {n:,}, d = {d}, float64 (ASkotch: an iteration is one block)")


def refusals() -> None:
    from krrcore.kernels import GaussianKernel
    from krrcore.memory import SlowFitWarning
    from krrcore.solvers.askotch import ASkotch
    from krrcore.solvers.exact import NystromKRR
    from krrcore.solvers.falkon import Falkon
    from krrcore.solvers.pcg import NystromPCG
    from krrcore.solvers.sketchysaga import SketchySAGA

    k = GaussianKernel(3.0)
    cases = [
        ("NystromKRR(M=55,000), n = 60,000", lambda **t: NystromKRR(k, PENALTY, M=55_000, **t), 60_000),
        ("Falkon(M=55,000), n = 60,000", lambda **t: Falkon(k, PENALTY, M=55_000, **t), 60_000),
        ("Falkon(M=150,000), n = 200,000", lambda **t: Falkon(k, PENALTY, M=150_000, **t), 200_000),
        ("NystromPCG(maxiter=1), n = 200,000", lambda **t: NystromPCG(k, PENALTY, maxiter=1, **t), 200_000),
        ("ASkotch(blocks=1, maxiter=1), n = 60,000", lambda **t: ASkotch(k, PENALTY, blocks=1, maxiter=1, **t), 60_000),
        (
            "SketchySAGA(M=55,000, maxiter=1), n = 60,000",
            lambda **t: SketchySAGA(k, PENALTY, M=55_000, maxiter=1, **t),
            60_000,
        ),
    ]
    rng = np.random.default_rng(0)
    for title, make, n in cases:
        X, y = rng.standard_normal((n, 10)), rng.standard_normal(n)
        print(f"\n## {title}, d = 10, float64")
        for label, params in (("fit()", {}), ("fit() with timeout=60", {"timeout": 60})):
            est = make(**params)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("error", SlowFitWarning)
                try:
                    est.fit(X, y)
                    outcome = "ran (no refusal)"
                except (MemoryError, ValueError, SlowFitWarning) as exc:
                    outcome = f"{type(exc).__name__}: {exc}"
            print(f"{label}, after {time.perf_counter() - t0:.2f} s:")
            print(textwrap.indent(textwrap.fill(outcome, 110), "    "))
            if outcome.startswith("MemoryLimitError"):
                break  # a timeout changes nothing about memory


def main() -> None:
    parser = quick_parser(__doc__)
    parser.add_argument("--part", default="1,2,3")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# torch threads: {args.threads}")
    parts = set(args.part.split(","))
    if "1" in parts:
        entry_cost(4_000 if args.quick else 20_000, 500 if args.quick else 2_000)
    if "2" in parts:
        solvers(2_000 if args.quick else 20_000, 10)
    if "3" in parts:
        refusals()


if __name__ == "__main__":
    main()

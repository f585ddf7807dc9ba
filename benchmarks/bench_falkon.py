"""FALKON time per iteration and peak memory, n from 10⁴ to 10⁶, beside the hardware floor.

Synthetic HIGGS-like data (d = 28, a look-alike: the real HIGGS is not available offline),
Gaussian kernel σ = 5, λ = 1e-8, float32 data (the paper's speed setting; K_MM and the
preconditioner in float64). Each case runs in a fresh process; for each we print set-up time,
seconds per CG iteration, the raw time of one blocked kernel pass (kernel blocks only, no
mat-vecs, no cache) and their ratio: how close an iteration comes to the cost of merely evaluating
K_nM — below 1 when the rows of K_nM cached within the storage budget (``cached_rows``) are read
instead of evaluated — and the ratio to the hardware floor (one uncached K_nMᵀ(K_nM v) pass,
``benchmarks.common.hardware_floor``). ``--budgets`` lists memory budgets in MiB, 0 meaning krrcore's default.
Run: python -m benchmarks.bench_falkon [--quick] [--max-n N] [--sizes 50000,1000000] [--budgets 0,256]
"""

from __future__ import annotations

import statistics

from benchmarks.common import (
    child_config,
    emit,
    hardware_floor,
    print_table,
    quick_parser,
    run_isolated,
    set_threads,
    timed,
)
from krrcore.memory import PeakMemory


def measure(cfg: dict) -> dict:
    import torch

    from krrcore import datasets
    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.falkon import Falkon

    set_threads()
    data = datasets.load("higgs_like", n=cfg["n"] + 5000, seed=0, test_fraction=5000 / (cfg["n"] + 5000))
    X = torch.as_tensor(data.X_train, dtype=torch.float32)
    y = torch.as_tensor(data.y_train, dtype=torch.float32)
    budget = cfg["budget_MiB"] * 2**20 or None
    model = Falkon(GaussianKernel(5.0), 1e-8, M=cfg["M"], maxiter=cfg["iters"], dtype="float32", memory_budget=budget)
    with PeakMemory() as mem:
        model.fit(X, y)
    secs = [b.seconds - a.seconds for a, b in zip(model.trace_[1:], model.trace_[2:])] or [float("nan")]
    per_iter = statistics.median(secs)
    op = model.operator_
    cached_rows = op.cached_rows
    del model.operator_, op  # free the cache before timing the raw pass
    from krrcore.ops import KernelOperator

    raw = KernelOperator(GaussianKernel(5.0), X, model.centers_, memory_budget=budget)
    pass_s, _ = timed(lambda: [None for _ in raw.blocks()], repeats=1)
    floor = hardware_floor(GaussianKernel(5.0), X, model.centers_, budget)
    err = float(
        (torch.sign(torch.as_tensor(model.predict(data.X_test))) != torch.as_tensor(data.y_test)).double().mean()
    )
    return {
        "n": cfg["n"],
        "M": cfg["M"],
        "block_rows": raw.block_rows,
        "cached_rows": cached_rows,
        "setup_s": model.trace_[0].seconds,
        "s_per_iter": per_iter,
        "kernel_pass_s": pass_s,
        "iter/pass": per_iter / pass_s,
        **floor,
        "iter/floor": per_iter / floor["floor_s"],
        "peak_extra_MiB": mem.extra_bytes / 2**20,
        "MxM_MiB": cfg["M"] ** 2 * 8 / 2**20,
        "budget_MiB": cfg["budget_MiB"] or "default",
        f"test_err@{cfg['iters']}it": err,
    }


def main() -> None:
    cfg = child_config()
    if cfg is not None:
        emit(measure(cfg))
        return
    parser = quick_parser(__doc__)
    parser.add_argument("--max-n", type=int, default=1_000_000)
    parser.add_argument("--sizes", default=None, help="comma-separated n (M = 2,000 for each)")
    parser.add_argument("--budgets", default="512", help="comma-separated budgets in MiB; 0 = the default")
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.quick:
        grid = [(10_000, 500), (30_000, 1_000)]
        iters = 3
    elif args.sizes:
        grid = [(int(n), 2_000) for n in args.sizes.split(",")]
        iters = 6
    else:
        grid = [(n, M) for M in (2_000, 10_000) for n in (10_000, 100_000, 1_000_000) if n <= args.max_n]
        iters = 4
    rows = []
    for n, M in grid:
        for budget in budgets:
            rows.append(
                run_isolated(__spec__.name, {"n": n, "M": M, "iters": iters, "budget_MiB": budget}, timeout=3 * 3600)
            )
            print(rows[-1], flush=True)
    print_table(rows, "FALKON on HIGGS-like data (synthetic look-alike), float32, σ=5, λ=1e-8")
    print(
        "\niter/pass: seconds per CG iteration over the raw kernel-block pass (exp and distances only, "
        "no cache).\n"
        "peak_extra_MiB: peak resident memory of the whole fit above its start (data excluded): the one "
        "M×M float64 buffer (MxM_MiB) plus the blocked product's budget plus small vectors."
    )


if __name__ == "__main__":
    main()

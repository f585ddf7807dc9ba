"""FALKON-BLESS's default centre selection: its cost against n, and its test error.

``BlessCenters(mode="sample")`` scores all n points on the BLESS dictionary (Eq. 3) and draws M
centres from the scores: O(n·|J|·d + n·|J|²) on top of BLESS. ``mode="dictionary"`` (the BLESS
paper's FALKON-BLESS, Sect. 3.1) takes the final dictionary J_H itself, M points weighted by
A: BLESS alone, whose cost stops growing once n > q1·κ²/λ. Part 1 times both selectors against
n on ``clustered_outliers`` points (σ = 0.3, M = 500, up to n = 10⁶); part 2 fits FALKON (λ = 1e-6, 30 iterations) on
n = 25,000 with uniform, sample-mode and dictionary-mode centres, over seeds: test MSE,
outlier centres, CG iterations until uniform's final test MSE (+1%).
Run: python -m benchmarks.bench_falkon_bless_default [--quick] [--max-n N] [--threads T]
"""

from __future__ import annotations

import statistics
import time

import torch

from benchmarks.common import print_table, quick_parser
from krrcore import datasets
from krrcore.kernels import GaussianKernel
from krrcore.leverage import BlessCenters


def clustered(n: int, seed: int = 0):
    data = datasets.load("clustered_outliers", n=n, seed=seed, test_fraction=0.2)
    return data, GaussianKernel(float(data.suggested_kernel.get("sigma", 0.3)))


def cost(sizes, M: int) -> None:
    import numpy as np

    from krrcore.datasets.synthetic import clustered_outliers

    rows = []
    kernel = GaussianKernel(0.3)
    for n in sizes:  # the generator itself: the catalog caps clustered_outliers at 200,000 rows
        X = torch.as_tensor(clustered_outliers(n, np.random.default_rng(0), 0.1).X)
        row = {"n": X.shape[0], "M": M}
        for mode in ("dictionary", "sample"):
            t0 = time.perf_counter()
            cs = BlessCenters(kernel=kernel, mode=mode).select(X, M, torch.Generator().manual_seed(0))
            row[f"{mode}_s"] = time.perf_counter() - t0
            row[f"{mode}_centres"] = cs.M
        rows.append(row)
        print(row, flush=True)
    print_table(rows, f"BLESS centre selection: seconds against n (clustered_outliers, σ = 0.3, M = {M})")


def quality(n: int, M: int, seeds, maxiter: int) -> None:
    from krrcore.solvers.falkon import Falkon

    selectors = {
        "uniform": lambda k: "uniform",
        "BLESS, sample M": lambda k: BlessCenters(kernel=k, mode="sample"),
        "BLESS, dictionary": lambda k: BlessCenters(kernel=k, mode="dictionary"),
    }
    runs = {name: [] for name in selectors}
    for seed in seeds:
        data, kernel = clustered(n, seed=seed)
        X, y = torch.as_tensor(data.X_train), torch.as_tensor(data.y_train)
        Xt, yt = torch.as_tensor(data.X_test), torch.as_tensor(data.y_test)
        outlier = torch.as_tensor(data.row_info_train["is_outlier"])
        traces = {}
        for name, make in selectors.items():
            t0 = time.perf_counter()
            model = Falkon(kernel, 1e-6, M, centers=make(kernel), maxiter=maxiter, seed=seed).fit(X, y, Xt, yt)
            traces[name] = [r.val_metric for r in model.trace_]
            runs[name].append(
                {
                    "centres": model.centers_.shape[0],
                    "outlier_centres": int(outlier[model.center_indices_].sum()),
                    "setup_s": model.trace_[0].seconds,
                    "total_s": time.perf_counter() - t0,
                    "test_mse": traces[name][-1],
                }
            )
        target = 1.01 * traces["uniform"][-1]
        for name, errors in traces.items():
            runs[name][-1]["iters"] = next((i for i, e in enumerate(errors) if e <= target), float("nan"))
    rows = [{"selector": name, **{k: statistics.fmean(r[k] for r in rs) for k in rs[0]}} for name, rs in runs.items()]
    print_table(
        rows,
        f"FALKON on clustered_outliers, n = {n} (80% train), M = {M}, λ = 1e-6, {maxiter} iterations, "
        f"mean over {len(seeds)} seeds",
    )


def main() -> None:
    parser = quick_parser(__doc__)
    parser.add_argument("--max-n", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--part", default="1,2")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    parts = set(args.part.split(","))
    if "1" in parts:
        sizes = [2_000, 8_000] if args.quick else [s for s in (10_000, 100_000, 1_000_000) if s <= args.max_n]
        cost(sizes, 100 if args.quick else 500)
    if "2" in parts:
        if args.quick:
            quality(4_000, 200, [0], 10)
        else:
            quality(25_000, 500, [0, 1, 2], 30)


if __name__ == "__main__":
    main()

"""BLESS leverage scores: accuracy, run time as n grows, and FALKON-BLESS against FALKON-uniform.

(1) R-ACC (BLESS paper Fig. 1): ℓ̃(i, λ)/ℓ(i, λ) over all n points — mean, 5th/95th percentile
    (and min/max), averaged over seeds — for BLESS, BLESS-R, BLESS-R with the public code's
    conditional weights, Recursive-RLS and uniform sampling; n = 20,000, λ = 1e-3, Gaussian
    kernel, on X ~ N(0, I₁₀) (σ = √10) and on clusters with outliers (non-uniform scores).
    Exact ℓ by the blocked Cholesky route (float64).
    Uniform's "approximate score": Eq. (3) with a uniform dictionary of the *same size* as BLESS's
    (same seed) and A = (M/n)I, its marginal inclusion probability — the scores uniform Nyström
    implies (the paper's "Uniform" row); its seconds include evaluating that dictionary along the
    whole λ path (the d_eff(λ) curve). The row "flat d_eff/n" is not a method: it is what
    ignoring scores altogether implies, and shows how far from uniform ℓ is.
(2) Run time against n = 10³…10⁵ at λ = 1e-3 (paper Fig. 2): BLESS's cost is O(Σ R_h M_h²) with
    R_h ≤ q1·κ²/λ_h, so it flattens once n > q1/λ; Recursive-RLS scores all n points (O(n M²));
    exact scores (O(n³)) where they fit.
(3) FALKON-BLESS vs FALKON-uniform on ``clustered_outliers`` (σ = 0.3, λ = 1e-6, the same M
    draws): CG iterations until the test MSE reaches FALKON-uniform's final test MSE (+1%),
    averaged over seeds; "reached" counts seeds where it did within ``maxiter``. BLESS runs at
    its own λ, derived from M (``BlessCenters`` default), as in the paper's experiments.

Timings are printed, never asserted. Run: python -m benchmarks.bench_leverage [--quick] [--part 1,2,3]
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import torch

from benchmarks.common import print_table, quick_parser, set_threads
from krrcore import leverage as lv
from krrcore.kernels import GaussianKernel

LAMBDA = 1e-3


def gaussian_data(n: int, d: int = 10, seed: int = 0):
    X = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return X, GaussianKernel(math.sqrt(d))


def clustered_data(n: int, seed: int = 0):
    from krrcore import datasets

    data = datasets.load("clustered_outliers", n=n, seed=seed, test_fraction=0.2)
    return data, GaussianKernel(float(data.suggested_kernel.get("sigma", 0.3)))


# ------------------------------------------------------------------------------- (1) R-ACC
def racc_stats(approx: torch.Tensor, exact: torch.Tensor) -> dict:
    r = (approx / exact).numpy()
    return {"mean": r.mean(), "q5": np.quantile(r, 0.05), "q95": np.quantile(r, 0.95), "min": r.min(), "max": r.max()}


def run_racc(X, kernel, label: str, seeds: list[int]) -> list[dict]:
    n = X.shape[0]
    t0 = time.perf_counter()
    exact = lv.exact_scores(X, kernel, LAMBDA)
    exact_s = time.perf_counter() - t0
    d_eff = float(exact.sum())
    beta = min(lv.DEFAULT_Q1 / (LAMBDA * n), 1.0)  # κ² = 1 (Gaussian kernel)
    print(
        f"\n{label}: n={n}, λ={LAMBDA:g}, exact d_eff={d_eff:.1f}, d_∞={n * float(exact.max()):.1f} "
        f"(max ℓ / mean ℓ = {float(exact.max()) / float(exact.mean()):.1f}), exact scores {exact_s:.1f} s; "
        f"BLESS-R's last-level β = q1κ²/(λn) = {beta:.2g}"
        + (" (β = 1: conditional and marginal weights coincide at that level)" if beta == 1 else "")
    )
    methods = {
        "BLESS": lambda s: lv.bless(X, kernel, LAMBDA, seed=s, points="all"),
        "BLESS-R": lambda s: lv.bless_r(X, kernel, LAMBDA, seed=s, points="all"),
        "BLESS-R conditional A (public code)": lambda s: lv.bless_r(
            X, kernel, LAMBDA, seed=s, points="all", weight_rule="conditional"
        ),
        "Recursive-RLS": lambda s: lv.recursive_rls(X, kernel, LAMBDA, seed=s, points="all"),
    }
    per_method: dict[str, list[dict]] = {name: [] for name in [*methods, "Uniform (same |J| as BLESS)"]}
    for seed in seeds:
        bless_size = None
        for name, run in methods.items():
            res = run(seed)
            bless_size = res.final.size if name == "BLESS" else bless_size
            per_method[name].append(
                {
                    **racc_stats(res.scores, exact),
                    "|J|": res.final.size,
                    "d_eff_est": res.d_eff,
                    "seconds": res.seconds,
                    "score_s": res.score_seconds,
                }
            )
        res = lv.uniform(X, kernel, LAMBDA, M=bless_size, seed=seed, points="all")
        per_method["Uniform (same |J| as BLESS)"].append(
            {
                **racc_stats(res.scores, exact),
                "|J|": res.final.size,
                "d_eff_est": res.d_eff,
                "seconds": res.seconds,
                "score_s": res.score_seconds,
            }
        )
    rows = []
    for name, runs in per_method.items():
        rows.append({"method": name, **{k: statistics.fmean(r[k] for r in runs) for k in runs[0]}})
    rows.append(
        {
            "method": "exact",
            **racc_stats(exact, exact),
            "|J|": n,
            "d_eff_est": d_eff,
            "seconds": exact_s,
            "score_s": 0.0,
        }
    )
    flat = torch.full_like(exact, d_eff / n)
    rows.append(
        {
            "method": "flat d_eff/n (no sampling)",
            **racc_stats(flat, exact),
            "|J|": 0,
            "d_eff_est": d_eff,
            "seconds": 0.0,
            "score_s": 0.0,
        }
    )
    print_table(
        rows,
        f"R-ACC = approximate/exact, {label}, mean over {len(seeds)} seed(s) "
        f"(seconds: sampler; score_s: Eq. (3) on all n points)",
    )
    return rows


# ------------------------------------------------------------------------------ (2) run time
def run_times(sizes: list[int], exact_max_n: int, rrls_max_n: int) -> list[dict]:
    X_all, kernel = gaussian_data(max(sizes), seed=1)
    rows = []
    for n in sizes:
        X = X_all[:n]
        row = {"n": n}
        for name, fn in (("bless", lv.bless), ("bless_r", lv.bless_r)):
            res = fn(X, kernel, LAMBDA, seed=0)
            row[f"{name}_s"] = res.seconds
            row[f"{name}_|J|"] = res.final.size
        if n <= rrls_max_n:
            res = lv.recursive_rls(X, kernel, LAMBDA, seed=0)
            row["rrls_s"] = res.seconds
            row["rrls_|J|"] = res.final.size
        else:
            row["rrls_s"] = row["rrls_|J|"] = float("nan")
        if n <= exact_max_n:
            t0 = time.perf_counter()
            lv.exact_scores(X, kernel, LAMBDA)
            row["exact_s"] = time.perf_counter() - t0
        else:
            row["exact_s"] = float("nan")
        row["rrls/bless"] = row["rrls_s"] / row["bless_s"]
        row["exact/bless"] = row["exact_s"] / row["bless_s"]
        rows.append(row)
        print(f"  n={n} done", flush=True)
    print_table(
        rows, f"Run time (s) against n, λ={LAMBDA:g}, X ~ N(0, I₁₀), σ=√10 (paper Fig. 2); nan: not run at this n"
    )
    return rows


# ---------------------------------------------------------------------- (3) FALKON-BLESS
def iterations_to(errors: list[float], target: float) -> int | None:
    return next((i for i, e in enumerate(errors) if e <= target), None)


def run_falkon(n: int, M: int, seeds: list[int], maxiter: int, penalty: float = 1e-6) -> None:
    from krrcore.solvers.falkon import Falkon

    selectors = {
        "FALKON-uniform": lambda k: "uniform",
        "FALKON-BLESS (sample M)": lambda k: lv.BlessCenters(kernel=k),
        "FALKON-BLESS-R (sample M)": lambda k: lv.BlessRCenters(kernel=k),
        "FALKON-BLESS (dictionary)": lambda k: lv.BlessCenters(kernel=k, mode="dictionary"),
    }
    runs: dict[str, list[dict]] = {name: [] for name in selectors}
    for seed in seeds:
        data, kernel = clustered_data(n, seed=seed)
        X, y = torch.as_tensor(data.X_train), torch.as_tensor(data.y_train)
        Xt, yt = torch.as_tensor(data.X_test), torch.as_tensor(data.y_test)
        outlier = torch.as_tensor(np.asarray(data.row_info_train["is_outlier"]))
        traces = {}
        for name, make in selectors.items():
            t0 = time.perf_counter()
            model = Falkon(kernel, penalty, M, centers=make(kernel), maxiter=maxiter, seed=seed).fit(X, y, Xt, yt)
            errors = [r.val_metric for r in model.trace_]
            info = model.center_set_.info or {}
            n_out = int(outlier[model.center_indices_].sum())
            traces[name] = errors
            runs[name].append(
                {
                    "centres": model.centers_.shape[0],
                    "outlier_centres": n_out,
                    "lambda_bless": info.get("penalty", float("nan")),
                    "setup_s": model.trace_[0].seconds,
                    "total_s": time.perf_counter() - t0,
                    "final_mse": errors[-1],
                }
            )
        target = 1.01 * traces["FALKON-uniform"][-1]
        for name, errors in traces.items():
            runs[name][-1]["iters"] = iterations_to(errors, target)
    rows = []
    for name, rs in runs.items():
        reached = [r["iters"] for r in rs if r["iters"] is not None]
        rows.append(
            {
                "method": name,
                "M draws": M,
                **{
                    k: statistics.fmean(r[k] for r in rs)
                    for k in ("centres", "outlier_centres", "lambda_bless", "setup_s", "total_s", "final_mse")
                },
                "iters_to_target": statistics.fmean(reached) if reached else float("nan"),
                "reached": f"{len(reached)}/{len(rs)}",
            }
        )
    base = rows[0]["iters_to_target"]
    for row in rows:
        row["iters_vs_uniform"] = row["iters_to_target"] / base if base else float("nan")
    print_table(
        rows,
        f"FALKON on clustered_outliers, n={n} (80% train), λ={penalty:g}, σ=0.3, maxiter={maxiter}: "
        f"CG iterations until test MSE ≤ 1.01 × FALKON-uniform's final, mean over {len(seeds)} seed(s)",
    )


def main() -> None:
    parser = quick_parser(__doc__)
    parser.add_argument("--part", default="1,2,3", help="comma-separated parts to run (1: R-ACC, 2: time, 3: FALKON)")
    args = parser.parse_args()
    parts = {int(p) for p in args.part.split(",") if p.strip()}
    threads = set_threads()
    print(f"torch {torch.__version__}, {threads} threads, float64 scores; quick={args.quick}")
    if 1 in parts:
        n, seeds = (3000, [0, 1]) if args.quick else (20_000, [0, 1, 2, 3, 4])
        X, kernel = gaussian_data(n)
        run_racc(X, kernel, "X ~ N(0, I₁₀), σ = √10", seeds)
        data, kernel = clustered_data(math.ceil(n / 0.8))
        run_racc(torch.as_tensor(data.X_train), kernel, "clustered_outliers (train split), σ = 0.3", seeds)
    if 2 in parts:
        if args.quick:
            run_times([1_000, 3_000, 10_000], exact_max_n=3_000, rrls_max_n=10_000)
        else:
            run_times([1_000, 3_000, 10_000, 30_000, 100_000], exact_max_n=20_000, rrls_max_n=100_000)
    if 3 in parts:
        if args.quick:
            run_falkon(4_000, 200, [0, 1], maxiter=30)
        else:
            run_falkon(25_000, 500, [0, 1, 2, 3, 4], maxiter=40)


if __name__ == "__main__":
    main()

"""Float32 FALKON against float64: test error over λ × maxiter, and the HIGGS-like long run (issue 12).

Grid: y = sin(Xw/√d) + 0.1·noise on standard normal X (``krrcore.datasets.synthetic.sine_projection``,
as in the tests), Gaussian kernel,
λ ∈ {1e-4, 1e-6, 1e-8}, maxiter ∈ {20, 100, 500} (one run, read at each) and a tol = 1e-6 run.
Each float32 row prints its test MSE and the ratio to float64's, for the default jitter rule
(a ridge at float32's noise level, :func:`krrcore.preconditioner.default_jitter`) and for the
FALKON library's float32 jitter 1e-5·M (``--library-jitter``), both with float64 CG vectors.

``--higgs``: HIGGS-like data (synthetic look-alike), 816,000 training points, d = 28, M = 5,000,
λ = 1e-7, σ = 5, 20 iterations: residual and validation error per iteration, float32 and float64.
Run: python -m benchmarks.bench_falkon_float32 [--quick] [--higgs [--dtypes float32,float64]] [--library-jitter]
"""
from __future__ import annotations

import numpy as np

from benchmarks.common import print_table, quick_parser, set_threads
from krrcore.datasets.synthetic import sine_projection
from krrcore.kernels import GaussianKernel
from krrcore.solvers.falkon import Falkon

LAMBDAS = (1e-4, 1e-6, 1e-8)
ITERATIONS = (20, 100, 500)


def _errors(X, y, X_test, y_test, *, sigma, M, lam, dtype, jitter):
    """Test MSE at 20/100/500 iterations of one run (a stalled run keeps its model), and of a tol run."""
    def mse(model):
        return float(np.mean((model.predict(X_test) - y_test) ** 2))

    model = Falkon(GaussianKernel(sigma), lam, M=M, maxiter=max(ITERATIONS), dtype=dtype, jitter=jitter)
    out = {}
    for record in model.iter_fit(X, y):
        if record.iteration in ITERATIONS:
            out[record.iteration] = mse(model)
    out.update({k: mse(model) for k in ITERATIONS if k >= model.n_iter_})
    tol_model = Falkon(GaussianKernel(sigma), lam, M=M, maxiter=500, tol=1e-6, dtype=dtype, jitter=jitter).fit(X, y)
    out["tol=1e-6"] = mse(tol_model)
    out["tol_iters"] = tol_model.n_iter_
    return out


def grid(problems, library_jitter: bool) -> None:
    for n, M, sigma, d in problems:
        table = sine_projection(n + 1000, np.random.default_rng(1), 0.1, d=d)
        X, y = table.X, table.target
        X, y, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
        rows = []
        for lam in LAMBDAS:
            ref = _errors(X, y, X_test, y_test, sigma=sigma, M=M, lam=lam, dtype="float64", jitter=None)
            rules = [("float32 (default)", None)] + ([("float32 (1e-5·M)", 1e-5 * M)] if library_jitter else [])
            for label, jitter in rules:
                got = _errors(X, y, X_test, y_test, sigma=sigma, M=M, lam=lam, dtype="float32", jitter=jitter)
                for key in (*ITERATIONS, "tol=1e-6"):
                    rows.append({"λ": lam, "run": f"maxiter={key}" if key in ITERATIONS else key, "rule": label,
                                 "float64 MSE": ref[key], "float32 MSE": got[key], "ratio": got[key] / ref[key]})
        print_table(rows, f"n={n}, M={M}, σ={sigma}, d={d}: float32 test MSE against float64's")
        worst = max(r["ratio"] for r in rows if r["rule"] == "float32 (default)")
        print(f"worst float32/float64 ratio (default rule): {worst:.3f}")


def higgs(quick: bool, dtypes) -> None:
    from krrcore import datasets

    n = 20_000 if quick else 816_000
    data = datasets.load("higgs_like", n=n + 20_000, seed=0, test_fraction=20_000 / (n + 20_000))
    rows = []
    for dtype in dtypes:
        model = Falkon(GaussianKernel(5.0), 1e-7, M=500 if quick else 5_000, maxiter=20, dtype=dtype)
        for record in model.iter_fit(data.X_train, data.y_train, data.X_test, data.y_test):
            rows.append({"dtype": dtype, "iteration": record.iteration, "seconds": record.seconds,
                         "residual": record.residual, "val_error": record.val_metric})
            print(rows[-1], flush=True)         # a long run that is stopped still leaves its rows
        del model
    print_table(rows, f"HIGGS-like (synthetic), n={n:,}, d=28, σ=5, λ=1e-7: residual and validation error")


def main() -> None:
    parser = quick_parser(__doc__)
    parser.add_argument("--higgs", action="store_true")
    parser.add_argument("--library-jitter", action="store_true")
    parser.add_argument("--dtypes", default="float32,float64", help="--higgs: the dtypes to run, in order")
    args = parser.parse_args()
    print(f"# torch threads: {set_threads()}")
    if args.higgs:
        higgs(args.quick, args.dtypes.split(","))
        return
    problems = [(600, 100, 2.0, 5)] if args.quick else [(2000, 400, 2.0, 5), (2000, 400, 5.0, 5),
                                                         (2000, 400, 0.7, 3), (4000, 800, 1.5, 10)]
    grid(problems, args.library_jitter)


if __name__ == "__main__":
    main()

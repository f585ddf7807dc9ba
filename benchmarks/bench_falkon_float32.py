"""Float32 FALKON against float64: test error over λ × maxiter, and the HIGGS-like long run.

Grid: y = sin(Xw/√d) + 0.1·noise on standard normal X (``krrcore.datasets.synthetic.sine_projection``,
as in the tests), Gaussian kernel,
λ ∈ {1e-4, 1e-6, 1e-8}, maxiter ∈ {20, 100, 500} and a tol = 1e-6 run (at most 500 iterations).
float64 is one run read at 20/100/500 iterations (CG is deterministic); each float32 cell is its
own fit, since ``Falkon(refine=...)`` refines the model a run ends with. Each float32 row prints its
test MSE and the ratio to float64's, for the default (float64 iterative refinement, its smaller
ridge) and ``refine=0`` (the float32 solve alone, :func:`krrcore.preconditioner.default_jitter`'s
ridge), with the refinement's cost: float64 passes, float32 CG iterations and solver seconds
against the run's own float32 solve, and how many eigen-directions of K_MM the solution uses that
float32 cannot resolve (``Falkon.unresolved_directions_``: > 0 means the fit warned with a
:class:`~krrcore.preconditioner.PrecisionWarning`). ``--library-jitter`` adds the FALKON library's float32 jitter
1e-5·M (unrefined).

``--higgs``: HIGGS-like data (synthetic look-alike), 816,000 training points, d = 28, M = 5,000,
λ = 1e-7, σ = 5, 20 iterations: residual and validation error per iteration (float32: then its
refinement rounds, whose residual is the true float64 one), float32 and float64.
Run: python -m benchmarks.bench_falkon_float32 [--quick] [--higgs [--dtypes float32,float64]] [--library-jitter]
"""

from __future__ import annotations

import warnings

import numpy as np

from benchmarks.common import print_table, quick_parser, set_threads
from krrcore.datasets.synthetic import sine_projection
from krrcore.kernels import GaussianKernel
from krrcore.preconditioner import PrecisionWarning
from krrcore.solvers.falkon import Falkon

LAMBDAS = (1e-4, 1e-6, 1e-8)
ITERATIONS = (20, 100, 500)
REFINEMENT = "float64 refinement"


def _mse(model, X_test, y_test) -> float:
    return float(np.mean((model.predict(X_test) - y_test) ** 2))


def _float64_errors(X, y, X_test, y_test, *, sigma, M, lam):
    """float64 test MSE at 20/100/500 iterations of one run (a stopped run keeps its model) and of a tol run."""
    model = Falkon(GaussianKernel(sigma), lam, M=M, maxiter=max(ITERATIONS))
    out = {}
    for record in model.iter_fit(X, y):
        if record.iteration in ITERATIONS:
            out[record.iteration] = _mse(model, X_test, y_test)
    out.update({k: _mse(model, X_test, y_test) for k in ITERATIONS if k >= model.n_iter_})
    tol_model = Falkon(GaussianKernel(sigma), lam, M=M, maxiter=500, tol=1e-6).fit(X, y)
    out["tol=1e-6"] = _mse(tol_model, X_test, y_test)
    return out


def _float32_cell(X, y, X_test, y_test, *, sigma, M, lam, maxiter, tol, jitter, refine):
    """One float32 fit: test MSE and what the refinement cost within the run."""
    with warnings.catch_warnings():  # counted in the table instead (unresolved directions)
        warnings.simplefilter("ignore", PrecisionWarning)
        model = Falkon(
            GaussianKernel(sigma), lam, M=M, maxiter=maxiter, tol=tol, dtype="float32", jitter=jitter, refine=refine
        ).fit(X, y)
    solve = [r for r in model.trace_ if r.extras.get("residual_kind") != REFINEMENT][-1]
    rounds = [r for r in model.trace_ if r.extras.get("residual_kind") == REFINEMENT]
    end = model.trace_[-1]
    return {
        "mse": _mse(model, X_test, y_test),
        "iterations": solve.iteration,
        "rounds": len(rounds),
        "refine iterations": end.iteration - solve.iteration,
        "refine s / solve s": (end.seconds - solve.seconds) / solve.seconds if rounds else 0.0,
        "true residual": rounds[-1].residual if rounds else None,
        "unresolved": model.unresolved_directions_,
    }


def grid(problems, library_jitter: bool) -> None:
    for n, M, sigma, d in problems:
        table = sine_projection(n + 1000, np.random.default_rng(1), 0.1, d=d)
        X, y = table.X, table.target
        X, y, X_test, y_test = X[:n], y[:n], X[n:], y[n:]
        rows = []
        rules = [("refined (default)", None, "auto"), ("refine=0", None, 0)]
        rules += [("1e-5·M, refine=0", 1e-5 * M, 0)] if library_jitter else []
        for lam in LAMBDAS:
            ref = _float64_errors(X, y, X_test, y_test, sigma=sigma, M=M, lam=lam)
            for label, jitter, refine in rules:
                for key in (*ITERATIONS, "tol=1e-6"):
                    maxiter, tol = (key, None) if key in ITERATIONS else (500, 1e-6)
                    got = _float32_cell(
                        X,
                        y,
                        X_test,
                        y_test,
                        sigma=sigma,
                        M=M,
                        lam=lam,
                        maxiter=maxiter,
                        tol=tol,
                        jitter=jitter,
                        refine=refine,
                    )
                    mse = got.pop("mse")
                    rows.append(
                        {
                            "λ": lam,
                            "run": f"maxiter={key}" if key in ITERATIONS else key,
                            "rule": label,
                            "float64 MSE": ref[key],
                            "float32 MSE": mse,
                            "ratio": mse / ref[key],
                            **got,
                        }
                    )
        # Ratios to four decimals: the 2% line falls inside print_table's three significant digits.
        print_table(
            [{**r, "ratio": f"{r['ratio']:.4f}"} for r in rows],
            f"n={n}, M={M}, σ={sigma}, d={d}: float32 test MSE against float64's",
        )
        for label, _, _ in rules:
            mine = [r for r in rows if r["rule"] == label]
            within = sum(r["ratio"] <= 1.02 for r in mine)
            warned = [r for r in mine if r["unresolved"]]
            print(
                f"{label}: worst float32/float64 ratio {max(r['ratio'] for r in mine):.4f}, "
                f"{within} of {len(mine)} cells within 2%; {len(warned)} warned (float32 cannot resolve λ), "
                f"{sum(r['ratio'] > 1.02 for r in mine if not r['unresolved'])} missed the 2% without a warning",
                flush=True,
            )


def higgs(quick: bool, dtypes) -> None:
    from krrcore import datasets

    n = 20_000 if quick else 816_000
    data = datasets.load("higgs_like", n=n + 20_000, seed=0, test_fraction=20_000 / (n + 20_000))
    rows = []
    for dtype in dtypes:
        model = Falkon(GaussianKernel(5.0), 1e-7, M=500 if quick else 5_000, maxiter=20, dtype=dtype)
        for record in model.iter_fit(data.X_train, data.y_train, data.X_test, data.y_test):
            rows.append(
                {
                    "dtype": dtype,
                    "iteration": record.iteration,
                    "seconds": record.seconds,
                    "residual": record.residual,
                    "kind": record.extras.get("residual_kind"),
                    "val_error": record.val_metric,
                }
            )
            print(rows[-1], flush=True)  # a long run that is stopped still leaves its rows
        del model
    print_table(rows, f"HIGGS-like (synthetic), n={n:,}, d=28, σ=5, λ=1e-7: residual and validation error")


def main() -> None:
    parser = quick_parser(__doc__)
    parser.add_argument("--higgs", action="store_true")
    parser.add_argument("--library-jitter", action="store_true")
    parser.add_argument("--dtypes", default="float32,float64", help="--higgs: the dtypes to run, in order")
    parser.add_argument("--problems", default="0,1,2,3", help="grid: which of the four problems (split long runs)")
    args = parser.parse_args()
    print(f"# torch threads: {set_threads()}")
    if args.higgs:
        higgs(args.quick, args.dtypes.split(","))
        return
    problems = [(2000, 400, 2.0, 5), (2000, 400, 5.0, 5), (2000, 400, 0.7, 3), (4000, 800, 1.5, 10)]
    chosen = [(600, 100, 2.0, 5)] if args.quick else [problems[int(i)] for i in args.problems.split(",")]
    grid(chosen, args.library_jitter)


if __name__ == "__main__":
    main()

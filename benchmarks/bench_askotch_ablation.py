"""ASkotch ablations (paper C.5, C.6): iterations to a residual with and without preconditioning,
acceleration, a fixed partition, and each rule for the strong-convexity constant μ.

Counts iterations, not seconds, so it runs in one process on one thread. For each problem it
prints, per solver, the first iteration whose float64 relative residual ‖(K+λnI)w − y‖/‖y‖ is
below each threshold ("—" if not reached within the pass limit), the μ the solver used and the
final residual, then the ratio preconditioned/plain for each pair run under the same rule.

Problems (``krrcore.datasets.synthetic.sine_projection``: y = sin(Xw/√d) + 0.1·noise, X standard
normal, d = 10):

* ``gauss``: Gaussian σ = 3, penalty 1e-3 (the paper's λ = 0.6 at n = 600), B = 6, r = 40;
* ``gauss-small-lambda``: the same at penalty 1e-5 (λ = 0.006): ill-conditioned, κ ≈ 10⁵;
* ``laplace-small-lambda``: Laplacian exp(−‖x − x'‖₂/σ), σ = 3, penalty 1e-5 — small λ with a rough
  kernel, where λ_min(K + λI) ≫ λ;
* ``qm9`` (``--qm9``, slow: L1 distances on 435 features): QM9 HOMO, n_train = 2,000, the kernel
  and penalty ``krrcore.datasets`` suggests, B = 10, r = 100, ``--qm9-passes`` (default 100)
  passes — the data set of the paper's C.6 (Fig. 10).

Solvers: ASkotch Alg. 1 with μ "auto" (= the Lanczos estimate at these sizes) and μ = λ (Alg. 1 as
printed), each with and without the Nyström preconditioner; Skotch with and without; the
fresh-random-block variant with and without.

Run: python -m benchmarks.bench_askotch_ablation [--quick] [--qm9] [--passes P]
(--quick: n = 200 and 40 passes — checks the script runs, not a measurement).
"""

from __future__ import annotations

import math
import sys
import time

from benchmarks.common import print_table, quick_parser

THRESHOLDS = (1e-1, 1e-2, 1e-3, 1e-6)

# (label, solver class name, keyword arguments): "pre"/"plain" pairs share everything else.
SOLVERS = (
    ("ASkotch μ auto", "ASkotch", {}),
    ("ASkotch μ auto, plain", "ASkotch", {"preconditioner": None}),
    ("ASkotch μ = λ", "ASkotch", {"mu": "lambda"}),
    ("ASkotch μ = λ, plain", "ASkotch", {"mu": "lambda", "preconditioner": None}),
    ("Skotch", "Skotch", {}),
    ("Skotch, plain", "Skotch", {"preconditioner": None}),
    ("fresh blocks", "ASkotch", {"variant": "fresh_blocks"}),
    ("fresh blocks, plain", "ASkotch", {"variant": "fresh_blocks", "preconditioner": None}),
)


def problems(args):
    import numpy as np

    from krrcore.datasets.synthetic import sine_projection
    from krrcore.kernels import GaussianKernel, LaplacianKernel

    n = 200 if args.quick else 600
    table = sine_projection(n, np.random.default_rng(0), 0.1, d=10)
    X, y = table.X, table.target
    rank = 20 if args.quick else 40
    yield "gauss", X, y, GaussianKernel(3.0), 1e-3, 6, rank, args.passes
    yield "gauss-small-lambda", X, y, GaussianKernel(3.0), 1e-5, 6, rank, args.passes
    yield "laplace-small-lambda", X, y, LaplacianKernel(3.0), 1e-5, 6, rank, args.passes
    if args.qm9:
        from krrcore import datasets
        from krrcore.kernels import make_kernel

        ds = datasets.load("qm9_homo", n=2500, seed=0)
        spec = dict(ds.suggested_kernel)
        kernel = make_kernel(spec.pop("name"), **spec)
        yield "qm9", ds.X_train, ds.y_train, kernel, ds.suggested_penalty, 10, 100, args.qm9_passes


def first_below(model, threshold):
    return next((r.iteration for r in model.trace_ if r.residual <= threshold), math.inf)


def main() -> None:
    import torch

    from krrcore.solvers import askotch

    p = quick_parser(__doc__.splitlines()[0])
    p.add_argument("--qm9", action="store_true", help="add the QM9 HOMO problem (n = 2,000; slow)")
    p.add_argument("--passes", type=int, default=None, help="passes over the data per run (default 1000, quick 40)")
    p.add_argument("--qm9-passes", type=int, default=100, help="passes per run on QM9 (default 100)")
    args = p.parse_args()
    torch.set_num_threads(1)
    args.passes = args.passes or (40 if args.quick else 1000)
    for name, X, y, kernel, penalty, blocks, rank, passes in problems(args):
        rows, reached = [], {}
        for label, cls, kwargs in SOLVERS:
            model = getattr(askotch, cls)(
                kernel,
                penalty,
                blocks=blocks,
                rank=rank,
                maxiter=passes * blocks,
                tol=min(THRESHOLDS),
                eval_every=blocks,
                dtype="float64",
                **kwargs,
            )
            start = time.perf_counter()
            model.fit(X, y)
            its = [first_below(model, t) for t in THRESHOLDS]
            reached[label] = its
            mu = getattr(model, "mu_", None)
            rows.append(
                {
                    "solver": label,
                    **{f"iters to {t:g}": ("—" if i == math.inf else i) for t, i in zip(THRESHOLDS, its)},
                    "mu": mu if mu is not None else "(λn, ν = n/|b|)" if "fresh" in label else "—",
                    "final residual": model.trace_[-1].residual,
                    "wall s": time.perf_counter() - start,
                }
            )
        n = len(X)
        print_table(
            rows,
            f"{name}: n = {n}, penalty {penalty:g} (paper's λ = {penalty * n:.3g}), "
            f"B = {blocks}, r = {rank}, at most {passes} passes",
        )
        ratios = []
        for label, _, _ in SOLVERS:
            if label.endswith(", plain"):
                pre, plain = reached[label[: -len(", plain")]], reached[label]
                ratios.append(
                    {
                        "pair": label[: -len(", plain")],
                        **{f"plain/pre at {t:g}": _ratio(b, a) for t, a, b in zip(THRESHOLDS, pre, plain)},
                    }
                )
        print_table(ratios, f"{name}: iterations without / with preconditioning (> 1: preconditioning helps)")
        sys.stdout.flush()


def _ratio(plain, pre):
    if pre == math.inf and plain == math.inf:
        return "neither"
    if pre == math.inf:
        return "pre not reached"
    if plain == math.inf:
        return "plain not reached"
    return plain / pre


if __name__ == "__main__":
    main()

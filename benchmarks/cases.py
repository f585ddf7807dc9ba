"""The suite's cases: what each measures (``measure``) and how it is shown (``summarise``).

A case's ``measure(quick, sizes)`` returns plain result dicts (one per fit, floor or app run, each
measured in a fresh process where memory is reported); ``summarise(results)`` turns them into
tables and plotly figures. The two are apart so that a full run can be measured in several
invocations (``--sizes``, ``--merge``: each hold of the machine stays short) and shown as one.
Every iterative row carries ``x floor``: its seconds per iteration over the hardware floor at the
same n, M, d and dtype (:func:`benchmarks.common.hardware_floor`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Callable

from benchmarks import bench_gpu, bench_logistic, bench_speed, bench_threads
from benchmarks.common import call_isolated
from benchmarks.solvers import fit_one

#: "Same test error" for times-to-target: within this factor of the reference error.
SAME_ERROR = 1.01


@dataclass
class Summary:
    tables: dict[str, list[dict]] = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    measure: Callable[[bool, list[int] | None], list[dict]]
    summarise: Callable[[list[dict]], Summary]
    sized: bool = False  # takes --sizes (results merge by n)
    #: The machine results were measured on when not this one (a stored run shown where the case cannot run).
    measured_on: Callable[[list[dict]], dict | None] = lambda results: None


def seconds_to(points: list[dict], target: float, key: str = "test_mse") -> float:
    """Solver seconds of the first point at or below ``target`` (NaN if none)."""
    return next((p["seconds"] for p in points if p[key] <= target), math.nan)


def _go():
    import plotly.graph_objects as go

    return go


_COLOURS: dict[str, str] = {}


def _colour(key: str) -> str:
    """One colour per solver/method across every panel and figure of a run."""
    from plotly.colors import qualitative

    return _COLOURS.setdefault(key, qualitative.Plotly[len(_COLOURS) % len(qualitative.Plotly)])


def _log_axes(fig, x=True, y=False, x_title="", y_title="", title=""):
    fig.update_layout(
        title=title, template="plotly_white", width=900, height=520, legend=dict(orientation="h", y=-0.18)
    )
    fig.update_xaxes(type="log" if x else "linear", title=x_title)
    fig.update_yaxes(type="log" if y else "linear", title=y_title)
    return fig


def _floor_of(results: list[dict], n, M, dtype) -> dict:
    return next(
        (
            r
            for r in results
            if r["solver"] == "floor" and r["n"] == n and r.get("M") == M and r["dtype"] == dtype and "floor_s" in r
        ),
        {},
    )


def _fits(results):
    return [r for r in results if r["solver"] != "floor"]


def _skips(results) -> list[str]:
    return [
        f"{r.get('label', r['solver'])} at n = {r['n']:,}: skipped — {r['skipped']}" for r in results if "skipped" in r
    ] + [f"{r.get('solver')} at n = {r.get('n')}: FAILED — {r['error']}" for r in results if "error" in r]


# ------------------------------------------------------------------ FALKON vs Nystroem + Ridge
def falkon_vs_nystroem_measure(quick: bool, sizes=None) -> list[dict]:
    n = (sizes or [3_000 if quick else 20_000])[0]
    base = {
        "n": n,
        "n_test": 1_000 if quick else 5_000,
        "sigma": 5.0,
        "penalty": 1e-6,
        "maxiter": 30 if quick else 100,
        "time_limit": 10.0 if quick else 120.0,
    }
    results = []
    for M in (100, 300) if quick else (1_000, 5_000):
        runs = [
            ("floor", "float64"),
            ("floor", "float32"),
            ("sk_nystroem", "float64"),
            ("falkon", "float64"),
            ("falkon", "float32"),
        ]
        for solver, dtype in runs:
            results.append(call_isolated(fit_one, {**base, "M": M, "solver": solver, "dtype": dtype}))
            print(f"  falkon_vs_nystroem: M={M} {solver} {dtype} done", flush=True)
    return results


def falkon_vs_nystroem_summarise(results: list[dict]) -> Summary:
    go = _go()
    from plotly.subplots import make_subplots

    out = Summary(notes=_skips(results))
    rows = []
    Ms = sorted({r["M"] for r in results})
    fig = make_subplots(rows=1, cols=len(Ms), subplot_titles=[f"M = {M:,}" for M in Ms], shared_yaxes=True)
    for col, M in enumerate(Ms, start=1):
        ref = next((r for r in results if r["solver"] == "sk_nystroem" and r["M"] == M and "points" in r), None)
        target = ref["points"][-1]["test_mse"] if ref else math.nan
        if ref:
            fig.add_hline(
                y=SAME_ERROR * target,
                line_dash="dot",
                line_color="grey",
                row=1,
                col=col,
                exclude_empty_subplots=False,
                annotation_text=f"{SAME_ERROR} × sklearn's test MSE",
                annotation_position="top right",
            )
        for r in _fits(results):
            if r["M"] != M or "points" not in r:
                continue
            floor = _floor_of(results, r["n"], M, r["dtype"])
            reach = (
                seconds_to(r["points"], SAME_ERROR * target) if r["solver"] == "falkon" else r["points"][-1]["seconds"]
            )
            rows.append(
                {
                    "solver": r["label"],
                    "dtype": r["dtype"],
                    "n": r["n"],
                    "M": M,
                    "seconds": r["points"][-1]["seconds"],
                    "test MSE": r["points"][-1]["test_mse"],
                    "s to sklearn's MSE": reach,
                    "speed-up vs sklearn": ref["points"][-1]["seconds"] / reach if ref else math.nan,
                    "iterations": r["iterations"],
                    "s/iter": r["s_per_iter"],
                    "x floor": r["s_per_iter"] / floor["floor_s"] if floor else math.nan,
                    "peak MiB": r["peak_MiB"],
                }
            )
            xs = [p["seconds"] for p in r["points"]]
            ys = [p["test_mse"] for p in r["points"]]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    name=f"{r['label']} {r['dtype']}",
                    legendgroup=r["label"] + r["dtype"],
                    showlegend=col == 1,
                    mode="lines+markers" if len(xs) > 1 else "markers",
                    line=dict(color=_colour(r["label"] + r["dtype"])),
                    marker=dict(size=7 if len(xs) > 1 else 14, color=_colour(r["label"] + r["dtype"])),
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(type="log", title="solver seconds")
    fig.update_yaxes(title="test MSE", col=1)
    fig.update_layout(
        title="FALKON against scikit-learn's Nystroem + Ridge at equal M (HIGGS look-alike)",
        template="plotly_white",
        width=1000,
        height=520,
        legend=dict(orientation="h", y=-0.2),
    )
    floors = [
        {
            "n": r["n"],
            "M": r["M"],
            "dtype": r["dtype"],
            "floor s": r["floor_s"],
            "floor GFLOP/s": r["floor_GFLOP/s"],
            "GEMM GFLOP/s": r["GEMM_GFLOP/s"],
        }
        for r in results
        if r["solver"] == "floor" and "floor_s" in r
    ]
    out.tables = {"summary": rows, "floor": floors}
    out.figures = {"test_error_vs_seconds": fig}
    out.notes.append(
        f"s to sklearn's MSE: FALKON's solver seconds until its test MSE ≤ {SAME_ERROR} × Nystroem+Ridge's "
        f"at the same M (sklearn: its fit time); x floor: s/iter over one K_nMᵀ(K_nM v) pass."
    )
    return out


# ------------------------------------------------------------------ the full n×n system against n
FULL_SOLVERS = ("falkon", "nystrom_pcg", "rlaopt", "cg", "askotch", "gpytorch", "exact", "sk_krr")


def full_system_time_limit(n: int) -> float:
    """Solver seconds each full-system fit gets at n: room for the slowest set-up (NyströmPCG's
    stored K and its sketch, ~6 s at n = 30,000 on an idle machine and 29 s on a busy one, growing
    as n²) and then for iterations: 90 s up to n = 30,000, growing as n² beyond, at most 600 s."""
    return min(600.0, 90.0 * max(1.0, (n / 30_000) ** 2))


def full_system_measure(quick: bool, sizes=None) -> list[dict]:
    sizes = sizes or ([1_000, 2_000] if quick else [30_000, 100_000])
    results = []
    for n in sizes:
        base = {
            "n": n,
            "n_test": 500 if quick else 2_000,
            "sigma": 5.0,
            "penalty": 1e-4,
            "dtype": "float32",
            "M": 300 if quick else 2_000,
            "maxiter": 10**5,
            "direct_max_n": 20_000,
            "time_limit": 2.0 if quick else full_system_time_limit(n),
        }
        results.append(call_isolated(fit_one, {**base, "solver": "floor", "M": n}))
        results.append(call_isolated(fit_one, {**base, "solver": "floor"}))
        for solver in FULL_SOLVERS:
            results.append(call_isolated(fit_one, {**base, "solver": solver}, timeout=1800))
            print(f"  full_system: n={n} {solver} done", flush=True)
    return results


def full_system_summarise(results: list[dict]) -> Summary:
    go = _go()
    out = Summary(notes=_skips(results))
    fits = [r for r in _fits(results) if "points" in r]
    rows = []
    for n in sorted({r["n"] for r in fits}):
        at_n = [r for r in fits if r["n"] == n]
        full = [r for r in at_n if r["solver"] != "falkon"]
        best = min((r["points"][-1]["test_mse"] for r in full), default=math.nan)
        for r in at_n:
            M = r["M"] if r["solver"] == "falkon" else n
            floor = _floor_of(results, n, M, r["dtype"])
            per_iter = r["s_per_iter"]
            if r["solver"] == "askotch" and r.get("blocks"):
                per_iter *= r["blocks"]  # B block iterations = one pass over K
            rows.append(
                {
                    "solver": r["label"],
                    "n": n,
                    "K": r.get("K") or "",
                    "seconds": r["points"][-1]["seconds"],
                    "test MSE": r["points"][-1]["test_mse"],
                    "s to best full MSE": seconds_to(r["points"], SAME_ERROR * best),
                    "iterations": r["iterations"],
                    "s/pass": per_iter,
                    "x floor": per_iter / floor["floor_s"] if floor else math.nan,
                    "peak MiB": r["peak_MiB"],
                }
            )
    fig_time = go.Figure()
    fig_err = go.Figure()
    for label in dict.fromkeys(r["solver"] for r in rows):
        mine = [r for r in rows if r["solver"] == label]
        fig_time.add_trace(
            go.Scatter(
                x=[r["n"] for r in mine],
                y=[r["s to best full MSE"] for r in mine],
                name=label,
                mode="lines+markers",
                line=dict(color=_colour(label)),
            )
        )
        fig_err.add_trace(
            go.Scatter(
                x=[r["n"] for r in mine],
                y=[r["test MSE"] for r in mine],
                name=label,
                mode="lines+markers",
                line=dict(color=_colour(label)),
            )
        )
    _log_axes(
        fig_time,
        y=True,
        x_title="n (training points)",
        y_title=f"seconds to {SAME_ERROR} × best full-KRR test MSE",
        title="Full-system solvers against n: time to the best test error (HIGGS look-alike, float32)",
    )
    _log_axes(
        fig_err,
        y=True,
        x_title="n (training points)",
        y_title="final test MSE (log scale)",
        title="Test MSE reached within each solver's time limit",
    )
    fig_curves = go.Figure()
    largest = max((r["n"] for r in fits), default=0)
    for r in fits:
        if r["n"] == largest:
            fig_curves.add_trace(
                go.Scatter(
                    x=[p["seconds"] for p in r["points"]],
                    y=[p["test_mse"] for p in r["points"]],
                    name=r["label"],
                    mode="lines+markers",
                    line=dict(color=_colour(r["label"])),
                )
            )
    _log_axes(
        fig_curves,
        y=True,
        x_title="solver seconds",
        y_title="test MSE (log scale)",
        title=f"Test MSE against seconds at n = {largest:,}",
    )
    out.tables = {"summary": rows}
    out.figures = {"time_vs_n": fig_time, "error_vs_n": fig_err, "curves_largest_n": fig_curves}
    out.notes.append(
        f"s to best full MSE: solver seconds until the test MSE ≤ {SAME_ERROR} × the best final test MSE of "
        "the full-system solvers at that n (FALKON solves the Nyström problem, M = its M); s/pass: seconds per "
        "pass over K (ASkotch: per B block iterations); x floor: s/pass over one blocked pass at the same n, "
        "M (n for the full system), d and dtype; K: how krrcore/rlaopt held K."
    )
    return out


# ------------------------------------------------------------------ QM9 HOMO: SMAPE against seconds
def qm9_measure(quick: bool, sizes=None) -> list[dict]:
    import tempfile
    from pathlib import Path

    from benchmarks import bench_askotch

    n = (sizes or [800 if quick else 10_000])[0]
    args = SimpleNamespace(n=n, n_test=200 if quick else 2_000, dtype="float32")
    # ASkotch's (alg1) set-up took 45 s at n = 10,000 and FALKON's estimate asked ~60 s for M = 5,000
    # (the L1 kernel's K_MM by cdist, no GEMM): 120 s leaves every solver room to iterate; FALKON
    # with M = 3,000 sets up in about a third of that (M² · d).
    time_limit = 2.0 if quick else 120.0
    solvers = (
        ("askotch_default", "nystrom_pcg_stored", "falkon") if quick else ("askotch_default", *bench_askotch.SOLVERS)
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        data = bench_askotch.prepare_data(args, Path(tmp))
        results.append(
            {
                "solver": "floor",
                "n": data["n_train"],
                "M": data["n_train"],
                "dtype": "float32",
                **call_isolated(qm9_floor, {"data": data["data"], "kernel": data["kernel"]}),
            }
        )
        for solver in solvers:
            cfg = {
                "solver": solver,
                "data": data["data"],
                "kernel": data["kernel"],
                "penalty": data["penalty"],
                "dtype": "float32",
                "time_limit": time_limit,
                "budget": 512 * 2**20,
                "falkon_M": 200 if quick else 3_000,
                "threads": 0,
            }
            result = call_isolated(bench_askotch.run_solver, cfg, timeout=20 * time_limit + 1800)
            results.append({**result, "n": data["n_train"], "data_note": data["note"], "dataset": data["name"]})
            print(f"  qm9: {solver} done", flush=True)
    return results


def qm9_floor(cfg: dict) -> dict:
    """Child: the floor for QM9's kernel (the L1 Laplacian has no distance GEMM: cdist instead)."""
    import numpy as np
    import torch

    from benchmarks.common import hardware_floor, set_threads
    from krrcore.kernels import make_kernel

    set_threads()
    X = torch.as_tensor(np.load(cfg["data"])["X_train"])
    kernel = make_kernel(cfg["kernel"]["name"], **{k: v for k, v in cfg["kernel"].items() if k != "name"})
    return hardware_floor(kernel, X, X, 512 * 2**20)


def qm9_summarise(results: list[dict]) -> Summary:
    go = _go()
    out = Summary(notes=[f"{r.get('solver')}: did not run — {r['error']}" for r in results if "error" in r])
    out.notes += sorted({r["data_note"] for r in results if r.get("data_note")})
    floor = next((r for r in results if r["solver"] == "floor" and "floor_s" in r), {})
    fig = go.Figure()
    rows = []
    for r in results:
        if r["solver"] == "floor" or "points" not in r:
            continue
        per_pass = r["s_per_iter"] * (r["blocks"] or 1)
        rows.append(
            {
                "solver": r["solver"],
                "n": r["n"],
                "setup s": r["setup_s"],
                "iterations": r["iterations"],
                "solver s": r["seconds"],
                "final SMAPE": r["points"][-1]["smape"],
                "best SMAPE": min(p["smape"] for p in r["points"]),
                "s/pass": per_pass,
                "x floor": per_pass / floor["floor_s"] if floor and r["solver"] != "falkon" else math.nan,
                "peak MiB": r["peak_rss_MiB"],
            }
        )
        fig.add_trace(
            go.Scatter(
                x=[max(p["seconds"], 1e-3) for p in r["points"]],
                y=[p["smape"] for p in r["points"]],
                name=r["solver"],
                mode="lines+markers",
                line=dict(color=_colour(r["solver"])),
            )
        )
    _log_axes(
        fig,
        x_title="solver seconds",
        y_title="test SMAPE (HOMO, eV)",
        title=f"QM9 HOMO: test SMAPE against seconds (n = {rows[0]['n']:,} train)" if rows else "QM9 HOMO",
    )
    out.tables = {
        "summary": rows,
        "floor": [{k: floor[k] for k in ("n", "floor_s", "floor_GFLOP/s", "GEMM_GFLOP/s")}] if floor else [],
    }
    out.figures = {"smape_vs_seconds": fig}
    out.notes.append(
        "s/pass: seconds per pass over K (ASkotch: per B block iterations; FALKON: per iteration over "
        "K_nM, M = its M, not comparable with the floor of the n×n pass); x floor: over one blocked "
        "pass of the n×n L1-Laplacian K (cdist: no distance GEMM for L1)."
    )
    return out


# ------------------------------------------------------------------ leverage scores against n
def leverage_measure(quick: bool, sizes=None) -> list[dict]:
    from benchmarks import bench_leverage

    sizes = sizes or ([1_000, 2_000] if quick else [2_000, 5_000, 10_000])
    exact_max = 2_000 if quick else 10_000
    results = []
    for n in sizes:
        if n <= exact_max:
            X, kernel = bench_leverage.gaussian_data(n)
            for row in bench_leverage.run_racc(X, kernel, f"n = {n:,}", [0]):
                results.append({"n": n, "solver": row["method"], **{k: v for k, v in row.items() if k != "method"}})
        else:
            for row in bench_leverage.run_times([n], exact_max_n=0, rrls_max_n=n):
                for method in ("bless", "bless_r", "rrls"):
                    results.append(
                        {
                            "n": n,
                            "solver": {"bless": "BLESS", "bless_r": "BLESS-R", "rrls": "Recursive-RLS"}[method],
                            "seconds": row[f"{method}_s"],
                            "|J|": row[f"{method}_|J|"],
                        }
                    )
    return results


def leverage_summarise(results: list[dict]) -> Summary:
    go = _go()
    from plotly.subplots import make_subplots

    keep = ("BLESS", "BLESS-R", "Recursive-RLS", "Uniform (same |J| as BLESS)", "exact")
    rows = [
        {
            "method": r["solver"],
            "n": r["n"],
            "seconds": r["seconds"],
            "dictionary size": r["|J|"],
            "R-ACC mean": r.get("mean", math.nan),
            "R-ACC q5": r.get("q5", math.nan),
            "R-ACC q95": r.get("q95", math.nan),
        }
        for r in results
        if r["solver"] in keep
    ]
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("R-ACC (approximate / exact score; bars: 5th–95th pct)", "seconds")
    )
    for method in keep:
        mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["n"])
        acc = [r for r in mine if not math.isnan(r["R-ACC mean"])]
        fig.add_trace(
            go.Scatter(
                x=[r["n"] for r in acc],
                y=[r["R-ACC mean"] for r in acc],
                name=method,
                legendgroup=method,
                mode="lines+markers",
                line=dict(color=_colour(method)),
                error_y=dict(
                    type="data",
                    symmetric=False,
                    array=[r["R-ACC q95"] - r["R-ACC mean"] for r in acc],
                    arrayminus=[r["R-ACC mean"] - r["R-ACC q5"] for r in acc],
                ),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[r["n"] for r in mine],
                y=[r["seconds"] for r in mine],
                name=method,
                legendgroup=method,
                showlegend=False,
                mode="lines+markers",
                line=dict(color=_colour(method)),
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(type="log", title="n")
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(
        title="Leverage scores: BLESS, BLESS-R, Recursive-RLS against exact (X ~ N(0, I₁₀), λ = 1e-3)",
        template="plotly_white",
        width=1000,
        height=520,
        legend=dict(orientation="h", y=-0.2),
    )
    return Summary(
        tables={"summary": rows},
        figures={"racc_and_time_vs_n": fig},
        notes=[
            "R-ACC where exact scores are computed (blocked Cholesky, float64); beyond that, time only. "
            "seconds: the sampler (BLESS's path of dictionaries), not scoring all n points. "
            "No hardware floor: these samplers do not iterate over K."
        ],
    )


# ------------------------------------------------------------------ FALKON per-iteration time and memory against n
#: Memory budgets (MiB) of the scaling case: 0 is krrcore's default (K_nM rows cached in what the
#: storage budget leaves), 512 leaves no room to cache: every iteration evaluates K_nM again.
SCALING_BUDGETS = (0, 512)


def scaling_measure(quick: bool, sizes=None) -> list[dict]:
    from benchmarks import bench_falkon

    sizes = sizes or ([5_000, 20_000] if quick else [10_000, 100_000, 1_000_000])
    M, iters = (500, 3) if quick else (2_000, 6)
    results = []
    for n in sizes:
        for budget in SCALING_BUDGETS:
            results.append(
                call_isolated(
                    bench_falkon.measure, {"n": n, "M": M, "iters": iters, "budget_MiB": budget}, timeout=3 * 3600
                )
            )
            print(f"  scaling: n={n} budget={budget or 'default'} done", flush=True)
    return results


def scaling_summarise(results: list[dict]) -> Summary:
    go = _go()
    from plotly.subplots import make_subplots

    ok = sorted((r for r in results if "error" not in r), key=lambda r: r["n"])
    rows = [
        {
            "n": r["n"],
            "M": r["M"],
            "d": 28,
            "dtype": "float32",
            "budget MiB": r["budget_MiB"],
            "s/iter": r["s_per_iter"],
            "floor s": r["floor_s"],
            "x floor": r["s_per_iter"] / r["floor_s"],
            "floor GFLOP/s": r["floor_GFLOP/s"],
            "GEMM GFLOP/s": r["GEMM_GFLOP/s"],
            "cached rows": r["cached_rows"],
            "setup s": r["setup_s"],
            "peak MiB": r["peak_extra_MiB"],
        }
        for r in ok
    ]
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("seconds per iteration", "peak resident memory of the fit (MiB)")
    )
    for budget in dict.fromkeys(r["budget MiB"] for r in rows):
        mine = [r for r in rows if r["budget MiB"] == budget]
        label = "krrcore's default budget" if budget == "default" else f"{budget} MiB budget"
        fig.add_trace(
            go.Scatter(
                x=[r["n"] for r in mine],
                y=[r["s/iter"] for r in mine],
                mode="lines+markers",
                name=f"FALKON iteration, {label}",
                line=dict(color=_colour(label)),
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=[r["n"] for r in mine],
                y=[r["peak MiB"] for r in mine],
                mode="lines+markers",
                name=f"peak MiB, {label}",
                line=dict(color=_colour(label), dash="dot"),
            ),
            row=1,
            col=2,
        )
    floors = [r for r in rows if r["budget MiB"] == rows[0]["budget MiB"]] if rows else []
    fig.add_trace(
        go.Scatter(
            x=[r["n"] for r in floors],
            y=[r["floor s"] for r in floors],
            mode="lines+markers",
            name="floor: one uncached K_nMᵀ(K_nM v) pass",
            line=dict(dash="dash", color="black"),
        ),
        row=1,
        col=1,
    )
    fig.update_xaxes(type="log", title="n")
    fig.update_yaxes(type="log")
    fig.update_layout(
        title=f"FALKON against n (HIGGS look-alike, d = 28, float32, M = {rows[0]['M'] if rows else ''})",
        template="plotly_white",
        width=1000,
        height=520,
        legend=dict(orientation="h", y=-0.2),
    )
    return Summary(
        tables={"summary": rows},
        figures={"iteration_and_memory_vs_n": fig},
        notes=[f"n = {r['n']}: FAILED — {r['error']}" for r in results if "error" in r]
        + ["x floor below 1: rows of K_nM cached within krrcore's storage budget are read, not recomputed."],
    )


# ------------------------------------------------------------------ the app against the library
def app_measure(quick: bool, sizes=None) -> list[dict]:
    from benchmarks import bench_app
    from benchmarks.common import find_chromium

    chromium, where = find_chromium()
    if chromium is None:  # the case drives the app in a browser: nothing to measure without one
        return [
            {
                "problem": "every problem",
                "skipped": f"needs Chromium to drive the app ({where}); apt-get install chromium, or set BROWSER_PATH",
            }
        ]
    return bench_app.measure(quick, repeats=1 if quick else 3)


def app_summarise(results: list[dict]) -> Summary:
    go = _go()
    rows = [r for r in results if "error" not in r and "skipped" not in r]
    fig = go.Figure()
    for key in (
        "app solver s (first Run)",
        "app solver s (Run again)",
        "krrcore s (same threads)",
        "Run → first chart s",
        "Run → result s",
    ):
        fig.add_trace(
            go.Bar(x=[f"{r['problem']}, browser {r['browser']}" for r in rows], y=[r[key] for r in rows], name=key)
        )
    fig.update_layout(
        barmode="group",
        title="The app against the library on the same fit (medians)",
        template="plotly_white",
        width=900,
        height=520,
        yaxis_title="seconds",
        legend=dict(orientation="h", y=-0.2),
    )
    return Summary(
        tables={"summary": rows},
        figures={"app_vs_library": fig},
        notes=[f"{r.get('problem')}: FAILED — {r['error']}" for r in results if "error" in r]
        + [f"{r['problem']}: skipped — {r['skipped']}" for r in results if "skipped" in r]
        + ["No hardware floor: this case measures the app's overhead against the same library fit."],
    )


# ------------------------------------------------------------------ tuning σ and λ
def tune_measure(quick: bool, sizes=None) -> list[dict]:
    from benchmarks import bench_tune

    names = list(bench_tune.QUICK if quick else bench_tune.DATASETS)
    results = []
    for name in names:
        results.append(call_isolated(bench_tune.measure, {"name": name, "quick": quick}, timeout=3600))
        print(f"  tune: {name} done", flush=True)
    return results


def tune_summarise(results: list[dict]) -> Summary:
    go = _go()
    from benchmarks import bench_tune

    rows = bench_tune.summary_rows(results)
    out = Summary(
        tables={"summary": rows, "targets": bench_tune.target_rows(results)},
        notes=[f"{r.get('name')}: FAILED — {r['error']}" for r in results if "error" in r]
        + [
            f"{r['dataset']}: {x['method']} skipped — {x['skipped']}"
            for r in results
            if "rows" in r
            for x in r["rows"]
            if "skipped" in x
        ],
    )
    fig = go.Figure()
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        fig.add_trace(
            go.Scatter(
                x=[r["seconds / grid"] for r in mine],
                y=[r["MSE / grid best"] for r in mine],
                text=[r["data set"] for r in mine],
                mode="markers+text",
                textposition="top center",
                name=method,
                marker=dict(size=11, color=_colour(method)),
            )
        )
    fig.add_hline(y=1.05, line_dash="dot", line_color="grey", annotation_text="5% above the grid's best point")
    fig.add_vline(x=1 / 3, line_dash="dot", line_color="grey", annotation_text="a third of the grid's time")
    _log_axes(
        fig,
        x=True,
        y=False,
        x_title="seconds / the 10 × 10 grid's seconds",
        y_title="test MSE / the grid's best test MSE",
        title="Tuning σ and λ: error and time against a 10 × 10 grid",
    )
    out.figures = {"error_and_time_vs_grid": fig}
    out.notes.append(
        "grid, best point: the 10 × 10 (σ, λ) grid of krrcore Falkon fits (same M, 20 iterations) scored "
        "on the test set, its best (an oracle); GridSearchCV: the same grid choosing on the hold-out fifth; "
        "RandomizedSearchCV: as many fits as the tuner's wall time allows; seconds are wall seconds of "
        "the whole call, refit included."
    )
    return out


# ------------------------------------------------------------------ predictive uncertainty
def uncertainty_measure(quick: bool, sizes=None) -> list[dict]:
    from benchmarks import bench_uncertainty

    results = []
    for name in bench_uncertainty.QUICK if quick else bench_uncertainty.DATASETS:
        results.append(call_isolated(bench_uncertainty.measure, {"name": name, "quick": quick}, timeout=3600))
        print(f"  uncertainty: {name} done", flush=True)
    return results


def uncertainty_summarise(results: list[dict]) -> Summary:
    from plotly.subplots import make_subplots

    from benchmarks import bench_uncertainty

    go = _go()

    rows = bench_uncertainty.summary_rows(results)
    out = Summary(
        tables={"summary": rows}, notes=[f"{r.get('name')}: FAILED — {r['error']}" for r in results if "error" in r]
    )
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("coverage of the nominal 90% interval", "µs per test point for mean + std")
    )
    for col, key in ((1, "coverage 90%"), (2, "µs/point, mean + std")):
        for method in dict.fromkeys(r["method"] for r in rows):
            mine = [r for r in rows if r["method"] == method]
            fig.add_trace(
                go.Bar(
                    x=[r["data set"] for r in mine],
                    y=[r[key] for r in mine],
                    name=method,
                    marker_color=_colour(method),
                    showlegend=col == 1,
                ),
                row=1,
                col=col,
            )
    fig.add_hline(y=0.9, line_dash="dot", line_color="grey", row=1, col=1)
    fig.update_yaxes(range=[0.5, 1.0], row=1, col=1)
    fig.update_yaxes(type="log", row=1, col=2)
    fig.update_layout(
        title="Predictive uncertainty: coverage and cost",
        template="plotly_white",
        width=1100,
        height=520,
        barmode="group",
        legend={"orientation": "h", "y": -0.18},
    )
    out.figures = {"coverage_and_cost": fig}
    out.notes.append(
        "std: of a new observation, mean ± 1.645·std for 90%. ExactKRR and the sklearn GPs fit the first "
        "n rows shown; the Nyström rows fit all of them. sklearn GP, matched: the GP whose posterior "
        "mean is ExactKRR's (signal σ̂²/(λn), noise σ̂², optimizer=None), so its coverage is ExactKRR's; "
        "own ML fit: length-scale, signal and noise by scikit-learn's marginal likelihood. posterior "
        "set-up s: the uncertainty set-up after the fit (included in fit s)."
    )
    out.notes.append(
        "µs/point: one predict call over all test rows ("
        + ", ".join(f"{r['name']}: {r['n_test']:,}" for r in results if "n_test" in r)
        + ") divided by their number; over a few hundred rows a call's fixed overhead dominates."
    )
    return out


CASES: dict[str, Case] = {
    c.name: c
    for c in [
        Case(
            "falkon_vs_nystroem",
            "FALKON vs scikit-learn Nystroem + Ridge at equal M: time to equal test error",
            falkon_vs_nystroem_measure,
            falkon_vs_nystroem_summarise,
            sized=False,
        ),
        Case(
            "full_system",
            "FALKON, NyströmPCG, rlaopt, CG, ASkotch, GPyTorch, exact KRR against n: time and test error",
            full_system_measure,
            full_system_summarise,
            sized=True,
        ),
        Case("qm9", "QM9 HOMO: test SMAPE against seconds", qm9_measure, qm9_summarise),
        Case(
            "leverage",
            "BLESS, BLESS-R, Recursive-RLS and exact scores: time and R-ACC against n",
            leverage_measure,
            leverage_summarise,
            sized=True,
        ),
        Case(
            "scaling",
            "FALKON time per iteration and peak memory against n, with the floor",
            scaling_measure,
            scaling_summarise,
            sized=True,
        ),
        Case(
            "app",
            "The app: Run to first chart, in-app solver seconds (first Run, Run again) against krrcore",
            app_measure,
            app_summarise,
        ),
        Case(
            "tune",
            "Tuning σ and λ: krrcore.tune against a 10 × 10 grid, a random search and GPyTorch",
            tune_measure,
            tune_summarise,
        ),
        Case(
            "uncertainty",
            "Predictive uncertainty: 90% interval coverage and cost per point, beside scikit-learn's GP",
            uncertainty_measure,
            uncertainty_summarise,
        ),
        Case(
            "speed",
            "float32 against float64, BLESS centres against uniform, 10⁶ points: time and test error",
            bench_speed.measure,
            lambda results: Summary(*bench_speed.summarise(results)),
            sized=True,
        ),
        Case(
            "threads",
            "FALKON at 1 and 2 threads, default and 512 MiB budgets: medians and spread, a fresh process per fit",
            bench_threads.measure,
            lambda results: Summary(*bench_threads.summarise(results)),
            sized=True,
        ),
        Case(
            "gpu",
            "FALKON and ASkotch on a CUDA card against its floor (the stored run where CUDA is absent)",
            bench_gpu.measure,
            lambda results: Summary(*bench_gpu.summarise(results)),
            sized=True,
            measured_on=bench_gpu.measured_on,
        ),
        Case(
            "logistic",
            "Logistic FALKON against Nystroem + LogisticRegression and squared-loss FALKON at the same M",
            bench_logistic.measure,
            lambda results: Summary(*bench_logistic.summarise(results)),
        ),
    ]
}

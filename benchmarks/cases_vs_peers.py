"""The cases that measure krrcore against its peers: FALKON against Nystroem + Ridge, the full n×n
system's solvers against n, and QM9 HOMO's test SMAPE against seconds (``measure`` and
``summarise`` of each, registered in :data:`benchmarks.cases.CASES`)."""

from __future__ import annotations

import math
from types import SimpleNamespace

from benchmarks.common import call_isolated
from benchmarks.solvers import fit_one
from benchmarks.summary import SAME_ERROR, Summary, colour, fit_rows, floor_of, log_axes, plotly_go, seconds_to, skips


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
    go = plotly_go()
    from plotly.subplots import make_subplots

    out = Summary(notes=skips(results))
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
        for r in fit_rows(results):
            if r["M"] != M or "points" not in r:
                continue
            floor = floor_of(results, r["n"], M, r["dtype"])
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
                    line=dict(color=colour(r["label"] + r["dtype"])),
                    marker=dict(size=7 if len(xs) > 1 else 14, color=colour(r["label"] + r["dtype"])),
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
    go = plotly_go()
    out = Summary(notes=skips(results))
    fits = [r for r in fit_rows(results) if "points" in r]
    rows = []
    for n in sorted({r["n"] for r in fits}):
        at_n = [r for r in fits if r["n"] == n]
        full = [r for r in at_n if r["solver"] != "falkon"]
        best = min((r["points"][-1]["test_mse"] for r in full), default=math.nan)
        for r in at_n:
            M = r["M"] if r["solver"] == "falkon" else n
            floor = floor_of(results, n, M, r["dtype"])
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
                line=dict(color=colour(label)),
            )
        )
        fig_err.add_trace(
            go.Scatter(
                x=[r["n"] for r in mine],
                y=[r["test MSE"] for r in mine],
                name=label,
                mode="lines+markers",
                line=dict(color=colour(label)),
            )
        )
    log_axes(
        fig_time,
        y=True,
        x_title="n (training points)",
        y_title=f"seconds to {SAME_ERROR} × best full-KRR test MSE",
        title="Full-system solvers against n: time to the best test error (HIGGS look-alike, float32)",
    )
    log_axes(
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
                    line=dict(color=colour(r["label"])),
                )
            )
    log_axes(
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
    go = plotly_go()
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
                line=dict(color=colour(r["solver"])),
            )
        )
    log_axes(
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

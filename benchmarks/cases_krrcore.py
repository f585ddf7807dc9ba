"""The cases that measure krrcore alone: leverage scores against n, FALKON's per-iteration time and
memory against n, the app against the library, tuning σ and λ, and predictive uncertainty
(``measure`` and ``summarise`` of each, registered in :data:`benchmarks.cases.CASES`)."""

from __future__ import annotations

import math

from benchmarks.common import call_isolated
from benchmarks.summary import Summary, colour, log_axes, plotly_go


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
    go = plotly_go()
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
                line=dict(color=colour(method)),
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
                line=dict(color=colour(method)),
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
    go = plotly_go()
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
                line=dict(color=colour(label)),
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
                line=dict(color=colour(label), dash="dot"),
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
    go = plotly_go()
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
    go = plotly_go()
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
                marker=dict(size=11, color=colour(method)),
            )
        )
    fig.add_hline(y=1.05, line_dash="dot", line_color="grey", annotation_text="5% above the grid's best point")
    fig.add_vline(x=1 / 3, line_dash="dot", line_color="grey", annotation_text="a third of the grid's time")
    log_axes(
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

    go = plotly_go()

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
                    marker_color=colour(method),
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

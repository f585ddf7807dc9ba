"""FALKON and ASkotch on a CUDA device against the blocked-pass floor of the same card.

``python -m benchmarks.bench_gpu [--quick] [--out DIR] [--plan NAME ...]`` runs, on the HIGGS
look-alike (d = 28, float32, σ = 5):

* the floor: one blocked pass K_nMᵀ(K_nM v) at each (n, M), and the card's GEMM rate;
* FALKON at n = 10⁶ and 10⁷, M = 5,000 and 20,000, 20 iterations, with the test MSE on 10⁵ points;
  at n = 10⁶, M = 5,000 also in float64, the reference the float32 error is compared with;
* ASkotch (the library's default) on the full n×n system at n = 10⁶ for a fixed solver time.

* the floor at n = 10⁶, M = 5,000 for several row-block sizes (``floor-blocks``): which block
  height this card runs a blocked pass fastest at (krrcore.ops.MAX_BLOCK_ROWS is its GPU default);
* one pass K_nMᵀ(K_nM v) at n = 10⁶, M = 5,000, d = 28 (``pass-*``): krrcore's fused product
  (:mod:`krrcore.fused`), its blocked one, and pykeops's (the engine under the FALKON library's GPU
  path; compiled at its first use, which is not timed) on the same card;
* FALKON on a HIGGS-like 1.1·10⁷ × 28 set at M = 20,000 and 100,000 (the preconditioner's 40 GB
  float32 M × M matrix factored in place), at most 5 minutes of solver time;
* GPyTorch's CG on the full n × n system at n = 50,000 (it evaluates K whole: 10 GB in float32).

Beside every row: the **compute floor** of one pass, its FLOPs (:func:`benchmarks.common.pass_flops`:
the distance GEMM and the two mat-vecs) over the card's measured GEMM rate, and the **memory
floor**, the bytes a pass must move at least (X, and the n-vector between the two mat-vecs, read
or written once each) over the card's measured copy bandwidth. ``x compute floor`` is a pass's
seconds over the former.

Every result is printed as one JSON line as soon as it exists and appended to ``DIR/gpu.jsonl``,
so a run cut short keeps what it measured. Seconds are wall-clock with the GPU synchronised
(:func:`benchmarks.common.timed`); ``x floor`` is seconds per iteration over the floor (for ASkotch,
per pass over K: B block iterations). Without CUDA it runs the same plans on the CPU at the sizes
``--quick`` picks, so the script itself is tested on any machine.

``python -m benchmarks --case gpu [--sizes 1000000]`` runs the plans (at those n) where CUDA is
available; elsewhere it refuses to measure, says why, and shows the stored run (:data:`STORED`,
with its machine line) instead. ``tools/gpu_session.sh`` is the whole session on a lent card: the
CUDA tests, then this case.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import gemm_gflops, hardware_floor, held_out_mse, pass_flops, synchronize, timed

SIGMA, PENALTY, N_TEST = 5.0, 1e-6, 100_000
#: The stored results of a run on a CUDA card (its machine row first, then one row per plan) and
#: the machine it ran on, as ``python -m benchmarks --docs`` keeps every case.
STORED = Path(__file__).resolve().parents[1] / "docs" / "data" / "gpu.json"
STORED_MACHINE = STORED.with_name("gpu.machine.json")
#: Row-block heights the ``floor-blocks`` plan times one pass at.
BLOCK_ROWS = (2_048, 4_096, 8_192, 16_384, 32_768, 65_536)

#: name -> (solver, n, M, dtype, maxiter, seconds allowed)
PLANS = {
    "floor-blocks": ("floor", 10**6, 5_000, "float32", 0, 30.0),
    "falkon-1e6-M5k-f32": ("falkon", 10**6, 5_000, "float32", 20, 60.0),
    "falkon-1e6-M5k-f64": ("falkon", 10**6, 5_000, "float64", 20, 90.0),
    "falkon-1e6-M20k-f32": ("falkon", 10**6, 20_000, "float32", 20, 90.0),
    "askotch-1e6-f32": ("askotch", 10**6, None, "float32", 10**9, 45.0),
    "falkon-1e7-M5k-f32": ("falkon", 10**7, 5_000, "float32", 20, 120.0),
    "falkon-1e7-M20k-f32": ("falkon", 10**7, 20_000, "float32", 20, 150.0),
    "pass-1e6-M5k-f32": ("pass", 10**6, 5_000, "float32", 0, 60.0),
    "pass-1e6-M5k-f64": ("pass", 10**6, 5_000, "float64", 0, 60.0),
    "falkon-1.1e7-M20k-f32": ("falkon", 11 * 10**6, 20_000, "float32", 20, 300.0),
    "falkon-1.1e7-M100k-f32": ("falkon", 11 * 10**6, 100_000, "float32", 20, 300.0),
    "gpytorch-5e4-f32": ("gpytorch", 50_000, None, "float32", 0, 300.0),
}
QUICK_SCALE = 1_000  # --quick: n / 1000, M / 50


def _higgs_rows(n: int, n_test: int):
    """(X, y, X_test, y_test): the catalogue's split up to its row limit; past it, independent
    10⁶-row draws of the same generator, z-scored with the training rows' mean and spread."""
    from krrcore import datasets
    from krrcore.datasets.synthetic import higgs_like

    if n + n_test <= datasets.get_info("higgs_like").max_n:
        data = datasets.load("higgs_like", n=n + n_test, seed=0, test_fraction=n_test / (n + n_test))
        return data.X_train, data.y_train, data.X_test, data.y_test
    chunk = 10**6
    tables = [
        higgs_like(min(chunk, n + n_test - start), np.random.default_rng(start // chunk), 0.0)
        for start in range(0, n + n_test, chunk)
    ]
    X = np.concatenate([t.X for t in tables])
    y = 2.0 * np.concatenate([t.target for t in tables]) - 1.0
    mean, spread = X[n_test:].mean(0), X[n_test:].std(0)
    X -= mean
    X /= spread
    return X[n_test:], y[n_test:], X[:n_test], y[:n_test]


def _data(n: int, device, dtype: str, cache: dict):
    key = (n, dtype)
    if key not in cache:
        n_test = min(N_TEST, max(n // 10, 500))
        X, y, X_test, y_test = _higgs_rows(n, n_test)
        as_t = lambda a: torch.as_tensor(np.asarray(a), dtype=getattr(torch, dtype)).to(device)  # noqa: E731
        cache.clear()  # one size on the card at a time
        cache[key] = (as_t(X), as_t(y), as_t(X_test), np.asarray(y_test, dtype=np.float64))
    return cache[key]


def run_plan(name: str, plan, device, quick: bool, cache: dict) -> dict:
    from krrcore import ASkotch, Falkon
    from krrcore.kernels import GaussianKernel

    solver, n, M, dtype, maxiter, limit = plan
    if quick:
        n, M, limit = n // QUICK_SCALE, (M // 50 if M else None), 10.0
    X, y, X_test, y_test = _data(n, device, dtype, cache)
    kernel = GaussianKernel(SIGMA)
    out = {"plan": name, "solver": solver, "device": str(device), "n": n, "M": M, "d": X.shape[1], "dtype": dtype}
    floor_M = M or n
    centers = X[torch.randperm(n, generator=torch.Generator().manual_seed(0))[:floor_M].to(device)]
    out.update(pass_floors(out["n"], floor_M, out["d"], X.dtype, device))
    if solver == "floor":
        return {**out, **_block_sweep(kernel, X, centers)}
    if solver == "pass":
        return {**out, **_one_pass(kernel, X, centers)}
    if solver == "gpytorch":
        return {**out, **_gpytorch(X, y, X_test, y_test)}
    out.update(hardware_floor(kernel, X, centers))
    del centers
    if solver == "falkon":
        model = Falkon(
            kernel=kernel, penalty=PENALTY, M=M, maxiter=maxiter, dtype=dtype, device=device, seed=0, timeout=limit
        )
    else:
        model = ASkotch(
            kernel=kernel,
            penalty=PENALTY,
            maxiter=maxiter,
            residual="estimate",
            eval_every=10,
            dtype=dtype,
            device=device,
            timeout=limit,
        )
    synchronize()
    t0 = time.perf_counter()
    model.fit(X, y)
    synchronize()
    wall = time.perf_counter() - t0
    trace = model.trace_
    setup, iters = trace[0].seconds, trace[-1].iteration
    per_iter = (trace[-1].seconds - setup) / iters if iters else math.nan
    blocks = getattr(model, "n_blocks_", None)
    per_pass = per_iter * blocks if solver == "askotch" and blocks else per_iter
    out.update(
        {
            "fit_s": wall,
            "solver_s": trace[-1].seconds,
            "setup_s": setup,
            "iterations": iters,
            "s_per_iter": per_iter,
            "blocks": blocks,
            "s_per_pass": per_pass,
            "x_floor": per_pass / out["floor_s"],
            "x_compute_floor": per_pass / out["compute_floor_s"],
            "residual": trace[-1].residual,
            "stop": getattr(model, "stop_reason_", ""),
            "K": getattr(model, "kernel_storage_", ""),
            "test_mse": held_out_mse(model, X_test, y_test),
        }
    )
    if device.type == "cuda":
        out["peak_GiB"] = torch.cuda.max_memory_allocated(device) / 2**30
        torch.cuda.reset_peak_memory_stats(device)
    return out


def copy_gbps(device, n_bytes: int = 1 << 30) -> float:
    """Measured device memory bandwidth: bytes read plus written by a copy of ``n_bytes``, per second."""
    device = torch.device(device)
    n_bytes = n_bytes if device.type == "cuda" else n_bytes // 16
    a = torch.empty(n_bytes // 4, dtype=torch.float32, device=device)
    b = torch.empty_like(a)
    seconds, _ = timed(lambda: b.copy_(a), repeats=4)
    return 2 * n_bytes / seconds / 1e9


_RATES: dict = {}


def pass_floors(n: int, M: int, d: int, dtype: torch.dtype, device) -> dict:
    """The compute and memory floors of one pass K_nMᵀ(K_nM v) on ``device`` (see the module docstring)."""
    key = (str(device), dtype)
    if key not in _RATES:
        _RATES[key] = (gemm_gflops(dtype, device=device), copy_gbps(device))
    gemm, bandwidth = _RATES[key]
    itemsize = torch.empty((), dtype=dtype).element_size()
    moved = itemsize * (n * d + M * d + 2 * n + 2 * M)
    return {
        "compute_floor_s": pass_flops(n, M, d) / (gemm * 1e9),
        "memory_floor_s": moved / (bandwidth * 1e9),
        "GEMM_GFLOP/s": gemm,
        "copy_GB/s": bandwidth,
    }


def _one_pass(kernel, X, centers) -> dict:
    """One uncached pass K_nMᵀ(K_nM v), best of three: fused (krrcore.fused where it applies),
    blocked, and pykeops's on a card (None where pykeops is not installed or X is not on CUDA, with the
    reason)."""
    from benchmarks import peers
    from krrcore.ops import KernelOperator

    v = torch.randn(centers.shape[0], 1, dtype=X.dtype, device=X.device)
    out = {}
    for name, fused in (("fused", True), ("blocked", False)):
        op = KernelOperator(kernel, X, centers, fused=fused)
        op.fused(v)  # compiles the Triton kernels once
        out[f"{name}_s"] = timed(lambda op=op: op.fused(v), repeats=3)[0]
        out[f"{name}_path"] = "fused" if op._fused is not None else "blocked"
        del op
    if X.device.type != "cuda":  # its CPU build compiles for minutes before the first pass
        out["pykeops_s"], out["pykeops_note"] = math.nan, "pykeops is timed on a CUDA card only"
        return out
    try:
        out["pykeops_s"] = peers.keops_pass(X, centers, v, sigma=SIGMA, repeats=3)
    except peers.PeerMissing as exc:
        out["pykeops_s"], out["pykeops_note"] = math.nan, str(exc)
    return out


def _gpytorch(X, y, X_test, y_test) -> dict:
    """GPyTorch's CG solve of the full system on the card (peers.gpytorch_cg)."""
    from benchmarks import peers

    try:
        points = peers.gpytorch_cg(X, y, X_test, y_test, sigma=SIGMA, penalty=PENALTY, tolerances=(1e-2,))
    except peers.PeerMissing as exc:
        return {"skipped": str(exc)}
    return {"fit_s": points[-1]["seconds"], "test_mse": points[-1]["test_mse"], "cg_tolerance": 1e-2}


def _block_sweep(kernel, X, centers) -> dict:
    """Seconds of one uncached pass K_nMᵀ(K_nM v) at each height of :data:`BLOCK_ROWS` (best of 2)."""
    from krrcore.ops import KernelOperator

    v = torch.randn(centers.shape[0], 1, dtype=X.dtype, device=X.device)
    seconds = {}
    for rows in BLOCK_ROWS:
        op = KernelOperator(kernel, X, centers, block_rows=min(rows, X.shape[0]), fused=False)
        op.fused(v)
        seconds[str(rows)] = timed(lambda op=op: op.fused(v), repeats=2)[0]
        del op
    best = min(seconds, key=seconds.get)
    return {"block_rows_s": seconds, "best_block_rows": int(best), "floor_s": seconds[best]}


def run_plans(names, quick: bool, jsonl: Path | None = None) -> list[dict]:
    """The machine line, then each plan's result (or its error), in order; printed (and appended to
    ``jsonl``) as they come, so a run cut short keeps what it measured."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    quick = quick or device.type != "cuda"
    info = {
        "plan": "machine",
        "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "quick": quick,
    }
    lines = []
    cache: dict = {}
    for name in [None, *(PLANS if names is None else names)]:
        if name is None:
            result = info
        else:
            try:
                result = run_plan(name, PLANS[name], device, quick, cache)
            except Exception as exc:  # one failing plan must not cost the others
                traceback.print_exc()
                result = {"plan": name, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(result), flush=True)
        lines.append(result)
        if jsonl is not None:
            with open(jsonl, "a") as fh:
                fh.write(json.dumps(result) + "\n")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return lines


def measure(quick: bool, sizes=None) -> list[dict]:
    """The suite's ``gpu`` case: the plans on this machine's CUDA card, or, without one, the
    stored run (each row marked ``stored``) and why nothing was measured."""
    if torch.cuda.is_available():
        return run_plans([name for name, plan in PLANS.items() if sizes is None or plan[1] in sizes], quick)
    print(
        f"# gpu: refused to measure: no CUDA device on this machine (torch.cuda.is_available() is False); "
        f"the table is the stored run {STORED.relative_to(STORED.parents[2])}. On a lent card: "
        "tools/gpu_session.sh",
        flush=True,
    )
    return [{**row, "stored": True} for row in json.loads(STORED.read_text())]


def measured_on(results: list[dict]) -> dict | None:
    """The machine stored results were measured on (None: these results were measured here)."""
    return json.loads(STORED_MACHINE.read_text()) if any(r.get("stored") for r in results) else None


def summarise(results: list[dict]):
    """(tables, figures, notes): each plan's time, iterations, floor and test error, with its machine."""
    machine = next((r for r in results if r.get("plan") == "machine"), {})
    rows, notes = [], []
    for r in results:
        if r.get("plan") == "machine":
            continue
        if "error" in r:
            notes.append(f"{r['plan']}: FAILED — {r['error']}")
        elif "skipped" in r:
            notes.append(f"{r['plan']}: not run — {r['skipped']}")
        elif r.get("solver") == "floor":
            rows.append(
                {
                    "plan": r["plan"],
                    "n": r["n"],
                    "M": r["M"],
                    "dtype": r["dtype"],
                    "floor s": r["floor_s"],
                    "best block rows": r["best_block_rows"],
                    "per block rows": ", ".join(f"{k}: {v:.3g} s" for k, v in r["block_rows_s"].items()),
                    **_floor_cells(r),
                }
            )
        elif r.get("solver") == "pass":
            rows.append(
                {
                    "plan": r["plan"],
                    "n": r["n"],
                    "M": r["M"],
                    "dtype": r["dtype"],
                    "fused s": r["fused_s"],
                    "blocked s": r["blocked_s"],
                    "pykeops s": r["pykeops_s"],
                    "x compute floor": r["fused_s"] / r["compute_floor_s"],
                    **_floor_cells(r),
                }
            )
            if r.get("pykeops_note"):
                notes.append(f"{r['plan']}: pykeops not run — {r['pykeops_note']}")
        elif r.get("solver") == "gpytorch":
            rows.append(
                {
                    "plan": r["plan"],
                    "n": r["n"],
                    "dtype": r["dtype"],
                    "fit s": r["fit_s"],
                    "test MSE": r["test_mse"],
                    **_floor_cells(r),
                }
            )
        else:
            rows.append(
                {
                    "plan": r["plan"],
                    "n": r["n"],
                    "M": r["M"] or "",
                    "dtype": r["dtype"],
                    "fit s": r["fit_s"],
                    "set-up s": r["setup_s"],
                    "iterations": r["iterations"],
                    "s/pass": r["s_per_pass"],
                    "floor s": r["floor_s"],
                    "x floor": r["x_floor"],
                    "floor GFLOP/s": r["floor_GFLOP/s"],
                    "GEMM GFLOP/s": r["GEMM_GFLOP/s"],
                    "residual": r["residual"],
                    "test MSE": r["test_mse"],
                    "peak GiB": r.get("peak_GiB", math.nan),
                    **_floor_cells(r),
                }
            )
    where = f"{machine.get('device', '?')}, torch {machine.get('torch', '?')}, CUDA {machine.get('cuda', '?')}" + (
        " (--quick: small sizes, not a measurement)" if machine.get("quick") else ""
    )
    notes.insert(
        0,
        f"device: {where}; command: python -m benchmarks.bench_gpu (or --case gpu)"
        + (f"; {machine['cuda_tests']}" if machine.get("cuda_tests") else ""),
    )
    notes.append(
        "s/pass: seconds per CG iteration (ASkotch: per pass over K, B block iterations), the float32 "
        "refinement included; x floor: over one uncached pass K_nMᵀ(K_nM v) as krrcore runs it on the "
        "same card (fused where triton is installed); compute floor: the pass's FLOPs over the card's "
        "GEMM rate; memory floor: the bytes it must move over the card's copy bandwidth; "
        "floor GFLOP/s against GEMM GFLOP/s: how far the pass is from compute-bound (exp and the "
        "block's memory traffic are the rest)."
    )
    return {"summary": rows}, {"pass_vs_floor": _floor_figure(rows, where)}, notes


def _floor_cells(r: dict) -> dict:
    """The compute and memory floors of a pass at the row's n, M, d. A run stored before they were
    measured: the compute floor from its GEMM rate where it has one, the memory floor NaN (no
    bandwidth was measured)."""
    compute = r.get("compute_floor_s")
    if compute is None and r.get("GEMM_GFLOP/s") and r.get("d"):
        compute = pass_flops(r["n"], r.get("M") or r["n"], r["d"]) / (r["GEMM_GFLOP/s"] * 1e9)
    return {
        "compute floor s": math.nan if compute is None else compute,
        "memory floor s": r.get("memory_floor_s", math.nan),
    }


def _floor_figure(rows: list[dict], where: str):
    """Seconds per CG iteration (per pass over K for ASkotch) beside the floor on the same card."""
    import plotly.graph_objects as go

    fits = [r for r in rows if "s/pass" in r and "floor s" in r]
    fig = go.Figure(
        [
            go.Bar(x=[r["plan"] for r in fits], y=[r["s/pass"] for r in fits], name="s per iteration"),
            go.Bar(x=[r["plan"] for r in fits], y=[r["floor s"] for r in fits], name="floor: one uncached pass"),
        ]
    )
    fig.update_layout(
        barmode="group",
        template="plotly_white",
        width=900,
        height=520,
        yaxis_type="log",
        yaxis_title="seconds (log)",
        title=f"Iterations against the blocked-pass floor ({where})",
        legend=dict(orientation="h", y=-0.25),
    )
    return fig


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run, not a measurement)")
    parser.add_argument("--out", type=Path, default=Path("benchmark-results"))
    parser.add_argument("--plan", nargs="*", choices=sorted(PLANS), help="the plans to run (default: all, in order)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = run_plans(args.plan, args.quick, args.out / "gpu.jsonl")
    return 0 if all("error" not in r for r in lines) else 1


if __name__ == "__main__":
    raise SystemExit(main())

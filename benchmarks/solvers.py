"""One fit of one solver — krrcore's or a peer's — on the HIGGS look-alike, in a fresh process.

:func:`fit_one` is what the suite's cases run through :func:`benchmarks.common.call_isolated`
(one interpreter per fit, so one fit's retained memory never counts in the next one's peak). It
returns the test error reached against solver seconds as ``points`` (evaluation off the clock:
krrcore's generators are suspended while we predict), the set-up and per-iteration seconds and the
peak resident memory of the fit above the process's size before it. ``solver="floor"`` measures
the hardware floor (:func:`benchmarks.common.hardware_floor`) at the case's n, M, d and dtype.

Data: ``krrcore.datasets`` "higgs_like" (d = 28, a synthetic look-alike: the real HIGGS is not
available offline), ±1 labels fitted by regression; the test error is the test MSE.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from benchmarks import peers
from benchmarks.common import hardware_floor, set_threads
from krrcore.memory import PeakMemory, available_bytes

#: Direct solves of the full system: O(n³) time, refused past the case's ``direct_max_n``.
DIRECT = ("exact", "sk_krr")
LABELS = {
    "falkon": "FALKON (krrcore)",
    "nystrom_pcg": "NyströmPCG (krrcore)",
    "cg": "CG (krrcore)",
    "askotch": "ASkotch (krrcore)",
    "exact": "Exact KRR (krrcore)",
    "sk_krr": "KernelRidge (scikit-learn)",
    "sk_nystroem": "Nystroem+Ridge (scikit-learn)",
    "rlaopt": "PCG + Nyström (rlaopt)",
    "gpytorch": "CG + pivoted Cholesky (GPyTorch)",
}


def load_split(n: int, n_test: int, dtype: str, seed: int = 0):
    """The HIGGS look-alike: n training and n_test test points, features in ``dtype``."""
    from krrcore import datasets

    data = datasets.load("higgs_like", n=n + n_test, seed=seed, test_fraction=n_test / (n + n_test))
    X = torch.as_tensor(data.X_train, dtype=getattr(torch, dtype))
    X_test = torch.as_tensor(data.X_test, dtype=X.dtype)
    return X, torch.as_tensor(data.y_train, dtype=X.dtype), X_test, np.asarray(data.y_test, dtype=np.float64)


def _mse(pred, y_test) -> float:
    return float(np.mean((np.asarray(pred, dtype=np.float64).reshape(-1) - y_test) ** 2))


def _krrcore_estimator(cfg: dict, kernel):
    from krrcore import ASkotch, CG, ExactKRR, Falkon, NystromPCG

    common = dict(kernel=kernel, penalty=cfg["penalty"], dtype=cfg["dtype"])
    budget = cfg.get("memory_budget")
    name = cfg["solver"]
    if name == "falkon":
        return Falkon(M=cfg["M"], maxiter=cfg["maxiter"], memory_budget=budget, seed=0, **common)
    if name == "nystrom_pcg":
        return NystromPCG(rank=100, maxiter=cfg["maxiter"], residual="estimate", memory_budget=budget, **common)
    if name == "cg":
        return CG(maxiter=cfg["maxiter"], residual="estimate", memory_budget=budget, **common)
    if name == "askotch":  # the library's default ASkotch (variant "auto": never stores K)
        return ASkotch(maxiter=10**9, residual="estimate", eval_every=10, memory_budget=budget, **common)
    if name == "exact":
        return ExactKRR(memory_budget=budget, **common)
    raise ValueError(f"unknown krrcore solver {name!r}")


def _fit_krrcore(cfg: dict, kernel, X, y, X_test, y_test) -> dict:
    """Iterate krrcore's stream; evaluate the test error at records past a geometric time grid
    (×1.25 from 0.01 s) and at the end, stop at ``time_limit`` solver seconds."""
    model = _krrcore_estimator(cfg, kernel)
    points, next_eval, last = [], 0.0, None
    for record in model.iter_fit(X, y):
        last = record
        done = record.seconds >= cfg["time_limit"]
        if record.seconds >= next_eval or done:
            points.append(
                {
                    "iteration": record.iteration,
                    "seconds": record.seconds,
                    "test_mse": _mse(model.predict(X_test), y_test),
                }
            )
            next_eval = max(0.01, record.seconds * 1.25)
        if done:
            break
    if points[-1]["iteration"] != last.iteration:
        points.append(
            {"iteration": last.iteration, "seconds": last.seconds, "test_mse": _mse(model.predict(X_test), y_test)}
        )
    trace = model.trace_
    setup = trace[0].seconds
    iterations = trace[-1].iteration
    return {
        "points": points,
        "setup_s": setup,
        "iterations": iterations,
        "s_per_iter": (trace[-1].seconds - setup) / iterations if iterations else math.nan,
        "blocks": getattr(model, "n_blocks_", None),
        "K": getattr(model, "kernel_storage_", ""),
    }


def _fit_peer(cfg: dict, kernel, X, y, X_test, y_test) -> dict:
    name, sigma, penalty = cfg["solver"], cfg["sigma"], cfg["penalty"]
    n = X.shape[0]
    itemsize = X.element_size()
    if name == "sk_krr":
        points = peers.sklearn_kernel_ridge(X.numpy(), y.numpy(), X_test.numpy(), y_test, sigma=sigma, penalty=penalty)
    elif name == "sk_nystroem":
        points = peers.sklearn_nystroem_ridge(
            X.numpy(), y.numpy(), X_test.numpy(), y_test, sigma=sigma, penalty=penalty, M=cfg["M"]
        )
    elif name == "rlaopt":  # K stored exactly when NyströmPCG would store it
        from krrcore.full_system import resolve_kernel_storage

        storage = resolve_kernel_storage("auto", n, itemsize, cfg.get("memory_budget"), X.device)
        points = peers.rlaopt_pcg(
            X,
            y,
            X_test,
            y_test,
            kernel=kernel,
            penalty=penalty,
            rank=100,
            max_iters=cfg["maxiter"],
            time_limit=cfg["time_limit"],
            stored=storage == "stored",
            memory_budget=cfg.get("memory_budget"),
        )
        last = points[-1]
        return {
            "points": points,
            "setup_s": points[0]["seconds"],
            "iterations": last["iteration"],
            "s_per_iter": (last["seconds"] - points[0]["seconds"]) / max(last["iteration"], 1),
            "K": storage,
        }
    elif name == "gpytorch":
        points = peers.gpytorch_cg(
            X, y, X_test, y_test, sigma=sigma, penalty=penalty, tolerances=cfg.get("tolerances", (1e-1, 1e-2, 1e-3))
        )
    else:
        raise ValueError(f"unknown peer {name!r}")
    return {
        "points": points,
        "setup_s": math.nan,
        "iterations": points[-1].get("iteration", math.nan),
        "s_per_iter": math.nan,
    }


def _refusal(cfg: dict, n: int, itemsize: int) -> str | None:
    """Why a solver that holds an n×n matrix cannot run at this n here (None if it can)."""
    need = {"sk_krr": 2 * n * n * 8, "gpytorch": 2 * n * n * itemsize}.get(cfg["solver"])
    if need is not None and need > 0.6 * available_bytes("cpu"):
        what = (
            "scikit-learn's KernelRidge holds K and its factor in float64"
            if cfg["solver"] == "sk_krr"
            else "GPyTorch (without KeOps) evaluates the whole K"
        )
        return f"{what}: ~{need / 2**30:.1f} GiB, more than this machine has free"
    if cfg["solver"] in DIRECT and cfg.get("direct_max_n") and n > cfg["direct_max_n"]:
        return f"n > {cfg['direct_max_n']:,}: a direct O(n³) solve, beyond this case's time limit"
    return None


def fit_one(cfg: dict) -> dict:
    """Child process: one fit (or the floor) described by ``cfg``; see the module docstring."""
    from krrcore.kernels import GaussianKernel

    if cfg.get("threads"):
        torch.set_num_threads(cfg["threads"])
    else:
        set_threads()
    out = {
        "solver": cfg["solver"],
        "label": LABELS.get(cfg["solver"], cfg["solver"]),
        "n": cfg["n"],
        "M": cfg.get("M"),
        "dtype": cfg["dtype"],
    }
    X, y, X_test, y_test = load_split(cfg["n"], cfg["n_test"], cfg["dtype"])
    kernel = GaussianKernel(cfg["sigma"])
    if cfg["solver"] == "floor":
        centers = X[: cfg["M"]].clone()
        return {**out, **hardware_floor(kernel, X, centers, cfg.get("memory_budget"))}
    reason = _refusal(cfg, X.shape[0], X.element_size())
    if reason:
        return {**out, "skipped": reason}
    # Predicting the training targets' mean: the error a fit must beat to be shown (benchmarks.docs).
    out["mean_error"] = _mse(np.full(y_test.shape, float(y.double().mean())), y_test)
    fit = _fit_krrcore if cfg["solver"] in {"falkon", "nystrom_pcg", "cg", "askotch", "exact"} else _fit_peer
    try:
        with PeakMemory() as mem:
            result = fit(cfg, kernel, X, y, X_test, y_test)
    except peers.PeerMissing as exc:
        return {**out, "skipped": str(exc)}
    except MemoryError as exc:  # krrcore's MemoryLimitError included: the message says why
        return {**out, "skipped": f"{type(exc).__name__}: {exc}"}
    return {**out, **result, "peak_MiB": mem.extra_bytes / 2**20}

"""Predictive uncertainty: coverage of nominal intervals and what the standard deviation costs.

For each data set and estimator fitted with ``uncertainty=True`` (:mod:`krrcore.solvers.uncertainty`):
the share of test targets inside the nominal 90% and 50% intervals (mean ± z·std of a new
observation), the mean 90% width, the test MSE, the fit's seconds, the posterior set-up's
seconds (``uncertainty_seconds_``) and the microseconds per test point of ``predict`` with and without
``return_std``. Beside them scikit-learn's ``GaussianProcessRegressor`` on the same rows: at the
matched GP (σ, signal σ̂²/(λn), noise σ̂², ``optimizer=None``: the same std as ExactKRR, its cost) and
with its own marginal-likelihood fit of length-scale, signal and noise (the peer's calibration).

Data: a smooth 2-D function with Gaussian noise of std 0.3 (a case where 90% should be 90%) and
the concrete table (real noise, standardised targets), both seeded; σ and λ are fixed per data set
(the same for every estimator), not tuned to the test set.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from benchmarks.common import set_threads

Z90, Z50 = 1.6448536269514722, 0.6744897501960817

#: Data sets: n training rows, σ and λ; "smooth" is generated, "concrete" is krrcore's table.
DATASETS = {
    "smooth (noise 0.3)": {"n": 20_000, "n_exact": 2_000, "n_test": 5_000, "sigma": 0.7, "penalty": 1e-5},
    "concrete": {"n": None, "n_exact": None, "n_test": None, "sigma": 2.0, "penalty": 1e-4},
}
QUICK = {"smooth (noise 0.3)": {"n": 1_500, "n_exact": 400, "n_test": 500, "sigma": 0.7, "penalty": 1e-5}}
#: (label, estimator, M): M None for ExactKRR and the scikit-learn GPs.
METHODS = [
    ("ExactKRR", "exact", None),
    ("NystromKRR M=100", "nystrom", 100),
    ("Falkon M=100", "falkon", 100),
    ("Falkon M=500", "falkon", 500),
    ("sklearn GP, matched", "gp_matched", None),
    ("sklearn GP, own ML fit", "gp_ml", None),
]
QUICK_METHODS = [m for m in METHODS if m[2] in (None, 100)]


def load(name: str, cfg: dict, seed: int = 0):
    """(X, y, X_test, y_test), float64."""
    if name.startswith("smooth"):
        rng = np.random.default_rng(seed)
        n, n_test = cfg["n"], cfg["n_test"]
        X, Xt = rng.uniform(-2, 2, (n, 2)), rng.uniform(-2, 2, (n_test, 2))

        def f(A):
            return np.sin(2 * A[:, 0]) + 0.5 * np.cos(3 * A[:, 1])

        return X, f(X) + 0.3 * rng.standard_normal(n), Xt, f(Xt) + 0.3 * rng.standard_normal(n_test)
    from krrcore.datasets import load as load_dataset

    data = load_dataset(name, seed=seed)
    return data.X_train, data.y_train, data.X_test, data.y_test


def _per_point_us(predict, Xt) -> float:
    start = time.perf_counter()
    predict(Xt)
    return 1e6 * (time.perf_counter() - start) / len(Xt)


def _row(label, n, M, mean, std, yt, **extra) -> dict:
    err = np.abs(yt - mean)
    return {
        "method": label,
        "n": n,
        "M": M,
        "coverage 90%": float(np.mean(err <= Z90 * std)),
        "coverage 50%": float(np.mean(err <= Z50 * std)),
        "90% width": float(2 * Z90 * np.mean(std)),
        "test MSE": float(np.mean(err**2)),
        **extra,
    }


def measure(config: dict) -> dict:
    """Every method on one data set (fits in this process, on the suite's threads)."""
    set_threads()
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    from krrcore.kernels import GaussianKernel
    from krrcore.solvers.exact import ExactKRR, NystromKRR
    from krrcore.solvers.falkon import Falkon

    name, quick = config["name"], config["quick"]
    cfg = (QUICK if quick else DATASETS)[name]
    X, y, Xt, yt = load(name, cfg)
    n_exact = min(len(X), cfg["n_exact"] or len(X))
    sigma, lam = cfg["sigma"], cfg["penalty"]
    rows, exact = [], None
    for label, kind, M in QUICK_METHODS if quick else METHODS:
        Xf, yf = (X[:n_exact], y[:n_exact]) if kind in ("exact", "gp_matched", "gp_ml") else (X, y)
        n = len(Xf)
        if kind in ("exact", "nystrom", "falkon"):
            cls, options = {"exact": (ExactKRR, {}), "nystrom": (NystromKRR, {"M": M}), "falkon": (Falkon, {"M": M})}[
                kind
            ]
            est = cls(GaussianKernel(sigma), lam, uncertainty=True, **options)
            start = time.perf_counter()
            est.fit(Xf, yf)
            fit_s = time.perf_counter() - start
            mean, std = est.predict(Xt, return_std=True)
            rows.append(
                _row(
                    label,
                    n,
                    M,
                    mean,
                    std,
                    yt,
                    **{
                        "fit s": fit_s,
                        "posterior set-up s": est.uncertainty_seconds_,
                        "µs/point, mean": _per_point_us(est.predict, Xt),
                        "µs/point, mean + std": _per_point_us(functools.partial(est.predict, return_std=True), Xt),
                        "noise std": float(est.noise_std_),
                        "df": est.effective_dof_,
                    },
                )
            )
            if kind == "exact":
                exact = est
            continue
        if kind == "gp_matched":
            noise_var = exact.noise_std_**2
            kernel = ConstantKernel(noise_var / (lam * n), "fixed") * RBF(sigma, "fixed") + WhiteKernel(
                noise_var, "fixed"
            )
            gp = GaussianProcessRegressor(kernel, alpha=0.0, optimizer=None)
        else:
            kernel = ConstantKernel(1.0) * RBF(sigma) + WhiteKernel(0.1)
            gp = GaussianProcessRegressor(kernel, alpha=0.0, n_restarts_optimizer=0, random_state=0)
        start = time.perf_counter()
        gp.fit(Xf, yf)
        fit_s = time.perf_counter() - start
        mean, std = gp.predict(Xt, return_std=True)
        noise = math.sqrt(gp.kernel_.k2.noise_level)
        rows.append(
            _row(
                label,
                n,
                M,
                mean,
                std,
                yt,
                **{
                    "fit s": fit_s,
                    "posterior set-up s": 0.0,
                    "µs/point, mean": _per_point_us(gp.predict, Xt),
                    "µs/point, mean + std": _per_point_us(functools.partial(gp.predict, return_std=True), Xt),
                    "noise std": noise,
                    "df": float("nan"),
                },
            )
        )
    return {"name": name, "n_test": len(Xt), "rows": [{"data set": name, **r} for r in rows]}


def summary_rows(results: list[dict]) -> list[dict]:
    return [r for result in results if "rows" in result for r in result["rows"]]

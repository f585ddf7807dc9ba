"""Where the tuner's closed form in λ stops being the Nyström solution, against two solvers that
stay accurate below the tuner's float64 floor of λ = 1e-7 (:data:`krrcore.tuning.search.PENALTY_BOUNDS`).

``python -m benchmarks.bench_penalty_floor``: on the tune benchmark's Friedman-1 (n = 2,000, M = 300,
its grid's best point is σ = 17.6, λ = 1e-9), the test MSE of the Nyström model at each (σ, λ) by
- the tuner's closed form (:class:`krrcore.tuning.objectives.PenaltyProfile`: K_MM + εI = LLᵀ, then
  the eigenproblem of L⁻¹GL⁻ᵀ),
- the same normal equations in K_MM's eigenbasis instead of its Cholesky factor (directions with
  eigenvalues above 1e-12 of the largest: no jitter, no L⁻¹),
- FALKON with 300 iterations (its preconditioned CG on the same centres),
- least squares on the stacked system [K_nM; √(λn) K_MM^½] α ≈ [y; 0] (LAPACK's gelsd: no normal
  equations, so the condition number is not squared).
Prints a Markdown table. Where the three agree the floor could be lower; where the closed form
departs, it cannot be trusted, and neither can the objectives computed from it.
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

from benchmarks.common import set_threads

#: (σ, λ): the grid's best point, its neighbours below the floor, and the tuner's answer's σ at
#: the floor and one decade below it.
POINTS = ((17.6, 1e-9), (17.6, 1e-8), (12.0, 1e-9), (12.0, 1e-8), (8.81, 1e-8), (8.81, 1e-7))


def main(argv=None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    set_threads()
    import torch

    from benchmarks.bench_tune import DATASETS, load
    from krrcore import Falkon, GaussianKernel
    from krrcore.tuning.objectives import PenaltyProfile, gaussian_block, row_stats

    X, y, X_test, y_test = load("friedman1", DATASETS["friedman1"])
    M = DATASETS["friedman1"]["M"]
    X64, Y64, Xt64 = torch.as_tensor(X), torch.as_tensor(y).reshape(-1, 1), torch.as_tensor(X_test)
    n = X.shape[0]
    columns = ("σ", "λ", "closed form (tuner)", "normal equations, K_MM eigenbasis", "FALKON, 300 iterations")
    print("| " + " | ".join((*columns, "stacked least squares")) + " |")
    print("|---|---|---|---|---|---|")
    for sigma, penalty in POINTS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            falkon = Falkon(GaussianKernel(sigma), penalty, M=M, maxiter=300, seed=0).fit(X, y)
        Z = falkon.centers_.double()
        log_sigma = torch.log(torch.tensor(sigma, dtype=torch.float64))
        Kmm, Knm = gaussian_block(Z, Z, log_sigma), gaussian_block(X64, Z, log_sigma)
        K_test = gaussian_block(Xt64, Z, log_sigma)

        def mse(alpha):
            return float(((K_test @ alpha).reshape(-1) - torch.as_tensor(y_test)).pow(2).mean())

        stats = row_stats(X64, Y64, Z, sigma, None)
        closed = PenaltyProfile("gcv", stats, Kmm).alpha(penalty)
        w, V = torch.linalg.eigh(Kmm)
        basis = V[:, w > 1e-12 * w.max()] / w[w > 1e-12 * w.max()].sqrt()
        mu, U = torch.linalg.eigh(basis.T @ stats.G @ basis)
        T = basis @ U
        eigen = T @ ((T.T @ stats.R) / (mu.clamp_min(0)[:, None] + penalty * n))
        root = (V * w.clamp_min(0).sqrt()) @ V.T
        A = torch.cat([Knm, math.sqrt(penalty * n) * root])
        b = torch.cat([Y64, torch.zeros(M, 1, dtype=torch.float64)])
        stacked = torch.linalg.lstsq(A, b, driver="gelsd").solution
        falkon_mse = float(np.mean((falkon.predict(X_test) - y_test) ** 2))
        values = (mse(closed), mse(eigen), falkon_mse, mse(stacked))
        print(f"| {sigma:g} | {penalty:g} | " + " | ".join(f"{v:.4f}" for v in values) + " |")


if __name__ == "__main__":
    main()

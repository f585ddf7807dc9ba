"""Diagnostics against dense linear algebra."""

import numpy as np
import pytest
import torch
from sklearn.datasets import load_diabetes

from krrcore.diagnostics import (
    effective_dimension,
    full_krr_spectrum,
    kernel_eigenvalues,
    lanczos_ritz_values,
    nystrom_kernel_eigenvalues,
    nystrom_spectra,
)
from krrcore.kernels import GaussianKernel


@pytest.fixture(scope="module")
def X():
    X = load_diabetes(return_X_y=True)[0]
    return (X - X.mean(0)) / X.std(0)


def test_preconditioning_collapses_the_condition_number(X):
    sp = nystrom_spectra(GaussianKernel(3.0), X, X[:200], 1e-3)
    K = GaussianKernel(3.0)(X, X[:200])
    H = K.T @ K / len(X) + 1e-3 * GaussianKernel(3.0)(X[:200], X[:200])
    ref = np.linalg.eigvalsh(H.numpy())
    np.testing.assert_allclose(sp["nystrom"].eigenvalues.numpy()[-5:], ref[-5:], rtol=1e-10)
    assert sp["nystrom"].condition_number > 1e4
    assert sp["falkon"].condition_number < 10


def test_lanczos_matches_exact_extremes(X):
    exact = nystrom_spectra(GaussianKernel(3.0), X, X[:150], 1e-3)
    est = nystrom_spectra(GaussianKernel(3.0), X, X[:150], 1e-3, exact_max_M=10, lanczos_steps=80)
    assert est["falkon"].method.startswith("lanczos")
    for key in ("nystrom", "falkon"):
        assert est[key].eigenvalues.max() == pytest.approx(float(exact[key].eigenvalues.max()), rel=1e-8)
    assert est["falkon"].condition_number == pytest.approx(exact["falkon"].condition_number, rel=1e-6)


def test_lanczos_on_a_known_diagonal_operator():
    d = torch.linspace(1.0, 100.0, 300, dtype=torch.float64)
    ritz = lanczos_ritz_values(lambda v: d[:, None] * v, 300, steps=60)
    assert float(ritz.max()) == pytest.approx(100.0, rel=1e-5) and float(ritz.min()) == pytest.approx(1.0, rel=1e-3)


def test_effective_dimension_matches_trace_formula(X):
    n, lam = len(X), 1e-3
    K = GaussianKernel(3.0)(X, X).numpy()
    ref = np.trace(K @ np.linalg.inv(K + lam * n * np.eye(n)))
    s = kernel_eigenvalues(GaussianKernel(3.0), X).eigenvalues
    assert float(effective_dimension(s, n, [lam])[0]) == pytest.approx(ref, rel=1e-8)
    d = effective_dimension(s, n, [1e-6, 1e-4, 1e-2])
    assert bool((d[:-1] > d[1:]).all())
    # The Nyström spectrum underestimates K's, so its d_eff is a lower bound that tightens with M.
    approx = [
        float(effective_dimension(nystrom_kernel_eigenvalues(GaussianKernel(3.0), X, M), n, [lam])[0])
        for M in (50, 300)
    ]
    assert approx[0] < approx[1] <= ref + 1e-8 and approx[1] > 0.9 * ref


def test_full_krr_condition_number(X):
    sp = full_krr_spectrum(GaussianKernel(3.0), X, 1e-3)
    ev = np.linalg.eigvalsh(GaussianKernel(3.0)(X, X).numpy()) + 1e-3 * len(X)
    assert sp.condition_number == pytest.approx(ev.max() / ev.min(), rel=1e-8)


# -- the diagnostics the pages show, on their own (krrcore.diagnostics, krrcore.leverage) ------------

from krrcore import ASkotch  # noqa: E402
from krrcore.diagnostics import SYSTEMS, askotch_blocks, condition_vs_M, condition_vs_penalty  # noqa: E402
from krrcore.diagnostics import effective_dimension_curve, interpolate_deff  # noqa: E402
from krrcore.diagnostics import projection_2d, shifted_spectrum, subsample  # noqa: E402
from krrcore.leverage import compare_with_exact  # noqa: E402


@pytest.fixture(scope="module")
def small(X):
    return torch.as_tensor(X[:120], dtype=torch.float64)


def test_askotch_blocks_are_the_solvers_own_and_match_dense_algebra(small):
    kernel, lam, n = GaussianKernel(3.0), 1e-3, small.shape[0]
    table, whole = askotch_blocks(kernel, small, lam, 3, 8, seed=5)
    solver = ASkotch(
        kernel, lam, blocks=3, rank=8, seed=5, maxiter=0, mu="lambda", variant="alg1", cache_preconditioners=True
    ).fit(small, np.ones(n))
    np.testing.assert_array_equal(table["L_P (get_L)"], solver.block_smoothness_.numpy())
    H = kernel(small, small) + lam * n * torch.eye(n, dtype=torch.float64)
    for row, idx, pc in zip(table.itertuples(), solver.block_indices_, solver.block_preconditioners_):
        H_bb = H[idx][:, idx]
        plain = torch.linalg.eigvalsh(H_bb)
        S = pc.inv_sqrt(torch.eye(idx.numel(), dtype=torch.float64))
        pre = torch.linalg.eigvalsh(S @ H_bb @ S)
        assert row.kappa_block == pytest.approx(float(plain[-1] / plain[0]), rel=1e-8)
        assert row.kappa_preconditioned == pytest.approx(float(pre[-1] / pre[0]), rel=1e-8)
        assert row.rho == pc.rho and row.kappa_preconditioned < row.kappa_block
    assert whole["lambda_min"] == pytest.approx(float(torch.linalg.eigvalsh(H)[0]), rel=1e-10)
    assert 0 < whole["mu_P"] < whole["lambda_min"]


def test_condition_sweeps_hold_every_system_and_agree_with_single_spectra(small):
    kernel, n = GaussianKernel(3.0), small.shape[0]
    frame = condition_vs_penalty(kernel, small, (1e-4, 1e-2), M=30, blocks=3, rank=8)
    assert set(frame["system"]) == set(SYSTEMS.values()) and len(frame) == 8
    full = frame[frame["system"] == SYSTEMS["full"]]["condition_number"].to_numpy()
    ev = np.linalg.eigvalsh(kernel(small, small).numpy()).clip(0)
    np.testing.assert_allclose(full, [(ev.max() + lam * n) / (ev.min() + lam * n) for lam in (1e-4, 1e-2)], rtol=1e-8)
    falkon = frame[frame["system"] == SYSTEMS["falkon"]]["condition_number"].to_numpy()
    nystrom = frame[frame["system"] == SYSTEMS["nystrom"]]["condition_number"].to_numpy()
    assert (falkon < nystrom).all() and nystrom[0] > nystrom[1]  # FALKON preconditions; λ regularises
    by_M = condition_vs_M(kernel, small, 1e-3, (10, 40))
    assert list(by_M["M"]) == [10, 10, 40, 40]
    spectrum = kernel_eigenvalues(kernel, small)
    assert shifted_spectrum(spectrum, n, 1e-2).condition_number == pytest.approx(full[1], rel=1e-12)


def test_effective_dimension_curve_exact_and_estimated(small):
    kernel, n = GaussianKernel(3.0), small.shape[0]
    K = kernel(small, small).numpy()
    penalties = (1e-4, 1e-3, 1e-2)
    exact = [np.trace(K @ np.linalg.inv(K + lam * n * np.eye(n))) for lam in penalties]
    curve = effective_dimension_curve(kernel, small, penalties)
    np.testing.assert_allclose(curve["d_eff"], exact, rtol=1e-8)
    assert set(curve["method"]) == {"exact"}
    estimate = effective_dimension_curve(kernel, small, penalties, exact_max_n=50, nystrom_M=60)
    assert estimate["method"][0].startswith("Nyström estimate (M = 60")
    assert ((estimate["d_eff"] <= np.array(exact) + 1e-8) & (estimate["d_eff"] > 0.5 * np.array(exact))).all()
    assert interpolate_deff(curve, 1e-3) == pytest.approx(exact[1], rel=1e-10)


def test_compare_with_exact_reports_r_acc_against_the_trace_formula(small):
    kernel, n, lam = GaussianKernel(3.0), small.shape[0], 1e-2
    K = kernel(small, small).numpy()
    exact = np.diag(K @ np.linalg.inv(K + lam * n * np.eye(n)))
    report = compare_with_exact(small, kernel, lam, "bless", seed=0, q2=8.0)
    np.testing.assert_allclose(report.points["exact"], exact, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(report.points["r_acc"], report.points["approximate"] / exact, rtol=1e-12)
    assert report.d_eff == pytest.approx(exact.sum(), rel=1e-8) and report.d_inf == pytest.approx(n * exact.max())
    assert report.r_acc["q05"] <= report.r_acc["mean"] <= report.r_acc["q95"]
    assert report.path["penalty"].iloc[-1] == pytest.approx(lam) and len(report.dictionary) > 0


def test_subsample_and_projection():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3)) * [10.0, 1.0, 0.1]
    rows = subsample(X, 20, seed=1)
    assert rows.shape == (20, 3) and np.array_equal(rows, subsample(X, 20, seed=1))
    np.testing.assert_array_equal(subsample(X, 100), X)  # fewer rows than the limit: all of them
    coords, axes = projection_2d(X)
    assert coords.shape == (50, 2) and axes[0].startswith("PC 1")
    assert abs(np.corrcoef(coords[:, 0], X[:, 0])[0, 1]) > 0.99  # PC 1 is the widest feature

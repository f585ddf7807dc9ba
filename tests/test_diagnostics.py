"""Diagnostics against dense linear algebra."""
import numpy as np
import pytest
import torch
from sklearn.datasets import load_diabetes

from krrcore.diagnostics import (effective_dimension, full_krr_spectrum, kernel_eigenvalues, lanczos_ritz_values,
                                 nystrom_kernel_eigenvalues, nystrom_spectra)
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
    approx = [float(effective_dimension(nystrom_kernel_eigenvalues(GaussianKernel(3.0), X, M), n, [lam])[0])
              for M in (50, 300)]
    assert approx[0] < approx[1] <= ref + 1e-8 and approx[1] > 0.9 * ref


def test_full_krr_condition_number(X):
    sp = full_krr_spectrum(GaussianKernel(3.0), X, 1e-3)
    ev = np.linalg.eigvalsh(GaussianKernel(3.0)(X, X).numpy()) + 1e-3 * len(X)
    assert sp.condition_number == pytest.approx(ev.max() / ev.min(), rel=1e-8)

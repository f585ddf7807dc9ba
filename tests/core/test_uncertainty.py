"""Predictive uncertainty (krrcore.solvers.uncertainty): the GP posterior whose mean is the KRR model.

Exact agreement with scikit-learn's GaussianProcessRegressor at the matched GP (signal variance
σ̂²/(λn), noise σ̂²), Falkon on all training points equal to ExactKRR, the DTC formula checked
against explicit inverses, calibration of 90% intervals, and the refusals."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from krrcore.kernels import GaussianKernel
from krrcore.memory import MemoryLimitError
from krrcore.solvers.askotch import ASkotch
from krrcore.solvers.classifiers import FalkonClassifier
from krrcore.solvers.exact import ExactKRR, NystromKRR
from krrcore.solvers.falkon import Falkon, NystromCG
from krrcore.solvers.params import ParameterError
from krrcore.solvers.pcg import CG
from krrcore.solvers.sketchysaga import SketchySAGA
from krrcore.solvers.uncertainty import UncertaintyError

Z90 = 1.6448536269514722  # the normal's 95% quantile: a central 90% interval is mean ± Z90·std


def smooth_data(seed, n, n_test=0, noise=0.1, d=2):
    rng = np.random.default_rng(seed)

    def f(X):
        return np.sin(2 * X[:, 0]) + 0.5 * np.cos(3 * X[:, -1])

    X = rng.uniform(-2, 2, (n, d))
    Xt = rng.uniform(-2, 2, (n_test, d))
    return X, f(X) + noise * rng.standard_normal(n), Xt, f(Xt) + noise * rng.standard_normal(n_test)


def test_exact_std_equals_sklearn_gaussian_process():
    X, y, _, _ = smooth_data(0, 300)
    Xq = np.random.default_rng(1).uniform(-3, 3, (200, 2))  # inside and outside the data
    sigma, lam, n = 0.8, 1e-4, len(X)
    model = ExactKRR(GaussianKernel(sigma), lam, uncertainty=True).fit(X, y)
    mean, std = model.predict(Xq, return_std=True)
    noise_var = model.noise_std_**2
    kernel = ConstantKernel(noise_var / (lam * n), "fixed") * RBF(sigma, "fixed") + WhiteKernel(noise_var, "fixed")
    # The model's offset is y's mean: the GP of zero mean on y less it, the mean added back.
    gp = GaussianProcessRegressor(kernel, alpha=0.0, optimizer=None, normalize_y=False).fit(X, y - y.mean())
    gp_mean, gp_std = gp.predict(Xq, return_std=True)
    assert np.abs(std - gp_std).max() < 1e-8
    assert np.abs(mean - (gp_mean + y.mean())).max() < 1e-8
    assert np.allclose(model.predict(Xq), mean)


def test_exact_noise_estimate_is_the_residual_variance_over_the_residual_degrees_of_freedom():
    X, y, _, _ = smooth_data(2, 200)
    lam, n = 1e-3, len(X)
    model = ExactKRR(GaussianKernel(0.5), lam, uncertainty=True).fit(X, y)
    K = GaussianKernel(0.5)(torch.as_tensor(X), torch.as_tensor(X)).numpy()
    hat = K @ np.linalg.inv(K + lam * n * np.eye(n))
    dof = np.trace(hat)
    assert model.effective_dof_ == pytest.approx(dof, rel=1e-9)
    centred = y - y.mean()  # the offset (fit_intercept) is y's mean: one more parameter fitted
    rss = np.sum((centred - hat @ centred) ** 2)
    assert model.noise_std_ == pytest.approx(np.sqrt(rss / (n - dof - 1)), rel=1e-9)
    assert "n − df − 1" in model.noise_source_ and "exact GP" in model.noise_source_
    plain = ExactKRR(GaussianKernel(0.5), lam, uncertainty=True, fit_intercept=False).fit(X, y)
    assert plain.noise_std_ == pytest.approx(np.sqrt(np.sum((y - hat @ y) ** 2) / (n - dof)), rel=1e-9)


def test_falkon_on_all_training_points_equals_exact():
    X, y, _, _ = smooth_data(0, 300)
    Xq = np.random.default_rng(1).uniform(-3, 3, (200, 2))
    exact = ExactKRR(GaussianKernel(0.8), 1e-4, uncertainty=True).fit(X, y)
    falkon = Falkon(GaussianKernel(0.8), 1e-4, centers=X, uncertainty=True, tol=1e-13, maxiter=50).fit(X, y)
    assert np.abs(falkon.predict_std(Xq) - exact.predict_std(Xq)).max() < 1e-8
    assert np.abs(falkon.predict_std(Xq, noise=False) - exact.predict_std(Xq, noise=False)).max() < 1e-8
    assert falkon.effective_dof_ == pytest.approx(exact.effective_dof_, abs=1e-5)


def dtc_std(X, y, C, sigma, lam, coef):
    """The DTC predictive std from explicit inverses (the module docstring's formula), for the
    default offset: the model is fitted to y less its mean, one more parameter (n − df − 1)."""
    y = y - y.mean()
    k = GaussianKernel(sigma)

    def t(A):
        return torch.as_tensor(A, dtype=torch.float64)

    KnM, KMM = k(t(X), t(C)).numpy(), k(t(C), t(C)).numpy()
    n = len(X)
    H = KnM.T @ KnM + lam * n * KMM
    S = np.linalg.inv(H)
    df = np.trace(KnM @ S @ KnM.T)
    noise_var = np.sum((y - KnM @ coef) ** 2) / (n - df - 1)
    return (
        S,
        KMM,
        noise_var,
        df,
        lambda Kq: np.sqrt(
            noise_var * (1 + (1 - np.einsum("ij,jk,ik->i", Kq, np.linalg.inv(KMM) - lam * n * S, Kq)) / (lam * n))
        ),
    )


@pytest.mark.parametrize("cls", [NystromKRR, Falkon, NystromCG])
def test_nystrom_std_is_the_dtc_posterior_of_the_same_centers(cls):
    X, y, _, _ = smooth_data(3, 400)
    Xq = np.random.default_rng(4).uniform(-3, 3, (100, 2))
    options = {} if cls is NystromKRR else {"tol": 1e-12, "maxiter": 300}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NystromCG may stall just short of tol=1e-12
        model = cls(GaussianKernel(0.6), 1e-3, M=40, uncertainty=True, seed=5, **options).fit(X, y)
    C = model.centers_.numpy()
    _, _, noise_var, df, std = dtc_std(X, y, C, 0.6, 1e-3, model.coef_.numpy()[:, 0])
    Kq = GaussianKernel(0.6)(torch.as_tensor(Xq), torch.as_tensor(C)).numpy()
    assert model.effective_dof_ == pytest.approx(df, rel=1e-7)
    assert model.noise_std_ == pytest.approx(np.sqrt(noise_var), rel=1e-7)
    assert np.abs(model.predict_std(Xq) - std(Kq)).max() < 1e-7
    assert "DTC" in model.noise_source_


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nominal_90_percent_intervals_cover_87_to_93_percent(seed):
    noise = 0.3
    X, y, Xt, yt = smooth_data(seed, 800, n_test=3000, noise=noise)
    exact = ExactKRR(GaussianKernel(0.7), 1e-4, uncertainty=True).fit(X, y)
    X, y, _, _ = smooth_data(seed + 10, 6000, noise=noise)
    falkon = Falkon(GaussianKernel(0.7), 1e-5, M=150, maxiter=40, uncertainty=True, seed=seed).fit(X, y)
    for model in (exact, falkon):
        mean, std = model.predict(Xt, return_std=True)
        coverage = np.mean(np.abs(yt - mean) <= Z90 * std)
        assert 0.87 <= coverage <= 0.93, (type(model).__name__, coverage)
        assert model.noise_std_ == pytest.approx(noise, rel=0.1)


def test_uncertainty_grows_away_from_the_centers():
    X, y, _, _ = smooth_data(0, 500, d=1)
    model = Falkon(GaussianKernel(0.3), 1e-4, M=30, uncertainty=True).fit(X, y)
    near = model.predict_std(np.array([[0.0]]), noise=False)[0]
    far = model.predict_std(np.array([[6.0]]), noise=False)[0]
    assert far > 10 * near
    # Far from every centre f(x) reverts to the prior: std = √(signal variance) = σ̂/√(λn).
    assert far == pytest.approx(model.noise_std_ / np.sqrt(1e-4 * 500), rel=1e-6)
    assert model.predict_std(np.array([[0.0]]))[0] > near  # the observation adds the noise


def test_blocks_of_test_rows_torch_input_multi_output_and_compact():
    X, y, Xq, _ = smooth_data(0, 300, n_test=500)
    Y = np.column_stack([y, 3 * y])
    model = NystromKRR(GaussianKernel(0.7), 1e-3, M=50, uncertainty=True).fit(X, Y)
    std = model.predict_std(Xq)
    assert std.shape == (500, 2) and np.allclose(std[:, 1], 3 * std[:, 0], rtol=1e-6)
    assert model.noise_std_.shape == (2,)
    small = NystromKRR(GaussianKernel(0.7), 1e-3, M=50, uncertainty=True, memory_budget=1 << 20).fit(X, Y)
    assert np.allclose(small.predict_std(Xq), std, rtol=1e-12, atol=1e-14)  # many blocks, same values
    _, std_t = model.compact().predict(torch.as_tensor(Xq), return_std=True)
    assert isinstance(std_t, torch.Tensor) and np.allclose(std_t.numpy(), std)


def test_float32_falkon_gives_float32_std_close_to_float64():
    X, y, Xq, _ = smooth_data(0, 2000, n_test=200)
    # 40 iterations: both near the Nyström solution, so the std's gap is float32's, not the iterates'.
    m64 = Falkon(GaussianKernel(0.7), 1e-5, M=100, uncertainty=True, maxiter=40).fit(X, y)
    m32 = Falkon(GaussianKernel(0.7), 1e-5, M=100, uncertainty=True, dtype="float32", maxiter=40).fit(X, y)
    s32 = m32.predict_std(Xq.astype(np.float32))
    assert s32.dtype == np.float32
    assert np.abs(s32 - m64.predict_std(Xq)).max() < 1e-3 * m64.noise_std_ * 10


def test_memory_estimate_counts_the_posterior_and_refuses_what_does_not_fit():
    plain = Falkon(M=2000).memory_estimate(100_000, 5)
    with_std = Falkon(M=2000, uncertainty=True).memory_estimate(100_000, 5)
    names = [p.name for p in with_std.parts]
    assert any(name.startswith("posterior") for name in names)
    assert with_std.peak_bytes >= plain.peak_bytes + 3 * 2000**2 * 8
    assert with_std.setup_seconds > plain.setup_seconds
    X, y, _, _ = smooth_data(0, 3000)
    budget = Falkon(M=1000).memory_estimate(3000, 2).stored_bytes + 1000**2 * 8
    Falkon(M=1000, memory_budget=budget, maxiter=1).fit(X, y)  # fits without the posterior
    with pytest.raises(MemoryLimitError, match="posterior"):
        Falkon(M=1000, memory_budget=budget, maxiter=1, uncertainty=True).fit(X, y)


@pytest.mark.parametrize(
    "model, reason",
    [
        (ASkotch(maxiter=2, rank=5), "solves full KRR, whose posterior variance needs a solve with K"),
        (CG(maxiter=2), "solves full KRR"),
        (SketchySAGA(M=10, maxiter=2, rank=5), "without any M×M matrix.*Falkon\\(uncertainty=True\\)"),
        (ExactKRR(), "holds no posterior: it was fitted without uncertainty=True"),
    ],
)
def test_refused_with_the_reason(model, reason):
    X, y, _, _ = smooth_data(0, 60)
    model.fit(X, y)
    with pytest.raises(UncertaintyError, match=reason):
        model.predict(X, return_std=True)


def test_refused_for_classifiers_and_interpolating_fits():
    X, y, _, _ = smooth_data(0, 60)
    with pytest.raises(ParameterError, match="FalkonClassifier predicts class labels"):
        FalkonClassifier(uncertainty=True).fit(X, y > 0)
    with pytest.raises(UncertaintyError, match="interpolates its training data"):
        ExactKRR(GaussianKernel(0.05), 1e-12, uncertainty=True).fit(X, y)
    with pytest.raises(ParameterError, match="uncertainty must be True or False"):
        ExactKRR(uncertainty="yes").fit(X, y)


@pytest.mark.parametrize("model", [ExactKRR(uncertainty=True), Falkon(M=20, uncertainty=True)])
def test_refused_with_sample_weights_whose_noise_estimate_it_does_not_have(model):
    X, y, _, _ = smooth_data(0, 60)
    weights = np.arange(60) % 3 + 1.0
    with pytest.raises(UncertaintyError, match="not available with sample_weight"):
        model.fit(X, y, sample_weight=weights)
    type(model)(**{**model.get_params(), "uncertainty": False}).fit(X, y, sample_weight=weights)


def test_falkon_with_weighted_bless_centers_whitens_by_T_and_D_to_the_same_dtc_posterior():
    """BLESS centres carry FALKON's D (Alg. 2): the posterior whitens by F = T D⁻¹ and is still the
    DTC posterior of the centres (D preconditions, the problem is Eq. 8's)."""
    X, y, _, _ = smooth_data(6, 600)
    Xq = np.random.default_rng(7).uniform(-3, 3, (100, 2))
    model = Falkon(
        GaussianKernel(0.6), 1e-3, M=60, centers="bless", uncertainty=True, tol=1e-12, maxiter=300, seed=1
    ).fit(X, y)
    assert model.center_weights_ is not None and not torch.allclose(model.center_weights_, model.center_weights_[0])
    C = model.centers_.numpy()
    _, _, noise_var, df, std = dtc_std(X, y, C, 0.6, 1e-3, model.coef_.numpy()[:, 0])
    Kq = GaussianKernel(0.6)(torch.as_tensor(Xq), torch.as_tensor(C)).numpy()
    assert model.effective_dof_ == pytest.approx(df, rel=1e-7)
    assert np.abs(model.predict_std(Xq) - std(Kq)).max() < 1e-7

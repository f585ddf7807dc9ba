"""Leverage scores: exact routes against each other and numpy; BLESS / BLESS-R accuracy (R-ACC),
marginal weights, the λ path, guards; FALKON-BLESS centre selection."""

import math

import numpy as np
import pytest
import torch

from krrcore import leverage as lv
from krrcore.centers import CENTER_SELECTORS, FixedCenters, resolve_selector
from krrcore.solvers.falkon import Falkon
from krrcore.kernels import GaussianKernel, LaplacianKernel


def _gaussian_data(n, d=10, seed=0):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _clustered_data(n, seed=0):
    """Four tight 2-D clusters plus 2% far outliers: leverage scores spread over ~2 decades."""
    rng = np.random.default_rng(seed)
    n_out = n // 50
    centers = 2.5 * np.array([[1, 0], [0, 1], [-1, 0], [0, -1]])
    inliers = centers[rng.integers(4, size=n - n_out)] + 0.3 * rng.standard_normal((n - n_out, 2))
    theta, radius = rng.uniform(0, 2 * np.pi, n_out), rng.uniform(7, 12, n_out)
    outliers = radius[:, None] * np.column_stack([np.cos(theta), np.sin(theta)])
    return torch.from_numpy(np.vstack([inliers, outliers]))


def _racc_band(approx, exact):
    racc = (approx / exact).numpy()
    return np.quantile(racc, 0.05), np.quantile(racc, 0.95), racc.mean()


# ------------------------------------------------------------------------------------ exact
def test_exact_scores_routes_agree_with_numpy():
    X = _gaussian_data(300, d=3)
    kernel, lam = GaussianKernel(1.0), 1e-3
    K = kernel(X, X).numpy()
    n = len(K)
    direct = np.diag(K @ np.linalg.inv(K + lam * n * np.eye(n)))
    eigh = lv.exact_scores(X, kernel, lam, method="eigh").numpy()
    chol = lv.exact_scores(X, kernel, lam, method="cholesky", block_size=64).numpy()
    np.testing.assert_allclose(eigh, direct, atol=1e-11)
    np.testing.assert_allclose(chol, direct, atol=1e-11)
    assert 0 < direct.min() and direct.max() < 1


def test_exact_path_matches_single_lambda_and_d_eff_is_monotone():
    X = _gaussian_data(250, d=4)
    kernel = LaplacianKernel(2.0)
    lams = np.geomspace(1e-1, 1e-5, 9)
    path = lv.exact_scores_path(X, kernel, lams)
    assert path.scores.shape == (9, 250)
    np.testing.assert_allclose(
        path.scores[3].numpy(), lv.exact_scores(X, kernel, lams[3], method="cholesky").numpy(), atol=1e-10
    )
    np.testing.assert_allclose(path.d_eff, path.scores.sum(1).numpy(), rtol=1e-12)
    assert np.all(np.diff(path.d_eff) > 0)  # λ decreasing ⇒ d_eff increasing
    assert np.all(path.d_inf >= path.d_eff - 1e-9)
    assert np.all(path.d_eff <= 1.0 / lams + 1e-9)  # d_eff ≤ κ²/λ with κ² = 1


def test_exact_refuses_past_memory_limit_with_the_gib_needed():
    X = _gaussian_data(200, d=2)
    with pytest.raises(ValueError, match=r"n=200.* needs [0-9.e-]+ GiB but only"):
        lv.exact_scores(X, GaussianKernel(1.0), 1e-3, method="cholesky", memory_budget=1000)
    with pytest.raises(ValueError, match=r"needs .* GiB"):
        lv.exact_scores_path(X, GaussianKernel(1.0), [1e-3], memory_budget=1000)


def test_eq3_with_every_point_and_unit_weights_is_exact():
    """Eq. (3) with J = [n], A = I is ℓ(i, λ) exactly (the identity below Eq. 3)."""
    X = _gaussian_data(300, d=3)
    kernel, lam = GaussianKernel(1.5), 1e-3
    idx = torch.arange(300)
    ones = torch.ones(300, dtype=torch.float64)
    level = lv.LeverageLevel(lam, idx, ones, ones, torch.ones_like(idx), math.nan, 300, 300)
    np.testing.assert_allclose(
        lv.approximate_scores(X, kernel, None, level).numpy(), lv.exact_scores(X, kernel, lam).numpy(), atol=1e-10
    )
    # A subset with the same scores at the requested points only.
    some = torch.tensor([5, 17, 250])
    np.testing.assert_allclose(
        lv.approximate_scores(X, kernel, lam, level, some).numpy(),
        lv.exact_scores(X, kernel, lam)[some].numpy(),
        atol=1e-10,
    )


def test_float32_scoring_is_checked_and_falls_back_to_float64_where_it_rounds_too_much(caplog):
    """BLESS's candidate scoring in float32 on clustered data with outliers (scores over 2–3 decades),
    λn from 3 down to 0.003: where the float64 check keeps float32, every score is within 1% of
    max(its float64 value, the mean score) and the checked ones are float64's; where float32's
    cancellation grows (small λn) the check sees it and every score is float64's, with a log line."""
    from krrcore.leverage import dictionary

    X = _clustered_data(3000)
    kernel, n, idx = GaussianKernel(0.3), 3000, torch.arange(3000)
    kept = []
    for lam in (1e-3, 1e-4, 1e-5, 1e-6):
        level = lv.bless(X, kernel, 10 * lam, seed=0).final
        args = (kernel, X, level.indices, level.weights, lam * n)
        exact = dictionary._Dictionary(*args).scores(idx)
        low = dictionary._Dictionary(*args, precision="float32")
        caplog.clear()
        with caplog.at_level("INFO", logger="krrcore.leverage.dictionary"):
            scores = low.scores(idx)
        assert exact.max() / exact.min() > 50
        if "scoring all in float64" in caplog.text:
            torch.testing.assert_close(scores, exact, rtol=1e-10, atol=0)
            continue
        kept.append(lam)
        assert float(((scores - exact).abs() / exact.clamp_min(float(exact.mean()))).max()) < 1e-2
        changed = scores != low.local_scores(idx)  # the checked ones: float64's
        assert int(changed.sum()) >= dictionary.FLOAT32_CHECKED
        torch.testing.assert_close(scores[changed], exact[changed], rtol=1e-10, atol=0)
    assert kept and kept != [1e-3, 1e-4, 1e-5, 1e-6]
    with pytest.raises(ValueError, match="precision must be one of"):
        lv.bless(X, kernel, 1e-3, precision="float16")


# ------------------------------------------------------------------------------- accuracy
@pytest.fixture(scope="module")
def flat():
    X = _gaussian_data(2000)
    kernel, lam = GaussianKernel(3.0), 1e-3
    return X, kernel, lam, lv.exact_scores(X, kernel, lam)


@pytest.fixture(scope="module")
def clustered():
    X = _clustered_data(2000)
    kernel, lam = GaussianKernel(0.3), 1e-3
    return X, kernel, lam, lv.exact_scores(X, kernel, lam)


@pytest.mark.parametrize("sampler", ["bless", "bless_r"])
def test_racc_band_with_defaults_on_gaussian_data(flat, sampler):
    X, kernel, lam, exact = flat
    result = lv.SAMPLERS[sampler](X, kernel, lam, seed=0, points="all")
    lo, hi, mean = _racc_band(result.scores, exact)
    assert 0.5 <= lo and hi <= 2.0, (lo, hi)
    assert 0.9 < mean < 1.3
    assert abs(result.d_eff / float(exact.sum()) - 1) < 0.3


@pytest.mark.parametrize("sampler", ["bless", "bless_r"])
def test_racc_band_on_clustered_data_with_oversampling(clustered, sampler):
    """On clusters + outliers d_eff ≈ 45 is mostly the ~40 outliers (ℓ ≈ 1), so a dictionary of
    q2·d_eff points puts only ~q2·5 points in the clusters, where 98% of the scores live. With
    the default q2 = 4 the 95th R-ACC percentile is ≈ 2.4 here — and sampling with the *exact*
    scores and the same q2 gives 1.6–2.8 across seeds: the limit is the dictionary size
    (Theorem 1 asks q2 ∝ log(n/δ)/t²), not the approximation. At q2 = 16 the band holds."""
    X, kernel, lam, exact = clustered
    result = lv.SAMPLERS[sampler](X, kernel, lam, seed=0, points="all", q1=16, q2=16)
    lo, hi, _ = _racc_band(result.scores, exact)
    assert 0.5 <= lo and hi <= 2.0, (lo, hi)
    # The outliers' scores (≈ 1) are found: the largest approximate score is at an outlier.
    assert int(result.scores.argmax()) >= 2000 - 2000 // 50


@pytest.mark.parametrize("sampler", ["recursive_rls", "uniform"])
def test_comparison_samplers_share_the_output_and_are_sane(flat, sampler):
    X, kernel, lam, exact = flat
    kwargs = {"M": 500, "q": 10.0} if sampler == "uniform" else {}  # q = 10: a short d_eff path
    result = lv.SAMPLERS[sampler](X, kernel, lam, seed=0, points=torch.arange(0, 2000, 7), **kwargs)
    assert isinstance(result, lv.LeverageResult) and result.method == sampler
    lo, hi, mean = _racc_band(result.scores, exact[::7])
    assert 0.5 <= lo and hi <= 2.0 and 0.9 < mean < 1.4
    assert result.final.size == result.weights.numel() and bool((result.weights > 0).all())


# --------------------------------------------------------------------------- marginal weights
def test_bless_r_weights_are_marginal_probabilities():
    """Horvitz–Thompson: with A_jj = P(j ∈ J), E[Σ_{j∈J} 1/A_jj] = n. The public code's
    conditional weights p/β give E = βn instead, inflate the dictionary and bias the scores.
    Here β = q1κ²/(λn) = 0.2 at the last level, so the two are far apart."""
    X = _gaussian_data(1000)
    kernel, lam = GaussianKernel(3.0), 2e-2
    d_eff = float(lv.exact_scores(X, kernel, lam).sum())
    stats = {}
    for rule in ("marginal", "conditional"):
        runs = [lv.bless_r(X, kernel, lam, seed=s, weight_rule=rule) for s in range(10)]
        stats[rule] = dict(
            ht=np.mean([float((1 / r.weights).sum()) for r in runs]),
            size=np.mean([r.final.size for r in runs]),
            expected=np.mean([r.final.expected_size for r in runs]),
            d_eff=np.mean([r.d_eff for r in runs]),
        )
    m, c = stats["marginal"], stats["conditional"]
    assert abs(m["ht"] / 1000 - 1) < 0.15, m
    assert c["ht"] < 0.5 * 1000, c
    assert abs(m["size"] / m["expected"] - 1) < 0.1  # E|J| = Σ marginal probabilities
    assert c["size"] > 1.4 * m["size"]  # the defect inflates the dictionary
    assert abs(m["d_eff"] / d_eff - 1) < 0.25 and c["d_eff"] > 1.4 * d_eff


def test_bless_weights_are_marginal_per_draw():
    """Alg. 1: A = (R_h M_h/n)·diag(p), merged over duplicates: Σ 1/A_jj is unbiased for n."""
    X = _gaussian_data(1000)
    kernel, lam = GaussianKernel(3.0), 2e-2
    runs = [lv.bless(X, kernel, lam, seed=s) for s in range(6)]
    assert abs(np.mean([float((1 / r.weights).sum()) for r in runs]) / 1000 - 1) < 0.1
    for r in runs:
        assert int(r.final.counts.sum()) == round(r.final.expected_size)  # M_h draws in all
    # With merged duplicates weighted by their count, K_nJ A⁻¹ K_Jn is unbiased for K·K: the mean of
    # six runs is within 3.4% of it (forgetting the counts, as the public code's merge would, is 15% off).
    K = kernel(X, X)
    mean = sum((K[:, r.indices] / r.weights) @ K[:, r.indices].T for r in runs) / len(runs)
    assert float(torch.linalg.norm(mean - K @ K) / torch.linalg.norm(K @ K)) < 0.08


# ----------------------------------------------------------------------- path, seeds, guards
def test_lambda_path_is_returned_whole():
    X = _gaussian_data(800, d=5)
    kernel, lam = GaussianKernel(2.0), 1e-3
    result = lv.bless(X, kernel, lam, q=2.0, seed=3)
    H = math.ceil(math.log(1.0 / lam) / math.log(2.0))
    pens = np.array([lvl.penalty for lvl in result.levels])
    assert len(result.levels) == H == 10
    assert pens[-1] == pytest.approx(lam) and np.all(np.diff(np.log(pens)) >= -math.log(2.0) - 1e-12)
    frame = result.path()
    assert list(frame["penalty"]) == list(pens) and frame["size"].iloc[-1] == result.final.size
    # Every level is a usable dictionary for its own λ (Theorem 1 holds at every h).
    for h in (4, 7):
        exact = lv.exact_scores(X, kernel, pens[h], method="cholesky")
        approx = lv.approximate_scores(X, kernel, None, result.levels[h])
        assert 0.7 < np.median((approx / exact).numpy()) < 1.6
        assert abs(result.levels[h].d_eff / float(exact.sum()) - 1) < 0.4


def test_target_size_stops_the_descent_at_a_dictionary_of_exactly_that_many_points():
    """The first level whose dictionary reaches target_size is the last, and keeps that many points:
    BLESS the draws up to the one that brings the target-th distinct point (M_h shrinks to them),
    BLESS-R the accepted candidates of smallest u (inclusion probabilities shrink by β'/β)."""
    X = _gaussian_data(1000, d=5)
    kernel = GaussianKernel(2.0)
    for sampler in (lv.bless, lv.bless_r):
        full = sampler(X, kernel, 1e-4, seed=0)
        result = sampler(X, kernel, 1e-4, target_size=150, seed=0)
        *before, last = result.levels
        assert result.penalty > 1e-4 and "the dictionary reached target_size=150" in result.note
        assert all(level.size < 150 for level in before) and last.size == 150
        # The same draws as without a target, up to the stop: the prefix is kept, not redrawn.
        twin = full.levels[len(before)]
        assert twin.penalty == last.penalty and twin.size > 150
        assert set(last.indices.tolist()) <= set(twin.indices.tolist())
        if sampler is lv.bless:
            assert int(last.counts.sum()) == round(last.expected_size) < int(twin.counts.sum())
            torch.testing.assert_close(last.weights, last.expected_size * last.probabilities / last.counts)
        else:
            kept = last.probabilities / twin.probabilities[torch.isin(twin.indices, last.indices)]
            assert 0 < float(kept[0]) < 1
            torch.testing.assert_close(kept, torch.full_like(kept, float(kept[0])))


@pytest.mark.parametrize("sampler", ["bless", "bless_r", "recursive_rls", "uniform"])
def test_seeds_reproduce(sampler):
    X = _gaussian_data(400, d=4)
    kernel = GaussianKernel(2.0)
    kwargs = {"uniform": {"M": 100, "q": 10.0}, "recursive_rls": {"base_size": 100}}.get(sampler, {})
    a = lv.SAMPLERS[sampler](X, kernel, 1e-3, seed=5, **kwargs)
    b = lv.SAMPLERS[sampler](X, kernel, 1e-3, seed=torch.Generator().manual_seed(5), **kwargs)
    c = lv.SAMPLERS[sampler](X, kernel, 1e-3, seed=6, **kwargs)
    assert torch.equal(a.indices, b.indices) and torch.equal(a.weights, b.weights)
    assert not torch.equal(a.indices, c.indices)


def test_float32_input_gives_float64_scores():
    X = _gaussian_data(500, d=3).float()
    result = lv.bless(X, GaussianKernel(2.0), 1e-3, points=[0, 1, 2])
    assert result.scores.dtype == torch.float64 and result.scores.shape == (3,)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda X, k: lv.bless(X, k, 2.0), r"penalty=2 is not below the kernel scale .* d_eff\(λ\) ≤ κ²/λ ≤ 1"),
        (lambda X, k: lv.bless_r(X, k, 0.0), r"penalty must be > 0"),
        (lambda X, k: lv.bless(X, k, 1e-3, q=1.0), r"q must be > 1"),
        (lambda X, k: lv.bless(X, k, 1e-3, lambda0=1e-4), r"lambda0 must be larger than penalty"),
        (lambda X, k: lv.bless(X, k, 1e-3, q2=-1), r"q2 must be > 0"),
        (lambda X, k: lv.bless_r(X, k, 1e-3, q2=1e-9), r"selected no points at the final level.*q2"),
        (lambda X, k: lv.bless_r(X, k, 1e-3, weight_rule="x"), r"weight_rule must be"),
        (lambda X, k: lv.bless(X, k, 1e-3, seed=-1), r"seed must be >= 0"),
        (lambda X, k: lv.bless(X, k, 1e-3, target_size=10_000), r"target_size=10000 exceeds the n=300"),
        (lambda X, k: lv.uniform(X, k, 1e-3, M=301), r"M=301 centres requested but X has only n=300"),
        (lambda X, k: lv.bless(X, k, 1e-3, points=[]), r"points is empty"),
        (lambda X, k: lv.bless(X, k, 1e-3, points=[0, 300]), r"points must lie in \[0, 300\)"),
        (lambda X, k: lv.bless(X, k, 1e-3, points=np.ones(3, bool)), r"points must be integer indices"),
        (lambda X, k: lv.bless(X, "gaussian", 1e-3), r"kernel must be a krrcore.kernels.Kernel"),
        (lambda X, k: lv.bless(np.empty((0, 3)), k, 1e-3), r"X is empty"),
        (lambda X, k: lv.exact_scores(X, k, 1e-3, method="qr"), r"method must be"),
        (lambda X, k: lv.exact_scores_path(X, k, [1e-3, -1.0]), r"penalties\[1\] must be > 0"),
        (lambda X, k: lv.approximate_scores(X[:10], k, None, lv.bless(X, k, 1e-2)), r"pass the X it was computed on"),
        (lambda X, k: lv.BlessCenters(kernel=k).select(X, 301, torch.Generator()), r"M=301 centres .* only n=300"),
        (lambda X, k: lv.BlessCenters().select(X, 30, torch.Generator()), r"BlessCenters needs the kernel"),
        (lambda X, k: lv.BlessCenters(kernel=k, mode="all").select(X, 30, torch.Generator()), r"mode must be"),
    ],
)
def test_guards_name_the_parameter(call, message):
    X = _gaussian_data(300, d=3)
    with pytest.raises(ValueError, match=message):
        call(X, GaussianKernel(2.0))


# -------------------------------------------------------------------------------- FALKON-BLESS
def test_selectors_are_registered():
    assert CENTER_SELECTORS["bless"] is lv.BlessCenters and CENTER_SELECTORS["bless_r"] is lv.BlessRCenters
    assert isinstance(resolve_selector("bless_r"), lv.BlessRCenters)


@pytest.mark.parametrize("variant, mode", [("bless", "sample"), ("bless_r", "sample"), ("bless", "dictionary")])
def test_bless_centers(variant, mode):
    X = _clustered_data(1500)
    kernel = GaussianKernel(0.3)
    cs = lv.BlessCenters(variant=variant, mode=mode, kernel=kernel).select(X, 120, torch.Generator().manual_seed(0))
    result = cs.info["bless"]
    assert cs.info["penalty"] == result.penalty and len(cs.info["path"]) == len(result.levels)
    assert bool((cs.weights > 0).all()) and cs.weights.numel() == cs.M == cs.indices.numel()
    torch.testing.assert_close(cs.centers, X[cs.indices])
    assert result.final.size >= 120 > result.levels[-2].size  # λ derived from M
    if mode == "sample":
        assert cs.M <= 120 and torch.equal(cs.indices, torch.unique(cs.indices))
        # Outliers score ~7× a cluster point at the derived λ: uniform sampling would keep 2.4
        # of the 30 in expectation, leverage sampling about 10.
        assert int((cs.indices >= 1500 - 30).sum()) >= 5
    else:
        # D² = M/(nA) with A the dictionary's marginal probabilities, so (n/M)·Σ_j D_jj² estimates n
        # (0.95–1.01 over five seeds); D = I or a conditional A would miss by far more.
        assert abs(float((cs.weights**2).sum()) / cs.M - 1) < 0.1


@pytest.fixture(scope="module")
def regression():
    X = _clustered_data(1500, seed=1)
    y = (
        torch.sin(X[:, 0])
        + torch.cos(0.8 * X[:, 1])
        + 0.05 * torch.randn(1500, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    )
    return X, y


@pytest.mark.parametrize("mode", ["sample", "dictionary"])
def test_falkon_bless_reaches_the_nystrom_solution_on_its_centers(regression, mode):
    """D changes only the preconditioner: FALKON on BLESS centres converges to the direct
    Nyström solution on the same (unweighted) centres."""
    from krrcore.solvers.exact import NystromKRR

    X, y = regression
    kernel, lam = GaussianKernel(0.5), 1e-3
    selector = lv.BlessCenters(kernel=kernel, mode=mode)
    model = Falkon(kernel, lam, 100, centers=selector, maxiter=60, tol=1e-10).fit(X, y)
    assert model.center_weights_ is not None and model.stop_reason_.startswith("converged")
    direct = NystromKRR(kernel, lam, centers=FixedCenters(model.centers_)).fit(X, y)

    # Both minimise (1/n)‖K_nM α − y‖² + λαᵀK_MMα. Centres packed in σ-wide clusters make cond(K_MM)
    # 1e9–1e11 (six seeds), so the coefficients may differ along its weakest directions; the
    # objective cannot: its gap bounds the predictions' mean squared difference (seeds: gaps up
    # to 1.3e-6 relative, RMS differences up to 2e-5, against |y| ≈ 1 and noise 0.05).
    def objective(model):
        alpha = model.coef_.reshape(-1, 1)
        residual = kernel(X, model.centers_) @ alpha - y.reshape(-1, 1)
        return float((residual**2).mean() + lam * (alpha.T @ kernel(model.centers_, model.centers_) @ alpha).sum())

    assert abs(objective(model) / objective(direct) - 1) < 1e-5
    assert float((model.predict(X) - direct.predict(X)).pow(2).mean().sqrt()) < 1e-4


def test_unit_weights_on_bless_centers_reduce_to_plain_falkon(regression):
    X, y = regression
    kernel, lam = GaussianKernel(0.5), 1e-3
    C = lv.BlessCenters(kernel=kernel).select(X, 80, torch.Generator().manual_seed(0)).centers
    plain = Falkon(kernel, lam, centers=FixedCenters(C), maxiter=8).fit(X, y)
    ones = Falkon(kernel, lam, centers=FixedCenters(C, weights=torch.ones(C.shape[0])), maxiter=8).fit(X, y)
    torch.testing.assert_close(ones.coef_, plain.coef_, rtol=1e-12, atol=1e-12)


def test_falkon_accepts_centers_by_name(regression):
    X, y = regression
    model = Falkon(GaussianKernel(0.5), 1e-5, 80, centers="bless", maxiter=10).fit(X, y)
    assert model.center_set_.info["method"] == "bless"
    # var(y) ≈ 0.73; 80 centres cannot follow y on every far outlier (measured MSE ≈ 0.07).
    assert float(((model.predict(X) - y) ** 2).mean()) < 0.15


# ------------------------------------------------------------------------- draws by rejection
bless_module = __import__("krrcore.leverage.bless", fromlist=["bless"])
dictionary_module = __import__("krrcore.leverage.dictionary", fromlist=["_Dictionary"])


def _level_dictionary(n=3000, lam=1e-4, seed=1):
    """Clustered data and a BLESS dictionary at 2λ: the J_{h−1} of a level at λ."""
    X = _clustered_data(n, seed=seed)
    kernel = GaussianKernel(0.3)
    previous = lv.bless(X, kernel, 2 * lam, seed=0).final
    return X, kernel, lam, previous


def test_leading_points_are_greedy_pivots_whose_scores_bound_the_dictionarys():
    X, kernel, lam, previous = _level_dictionary()
    n, r = X.shape[0], previous.size // 4
    args = (kernel, X, previous.indices, previous.weights, lam * n)
    pivoted = dictionary_module._Dictionary(*args, pivots=r)
    # Greedy pivots, 16 at a time: each block starts with the point of largest residual diagonal,
    # which no later point's residual (the factor's diagonal, squared) exceeds.
    diagonal = pivoted._L.diagonal()
    for start in range(0, r, 16):
        assert float(diagonal[start:].max()) <= float(diagonal[start]) * (1 + 1e-12), start
    assert float(diagonal[0]) == pytest.approx(float(diagonal.max()), rel=1e-12)
    assert sorted(pivoted.indices.tolist()) == previous.indices.tolist()
    points = torch.arange(n)
    full, bound = pivoted.scores(points), pivoted.leading(r).scores(points)
    assert float(full.sum()) == pytest.approx(
        float(dictionary_module._Dictionary(*args).scores(points).sum()), rel=1e-9
    )
    # The leading block is the dictionary of those r points with their own weights ...
    weights = pivoted._s[:r] ** -2
    alone = dictionary_module._Dictionary(kernel, X, pivoted.indices[:r], weights, lam * n).scores(points)
    torch.testing.assert_close(bound, alone, rtol=1e-9, atol=1e-12)
    # ... whose scores bound every point's from above, and tighter than r points in index order.
    assert bool((bound >= full - 1e-12).all())
    in_order = dictionary_module._Dictionary(*args).leading(r).scores(points)
    assert float(full.sum() / bound.sum()) > 1.2 * float(full.sum() / in_order.sum())
    with pytest.raises(ValueError, match="a leading sub-dictionary needs 1 to"):
        pivoted.leading(previous.size + 1)


def _rejection_everywhere(monkeypatch):
    monkeypatch.setattr(bless_module, "REJECTION_MIN_DICTIONARY", 1)
    monkeypatch.setattr(bless_module, "REJECTION_SAVING", math.inf)
    calls = []

    class Recorded(bless_module._BoundedCandidates):
        def __init__(self, ctx, previous, lam, *args):
            calls.append(lam)
            super().__init__(ctx, previous, lam, *args)

    monkeypatch.setattr(bless_module, "_BoundedCandidates", Recorded)
    return calls


def test_draws_by_rejection_are_draws_from_the_exact_scores(monkeypatch):
    """Alg. 1 line 9 by rejection: the M_h accepted draws follow P_h ∝ ℓ̃ (χ² over 20 bins of equal
    exact mass), the chosen points carry A_h = (R_h M_h/n)·p with p ∝ their exact ℓ̃, and d_h is
    within four standard errors of the pilot's importance estimate of the exact Σ_U ℓ̃."""
    X, kernel, lam, previous = _level_dictionary()
    n = X.shape[0]
    calls = _rejection_everywhere(monkeypatch)
    ctx = bless_module._Context(X, kernel, 1.0, 4.0, 200.0, torch.Generator().manual_seed(5), None, "float64")
    level = bless_module._bless_level(ctx, previous, lam, None)
    assert calls == [lam]
    assert level.n_candidates == n  # R_h = q1κ²/λ ≥ n: every point once
    exact = ctx.dictionary(previous, lam).scores(torch.arange(n))
    total, M = float(exact.sum()), round(level.expected_size)
    assert int(level.counts.sum()) == M > 5000
    order = torch.argsort(exact)
    bins = torch.bucketize(torch.cumsum(exact[order], 0) / total, torch.linspace(0, 1, 21)[1:-1])
    bin_of = torch.empty(n, dtype=torch.int64)
    bin_of[order] = bins
    observed = torch.zeros(20, dtype=torch.float64).index_add_(0, bin_of[level.indices], level.counts.double())
    expected = M * torch.zeros(20, dtype=torch.float64).index_add_(0, bins, exact[order] / total)
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < 50, chi2  # 19 degrees of freedom: P(χ² > 50) ≈ 1e-4
    ratio = level.probabilities / exact[level.indices]
    torch.testing.assert_close(ratio, torch.full_like(ratio, float(ratio[0])), rtol=1e-9, atol=0)
    torch.testing.assert_close(level.weights, M * level.probabilities / level.counts, rtol=1e-12, atol=0)
    r = bless_module._leading_size(previous, n)
    bound = ctx.dictionary(previous, lam, pivots=r).leading(r).scores(torch.arange(n))
    q = bound / bound.sum()
    mean = total / float(bound.sum())
    standard_error = math.sqrt(float((q * (exact / bound - mean) ** 2).sum()) / bless_module.REJECTION_PILOT) / mean
    assert abs(level.d_eff / total - 1) < 4 * standard_error, (level.d_eff, total, standard_error)


def test_a_level_whose_bounds_accept_too_few_proposals_scores_every_candidate(monkeypatch):
    X, kernel, lam, previous = _level_dictionary()
    calls = _rejection_everywhere(monkeypatch)
    results = {}
    for floor in (0.0, 1.01):  # no floor; a floor no bound can reach (acceptance ≤ 1)
        monkeypatch.setattr(bless_module, "REJECTION_MIN_ACCEPTANCE", floor)
        ctx = bless_module._Context(X, kernel, 1.0, 4.0, 4.0, torch.Generator().manual_seed(5), None, "float64")
        results[floor] = bless_module._bless_level(ctx, previous, lam, None)
    assert calls == [lam, lam]
    assert results[0.0].scored < X.shape[0] == results[1.01].scored  # U_h: every point once


@pytest.mark.parametrize("data", ["flat", "clustered"])
def test_racc_band_holds_when_every_level_draws_by_rejection(request, monkeypatch, data):
    X, kernel, lam, exact = request.getfixturevalue(data)
    calls = _rejection_everywhere(monkeypatch)
    oversampling = {"q1": 16, "q2": 16} if data == "clustered" else {}
    result = lv.bless(X, kernel, lam, seed=0, points="all", **oversampling)
    assert len(calls) == len(result.levels) - 1  # every level after the first
    assert any(level.scored < level.n_candidates for level in result.levels[1:])
    assert result.path()["scored"].tolist() == [level.scored for level in result.levels]
    lo, hi, mean = _racc_band(result.scores, exact)
    assert 0.5 <= lo and hi <= 2.0, (lo, hi)
    assert abs(result.d_eff / float(exact.sum()) - 1) < 0.3


@pytest.mark.parametrize(
    "sequence, M_h, kept",
    [
        ([1, 1, 2, 1, 3, 4, 5, 6], 6, [1, 1, 2, 1, 3]),  # cut after the draw that brings the 3rd point
        ([1, 1, 1, 2, 1, 3, 4, 5], 4, [1, 1, 1, 2, 1, 3]),  # M_h ≥ 3 but only 2 points: draws on to the 3rd
        ([1, 2] * 40, 4, [1, 2, 1, 2]),  # 4·M_h draws fall short: the M_h draws stand
        ([1, 2, 3, 4], 2, [1, 2]),  # M_h below the target: not the last level
    ],
)
def test_the_last_level_of_a_descent_keeps_the_draws_up_to_its_target(sequence, M_h, kept):
    source = iter(sequence)
    ctx = bless_module._Context(
        torch.zeros(8, 1), GaussianKernel(1.0), 1.0, 4.0, 4.0, torch.Generator(), None, target_size=3
    )
    draws = bless_module._line9_draws(ctx, lambda m: torch.tensor([next(source) for _ in range(m)]), M_h)
    assert draws.tolist() == kept


# -- time: the estimators' policy (krrcore.leverage.cost) ------------------------------------------
def test_a_leverage_path_past_its_timeout_is_refused_before_it_starts_and_runs_within_one():
    """BLESS-R at λ = 1e-10 on 300 points walks 34 levels of ~300 points each: its estimate names
    the work, and a timeout below it refuses the call before any level runs; within it, it runs."""
    from krrcore.memory import TimeLimitError

    X = np.random.default_rng(0).normal(size=(300, 3))
    kernel = GaussianKernel(1.0)
    with pytest.raises(
        TimeLimitError,
        match=r"Refused before starting: it would take about .* beyond timeout=0.01 s; "
        r"raise penalty \(34 levels down to λ=1e-10, the last of about 3\d\d points\)",
    ) as info:
        lv.bless_r(X, kernel, 1e-10, timeout=0.01)
    assert info.value.estimate.solver == "bless_r" and info.value.estimate.n == 300
    result = lv.bless_r(X, kernel, 1e-3, timeout=600)  # a path estimated within its timeout runs
    assert len(result.levels) == 10 and result.levels[-1].size > 0
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds or None, got -1"):
        lv.bless(X, kernel, 1e-3, timeout=-1)


def test_a_leverage_computation_estimated_past_a_minute_warns_before_it_starts():
    """The same SlowFitWarning as an estimator's, raised here as an error so that nothing runs."""
    import warnings

    from krrcore.memory import SlowFitWarning, TimeLimitError

    X = np.random.default_rng(0).normal(size=(20_000, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SlowFitWarning)
        with pytest.raises(
            SlowFitWarning,
            match=r"bless_r on n=20,000 points .* It may take a while; to go faster: "
            r"raise penalty",
        ):
            lv.bless_r(X, GaussianKernel(1.0), 1e-10)
    X = np.random.default_rng(0).normal(size=(3000, 3))
    with pytest.raises(
        TimeLimitError, match=r"exact leverage scores \(eigh\) on n=3,000 points .* beyond timeout=0.01 s"
    ):
        lv.exact_scores_path(X, GaussianKernel(1.0), [1e-3], timeout=0.01)
    with pytest.raises(TimeLimitError, match=r"exact leverage scores \(cholesky\) on n=3,000 points"):
        lv.exact_scores(X, GaussianKernel(1.0), 1e-3, timeout=0.01)

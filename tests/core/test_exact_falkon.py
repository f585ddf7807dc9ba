"""Exact KRR against scikit-learn; FALKON and its baselines against the exact/direct solutions."""

import threading

import numpy as np
import pytest
import torch
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.kernel_ridge import KernelRidge
from sklearn.model_selection import GridSearchCV

from krrcore import ExactKRR, NystromKRR
from krrcore.centers import FixedCenters
from krrcore.kernels import GaussianKernel, LaplacianKernel
from krrcore.memory import MemoryBudgetError
from krrcore.solvers.falkon import Falkon, NystromCG, NystromGD
from krrcore.stream import SolverDivergedError


def _standardise(X, y):
    return (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


@pytest.fixture(scope="module")
def diabetes():
    return _standardise(*load_diabetes(return_X_y=True))


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return (X - X.mean(0)) / X.std(0), np.where(y == 1, 1.0, -1.0)


@pytest.mark.parametrize("data, sigma, lam", [("diabetes", 3.0, 1e-2), ("cancer", 5.0, 1e-4)])
def test_exact_krr_matches_sklearn(data, sigma, lam, request):
    X, y = request.getfixturevalue(data)
    n = len(y)
    ours = ExactKRR(GaussianKernel(sigma), lam, fit_intercept=False).fit(X, y)  # KernelRidge has no offset
    ref = KernelRidge(alpha=lam * n, kernel="rbf", gamma=1 / (2 * sigma**2)).fit(X, y)
    np.testing.assert_allclose(ours.predict(X), ref.predict(X), atol=1e-8)
    np.testing.assert_allclose(ours.coef_[:, 0].numpy(), ref.dual_coef_, atol=1e-6, rtol=1e-6)
    # The default: KernelRidge on y less its mean, and the mean added back (cancer's ±1 labels: −0.25).
    centred = ExactKRR(GaussianKernel(sigma), lam).fit(X, y)
    ref = KernelRidge(alpha=lam * n, kernel="rbf", gamma=1 / (2 * sigma**2)).fit(X, y - y.mean())
    assert float(centred.intercept_[0]) == pytest.approx(y.mean(), abs=1e-12)
    np.testing.assert_allclose(centred.predict(X), ref.predict(X) + y.mean(), atol=1e-8)
    np.testing.assert_allclose(centred.coef_[:, 0].numpy(), ref.dual_coef_, atol=1e-6, rtol=1e-6)


def test_exact_krr_refuses_past_memory_limit(diabetes):
    X, y = diabetes
    with pytest.raises(
        MemoryBudgetError,
        match=r"ExactKRR on n=442 points .* needs about .* storage budget of .* "
        r"Refused before allocating: subsample to at most n=",
    ):
        ExactKRR(GaussianKernel(3.0), 1e-2, memory_budget=1000).fit(X, y)


def test_direct_solvers_stream_one_record_with_their_system_residual(diabetes):
    """ExactKRR and NystromKRR yield exactly one record, like an iterative solver's stream: the solve
    time, the float64 residual and objective of the solved system, and the validation metric."""
    X, y = diabetes
    X_tr, y_tr, X_va, y_va = X[:350], y[:350], X[350:], y[350:]
    kernel, lam, n = GaussianKernel(3.0), 1e-3, 350
    X64, y64 = torch.as_tensor(X_tr), torch.as_tensor(y_tr - y_tr.mean())[:, None]  # the solved y: less its mean

    exact = ExactKRR(kernel, lam)
    records = list(exact.iter_fit(X_tr, y_tr, X_va, y_va, stop_event=threading.Event()))
    assert len(records) == 1 and exact.trace_ == records and exact.n_iter_ == 1
    rec = records[0]
    assert rec.iteration == 1 and rec.seconds > 0 and rec.eval_seconds > 0
    assert exact.stop_reason_ == "direct solve finished"
    A = kernel(X64, X64) + lam * n * torch.eye(n, dtype=torch.float64)
    c = exact.coef_
    assert rec.residual == pytest.approx(float(torch.linalg.norm(A @ c - y64) / torch.linalg.norm(y64)), rel=1e-6)
    assert rec.residual < 1e-12
    assert rec.objective == pytest.approx(float(0.5 * c.T @ A @ c - y64.T @ c), rel=1e-10)  # dual d(c)
    assert rec.metric == "mse" and rec.val_metric == pytest.approx(np.mean((exact.predict(X_va) - y_va) ** 2))

    nystrom = NystromKRR(kernel, lam, M=60, seed=1)
    (rec,) = nystrom.iter_fit(X_tr, y_tr, X_va, y_va)
    Knm = kernel(X64, nystrom.centers_)
    H = Knm.T @ Knm + lam * n * kernel(nystrom.centers_, nystrom.centers_)
    alpha = nystrom.coef_
    rhs = Knm.T @ y64
    assert rec.residual == pytest.approx(
        float(torch.linalg.norm(H @ alpha - rhs) / torch.linalg.norm(rhs)), rel=1e-3, abs=1e-14
    )
    assert rec.residual < 1e-9
    # ½‖K_nMα − y‖² + (λn/2)αᵀK_MMα: the objective SketchySAGA reports for the same problem.
    objective = 0.5 * float(((Knm @ alpha - y64) ** 2).sum()) + 0.5 * lam * n * float(
        alpha.T @ kernel(nystrom.centers_, nystrom.centers_) @ alpha
    )
    assert rec.objective == pytest.approx(objective, rel=1e-8)
    assert rec.val_metric == pytest.approx(np.mean((nystrom.predict(X_va) - y_va) ** 2))
    # fit drains the same stream (no validation data: no validation metric).
    assert np.isnan(NystromKRR(kernel, lam, M=60, seed=1).fit(X_tr, y_tr).trace_[0].val_metric)


def test_falkon_with_all_points_as_centers_equals_exact(diabetes):
    X, y = diabetes
    exact = ExactKRR(GaussianKernel(3.0), 1e-3).fit(X, y)
    falkon = Falkon(GaussianKernel(3.0), 1e-3, M=len(y), maxiter=50, tol=1e-14).fit(X, y)
    np.testing.assert_allclose(falkon.predict(X), exact.predict(X), atol=1e-6)


def test_falkon_reaches_direct_nystrom_solution(diabetes):
    X, y = diabetes
    kernel = GaussianKernel(3.0)
    direct = NystromKRR(kernel, 1e-3, M=80, seed=3).fit(X, y)
    falkon = Falkon(kernel, 1e-3, M=80, seed=3, maxiter=25).fit(X, y)
    np.testing.assert_allclose(falkon.coef_.numpy(), direct.coef_.numpy(), rtol=1e-6, atol=1e-8)
    # Objective in the stream equals the Nyström objective evaluated directly.
    alpha = direct.coef_
    obj = float(((direct.predict(X) - y) ** 2).mean()) + 1e-3 * float(
        alpha.T @ kernel(direct.centers_, direct.centers_) @ alpha
    )
    assert falkon.trace_[-1].objective == pytest.approx(obj, rel=1e-8)


def test_falkon_stops_at_working_precision_on_an_easy_problem():
    """1-D, 60 centres: CG's recursive residual keeps falling (to ~1e-100 by iteration 200) so the
    stall rule never fires, and the run used to iterate to maxiter doing nothing useful."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, (500, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(500)
    model = Falkon(GaussianKernel(1.0), 1e-3, M=60, maxiter=200).fit(X, y)
    assert model.n_iter_ < 30 and model.stop_reason_.startswith("converged to working precision")
    assert model.trace_[-1].residual < 10 * np.finfo(np.float64).eps <= model.trace_[-2].residual
    direct = NystromKRR(GaussianKernel(1.0), 1e-3, centers=model.centers_).fit(X, y)
    np.testing.assert_allclose(model.predict(X), direct.predict(X), atol=1e-6)


def test_preconditioning_beats_plain_cg_and_gd(diabetes):
    X, y = diabetes
    kw = dict(kernel=GaussianKernel(3.0), penalty=1e-4, M=150, seed=0, maxiter=15)
    res = {cls.__name__: cls(**kw).fit(X, y).trace_[-1].objective for cls in (Falkon, NystromCG, NystromGD)}
    best = NystromKRR(GaussianKernel(3.0), 1e-4, M=150, seed=0).fit(X, y)
    alpha = best.coef_
    f_star = float(((best.predict(X) - y) ** 2).mean()) + 1e-4 * float(
        alpha.T @ GaussianKernel(3.0)(best.centers_, best.centers_) @ alpha
    )
    gap = {k: v - f_star for k, v in res.items()}
    assert gap["Falkon"] < 1e-6
    assert gap["NystromCG"] > 100 * max(gap["Falkon"], 1e-12)
    assert gap["NystromGD"] > gap["NystromCG"]


def test_weighted_centers_with_unit_weights_reduce_to_plain_falkon(diabetes):
    X, y = diabetes
    C = X[:60]
    plain = Falkon(GaussianKernel(3.0), 1e-3, centers=C, maxiter=10).fit(X, y)
    weighted = Falkon(GaussianKernel(3.0), 1e-3, centers=FixedCenters(C, np.ones(60)), maxiter=10).fit(X, y)
    np.testing.assert_allclose(weighted.coef_.numpy(), plain.coef_.numpy(), rtol=1e-12, atol=1e-14)


def test_weighted_centers_solve_the_same_nystrom_problem(diabetes):
    """D only changes the preconditioner (Def. 4): the converged α is the direct Nyström one."""
    X, y = diabetes
    C = X[:60]
    w = np.linspace(0.3, 3.0, 60)
    weighted = Falkon(GaussianKernel(3.0), 1e-3, centers=FixedCenters(C, w), maxiter=60, tol=1e-13).fit(X, y)
    direct = NystromKRR(GaussianKernel(3.0), 1e-3, centers=C).fit(X, y)
    np.testing.assert_allclose(weighted.predict(X), direct.predict(X), atol=1e-6)


def test_falkon_multiclass_float32_and_torch_input(cancer):
    X, y = cancer
    Y = np.stack([y, -y], 1)
    model = Falkon(GaussianKernel(5.0), 1e-4, M=100, maxiter=20, dtype="float32").fit(torch.tensor(X), torch.tensor(Y))
    pred = model.predict(torch.tensor(X))
    assert isinstance(pred, torch.Tensor) and pred.shape == (len(y), 2) and pred.dtype == torch.float32
    assert model.preconditioner_._packed.dtype == torch.float64
    direct = NystromKRR(GaussianKernel(5.0), 1e-4, M=100).fit(X, Y)
    # float32 FALKON uses jitter 1e-5·M on K_MM (the library's default), which perturbs the
    # regulariser λαᵀK_MMα; agreement to ~1e-2 on outputs of size ~1 is what that allows.
    np.testing.assert_allclose(pred.numpy(), direct.predict(X), atol=2e-2)
    assert np.mean(np.sign(pred[:, 0].numpy()) != y) < 0.05


def test_stream_records_and_stops(diabetes):
    X, y = diabetes
    event = threading.Event()
    model = Falkon(GaussianKernel(3.0), 1e-4, M=100, maxiter=50)
    seen = []
    for rec in model.iter_fit(X[:300], y[:300], X[300:], y[300:], stop_event=event):
        seen.append(rec)
        if rec.iteration == 3:
            event.set()
    assert [r.iteration for r in seen] == [0, 1, 2, 3]  # the flag is read right after the record
    assert model.stop_reason_ == "stopped by the user"
    assert all(r.seconds >= 0 for r in seen) and seen[-1].seconds >= seen[1].seconds
    assert np.isfinite(seen[-1].val_metric) and seen[-1].metric == "mse"
    mse = float(np.mean((model.predict(X[300:]) - y[300:]) ** 2))
    assert seen[-1].val_metric == pytest.approx(mse, rel=1e-10)
    calls = Falkon(GaussianKernel(3.0), 1e-4, M=100, maxiter=50, callback=lambda r: r.iteration >= 2).fit(X, y)
    assert calls.n_iter_ == 2 and calls.stop_reason_ == "callback asked to stop"
    tol = Falkon(GaussianKernel(3.0), 1e-4, M=100, maxiter=50, tol=1e-6).fit(X, y)
    assert tol.trace_[-1].residual <= 1e-6 and tol.stop_reason_.startswith("converged")


def test_duplicate_centers_raise_jitter_and_report_it(diabetes):
    X, y = diabetes
    C = np.vstack([X[:30], X[:30]])  # K_MM singular: every centre twice
    model = Falkon(GaussianKernel(3.0), 1e-3, centers=C, maxiter=10, jitter=0.0).fit(X, y)
    assert model.jitter_ > 0
    # Duplicates span the same functions: the model is the Nyström solution on the 30 distinct
    # centres (measured 0.4% apart after 10 iterations).
    reference = NystromKRR(GaussianKernel(3.0), 1e-3, centers=FixedCenters(X[:30])).fit(X, y).predict(X)
    assert np.linalg.norm(model.predict(X) - reference) / np.linalg.norm(reference) < 0.02


def test_nan_in_the_run_raises_and_keeps_last_finite_model(diabetes, monkeypatch):
    X, y = diabetes
    model = Falkon(GaussianKernel(3.0), 1e-3, M=50, maxiter=10)
    original = Falkon._W
    calls = {"n": 0}

    def poisoned(self, beta, *pass_):
        calls["n"] += 1
        out = original(self, beta, *pass_)
        return out * float("nan") if calls["n"] >= 4 else out

    monkeypatch.setattr(Falkon, "_W", poisoned)
    with pytest.raises(SolverDivergedError, match="diverged at iteration 4"):
        model.fit(X, y)
    assert len(model.trace_) == 4 and np.all(np.isfinite(model.predict(X)))


def test_sklearn_grid_search(diabetes):
    X, y = diabetes
    grid = GridSearchCV(
        Falkon(GaussianKernel(3.0), M=50, maxiter=10),
        {"penalty": [1e-5, 1e-3], "kernel": [GaussianKernel(2.0), LaplacianKernel(4.0)]},
        cv=3,
    )
    grid.fit(X, y)
    assert set(grid.best_params_) == {"penalty", "kernel"} and grid.best_score_ > 0.3


@pytest.mark.parametrize(
    "kwargs, X, y, message",
    [
        (dict(penalty=-1.0), None, None, "penalty must be >= 0"),
        (dict(penalty=0.0), None, None, "penalty must be > 0"),
        (dict(M=0), None, None, "M must be >= 1"),
        (dict(), np.full((5, 2), np.nan), np.ones(5), "X contains 10 NaN"),
        (dict(), np.ones((5, 2)), np.ones(4), "mismatched shapes"),
        (dict(), np.array([["a", "b"]] * 3), np.ones(3), "X must contain only numbers"),
        (dict(), np.zeros((0, 3)), np.zeros(0), "X is empty"),
        (dict(maxiter=-1), None, None, "maxiter must be >= 0"),
    ],
)
def test_bad_input_raises_clear_errors(diabetes, kwargs, X, y, message):
    Xd, yd = diabetes
    params = {**dict(kernel=GaussianKernel(3.0), penalty=1e-3, M=20, maxiter=3), **kwargs}
    with pytest.raises(ValueError, match=message):
        Falkon(**params).fit(Xd if X is None else X, yd if y is None else y)


def test_in_place_lapack_and_torch_factorisations_agree(diabetes, monkeypatch):
    """The CPU path factors T and A in place in one buffer through LAPACK; the GPU path does the same
    blocked with torch ops (run here on the CPU with blocks of 32 so several block columns are walked)."""
    from krrcore import linalg
    from krrcore.preconditioner import FalkonPreconditioner

    X, y = diabetes
    kw = dict(kernel=GaussianKernel(3.0), penalty=1e-4, M=120, maxiter=20, seed=1)
    in_place = Falkon(**kw).fit(X, y)
    monkeypatch.setattr(FalkonPreconditioner, "_factor_in_place", FalkonPreconditioner._factor_blocked)
    monkeypatch.setattr(linalg.cholesky_lower_, "__defaults__", (32,))
    monkeypatch.setattr(linalg.lower_gram_, "__defaults__", (32,))
    with_torch = Falkon(**kw).fit(X, y)
    np.testing.assert_allclose(in_place.predict(X), with_torch.predict(X), atol=1e-8)
    assert in_place.preconditioner_.buffer_bytes == 120 * 120 * 8

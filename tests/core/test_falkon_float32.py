"""Float32 FALKON holds in long runs: float32 kernel blocks, float64 CG vectors and sums,
a ridge at float32's noise level, restarts that are CG again, the best iterate kept on a stall, and
float64 iterative refinement of the float32 solve (``Falkon(refine=...)``), and a warning where
float32 kernel values cannot hold float64's answer at all (λ below float32's resolution)."""

import warnings

import numpy as np
import pytest
import torch

from krrcore.cg import conjugate_gradient
from krrcore.kernels import GaussianKernel
from krrcore.preconditioner import FalkonPreconditioner, PrecisionWarning
from krrcore.solvers.base import Step
from krrcore.solvers.loops import IterativeKRR
from krrcore.solvers.falkon import Falkon

from solver_problems import make_problem, one_thread  # noqa: F401  (fixture)

LAMBDAS = (1e-4, 1e-6, 1e-8)


@pytest.fixture(scope="module")
def problem():
    X, y = make_problem(2000, 5, seed=1)
    return X[:1000], y[:1000], X[1000:], y[1000:]


def _test_mse(problem, dtype, lam, maxiter, tol):
    X, y, X_test, y_test = problem
    model = Falkon(GaussianKernel(2.0), lam, M=200, maxiter=maxiter, tol=tol, dtype=dtype).fit(X, y)
    return float(np.mean((model.predict(X_test) - y_test) ** 2)), model


def _test_mse_at(problem, dtype, lam, iterations):
    """Test MSE after each of ``iterations`` of one run (CG is deterministic: the iterate after 20 of
    500 iterations is the model maxiter=20 gives) and the model at the end (float64: unrefined)."""
    X, y, X_test, y_test = problem
    model = Falkon(GaussianKernel(2.0), lam, M=200, maxiter=max(iterations), dtype=dtype)
    errors = {}
    for record in model.iter_fit(X, y):
        if record.iteration in iterations:
            errors[record.iteration] = float(np.mean((model.predict(X_test) - y_test) ** 2))
    final = float(np.mean((model.predict(X_test) - y_test) ** 2))
    # A run that stopped early (stall: best iterate kept) gives the same model for any larger maxiter.
    errors.update({k: final for k in iterations if k >= model.n_iter_})
    return errors, model


def _float32_mse_per_maxiter(problem, lam, iterations):
    """float32 test MSE of one fit per maxiter: refinement applies to the model a run ends with."""
    errors = {}
    for maxiter in iterations:
        errors[maxiter], model = _test_mse(problem, "float32", lam, maxiter, None)
    return errors, model


@pytest.mark.parametrize("lam", LAMBDAS)
def test_float32_test_error_within_2_percent_of_float64(problem, lam, one_thread):
    """For λ ∈ {1e-4, 1e-6, 1e-8}, maxiter ∈ {20, 100, 500} and a tol-driven run, float32's test MSE
    is at most 2% above float64's (before the change: 10^19 times it at λ = 1e-6 after 500 iterations)."""
    ref, _ = _test_mse_at(problem, "float64", lam, (20, 100, 500))
    got, model = _float32_mse_per_maxiter(problem, lam, (20, 100, 500))
    assert model.coef_.dtype == torch.float32
    for maxiter in ref:
        assert got[maxiter] <= 1.02 * ref[maxiter], (lam, maxiter, got[maxiter], ref[maxiter])
    mse64, _ = _test_mse(problem, "float64", lam, 500, 1e-6)
    mse32, _ = _test_mse(problem, "float32", lam, 500, 1e-6)
    assert mse32 <= 1.02 * mse64, (lam, "tol=1e-6", mse32, mse64)


def test_float32_cg_residual_keeps_falling_without_refresh(problem, one_thread):
    """The reported residual is CG's float64 recursive one: it falls to the tol in a long run instead
    of rising after a refresh, and the run stops on it."""
    _, model = _test_mse(problem, "float32", 1e-6, 500, 1e-6)
    residuals = [r.residual for r in model.trace_]
    assert model.stop_reason_.startswith("converged") and residuals[-1] <= 1e-6
    assert min(residuals[:10]) > residuals[-1]


def test_restart_is_cg_again():
    """A restart recomputes r = b − Ax and starts a fresh direction: on an SPD system the restarted
    iteration still converges (refresh every step = steepest descent), where replacing r alone
    mixed two runs' recurrences."""
    rng = np.random.default_rng(0)
    Q, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    A = torch.as_tensor(Q @ np.diag(np.geomspace(1, 1e2, 60)) @ Q.T)
    b = torch.as_tensor(rng.standard_normal((60, 1)))
    x_true = torch.linalg.solve(A, b)
    for refresh in (1, 7):
        for state in conjugate_gradient(lambda v: A @ v, b, refresh_every=refresh):
            if state.iteration == 3000 or state.rel_residual < 1e-10:
                break
        assert state.rel_residual < 1e-8
        assert torch.allclose(state.x, x_true, rtol=1e-6, atol=1e-8)
    states = list(zip(range(20), conjugate_gradient(lambda v: A @ v, b, refresh_every=5)))
    assert states[-1][1].rel_residual < states[4][1].rel_residual  # no rise after the restarts


class _ScriptedResiduals(IterativeKRR):
    """Reports the given residuals; coef_ is the iteration number, so the model kept is visible."""

    def __init__(self, residuals=(), stall_patience=3, maxiter=100):
        self.kernel, self.penalty, self.dtype = GaussianKernel(1.0), 1e-3, "float64"
        self.residuals, self.stall_patience, self.maxiter = residuals, stall_patience, maxiter

    def _setup(self, X, Y):
        self.centers_, self.coef_ = X, torch.zeros_like(Y)

    def _steps(self, X, Y):
        for i, residual in enumerate(self.residuals, start=1):
            self.coef_ = torch.full_like(Y, float(i))
            yield Step(residual=residual)


def test_stalled_run_keeps_its_best_iterate():
    """When the residual stops improving (float32 drift), the model is the best iterate seen."""
    X = np.random.default_rng(0).standard_normal((10, 2))
    model = _ScriptedResiduals([0.5, 0.1, 0.2, 0.3, 0.4, 0.05]).fit(X, X[:, 0])
    assert model.n_iter_ == 5 and float(model.coef_[0, 0]) == 2.0
    assert "the model is the best iterate, from iteration 2 (residual 0.1)" in model.stop_reason_


@pytest.fixture(scope="module")
def rough_problem():
    """The grid cell of benchmarks/bench_falkon_float32.py where float32 alone missed the 2%
    (n = 2,000, M = 400, σ = 0.7, d = 3, λ = 1e-4: 1.022 without refinement)."""
    X, y = make_problem(3000, 3, seed=1)
    return X[:2000], y[:2000], X[2000:], y[2000:]


def _rough_fit(problem, dtype, maxiter=500, tol=None, **options):
    X, y, X_test, y_test = problem
    model = Falkon(GaussianKernel(0.7), 1e-4, M=400, maxiter=maxiter, tol=tol, dtype=dtype, **options).fit(X, y)
    return float(np.mean((model.predict(X_test) - y_test) ** 2)), model


@pytest.mark.parametrize("maxiter, tol", [(20, None), (100, None), (500, None), (500, 1e-6)])
def test_float64_refinement_brings_float32_within_2_percent(rough_problem, maxiter, tol, one_thread):
    """With the default refinement float32's test MSE is within 2% of float64's on the problem where
    the float32 solve alone was 2.2% above it (this test fails with ``REFINE_ROUNDS = 0``)."""
    mse64, _ = _rough_fit(rough_problem, "float64", maxiter, tol)
    mse32, model = _rough_fit(rough_problem, "float32", maxiter, tol)
    assert mse32 <= 1.02 * mse64, (maxiter, tol, mse32, mse64)
    assert any(r.extras.get("residual_kind") == "float64 refinement" for r in model.trace_)


def test_refinement_lowers_the_true_float64_residual(rough_problem, one_thread):
    """Each round's record carries the true float64 residual, which falls from round to round; the model
    stays float32 (predict answers in float32), and n_iter_ counts the refinement's CG iterations."""
    X, _, X_test, _ = rough_problem
    _, model = _rough_fit(rough_problem, "float32", 500, None)
    rounds = [r for r in model.trace_ if r.extras.get("residual_kind") == "float64 refinement"]
    assert [r.extras["refinement_round"] for r in rounds] == [1, 2]
    assert rounds[1].residual < rounds[0].residual < 1e-2
    assert "2 float64 refinement round(s): true residual" in model.stop_reason_
    assert model.n_iter_ == rounds[-1].iteration > model.trace_[-3].iteration
    assert model.coef_.dtype == torch.float32 and model.predict(X_test).dtype == np.float32
    assert model.predict(torch.as_tensor(X_test)).dtype == torch.float32
    assert "float64 refinement block buffer" in {p.name for p in model.memory_estimate_.parts}


def test_refinement_is_off_for_float64_with_refine_0_and_after_a_stop(rough_problem, one_thread):
    """No refinement record for float64 (nothing to refine), ``refine=0``, or a stop asked for."""
    X, y, _, _ = rough_problem
    kinds = lambda m: {r.extras.get("residual_kind") for r in m.trace_}  # noqa: E731
    assert "float64 refinement" not in kinds(_rough_fit(rough_problem, "float64", 50)[1])
    assert "float64 refinement" not in kinds(_rough_fit(rough_problem, "float32", 50, refine=0)[1])
    stopped = Falkon(
        GaussianKernel(0.7), 1e-4, M=400, maxiter=50, dtype="float32", callback=lambda record: record.iteration >= 5
    ).fit(X, y)
    assert stopped.n_iter_ == 5 and "float64 refinement" not in kinds(stopped)
    with pytest.raises(ValueError, match="refine"):
        Falkon(GaussianKernel(0.7), 1e-4, M=400, dtype="float32", refine=-1).fit(X, y)


@pytest.mark.parametrize("sigma, lam", [(5.0, 1e-8), (2.0, 1e-8), (5.0, 1e-6), (0.5, 1e-11)])
def test_unresolved_directions_are_the_eigenvalues_between_lambda_m_and_float32s_floor(sigma, lam, one_thread):
    """The inertia count (two LDLᵀ) equals the number of eigenvalues of K_MM in (λM, eps32·‖K_MM‖_∞)
    found by eigvalsh; none is counted in float64."""
    C = torch.as_tensor(np.random.default_rng(0).standard_normal((300, 5)))
    kernel = GaussianKernel(sigma)
    pc = FalkonPreconditioner(kernel, C, lam, data_dtype=torch.float32, refined=True)
    K = kernel(C, C)
    assert pc.resolution_floor_ == pytest.approx(torch.finfo(torch.float32).eps * float(K.abs().sum(1).max()))
    s = torch.linalg.eigvalsh(K)
    assert pc.unresolved_ == int(((s > lam * 300) & (s < pc.resolution_floor_)).sum())
    assert (pc.unresolved_ > 0) == (lam == 1e-8)
    assert FalkonPreconditioner(kernel, C, lam).unresolved_ == 0


@pytest.fixture(scope="module")
def smooth_problem():
    """The issue's problem (n = 2,000, M = 400, σ = 5, d = 5) of benchmarks/bench_falkon_float32.py."""
    X, y = make_problem(3000, 5, seed=1)
    return X[:2000], y[:2000], X[2000:], y[2000:]


def test_float32_warns_where_its_kernel_values_cannot_hold_float64s_answer(smooth_problem, one_thread):
    """At σ = 5, λ = 1e-8 float64 FALKON is the exact Nyström solution (QR least squares, to 1%), whose
    coefficients cancel so much that float32 kernel values lose it (> 10% worse evaluated with them):
    no float32 model holds it, refinement included. The float32 fit says so (the smallest λ it
    resolves, float64 as the remedy) and still fits in float32; at λ = 1e-6, and in float64, no warning."""
    X, y, X_test, y_test = smooth_problem
    n, M, lam, kernel = X.shape[0], 400, 1e-8, GaussianKernel(5.0)
    model64 = Falkon(kernel, lam, M=M, maxiter=500).fit(X, y)
    C = model64.centers_
    mse = lambda prediction: float(np.mean((np.asarray(prediction, dtype=np.float64).ravel() - y_test) ** 2))  # noqa: E731
    s, U = torch.linalg.eigh(kernel(C, C))
    stacked = torch.cat([kernel(torch.as_tensor(X), C) / n**0.5, lam**0.5 * s.clamp_min(0).sqrt()[:, None] * U.T])
    rhs = np.concatenate([y / n**0.5, np.zeros(M)])
    exact = torch.as_tensor(np.linalg.lstsq(stacked.numpy(), rhs, rcond=None)[0])
    K_test = kernel(torch.as_tensor(X_test), C)
    mse64 = mse(model64.predict(X_test))
    assert mse(K_test @ exact) == pytest.approx(mse64, rel=0.01)
    assert mse(K_test.float().double() @ exact) > 1.1 * mse64
    with pytest.warns(
        PrecisionWarning,
        match=r"float32 cannot resolve penalty=1e-08 .* dtype='float64' .* "
        r"penalty of at least 1\.\d+e-07 in float32",
    ):
        model32 = Falkon(kernel, lam, M=M, maxiter=500, dtype="float32").fit(X, y)
    assert model32.unresolved_directions_ > 0 and model32.coef_.dtype == torch.float32
    assert mse(model32.predict(X_test)) <= 1.06 * mse64  # regularised differently: 4.6% measured
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecisionWarning)
        resolved = Falkon(kernel, 1e-6, M=M, maxiter=20, dtype="float32").fit(X, y)
        assert resolved.unresolved_directions_ == 0
        assert Falkon(kernel, lam, M=M, maxiter=20).fit(X, y).unresolved_directions_ == 0
    # The check's factorisations are in the set-up estimate only where they can run (λ < eps32).
    assert model32.memory_estimate_.setup_seconds > resolved.memory_estimate_.setup_seconds


@pytest.mark.parametrize("outputs", [1, 2])
def test_a_maxiter_run_checks_its_true_residual_in_its_last_cg_pass(problem, outputs, monkeypatch, one_thread):
    """A refined float32 run that ends at maxiter makes no pass of its own for the check: its last CG
    pass runs in float64 arithmetic with −α as a second column, and the true residual it gives (by
    linearity at the last iterate) is the one a separate float64 pass gives at the model's α."""
    from krrcore.ops import KernelOperator

    X, y, _, _ = problem
    Y = np.column_stack([y, 1 - 2 * y])[:, :outputs]
    passes = []
    fused = KernelOperator.fused

    def counted(self, v, w=None, *, dtype=None):
        passes.append((dtype, None if v is None else v.shape[1]))
        return fused(self, v, w, dtype=dtype)

    monkeypatch.setattr(KernelOperator, "fused", counted)
    model = Falkon(GaussianKernel(2.0), 1e-6, M=200, maxiter=10, dtype="float32").fit(X, Y)
    assert "0 float64 refinement round(s)" in model.stop_reason_  # 10 iterations: far above float32's noise
    assert passes == [(None, outputs)] * 9 + [(torch.float64, 2 * outputs)]
    alpha = model.coef_.double()
    Y64 = torch.as_tensor(Y, dtype=torch.float64).reshape(len(X), outputs)
    Y64 = Y64 - model.intercept_  # the solved targets: y less its mean (fit_intercept)
    separate = model._true_residual(fused(model.operator_, -alpha, Y64, dtype=torch.float64) / len(X), alpha)
    expected = float(torch.linalg.norm(separate)) / float(torch.linalg.norm(model._rhs))
    folded = float(model.stop_reason_.split("true residual ")[1].split(" ->")[0])
    assert folded == pytest.approx(expected, rel=5e-3)

    passes.clear()  # a tol run: the check is a pass of its own, and rounds run to tol
    model = Falkon(GaussianKernel(2.0), 1e-6, M=200, maxiter=500, tol=1e-6, dtype="float32").fit(X, Y)
    rounds = [r for r in model.trace_ if r.extras.get("residual_kind") == "float64 refinement"]
    assert rounds and model.converged_ and rounds[-1].residual <= 1e-6
    assert sum(dtype == torch.float64 for dtype, _ in passes) == 1 + len(rounds)


def test_float32_preconditioner_evaluates_K_MM_once_when_there_is_nothing_to_count(monkeypatch):
    """For float32 data the count of unresolved directions loads D K_MM D first; when λM is above
    float32's resolution there is nothing to count, and the factorisation starts from that same
    buffer: one kernel evaluation, and factors equal to those of an evaluation of their own."""
    C = torch.as_tensor(np.random.default_rng(0).standard_normal((300, 4)))
    kernel = GaussianKernel(2.0)
    calls = []
    block = GaussianKernel.block

    def counted(self, *args, **kwargs):
        calls.append(1)
        return block(self, *args, **kwargs)

    monkeypatch.setattr(GaussianKernel, "block", counted)
    pc32 = FalkonPreconditioner(kernel, C, 1e-4, data_dtype=torch.float32, jitter=1e-6)
    assert pc32.unresolved_ == 0 and len(calls) == 1
    pc64 = FalkonPreconditioner(kernel, C, 1e-4, data_dtype=torch.float64, jitter=1e-6)
    # T from the same D K_MM D: equal; A is factored in float32 for float32 data (the next test).
    assert torch.equal(torch.tril(pc32._packed, -1), torch.tril(pc64._packed, -1))
    assert torch.equal(pc32.diag_T, pc64.diag_T)


@pytest.mark.parametrize("penalty", [1e-4, 1e-7])
def test_float32_data_factors_A_in_float32_and_solves_the_same_system(penalty, one_thread):
    """For float32 data, A (T Tᵀ/M + λI = A Aᵀ) is formed and factored in float32; T stays float64.
    A is only a change of variables (B = T⁻¹A⁻¹/√n), so FALKON's system W β = Pᵀ b̃ has the same
    solution α = P β with either A: the float32 A's factors are off by float32 rounding, the fitted
    values K_nM α agree to float64 accuracy."""
    rng = np.random.default_rng(1)
    C = torch.as_tensor(rng.standard_normal((200, 3)))
    X = torch.as_tensor(rng.standard_normal((1000, 3)))
    y = torch.as_tensor(rng.standard_normal((1000, 1)))
    kernel = GaussianKernel(1.5)
    K_nM = kernel(X, C)
    pcs = {
        dt: FalkonPreconditioner(kernel, C, penalty, data_dtype=dt, jitter=1e-8)
        for dt in (torch.float32, torch.float64)
    }
    pc32, pc64 = pcs[torch.float32], pcs[torch.float64]
    assert torch.equal(pc32.diag_T, pc64.diag_T)
    upper32, upper64 = torch.triu(pc32._packed, 1), torch.triu(pc64._packed, 1)
    assert not torch.equal(upper32, upper64)  # A is float32's
    assert float((upper32 - upper64).abs().max() / upper64.abs().max()) < 1e-3
    n = X.shape[0]
    kernel_product = lambda v: K_nM.T @ (K_nM @ v) / n  # noqa: E731
    alphas = []
    for pc in (pc32, pc64):
        b = pc.apply_t(K_nM.T @ y / n)
        W = torch.stack(
            [
                pc.system_product(e[:, None], kernel_product, penalty)[:, 0]
                for e in torch.eye(C.shape[0], dtype=torch.float64)
            ],
            1,
        )
        alphas.append(pc.apply(torch.linalg.solve(W, b)))
    fits = [K_nM @ alpha for alpha in alphas]  # the fitted values: well conditioned, unlike α
    assert float((fits[0] - fits[1]).abs().max()) < 1e-6

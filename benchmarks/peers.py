"""The peer libraries a user would pick instead of krrcore, on the same data, kernel and penalty.

Each peer is optional: :func:`require` raises :class:`PeerMissing` with the reason and the install
command when its package is absent, and the suite prints that reason in place of the row. Every
peer solves the same problem as krrcore — Gaussian kernel exp(−‖x − x'‖²/(2σ²)), penalty λ per
sample, so the regulariser of (K + λnI) is λn — and returns what it reached as points
``{"seconds", "test_mse", ...}`` (seconds exclude evaluating the test error):

* scikit-learn ``KernelRidge(alpha=λn)``: the exact solve (one point);
* scikit-learn ``Nystroem`` + ``Ridge(alpha=λn)``: the direct Nyström solve (one point);
* rlaopt's ``PCG`` with its ``NystromConfig`` preconditioner (the ASkotch authors' library) on
  K stored or applied on the fly, a point after its set-up (iteration 0) and at iterations 1, 2,
  4, 8, …;
* GPyTorch's exact GP with fixed hyper-parameters (length-scale σ, output scale 1, noise σ² = λn):
  its posterior mean solves (K + σ²I)α = y by modified batch CG with a pivoted-Cholesky
  preconditioner; one fresh solve per CG tolerance gives a point each.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import replace

import numpy as np
import torch


class PeerMissing(RuntimeError):
    """A peer library is not installed; the message is the reason printed in its place."""


def require(module: str, package: str | None = None):
    """Import ``module`` or raise :class:`PeerMissing` naming the package to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = package or module
        raise PeerMissing(
            f"{package} is not installed ({exc}); pip install {package} (or pip install '.[bench]')"
        ) from None


def _mse(pred, y_test) -> float:
    pred = np.asarray(pred, dtype=np.float64).reshape(-1)
    return float(np.mean((pred - np.asarray(y_test, dtype=np.float64).reshape(-1)) ** 2))


def sklearn_kernel_ridge(X, y, X_test, y_test, *, sigma: float, penalty: float) -> list[dict]:
    """scikit-learn's exact KRR: ``KernelRidge(kernel="rbf", gamma=1/(2σ²), alpha=λn)``."""
    kernel_ridge = require("sklearn.kernel_ridge", "scikit-learn")
    X, y = np.asarray(X), np.asarray(y)
    model = kernel_ridge.KernelRidge(alpha=penalty * X.shape[0], kernel="rbf", gamma=0.5 / sigma**2)
    t0 = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    return [{"seconds": seconds, "test_mse": _mse(model.predict(np.asarray(X_test)), y_test)}]


def sklearn_nystroem_ridge(X, y, X_test, y_test, *, sigma: float, penalty: float, M: int, seed: int = 0) -> list[dict]:
    """scikit-learn's direct Nyström solve: ``Nystroem(n_components=M)`` then ``Ridge(alpha=λn)``
    on the M features — the minimiser of the Nyström KRR problem FALKON iterates towards
    (FALKON paper, Eq. 8), with M uniformly drawn centres."""
    require("sklearn", "scikit-learn")
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    X, y = np.asarray(X), np.asarray(y)
    model = make_pipeline(
        Nystroem(kernel="rbf", gamma=0.5 / sigma**2, n_components=M, random_state=seed),
        Ridge(alpha=penalty * X.shape[0]),
    )
    t0 = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    return [{"seconds": seconds, "test_mse": _mse(model.predict(np.asarray(X_test)), y_test)}]


def _kernel_operator(kernel, X: torch.Tensor, stored: bool, memory_budget: int | None):
    """K(X, X) as an rlaopt (``linops``) operator: the dense matrix, or blocked products from
    :class:`krrcore.ops.KernelOperator` computing K on the fly."""
    linops = require("linops", "rlaopt")
    from linops.linops import Symmetric
    from krrcore.ops import KernelOperator, dense_kernel

    if stored:
        return dense_kernel(kernel, X, X, memory_budget=memory_budget)
    blocked = KernelOperator(kernel, X, X, memory_budget=memory_budget)

    class OnTheFly(linops.LinearOperator):
        supports_operator_matrix = True
        _adjoint = Symmetric

        def __init__(self):
            super().__init__()
            self._shape = (X.shape[0], X.shape[0])
            self.device = X.device

        def _matmul_impl(self, v):
            return blocked.matvec(v)

    return OnTheFly()


def rlaopt_pcg(
    X,
    y,
    X_test,
    y_test,
    *,
    kernel,
    penalty: float,
    rank: int,
    max_iters: int,
    time_limit: float,
    stored: bool,
    memory_budget: int | None = None,
    tol: float = 1e-6,
) -> list[dict]:
    """rlaopt's PCG with a rank-``rank`` Nyström preconditioner (damping λn + the smallest retained
    eigenvalue, as NyströmPCG's "damped"), stepped one iteration at a time so that test error is
    evaluated off the clock; stops at rlaopt's convergence test (relative residual ≤ ``tol``, its
    default), ``max_iters`` or ``time_limit`` solver seconds.

    The rank is fixed (no adaptive growth: ``error_tolerance`` is not binding, one power
    iteration for the error estimate rlaopt always makes) to match NyströmPCG's r.
    """
    require("rlaopt")
    from rlaopt.linalg import LinSys, NystromConfig
    from rlaopt.solvers.pcg import PCG, PCGConfig

    from krrcore.ops import KernelOperator

    X, X_test = torch.as_tensor(X), torch.as_tensor(X_test, dtype=torch.as_tensor(X).dtype)
    y = torch.as_tensor(y, dtype=X.dtype).reshape(-1, 1)
    reg = float(penalty * X.shape[0])
    t0 = time.perf_counter()
    system = LinSys(_kernel_operator(kernel, X, stored, memory_budget), y, reg=reg)
    config = PCGConfig(
        preconditioner_config=NystromConfig(
            rank_init=rank,
            rank_max=rank,
            base_damping=reg,
            damping_mode="adaptive",
            error_tolerance=1e30,
            num_power_iters=1,
        )
    )
    solver = PCG(system, config)
    w = torch.zeros_like(y)
    state = replace(solver.init_state(w), tol=tol)  # as rlaopt's own solve() sets it
    seconds = time.perf_counter() - t0
    test_op = KernelOperator(kernel, X_test, X, memory_budget=memory_budget)
    points, next_eval = (
        [{"iteration": 0, "seconds": seconds, "test_mse": _mse(np.zeros(len(y_test)), y_test), "residual": 1.0}],
        1,
    )
    for iteration in range(1, max_iters + 1):
        t0 = time.perf_counter()
        w, state = solver.step(w, state)
        seconds += time.perf_counter() - t0
        last = iteration == max_iters or seconds >= time_limit or not bool(state.mask.any())
        if iteration >= next_eval or last:
            points.append(
                {
                    "iteration": iteration,
                    "seconds": seconds,
                    "test_mse": _mse(test_op.matvec(w), y_test),
                    "residual": float(state.res_norm[0] / system.rhs_norm[0]),
                }
            )
            next_eval *= 2
        if last:
            break
    return points


def gpytorch_cg(
    X,
    y,
    X_test,
    y_test,
    *,
    sigma: float,
    penalty: float,
    tolerances=(1e-1, 1e-2, 1e-3),
    preconditioner_rank: int = 100,
    max_cg_iterations: int = 1000,
) -> list[dict]:
    """GPyTorch's CG solve of (K + σ²I)α = y, σ² = λn, hyper-parameters fixed and not learned:
    the time of the posterior mean at the test points (the solve and the cross-kernel product),
    one fresh model per CG tolerance. Cholesky is switched off (``max_cholesky_size(0)``) so CG
    runs at every n; the pivoted-Cholesky preconditioner has rank ``preconditioner_rank``."""
    gpytorch = require("gpytorch")

    X = torch.as_tensor(X)
    X_test = torch.as_tensor(X_test, dtype=X.dtype)
    y = torch.as_tensor(y, dtype=X.dtype).reshape(-1)

    class FixedGP(gpytorch.models.ExactGP):
        def __init__(self, likelihood):
            super().__init__(X, y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.RBFKernel()

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    points = []
    for tol in tolerances:
        likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(0.0))
        model = FixedGP(likelihood).to(device=X.device, dtype=X.dtype)
        likelihood.to(X.device)
        model.covar_module.lengthscale = sigma
        likelihood.noise = penalty * X.shape[0]
        model.eval()
        likelihood.eval()
        with (
            torch.no_grad(),
            gpytorch.settings.max_cholesky_size(0),
            gpytorch.settings.cg_tolerance(tol),
            gpytorch.settings.eval_cg_tolerance(tol),
            gpytorch.settings.max_cg_iterations(max_cg_iterations),
            gpytorch.settings.max_preconditioner_size(preconditioner_rank),
            gpytorch.settings.skip_posterior_variances(True),
        ):
            t0 = time.perf_counter()
            mean = model(X_test).mean
            seconds = time.perf_counter() - t0
        points.append({"cg_tolerance": tol, "seconds": seconds, "test_mse": _mse(mean.cpu(), y_test)})
    return points


def keops_pass(X, C, v, *, sigma: float, repeats: int = 3) -> float:
    """Seconds (best of ``repeats``, after one untimed call that compiles KeOps's kernel) of one pass
    K_nMᵀ(K_nM v) with pykeops's symbolic Gaussian kernel exp(−‖x − c‖²/(2σ²)) on X's device: the
    reduction the FALKON library's GPU path runs, K never formed."""
    keops = require("pykeops.torch", "pykeops")
    from benchmarks.common import timed

    x = keops.LazyTensor(X[:, None, :] / sigma)
    c = keops.LazyTensor(C[None, :, :] / sigma)
    K = (-0.5 * ((x - c) ** 2).sum(-1)).exp()  # n × M, symbolic

    def one_pass():
        return K.t() @ (K @ v)

    one_pass()
    return timed(one_pass, repeats=repeats)[0]


def gpytorch_marginal_likelihood(
    X,
    y,
    X_test,
    y_test,
    *,
    ard: bool = False,
    steps: int = 60,
    lr: float = 0.1,
    inducing: int | None = None,
    seed: int = 0,
) -> dict:
    """GPyTorch's own way to choose σ and λ: Adam (``lr``, ``steps``) on the negative marginal log
    likelihood of a zero-mean GP with a scaled RBF kernel (one length-scale, or one per feature
    with ``ard``) over its length-scale(s), output scale s² and noise τ², from the median heuristic
    (krrcore's start); then the posterior mean at X_test. Exact GP (Cholesky, float64), or with
    ``inducing`` = M SGPR (Titsias's bound; InducingPointKernel on M training points, moved too).

    The posterior mean is KRR with σ = the length-scale and λ = τ²/(s²n): both are returned."""
    gpytorch = require("gpytorch")
    from krrcore.kernels import median_heuristic

    X = torch.as_tensor(np.asarray(X), dtype=torch.float64)
    y = torch.as_tensor(np.asarray(y), dtype=torch.float64).reshape(-1)
    X_test = torch.as_tensor(np.asarray(X_test), dtype=torch.float64)
    d = X.shape[1] if ard else None
    start = median_heuristic(X)

    class GP(gpytorch.models.ExactGP):
        def __init__(self, likelihood):
            super().__init__(X, y, likelihood)
            self.mean_module = gpytorch.means.ZeroMean()
            base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=d))
            base.base_kernel.lengthscale = start
            if inducing is not None:
                rows = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))[:inducing]
                self.covar_module = gpytorch.kernels.InducingPointKernel(
                    base, inducing_points=X[rows].clone(), likelihood=likelihood
                )
            else:
                self.covar_module = base

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    t0 = time.perf_counter()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = GP(likelihood).double()
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    with gpytorch.settings.max_cholesky_size(10**6):
        for _ in range(steps):
            optimizer.zero_grad()
            loss = -mll(model(X), y)
            loss.backward()
            optimizer.step()
        model.eval()
        likelihood.eval()
        with torch.no_grad(), gpytorch.settings.skip_posterior_variances(True):
            mean = model(X_test).mean
    seconds = time.perf_counter() - t0
    scaled = model.covar_module.base_kernel if inducing is not None else model.covar_module
    lengthscale = scaled.base_kernel.lengthscale.detach().reshape(-1).tolist()
    penalty = float(likelihood.noise.detach()) / (float(scaled.outputscale.detach()) * len(X))
    return {
        "seconds": seconds,
        "test_mse": _mse(mean, y_test),
        "sigma": lengthscale,
        "penalty": penalty,
        "steps": steps,
        "model": "SGPR" if inducing is not None else "exact GP",
    }

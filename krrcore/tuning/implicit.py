"""The hold-out hypergradient without the direct solve: FALKON's conjugate gradient for the model and
for its adjoint (the implicit-function hypergradient, truncated at ``maxiter`` CG iterations).

The direct route (:mod:`krrcore.tuning.objectives`) forms G = K_nMᵀK_nM — O(nM²) per evaluation
— and factorises M×M matrices; with many rows and centres that costs more than a FALKON fit. Here,
at (σ, λ, centres):

1. α = FALKON's solution of (G/n + λK_MM)α = K_nMᵀY/n (:class:`~krrcore.solvers.falkon.Falkon`,
   ``maxiter`` iterations: a fit, with its preconditioner and cached kernel rows);
2. the hold-out error L = ‖K_vMα − Y_v‖²/(n_v k) and g = ∂L/∂α = 2K_vMᵀ(K_vMα − Y_v)/(n_v k);
3. the adjoint w = H⁻¹g, H = G + λnK_MM, by the same preconditioned CG on the same system
   (w = Pβ with Pᵀ(G/n + λK_MM)P β = Pᵀg/n: FALKON's W, another right-hand side);
4. the implicit-function theorem: dL/dθ = ∂L/∂θ|_α − wᵀ ∂(Hα − K_nMᵀY)/∂θ, i.e. ∂L/∂G = −wαᵀ,
   ∂L/∂R = w, ∂L/∂K_MM = −λn wαᵀ, ∂L/∂λ = −n wᵀK_MMα and ∂L/∂K_vM = 2rαᵀ/(n_v k) — the same
   rank-k weights as the direct route, pushed into σ and the centres by one pass over FALKON's
   (cached) kernel blocks.

Each evaluation costs about two FALKON fits' worth of passes, O(nM) each, and one M×M
preconditioner; it is exact when CG has converged (tests check it against the direct route and
finite differences). Only the hold-out objective: GCV and compreg need traces of H⁻¹G.
"""

from __future__ import annotations

import math
import warnings

import torch

from ..cg import conjugate_gradient
from ..kernels import GaussianKernel
from ..ops import KernelOperator
from ..solvers.falkon import Falkon, ResidualWarning
from .objectives import Evaluation, Problem, RowWeights, Stats, _push_into_kernel, gaussian_block, sigma_value

#: CG stops at this relative residual (or at ``maxiter``): the hypergradient's accuracy.
CG_TOL = 1e-10


def evaluate_cg(
    problem: Problem,
    Z: torch.Tensor,
    log_sigma: torch.Tensor,
    log_penalty: float,
    *,
    maxiter: int,
    centers_grad: bool = False,
    grad: bool = True,
) -> Evaluation:
    """The hold-out error at (σ, λ, centres) and its hypergradient in (log σ, log λ, centres), by
    FALKON and its conjugate gradient (see the module docstring); ``grad=False``: steps 1–2 only."""
    sigma, lam = sigma_value(log_sigma), math.exp(log_penalty)
    kernel = GaussianKernel(sigma)
    n, k = problem.X.shape[0], problem.k
    falkon = Falkon(
        kernel,
        lam,
        Z.shape[0],
        centers=Z.detach().numpy(),
        maxiter=maxiter,
        tol=CG_TOL,
        dtype="float64",
        memory_budget=problem.memory_budget,
        fit_intercept=False,  # the system of the direct route: Y is the tuning's, already less its mean
    )
    with warnings.catch_warnings():  # a truncated solve is this route's choice, not a user's fit
        warnings.simplefilter("ignore", ResidualWarning)
        warnings.filterwarnings("ignore", message=".*did not reach tol")
        falkon.fit(problem.X, problem.Y)
    alpha = falkon.coef_.double()
    val_op = KernelOperator(kernel, problem.X_val, Z.detach(), memory_budget=problem.memory_budget, n_rhs=k)
    residual = val_op.matvec(alpha) - problem.Y_val
    scale = 1.0 / (problem.X_val.shape[0] * k)
    value = float((residual * residual).sum()) * scale
    if not grad:
        return Evaluation(value, None, math.nan, None, alpha, residual)
    g = 2.0 * scale * val_op.rmatvec(residual)
    pc = falkon.preconditioner_
    rhs = pc.apply_t(g / n)
    state = None
    for state in conjugate_gradient(falkon._W, rhs):
        if state.iteration >= maxiter or state.converged or state.rel_residual <= CG_TOL:
            break
    w = pc.apply(state.x).double() if state is not None else torch.zeros_like(alpha)
    # The K_MM and λ terms (M×M: autograd), then one pass over FALKON's kernel blocks.
    ls = log_sigma.detach().clone().requires_grad_()
    Zg = Z.detach().clone().requires_grad_(centers_grad)
    Kmm = gaussian_block(Zg, Zg, ls)
    (-(lam * n) * (w @ alpha.T) * Kmm).sum().backward()
    grad_log_penalty = -lam * n * float((w * (Kmm.detach() @ alpha)).sum())
    weights = [
        RowWeights(P=torch.cat([w, alpha], 1), Q=-torch.cat([alpha, w], 1), R=w),
        RowWeights(E=2.0 * scale * residual, F=alpha),
    ]
    train = Stats(None, None, 0.0, n, falkon.operator_, problem.Y)
    val = Stats(None, None, 0.0, problem.X_val.shape[0], val_op, problem.Y_val)
    grad_sigma, grad_centers = _push_into_kernel(
        problem, "holdout", weights, [train, val], Z.detach().double(), ls, centers_grad
    )
    grad_sigma = grad_sigma + ls.grad.detach()
    if centers_grad:
        grad_centers = grad_centers + Zg.grad.detach()
    return Evaluation(value, grad_sigma, grad_log_penalty, grad_centers, alpha, residual)

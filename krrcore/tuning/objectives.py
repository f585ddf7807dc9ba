"""Nyström tuning objectives and their exact hypergradients (Meanti, Carratino, De Vito, Rosasco,
"Efficient Hyperparameter Tuning for Large Scale Kernel Ridge Regression", AISTATS 2022).

Notation (krrcore's per-sample λ): n rows X with targets Y (n×k), M centres Z, the Gaussian kernel
with one length σ or one per feature (ARD), K_nM = k(X, Z), K_MM = k(Z, Z). The Nyström estimator
is α = (K_nMᵀK_nM + λn K_MM)⁻¹ K_nMᵀY (FALKON Eq. 8), f(x) = k(x, Z)α, and its hat matrix
Ĥ = K_nM (K_nMᵀK_nM + λn K_MM)⁻¹ K_nMᵀ maps Y to the fitted values f(X) = ĤY.

The training rows enter every objective only through three sums, :class:`Stats`:
G = K_nMᵀK_nM (M×M), R = K_nMᵀY (M×k) and ‖Y‖² (the hold-out objective also through the
validation outputs K_vM α). So one blocked pass over the rows (:func:`row_stats`) gives the
objective exactly, and its gradient follows in two steps (:func:`evaluate`): the M×M algebra gives
∂L/∂G, ∂L/∂R and ∂L/∂K_MM (written out for the hold-out objective, by autograd for the others);
then a second blocked pass pushes them into σ and the centres with
∂(⟨Ḡ, K_bMᵀK_bM⟩ + ⟨R̄, K_bMᵀY_b⟩) = ⟨K_bM(Ḡ + Ḡᵀ) + Y_bR̄ᵀ, ∂K_bM⟩ per row block b — the
exact hypergradient in O(nM²) time (O(nMd) for the hold-out objective, whose Ḡ has rank k) and
O(M² + block·M) memory, never K_nM whole unless it fits the storage budget (then its blocks are
kept from the first pass for the second).

The objectives (:data:`OBJECTIVES`):

* ``holdout`` — the validation error (1/(n_v k))‖K_vM α − Y_v‖² of the model trained on the other
  rows (the paper's hold-out objective).
* ``gcv`` — generalised cross-validation, (1/(nk))‖(I − Ĥ)Y‖² / (1 − Tr Ĥ / n)² (Craven & Wahba;
  the paper's GCV in its Nyström form): the leave-one-out error with every point's leverage
  replaced by the average one. Needs no held-out rows.
* ``compreg`` — the paper's complexity-regularised Nyström objective (its proposal, in the form of
  the public falkon library's ``NystromCompReg``): k·Tr Ĥ + Yᵀ(I − Ĥ)Y · (1 + Tr(K − K̃)/(λn²)),
  with K̃ = K_nM K_MM⁺ K_nMᵀ the Nyström kernel. Tr Ĥ (the effective dimension) is the variance of
  the estimator, Yᵀ(I − Ĥ)Y = λn Yᵀ(K̃ + λnI)⁻¹Y its penalised data fit, and the last factor the
  error the centres leave, Tr(K − K̃), relative to λn. It reads Y in units of the noise: the tuner
  scales Y to unit mean square, so on low-noise data it regularises more than the other two.

For a fixed σ and fixed centres every objective is a closed-form function of λ once the
eigenvalues μ_i of the Nyström features' Gram matrix are known (:class:`PenaltyProfile`): the
tuner minimises over λ exactly at every step, and the map of the page costs one eigenproblem per σ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..kernels import GaussianKernel
from ..ops import KernelOperator
from ..preconditioner import JITTER_EPS_FLOAT64

#: The objectives by name, with the sentence a front end shows.
OBJECTIVES = {
    "gcv": "generalised cross-validation: the leave-one-out error estimated from the training rows alone",
    "holdout": "validation error of the model trained on the other rows (a held-out fifth by default)",
    "compreg": "complexity-regularised Nyström objective: data fit + effective dimension + the centres' error",
}


def check_objective(objective: str) -> str:
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {sorted(OBJECTIVES)}, got {objective!r}")
    return objective


def gaussian_block(X: torch.Tensor, Z: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
    """exp(−‖(x − z)/σ‖²/2) for rows of X against Z, differentiable in ``log_sigma`` (scalar or
    one per feature) and Z: :class:`krrcore.kernels.GaussianKernel`'s formula without its in-place
    buffers, which autograd cannot follow."""
    inv = torch.exp(-log_sigma).to(X.dtype)
    Xs, Zs = X * inv, Z * inv
    sq = (Xs * Xs).sum(1, keepdim=True) + (Zs * Zs).sum(1) - 2.0 * Xs @ Zs.T
    return torch.exp(-0.5 * sq.clamp_min(0.0))


def sigma_value(log_sigma: torch.Tensor):
    """σ as :class:`~krrcore.kernels.GaussianKernel` takes it: a float for a 0-d ``log_sigma``, a
    1-D CPU tensor (ARD) otherwise."""
    s = torch.exp(log_sigma.detach().double()).cpu()
    return float(s) if s.ndim == 0 else s


@dataclass
class Stats:
    """Sums over a set of rows: G = K_nMᵀK_nM, R = K_nMᵀY, ‖Y‖², the row count (float64), and
    the blocked operator that computed them (its cached row blocks serve the gradient's pass)."""

    G: torch.Tensor | None
    R: torch.Tensor | None
    yy: float
    n: int
    op: KernelOperator | None = None
    Y: torch.Tensor | None = None
    K: torch.Tensor | None = None  # the rows' K_nM whole, when the caller holds it (no op then)


@dataclass
class Problem:
    """What one evaluation of an objective reads: training rows (and, for ``holdout``, validation
    rows) with their targets, the centres, and the memory budget of the blocked passes."""

    X: torch.Tensor  # float64 training rows
    Y: torch.Tensor  # float64 (n, k)
    X_val: torch.Tensor | None = None
    Y_val: torch.Tensor | None = None
    memory_budget: int | None = None

    @property
    def k(self) -> int:
        return self.Y.shape[1]

    def row_sets(self):
        yield self.X, self.Y
        if self.X_val is not None:
            yield self.X_val, self.Y_val


def row_stats(
    X: torch.Tensor,
    Y: torch.Tensor,
    Z: torch.Tensor,
    sigma,
    memory_budget=None,
    cache_bytes: int = 0,
    gram: bool = True,
) -> Stats:
    """:class:`Stats` of rows (X, Y) for centres Z and length(s) ``sigma``: one blocked pass
    (:meth:`krrcore.ops.KernelOperator.gram`), keeping the first ``cache_bytes`` of K_nM's row
    blocks for later passes. ``gram=False`` (validation rows): only the operator, no pass yet."""
    op = KernelOperator(
        GaussianKernel(sigma), X, Z.detach(), memory_budget=memory_budget, n_rhs=Y.shape[1], cache_bytes=cache_bytes
    )
    G, R = op.gram(Y) if gram else (None, None)
    return Stats(G, R, float((Y * Y).sum()), X.shape[0], op, Y)


def jitter_for(A: torch.Tensor) -> float:
    """The smallest jitter ε·I (from 1e-14·mean diagonal, ×100 per try) that lets A factor."""
    eps = 1e-14 * max(float(A.diagonal().mean()), 1e-300)
    eye = torch.eye(A.shape[0], dtype=A.dtype, device=A.device)
    for _ in range(10):
        _, info = torch.linalg.cholesky_ex(A + eps * eye)
        if int(info) == 0:
            return eps
        eps *= 100.0
    raise ValueError(
        "the Nyström system is not positive definite even with jitter (check for NaN inputs or an extremely small σ)"
    )


def _chol(A: torch.Tensor) -> torch.Tensor:
    """Differentiable lower Cholesky factor of A + εI with the jitter ε of :func:`jitter_for`."""
    eps = jitter_for(A.detach())
    return torch.linalg.cholesky(A + eps * torch.eye(A.shape[0], dtype=A.dtype, device=A.device))


def objective_value(
    objective: str, train: Stats, Kmm: torch.Tensor, penalty: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """(gcv or compreg, α) from the sums by Cholesky, differentiable in ``train.G``, ``train.R``,
    ``Kmm`` and ``penalty``: α solves (G + λn K_MM)α = R (FALKON Eq. 8)."""
    n, k = train.n, train.R.shape[1]
    H = train.G + (penalty * n) * Kmm
    L = _chol(H)
    alpha = torch.cholesky_solve(train.R, L)
    # ‖Y − K_nMα‖² from the sums (clamped: it is a difference of nearly equal terms at small λ).
    residual = (train.yy - 2.0 * (train.R * alpha).sum() + (alpha * (train.G @ alpha)).sum()).clamp_min(0.0)
    tr_hat = torch.diagonal(torch.cholesky_solve(train.G, L)).sum()  # Tr Ĥ = Tr((G + λnK_MM)⁻¹G)
    if objective == "gcv":
        return (residual / (n * k)) / (1.0 - tr_hat / n) ** 2, alpha
    if objective == "compreg":
        # Yᵀ(I − Ĥ)Y = min_α ‖Y − K_nMα‖² + λn αᵀK_MMα: the data fit at the optimum, both terms ≥ 0.
        datafit = residual + penalty * n * (alpha * (Kmm @ alpha)).sum()
        nystrom_trace = torch.diagonal(torch.cholesky_solve(train.G, _chol(Kmm))).sum()  # Tr K̃
        return k * tr_hat + datafit * (1.0 + (n - nystrom_trace) / (penalty * n * n)), alpha
    raise ValueError(check_objective(objective))


@dataclass
class Evaluation:
    """One evaluation: the objective, its gradient in (log σ, log λ, centres), α (M×k)."""

    value: float
    grad_log_sigma: torch.Tensor | None
    grad_log_penalty: float
    grad_centers: torch.Tensor | None
    alpha: torch.Tensor
    residual: torch.Tensor | None = None  # validation residuals K_vMα − Y_v (the CG route keeps them)


@dataclass
class RowWeights:
    """∂L/∂K_bM for the rows of one set, as W_b = (K_bM P) Qᵀ + Y_b Rᵀ + E_b Fᵀ (a term is left out
    when its first factor is None; Q None: the identity). A dense ∂L/∂G = Ḡ gives P = Ḡ + Ḡᵀ;
    low-rank ones P, Q of a few columns; E is a per-row matrix (n×k) computed beforehand."""

    P: torch.Tensor | None = None
    Q: torch.Tensor | None = None
    R: torch.Tensor | None = None
    E: torch.Tensor | None = None
    F: torch.Tensor | None = None

    def block(self, K: torch.Tensor, Y: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        W = torch.zeros_like(K)
        if self.P is not None:
            KP = K @ self.P
            W += KP if self.Q is None else KP @ self.Q.T
        if self.R is not None:
            W += Y[start:stop] @ self.R.T
        if self.E is not None:
            W += self.E[start:stop] @ self.F.T
        return W


def _push_into_kernel(
    problem: Problem,
    objective: str,
    weights: list[RowWeights],
    stats: list[Stats],
    Z: torch.Tensor,
    log_sigma: torch.Tensor,
    centers_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 2 of the hypergradient: the gradient of Σ_b ⟨W_b, K_bM⟩ with W_b held fixed, in
    (log σ, centres), one blocked pass per row set over the kernel blocks of step 1 (read from
    their cache where it holds them).

    For the Gaussian kernel ∂K_ij/∂log σ_l = K_ij (x_il − z_jl)²/σ_l² and ∂K_ij/∂z_jl =
    K_ij (x_il − z_jl)/σ_l², so with V = W ⊙ K the sums are products: Σ_i x_il² (V1)_i −
    2 Σ_i x_il (VZ)_il + Σ_j z_jl² (Vᵀ1)_j for σ_l, and (VᵀX − diag(Vᵀ1)Z)/σ² for the centres."""
    X_sets = [(problem.X, problem.Y)] + ([(problem.X_val, problem.Y_val)] if objective == "holdout" else [])
    by_feature = torch.zeros(Z.shape[1], dtype=torch.float64)
    centers = torch.zeros_like(Z) if centers_grad else None
    for (X, Y), w, st in zip(X_sets, weights, stats):
        for start, stop, K in st.op.blocks():
            Xb = X[start:stop]
            V = w.block(K, Y, start, stop).mul_(K)
            rows, cols = V.sum(1), V.sum(0)
            VZ = V @ Z
            by_feature += (Xb * Xb * rows[:, None]).sum(0) - 2.0 * (Xb * VZ).sum(0) + (Z * Z * cols[:, None]).sum(0)
            if centers_grad:
                centers += V.T @ Xb - Z * cols[:, None]
    inv_sq = torch.exp(-2.0 * log_sigma.detach())
    grad_sigma = (by_feature * inv_sq).sum() if log_sigma.ndim == 0 else by_feature * inv_sq
    return grad_sigma, (centers * inv_sq if centers_grad else None)


def evaluate(
    objective: str,
    problem: Problem,
    Z: torch.Tensor,
    log_sigma: torch.Tensor,
    log_penalty: float,
    *,
    centers_grad: bool = False,
    train: Stats | None = None,
    val: Stats | None = None,
    profile: "PenaltyProfile | None" = None,
) -> Evaluation:
    """The objective at (σ, λ, centres) and its exact gradient (see the module docstring).

    ``train``/``val``/``profile``: the sums and the closed form at these σ and centres when the
    caller has them already (the search does), saving the first pass. The value and α come from
    the closed form (:class:`PenaltyProfile`), robust at small λ.

    The hold-out gradient is written out: with the validation residual r = K_vMα − Y_v,
    g = ∂L/∂α = 2K_vMᵀr/(n_v k) and w = H⁻¹g (H = G + λnK_MM), ∂L/∂G = −wαᵀ, ∂L/∂R = w,
    ∂L/∂K_vM = 2rαᵀ/(n_v k), ∂L/∂K_MM = −λn wαᵀ and ∂L/∂λ = −n wᵀK_MMα: all of rank k, so the
    second pass costs matrix-vector products, O(nMd), not O(nM²). gcv and compreg differentiate
    Tr Ĥ, whose ∂/∂G has full rank: autograd through the M×M algebra, then an O(nM²) pass."""
    sigma = sigma_value(log_sigma)
    if train is None:
        train = row_stats(problem.X, problem.Y, Z, sigma, problem.memory_budget)
    if objective == "holdout" and val is None:
        val = row_stats(problem.X_val, problem.Y_val, Z, sigma, problem.memory_budget, gram=False)
    ls = log_sigma.detach().clone().requires_grad_()
    Zg = Z.detach().clone().requires_grad_(centers_grad)
    Kmm = gaussian_block(Zg, Zg, ls)
    if profile is None:
        profile = PenaltyProfile(objective, train, Kmm.detach(), val)
    lam = math.exp(log_penalty)
    value, alpha = float(profile.values([lam])[0]), profile.alpha(lam)
    if objective == "holdout":
        k = alpha.shape[1]
        scale = 1.0 / (val.n * k)
        residual = profile.val_residual(lam)  # K_vMα − Y_v, from the rows
        g = 2.0 * scale * val.op.rmatvec(residual)
        w = profile.solve(g, lam)  # H⁻¹g
        weights = [
            RowWeights(P=torch.cat([w, alpha], 1), Q=-torch.cat([alpha, w], 1), R=w),
            RowWeights(E=2.0 * scale * residual, F=alpha),
        ]
        grad_log_penalty = -lam * train.n * float((w * (Kmm.detach() @ alpha)).sum())
        (-(lam * train.n) * (w @ alpha.T) * Kmm).sum().backward()  # the K_MM path (M×M: autograd)
    else:
        leaf = Stats(train.G.clone().requires_grad_(), train.R.clone().requires_grad_(), train.yy, train.n)
        lp = torch.tensor(float(log_penalty), dtype=torch.float64, requires_grad=True)
        objective_value(objective, leaf, Kmm, torch.exp(lp))[0].backward()
        weights = [RowWeights(leaf.G.grad + leaf.G.grad.T, None, leaf.R.grad)]
        grad_log_penalty = float(lp.grad)
    grad_sigma, grad_centers = _push_into_kernel(
        problem, objective, weights, [train, val], Z.detach().double(), ls, centers_grad
    )
    grad_sigma = grad_sigma + ls.grad.detach()
    if centers_grad:
        grad_centers = grad_centers + Zg.grad.detach()
    return Evaluation(value, grad_sigma, grad_log_penalty, grad_centers, alpha)


def jittered_factor(Kmm: torch.Tensor) -> torch.Tensor:
    """L with LLᵀ = K_MM + εI, ε = FALKON's float64 jitter·M, raised 100× until the factor exists."""
    M = Kmm.shape[0]
    eye = torch.eye(M, dtype=Kmm.dtype, device=Kmm.device)
    jitter = JITTER_EPS_FLOAT64 * M
    for _ in range(8):
        L, info = torch.linalg.cholesky_ex(Kmm + jitter * eye)
        if int(info) == 0:
            return L
        jitter *= 100.0
    raise ValueError("K_MM is not positive definite even with jitter (check for NaN inputs)")


class PenaltyProfile:
    """Every objective as a closed-form function of λ for fixed σ and centres.

    With K_MM + εI = LLᵀ (ε = FALKON's float64 jitter, :data:`~krrcore.preconditioner.JITTER_EPS_FLOAT64`·M)
    the Nyström features Φ = K_nM L⁻ᵀ
    have Gram matrix S = L⁻¹GL⁻ᵀ = V diag(μ) Vᵀ, and with T = L⁻ᵀV, q = TᵀR, ν = λn:
    α(λ) = T diag(1/(μ + ν)) q, H⁻¹ = (G + νK_MM)⁻¹ = T diag(1/(μ + ν)) Tᵀ, Tr Ĥ = Σ μ_i/(μ_i + ν),
    Tr K̃ = Σ μ_i; the residuals are written as sums of non-negative terms in the coordinates
    (u_iᵀY)² = ‖q_i‖²/μ_i of Y on the features' span (exact at small λ), and the hold-out error from
    the validation outputs K_vM T (one product), never from a difference of sums. One Cholesky and
    one eigenproblem of size M, then O(n_v M) per λ (O(M) for gcv and compreg).
    """

    def __init__(self, objective: str, train: Stats, Kmm: torch.Tensor, val: Stats | None = None, *, factor=None):
        """``factor``: :func:`jittered_factor` of ``Kmm`` when the caller has it (the folds share
        one K_MM, so one factorisation)."""
        self.objective, self.train, self.val = objective, train, val
        L = jittered_factor(Kmm) if factor is None else factor
        A = torch.linalg.solve_triangular(L, train.G, upper=False)  # L⁻¹G
        S = torch.linalg.solve_triangular(L, A.T, upper=False)  # L⁻¹GL⁻ᵀ
        mu, V = torch.linalg.eigh((S + S.T) / 2)
        self.mu = mu.clamp_min(0.0)
        self.T = torch.linalg.solve_triangular(L.T, V, upper=True)
        self.q = self.T.T @ train.R  # r×k
        self.q2 = (self.q**2).sum(1)
        # Directions with μ_i ≈ 0 carry no part of Y (q_i = √μ_i u_iᵀY): counted as 0, not 0/0.
        significant = self.mu > self.mu.max() * len(self.mu) * torch.finfo(self.mu.dtype).eps
        self.mu_safe = torch.where(significant, self.mu, torch.ones_like(self.mu))
        self.q2 = torch.where(significant, self.q2, torch.zeros_like(self.q2))
        self.outside = max(train.yy - float((self.q2 / self.mu_safe).sum()), 0.0)  # ‖(I − P_Φ)Y‖²
        if val is not None and val.K is not None:  # validation outputs in the T basis: K_vM T (n_v×M)
            self.Pv = val.K @ self.T
        elif val is not None:
            self.Pv = torch.empty(val.n, self.T.shape[1], dtype=self.T.dtype, device=self.T.device)
            for start, stop, K in val.op.blocks():
                torch.mm(K, self.T, out=self.Pv[start:stop])

    def val_residual(self, penalty: float) -> torch.Tensor:
        """K_vMα − Y_v at λ = ``penalty`` (n_v×k), from the validation outputs: no cancellation."""
        return self.Pv @ (self.q / (self.mu[:, None] + penalty * self.train.n)) - self.val.Y

    def solve(self, B: torch.Tensor, penalty: float) -> torch.Tensor:
        """(G + λnK_MM)⁻¹B."""
        return self.T @ ((self.T.T @ B) / (self.mu[:, None] + penalty * self.train.n))

    def values(self, penalties, objective: str | None = None) -> torch.Tensor:
        """The objective (``objective``, default the profile's own: every objective reads the same
        eigenproblem; "holdout" needs the validation rows) at each λ of ``penalties``."""
        objective = objective or self.objective
        lam = torch.as_tensor(penalties, dtype=torch.float64)
        nu = lam[:, None] * self.train.n
        inv = 1.0 / (self.mu[None, :] + nu)  # (g, r)
        k = self.q.shape[1]
        if objective == "holdout":
            g, r = inv.shape
            A = (inv[:, :, None] * self.q[None]).permute(1, 0, 2).reshape(r, g * k)  # T-basis coefficients
            out = (self.Pv @ A).reshape(-1, g, k) - self.val.Y[:, None, :]  # one product reads Pv once
            return (out * out).sum((0, 2)) / (self.val.n * k)
        n = self.train.n
        tr_hat = (self.mu[None] * inv).sum(1)
        # Y = (its part outside the features' span) + Σ u_i (u_iᵀY), with q_i = √μ_i u_iᵀY: each
        # form below is a sum of non-negative terms, exact at small λ where yy − Tr(YᵀĤY) cancels.
        shrink = nu * inv  # ν/(μ_i + ν) = 1 − (Ĥ's eigenvalue)
        coords = self.q2 / self.mu_safe  # (u_iᵀY)²
        if objective == "gcv":
            residual = self.outside + (shrink**2 * coords[None]).sum(1)
            return (residual / (n * k)) / (1.0 - tr_hat / n) ** 2
        datafit = self.outside + (shrink * coords[None]).sum(1)
        return k * tr_hat + datafit * (1.0 + (n - self.mu.sum()) / (lam * n * n))

    def alpha(self, penalty: float) -> torch.Tensor:
        """The Nyström coefficients α (M×k) at λ = ``penalty``."""
        return self.T @ (self.q / (self.mu[:, None] + penalty * self.train.n))

    def effective_dimension(self, penalty: float) -> float:
        """d_eff(λ) = Tr Ĥ = Σ μ_i/(μ_i + λn) of the Nyström model (BLESS's effective dimension,
        measured on the span of the centres)."""
        return float((self.mu / (self.mu + penalty * self.train.n)).sum())

    def best(self, low: float, high: float, points: int = 33, objective: str | None = None) -> tuple[float, float]:
        """(λ, objective) minimising the objective (``objective``: as in :meth:`values`) over
        [low, high] (:func:`minimise_log`)."""
        return minimise_log(lambda lam: self.values(lam, objective), low, high, points)


def minimise_log(values, low: float, high: float, points: int = 33, refine: int = 4) -> tuple[float, float]:
    """(λ, value) minimising ``values`` (a function of a 1-D tensor of λ) over [low, high]: the best
    of ``points`` log-spaced values, then ``refine`` rounds of 9 values spanning the best one's two
    neighbours (each round narrows the bracket 4×: to 0.5% in λ over the tuner's range). Every round
    is one vectorised call: λ costs O(M) (O(n_v M) held out) per value once the eigenproblem is
    solved, and a call's fixed cost is what a sequential search would pay per value."""
    logs = torch.linspace(math.log(low), math.log(high), points, dtype=torch.float64)
    best_t, best_v = None, math.inf
    for _ in range(refine + 1):
        vals = values(torch.exp(logs))
        vals = torch.where(torch.isfinite(vals), vals, torch.full_like(vals, math.inf))
        i = int(torch.argmin(vals))
        if best_t is None or float(vals[i]) < best_v:
            best_t, best_v = float(logs[i]), float(vals[i])
        a, b = float(logs[max(i - 1, 0)]), float(logs[min(i + 1, logs.numel() - 1)])
        if not b > a:
            break
        logs = torch.linspace(a, b, 9, dtype=torch.float64)
    return math.exp(best_t), best_v


def nystrom_leftover(X: torch.Tensor, Z: torch.Tensor, sigma, rows: int = 2000, seed: int = 0) -> float:
    """Tr(K − K̃)/n, the average diagonal of the error the centres Z leave (K̃ = K_nM K_MM⁻¹ K_Mn), on a
    seeded sample of at most ``rows`` rows of X: 1 − ‖L⁻¹k(Z, x)‖² per row, K_MM + εI = LLᵀ."""
    if X.shape[0] > rows:
        X = X[torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(seed))[:rows]]
    kernel = GaussianKernel(sigma)
    Kmm = kernel(Z, Z)
    eps = max(JITTER_EPS_FLOAT64 * Z.shape[0], jitter_for(Kmm))
    L = torch.linalg.cholesky(Kmm + eps * torch.eye(Z.shape[0], dtype=Kmm.dtype))
    A = torch.linalg.solve_triangular(L, kernel(Z, X), upper=False)
    return float((1.0 - (A * A).sum(0)).clamp_min(0.0).mean())


def tuning_problem(
    X64: torch.Tensor,
    Y64: torch.Tensor,
    objective: str,
    *,
    tune_rows=None,
    validation_fraction: float = 0.2,
    seed: int = 0,
    memory_budget=None,
    check: bool = False,
):
    """(the :class:`~krrcore.tuning.objectives.Problem` a tuning reads, the scale of Y in it, the
    rows used, the held-out rows): a seeded subsample of ``tune_rows`` rows (all by default),
    split for the hold-out objective (or with ``check``) into the rows the models are fitted on and
    ``validation_fraction`` of them held out (otherwise the held-out rows are empty); for
    ``compreg`` Y is divided by its root mean square (that objective reads Y in noise units,
    :mod:`krrcore.tuning.objectives`). The same seed gives the same rows and split."""
    n = X64.shape[0]
    generator = torch.Generator().manual_seed(int(seed))
    rows = torch.randperm(n, generator=generator)[:tune_rows] if tune_rows and tune_rows < n else torch.arange(n)
    scale = (float(Y64[rows].pow(2).mean().sqrt()) or 1.0) if objective == "compreg" else 1.0
    if objective != "holdout" and not check:
        return Problem(X64[rows], Y64[rows] / scale, memory_budget=memory_budget), scale, rows, rows[:0]
    order = rows[torch.randperm(len(rows), generator=generator)]
    n_val = min(max(1, round(validation_fraction * len(order))), len(order) - 2)
    val, train = order[:n_val], order[n_val:]
    return Problem(X64[train], Y64[train] / scale, X64[val], Y64[val] / scale, memory_budget), scale, rows, val

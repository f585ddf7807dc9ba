"""SketchySAGA for inducing-points (Nyström) KRR: ASkotch paper Alg. 5 (after Frangella et al. 2023).

Solves the problem FALKON solves — min over α ∈ R^M of ½‖K_nM α − y‖² + (λn/2) αᵀK_MM α, i.e.
(K_nMᵀK_nM + λn K_MM) α = K_nMᵀ y (FALKON paper Eq. 8; the ASkotch paper's Eq. (4)/(5) with its
λ = ``penalty * n``) — by SAGA with a Nyström preconditioner of a subsampled Hessian. Unlike
FALKON it never forms or factorises an M×M matrix: its memory is O(M(b_g + r) + n), so M can be
far larger than a memory budget that would hold K_MM.

Finite-sum form used by Alg. 5: f(α) = (1/n) Σᵢ fᵢ(α) with fᵢ(α) = (n/2)(kᵢᵀα − yᵢ)² + (λ/2)‖α‖²_{K_MM},
kᵢ the i-th row of K_nM, so ∇fᵢ = kᵢ·n(kᵢᵀα − yᵢ) + λK_MM α and the gradient table stores the
scalars ψᵢ = n(kᵢᵀα − yᵢ) (one per sample and output).
"""

from __future__ import annotations

import math

import torch

from ..centers import center_count, select_centers
from ..full_system import evaluation_blocks
from ..linalg import residual_and_objective
from ..memory import CostModel
from ..nystrom import GET_L_ITERATIONS, NystromPreconditioner, get_L, randomized_nystrom, resolve_damping
from ..ops import KernelOperator, operator_bytes
from .base import NystromCenters, Step
from .loops import IterativeKRR
from .params import COUNT, DAMPING, EVERY, NONE, POSITIVE, default, param


#: r of the ASkotch paper's experiments ("most consistent performance", C.8); capped at M.
DEFAULT_RANK = 100
#: b_g of the paper's synthetic runs (C.2.1); B.5 recommends 2⁸–2¹⁶ depending on hardware.
DEFAULT_BATCH_SIZE = 1024


class NystromObjective:
    """Float64 evaluation of the Nyström problem (FALKON Eq. 8) without any M×M matrix.

    ``evaluate(α)`` returns the relative residual ‖Hα − K_nMᵀy‖/‖K_nMᵀy‖ with
    H = K_nMᵀK_nM + λn K_MM, and the objective ½‖K_nMα − y‖² + (λn/2)αᵀK_MMα (= ½αᵀHα − αᵀK_nMᵀy
    + ½‖y‖²). Each call costs one pass over K_nM and one over K_MM, in blocks within the budget.
    """

    def __init__(self, kernel, X, C, Y, lam_n: float, memory_budget: int):
        self.kernel, self.lam_n, self.memory_budget = kernel, lam_n, memory_budget
        self.X64, self.C64, self.Y64 = X.to(torch.float64), C.to(torch.float64), Y.to(torch.float64)
        self._rhs = None

    def _operators(self):
        k = self.Y64.shape[1]
        return (
            KernelOperator(self.kernel, self.X64, self.C64, memory_budget=self.memory_budget, n_rhs=k),
            KernelOperator(self.kernel, self.C64, self.C64, memory_budget=self.memory_budget, n_rhs=k),
        )

    def evaluate(self, alpha: torch.Tensor) -> tuple[float, float]:
        a = alpha.to(torch.float64)
        op_nm, op_mm = self._operators()
        if self._rhs is None:
            self._rhs = op_nm.rmatvec(self.Y64)
        H_a = op_nm.fused(a).add_(op_mm.matvec(a), alpha=self.lam_n)
        return residual_and_objective(H_a, a, self._rhs, 0.5 * float((self.Y64**2).sum()))


class SketchySAGA(NystromCenters, IterativeKRR):
    """SketchySAGA on inducing-points KRR (ASkotch paper Alg. 5, defaults of B.5 and C.2.1).

    Set-up: sample independent batches H₁ (|H₁| = b_H1) and H₂ (|H₂| = b_H2) of the data;
    P = Nyström((n/b_H1) K_H₁Mᵀ K_H₁M, r) (Alg. 2, matrix-free); L_P = get_L((n/b_H2) K_H₂Mᵀ K_H₂M
    + λK_MM, P, ρ) (Alg. 3); η = α/L_P. Iteration: for a batch B (|B| ≈ b_g),
    ψ = n(K_BM w − y_B), aux = K_BMᵀ(ψ − Ψ_B), g = x + aux/|B| + λK_MM w, x ← x + aux/n, Ψ_B ← ψ,
    w ← w − η (P + ρI)⁻¹ g. One iteration costs O(b_g M d + M² d): K_MM w is recomputed in blocks
    (FALKON instead stores and factorises K_MM).

    Parameters
    ----------
    kernel, penalty : the kernel and λ per sample (the paper's λ is ``penalty * n``).
    M : number of centres; ``centers``: "uniform" (default; the paper samples uniformly, C.2),
        a selector name, a :class:`~krrcore.centers.CenterSelector` or an M×d array. Centre weights
        (FALKON's D) are not used: the problem is NystromKRR's.
    rank : r, preconditioner rank. None (default): min(100, M) — 100 as for ASkotch (C.8), capped at
        the number of centres so small M works; an explicit rank must be <= M. The rank used is ``rank_``.
    batch_size : b_g (default 1024 capped at n, C.2.1's synthetic setting; B.5 recommends 2⁸–2¹⁶). The batch is
        drawn with replacement and duplicates dropped, so it is uniform and each index appears once.
    precond_batch_size : b_H1 (default ⌊√n⌋, B.5). lr_batch_size : b_H2 (default ⌊n/50⌋, B.5).
    damping : ρ: "damped" (λn + Λ̂[r−1], default), "regularization" (λn) or a number. B.5 calls ρ
        "the most difficult parameter to tune" and recommends a grid search.
    lr_scale : α in η = α/L_P (default 1/2, B.5).
    maxiter : SAGA iterations. eval_every : report the float64 residual every this many iterations
        (default ⌈n/b_g⌉, one pass over the data; an evaluation costs about one pass).
    memory_budget : bytes for each kernel block (batch rows × M, K_MM row blocks, evaluation);
        default krrcore's default budget. Nothing of size M×M is ever allocated.
    """

    _SAMPLE_WEIGHT_REFUSAL = (
        "its gradient table, batch sampling and the smoothness constant L_P (Alg. 3) are "
        "those of the unweighted objective; use Falkon, NystromCG or NystromKRR, which solve "
        "the weighted Nyström system"
    )

    #: A step η = α/L_P too large for the batch's gradient noise makes SAGA diverge.
    DIVERGENCE_ADVICE = (
        "lower lr_scale (now {lr_scale!r}; the default is 0.5)",
        "raise batch_size (now {batch_size_!r})",
    )

    M: int = default(1000)
    rank: int | None = param(None, NONE | COUNT)
    batch_size: int | None = param(None, NONE | COUNT)
    precond_batch_size: int | None = param(None, NONE | COUNT)
    lr_batch_size: int | None = param(None, NONE | COUNT)
    damping: str | float = param("damped", DAMPING)
    lr_scale: float = param(0.5, POSITIVE)
    maxiter: int = default(1000)
    eval_every: int | None = param(None, EVERY)

    # -- set-up ------------------------------------------------------------------------------
    def _batch_sizes(self, n: int) -> tuple[int, int, int]:
        def size(value, default, name):
            if value is None:
                return max(1, min(default, n))
            if value > n:
                raise ValueError(f"{name} must be <= n ({n} training points), got {value}")
            return value

        return (
            size(self.batch_size, DEFAULT_BATCH_SIZE, "batch_size"),
            size(self.precond_batch_size, max(1, math.isqrt(n)), "precond_batch_size"),
            size(self.lr_batch_size, max(1, n // 50), "lr_batch_size"),
        )

    def _center_count(self, n: int) -> int:
        return center_count(self.centers, self.M, n)

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """The gradient table (n×k), batch rows of K_nM, K_MM in row blocks, the M×r preconditioner; per
        iteration b_g·M + M² kernel entries (K_MM w is recomputed), 1/pass of a float64 evaluation."""
        M, d, s, scratch = self._center_count(n), model.d, model.itemsize, model.scratch_blocks
        b_g, b_h1, b_h2 = self._batch_sizes(n)
        rank = min(DEFAULT_RANK, M) if self.rank is None else self.rank
        budget = model.scratch_bytes

        def blocks(rows, n_rhs):
            return operator_bytes(rows, M, itemsize=s, budget_bytes=budget, d=d, n_rhs=n_rhs, scratch_blocks=scratch)

        model.hold("gradient table and centres", n * k * s + M * d * s)
        model.hold("kernel blocks (batch rows, K_MM rows)", blocks(b_g, k) + blocks(M, k), "scratch")
        model.hold(f"Nyström preconditioner (4 × M×r, r={rank})", 4 * M * rank * s)
        model.hold("float64 copies of centres, targets", M * d * 8 + n * k * 8)
        evaluation_blocks(model, n, M, k, budget)
        eval_every = math.ceil(n / b_g) if self.eval_every is None else self.eval_every
        model.setup += (
            model.entry_seconds(b_h1 * M)
            + model.flop_seconds(4 * b_h1 * M * rank)
            + GET_L_ITERATIONS * model.entry_seconds(b_h2 * M + M * M)
        )
        model.iteration += (
            model.entry_seconds(b_g * M + M * M)
            + model.flop_seconds(4 * M * rank)
            + model.entry_seconds(n * M + M * M, torch.float64) / eval_every
        )
        return "lower M (each iteration recomputes K_MM w: M² kernel entries), or use dtype='float32'"

    def _setup(self, X, Y):
        lam = self._penalty()
        n = X.shape[0]
        kernel = self._kernel()
        b_g, b_h1, b_h2 = self._batch_sizes(n)
        self.batch_size_ = b_g
        rank, lr_scale = self.rank, float(self.lr_scale)
        self._set_eval_every(math.ceil(n / b_g))
        lam_n = lam * n
        generator = torch.Generator().manual_seed(self.seed_)
        cs = select_centers(self.centers, X, self.M, self.seed_, kernel=kernel)
        C = cs.centers
        M = C.shape[0]
        self.rank_ = rank = min(DEFAULT_RANK, M) if rank is None else rank
        if rank > M:
            raise ValueError(f"rank must be <= M ({M} centres), got {rank}")
        budget = self._block_budget()
        self._generator, self._lam_n = generator, lam_n
        self._Kmm = KernelOperator(kernel, C, C, memory_budget=budget, n_rhs=Y.shape[1])  # blocks, never M×M
        self._Knm = KernelOperator(kernel, X, C, memory_budget=budget, n_rhs=Y.shape[1])  # batch rows only

        # P ← Nyström((n/b_H1) K_H₁Mᵀ K_H₁M, r), matrix-free over row blocks of K_H₁M.
        H1 = X[torch.randperm(n, generator=generator, device="cpu")[:b_h1].to(X.device)]
        scale = n / b_h1
        op_h1 = KernelOperator(kernel, H1, C, memory_budget=budget, n_rhs=rank)
        trace = scale * sum(float((Kc * Kc).sum()) for _s, _e, Kc in op_h1.blocks())

        def apply_hessian_sample(omega):
            return op_h1.fused(omega).mul_(scale)

        approx = randomized_nystrom(
            apply_hessian_sample, M, rank, trace, generator=generator, dtype=X.dtype, device=X.device
        )
        self.rho_ = resolve_damping(self.damping, approx, lam_n)
        self._precond = NystromPreconditioner(approx, self.rho_)

        # L_P ← get_L((n/b_H2) K_H₂Mᵀ K_H₂M + λK_MM, P, ρ); η = α/L_P.
        H2 = X[torch.randperm(n, generator=generator, device="cpu")[:b_h2].to(X.device)]
        op_h2 = KernelOperator(kernel, H2, C, memory_budget=budget)

        def apply_lr_hessian(V):
            return op_h2.fused(V).mul_(n / b_h2).add_(self._Kmm.matvec(V), alpha=lam_n)

        self.smoothness_ = get_L(
            apply_lr_hessian, M, self._precond, generator=generator, dtype=X.dtype, device=X.device
        )
        if not self.smoothness_ > 0:
            raise ValueError("the preconditioned smoothness constant is not positive: check the kernel and penalty")
        self.lr_ = lr_scale / self.smoothness_
        self.batch_size_, self.precond_batch_size_, self.lr_batch_size_ = b_g, b_h1, b_h2
        self._objective = NystromObjective(kernel, X, C, Y, lam_n, budget)
        self.centers_ = C
        self.center_indices_ = cs.indices
        self.coef_ = torch.zeros(M, Y.shape[1], dtype=X.dtype, device=X.device)

    def _residual_dtype(self, X) -> torch.dtype:
        """The residual is always :class:`NystromObjective`'s float64 evaluation."""
        return torch.float64

    def _initial_step(self, X, Y) -> Step:
        """α = 0: relative residual 1 and objective ½‖y‖²."""
        return Step(residual=1.0, objective=0.5 * float((Y.to(torch.float64) ** 2).sum()))

    # -- iterations: Alg. 5 main loop ------------------------------------------------------------
    def _steps(self, X, Y):
        n = X.shape[0]
        w = self.coef_
        table = torch.zeros_like(Y)  # Ψ: ψᵢ per sample and output
        table_mean = torch.zeros_like(w)  # x = (1/n) Σᵢ kᵢ Ψᵢ
        lam_n, lr, precond = self._lam_n, self.lr_, self._precond
        iteration = 0
        while True:
            iteration += 1
            batch = torch.unique(torch.randint(n, (self.batch_size_,), generator=self._generator, device="cpu")).to(
                X.device
            )
            aux = torch.zeros_like(w)
            for start, stop, Kc in self._Knm.blocks(rows=batch):
                rows = batch[start:stop]
                psi = (Kc @ w).sub_(Y[rows]).mul_(n)
                aux.addmm_(Kc.T, psi - table[rows])
                table[rows] = psi
            g = table_mean + aux / batch.numel()
            g.add_(self._Kmm.matvec(w), alpha=lam_n)
            table_mean.add_(aux, alpha=1.0 / n)
            w.sub_(precond.solve(g), alpha=lr)
            if self._report_due(iteration):
                yield Step.deferred(
                    lambda: self._objective.evaluate(w),
                    iteration=iteration,
                    extras={"data_passes": iteration * self.batch_size_ / n},
                )

"""ASkotch and Skotch: Nyström-preconditioned (accelerated) block coordinate descent for full KRR.

Rathore, Frangella, Udell (2024), "Have ASkotch". Both minimise the dual of Lemma 3.1,
d(w) = ½ wᵀ(K + λI)w − yᵀw, i.e. solve (K + λI) w = y over all n training points.

Penalty convention: krrcore's ``penalty`` is λ per sample, (K + λnI) w = y, so **the paper's λ
is ``penalty * n`` here** (e.g. its HOMO setting λ = 10⁻³ at n = 10⁵ is ``penalty=1e-8``). Every
λ in the formulas below is the paper's, i.e. λn.

Each iteration touches one block row K_bn, computed on the fly in chunks within
``memory_budget`` (O(n|b|d) flops, never the n×n matrix), plus a rank-r Nyström approximation of
K_bb (O(|b|²r)). Defaults and their sources:

* blocks B: the authors' code uses block size n/100 (B = 100), reduced so every block holds at
  least ``rank`` points; the paper (Sec. 3.2) says to set B by the memory available.
* rank r = 100: "most consistent performance" (C.8).
* damping ρ_b = λ + Λ̂_b[r−1] ("damped", Sec. 3.2 and B.4); "regularization" gives ρ_b = λ.
* β = 0 for ASkotch (Sec. 3.2), hence sampling exponent α = (1 − β)/2 = 1/2; Skotch α = 1/2 (B.4).
* L_Pb by get_L with 10 power iterations (B.3).
* The block preconditioner is recomputed at every iteration, as in Alg. 1/4 (O(r|b|) storage);
  ``cache_preconditioners=True`` keeps the B set-up factorisations instead (O(rn) storage).
* variant: the fresh-random-block variant of the authors' later code by default (``variant="auto"``,
  :meth:`ASkotch._resolve_variant`): it needs no strong-convexity constant, so the default never
  stores the n×n K or spends kernel passes estimating one, at any n.
* Alg. 1's strong-convexity constant μ: see :meth:`ASkotch._strong_convexity` — Alg. 1 prints
  μ = λ, which is too large once blocks are preconditioned (Lemma D.2 needs μ_P); with
  ``variant="alg1"`` the default is a lower bound on μ_P from λ_min(K + λI), estimated by Lanczos
  when K fits the storage budget.
* Preconditioning a *fixed* partition (Alg. 1, B ≥ 2) speeds the early and middle phase but not
  the asymptotic rate: Theorem 5.1's Σ_b √L_Pb / √μ_P is no better than NU_ACDM's
  Σ_b √L_b / √λ_min(K + λI), because the cross-block cancellation that makes μ_P small costs what
  the preconditioner gains in L_Pb. The fresh-block variant keeps the gain all the way; the
  measured iteration counts are in docs/measurements.md (``benchmarks.bench_askotch_ablation``).
"""

from __future__ import annotations

import math

import torch

from .._validation import check_int
from ..full_system import RESIDUAL_MODES, FullKernelSystem, evaluation_blocks, resolve_kernel_storage
from ..linalg import lanczos_ritz_values
from ..memory import CostModel
from ..nystrom import GET_L_ITERATIONS, NystromPreconditioner, get_L, randomized_nystrom, resolve_damping
from ..ops import operator_bytes
from .base import Step
from .loops import IterativeKRR
from .params import BOOLEAN, COUNT, DAMPING, EVERY, NONE, POSITIVE, UNIT_INTERVAL, Options, default, param

#: The authors' default block size is n/100 (field notes: "block size n/100").
DEFAULT_BLOCKS = 100
PRECONDITIONERS = ("nystrom", None)
VARIANTS = ("auto", "alg1", "fresh_blocks")
MU_RULES = ("auto", "estimate", "bound", "lambda")
#: Lanczos steps for λ_min(K + λI) in μ "estimate" (20 steps overshot 2.8× on an ill-conditioned problem).
MU_LANCZOS_STEPS = 40


def random_partition(n: int, blocks: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Alg. 1/4 line 1: a random partition of [n] into ``blocks`` parts of sizes ⌊n/B⌋ or ⌈n/B⌉."""
    perm = torch.randperm(n, generator=generator, device="cpu")
    sizes = [n // blocks + (1 if i < n % blocks else 0) for i in range(blocks)]
    return list(torch.split(perm, sizes))


class _BlockCoordinateKRR(IterativeKRR):
    """Shared machinery of Alg. 1 (ASkotch) and Alg. 4 (Skotch): partition, block preconditioners,
    preconditioned smoothness constants, sampling probabilities, block gradients, evaluation."""

    _SAMPLE_WEIGHT_REFUSAL = (
        "its block preconditioners, smoothness constants and sampling probabilities are "
        "built from the blocks of K + λnI, not of the weighted system W^½ K W^½ + λnI; "
        "use NystromPCG, CG or ExactKRR (the full system, weighted) or Falkon (Nyström)"
    )

    blocks: int | None = param(None, NONE | COUNT)
    rank: int = param(100, COUNT)
    damping: str | float = param("damped", DAMPING)
    preconditioner: str | None = param("nystrom", Options(*PRECONDITIONERS))
    cache_preconditioners: bool = param(False, BOOLEAN)
    maxiter: int = default(1000)
    eval_every: int | None = param(None, EVERY)
    residual: str = param("float64", Options(*RESIDUAL_MODES))

    # -- parameter resolution ----------------------------------------------------------------
    def check_sizes(self, n: int) -> tuple[int, int]:
        """(B, r) after checks against ``n`` training points: B <= n and, with preconditioning,
        r <= the smallest block size. Raises ``ValueError`` before any work, so a front end can
        refuse a configuration before it runs."""
        precondition = self.preconditioner == "nystrom"
        rank = check_int(self.rank, "rank") if precondition else 0
        if self.blocks is None:
            blocks = min(DEFAULT_BLOCKS, n)
            if precondition:
                blocks = max(1, min(blocks, n // rank))
        else:
            blocks = check_int(self.blocks, "blocks")
        if blocks > n:
            raise ValueError(f"blocks must be <= n (n_samples={n} training points), got {blocks}")
        if precondition and rank > n // blocks:
            raise ValueError(
                f"rank must be <= the block size: {blocks} blocks of {n} points hold at least {n // blocks} "
                f"points each, but rank={rank}; lower rank or use fewer blocks"
            )
        return blocks, rank

    def _sampling_exponent(self) -> float:
        raise NotImplementedError

    def _resolve_variant(self, n: int) -> str:
        """ "alg1": a fixed partition (Skotch is Alg. 4); ASkotch chooses by its ``variant``."""
        return "alg1"

    # -- resources -----------------------------------------------------------------------------
    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """Iterates (O(nk)), one block row of K in chunks, K_bb (dense when it fits the scratch budget,
        as :meth:`FullKernelSystem.principal_block` decides) and its rank-r Nyström factors; per
        iteration a block row (|b|·n kernel entries), the block's preconditioner (a sketch of K_bb)
        unless cached, and 1/B of a float64 evaluation; the set-up makes every block's
        preconditioner and L_P."""
        blocks, rank = self.check_sizes(n)
        s, d, scratch, budget = model.itemsize, model.d, model.scratch_blocks, model.scratch_bytes
        size = -(-n // blocks)
        model.hold("iterates and targets (n×k each)", 4 * n * k * s + n * k * 8)
        model.hold(
            "block-row kernel chunks",
            operator_bytes(size, n, itemsize=s, budget_bytes=budget, d=d, n_rhs=k, scratch_blocks=scratch),
            "scratch",
        )
        dense_block = size * size * s * (1 + scratch) <= budget
        if dense_block:
            model.hold(f"K_bb ({size:,}×{size:,})", size * size * s * (1 + scratch), "scratch")
            block_product = model.flop_seconds(2 * size * size)
        else:
            model.hold(
                "K_bb blocks",
                operator_bytes(
                    size, size, itemsize=s, budget_bytes=budget, d=d, n_rhs=max(rank, 1), scratch_blocks=scratch
                ),
                "scratch",
            )
            block_product = model.entry_seconds(size * size)
        sketch = 0.0
        if rank:
            model.hold(f"block Nyström factors (4 × |b|×r, r={rank})", 4 * size * rank * s)
            sketch = (
                (model.entry_seconds(size * size) if dense_block else 0.0)
                + block_product
                + model.flop_seconds(2 * size * size * rank + 4 * size * rank * rank)
            )
            if self.cache_preconditioners:
                model.hold("cached block preconditioners (n×r)", n * rank * s)
        smoothness = GET_L_ITERATIONS * block_product
        evaluation_blocks(model, n, n, k, budget)
        evaluation = model.entry_seconds(n * n, torch.float64) if self.residual == "float64" else 0.0
        eval_every = blocks if self.eval_every is None else self.eval_every
        model.iteration += model.entry_seconds(size * n) + evaluation / eval_every
        if self._resolve_variant(n) == "fresh_blocks":
            model.iteration += sketch + smoothness
        else:
            model.setup += blocks * (sketch + smoothness)
            if not self.cache_preconditioners:
                model.iteration += sketch
            self._estimate_mu(model, n)
        return f"use more blocks (now {blocks}), a smaller rank (now {rank}), or dtype='float32'"

    def _estimate_mu(self, model: CostModel, n: int) -> None:
        pass

    # -- per-block pieces ----------------------------------------------------------------------
    def _block_preconditioner(self, idx: torch.Tensor):
        """(preconditioner or None, apply_H) for block b: P_b = Nyström(K_bb, r) (Alg. 2),
        ρ_b from ``damping``, and H_b = K_bb + λI."""
        system, lam_n = self._system, self._system.lam_n
        apply_Kbb, trace = system.principal_block(idx)

        def apply_H(V):
            return apply_Kbb(V).add_(V, alpha=lam_n)

        if not self._precondition:
            return None, apply_H
        X = system.X
        approx = randomized_nystrom(
            apply_Kbb, idx.numel(), self.rank_, trace, generator=self._generator, dtype=X.dtype, device=X.device
        )
        return NystromPreconditioner(approx, resolve_damping(self.damping, approx, lam_n)), apply_H

    def _smoothness(self, precond, apply_H, size: int) -> float:
        """L_Pb = get_L(K_bb + λI, P_b, ρ_b) (Alg. 3, 10 power iterations)."""
        X = self._system.X
        return get_L(apply_H, size, precond, generator=self._generator, dtype=X.dtype, device=X.device)

    def _block_gradient(self, idx: torch.Tensor, W: torch.Tensor, inverse_probability: float) -> torch.Tensor:
        """∇_b d(W) = K_bn W + λ W_b − y_b, every term at the same point W.

        Also accumulates ‖∇_b d‖²/p_b, an unbiased estimate of ‖∇d(W)‖² = ‖(K + λI)W − y‖², for
        ``residual="estimate"``.
        """
        g = self._system.rows_matvec(idx, W)
        g.add_(W[idx], alpha=self._system.lam_n)
        g.sub_(self._Y[idx])
        self._gradient_sq_sum += inverse_probability * float((g * g).sum())
        self._gradient_count += 1
        return g

    def _initial_step(self, X, Y) -> Step:
        """w = 0: relative residual 1 and dual objective d(0) = 0."""
        return Step(residual=1.0, objective=0.0)

    def _evaluation_step(self, W: torch.Tensor, iteration: int) -> Step:
        """The record's residual: exact in float64 (O(n²d), timed as evaluation), or the free
        block-gradient estimate averaged over the iterations since the last record."""
        extras = {"data_passes": iteration / self.n_blocks_}
        if self.residual == "float64":
            return Step.deferred(lambda: self._system.evaluate(W, self._Y64), iteration=iteration, extras=extras)
        estimate = math.sqrt(self._gradient_sq_sum / max(self._gradient_count, 1)) / self._y_norm
        self._gradient_sq_sum, self._gradient_count = 0.0, 0
        return Step(
            residual=estimate,
            iteration=iteration,
            extras={**extras, "residual_kind": "block-gradient estimate at the gradient points"},
        )

    # -- set-up: Alg. 1/4 lines 1–5 ------------------------------------------------------------
    def _setup(self, X, Y):
        lam = self._penalty()
        n = X.shape[0]
        self._precondition = self.preconditioner == "nystrom"
        variant = self._resolve_variant(n)
        if variant == "fresh_blocks" and self.cache_preconditioners:
            raise ValueError(
                "cache_preconditioners applies to variant='alg1' only: "
                "'fresh_blocks' draws a new block (and preconditioner) every iteration"
            )
        self.n_blocks_, self.rank_ = self.check_sizes(n)
        self._set_eval_every(self.n_blocks_)
        self._gradient_sq_sum, self._gradient_count = 0.0, 0
        self._generator = torch.Generator().manual_seed(self.seed_)
        self._system = FullKernelSystem(
            self._kernel(), X, lam * n, storage="on_the_fly", memory_budget=self.memory_budget
        )
        self._Y, self._Y64 = Y, Y.to(torch.float64)
        self._y_norm = float(torch.linalg.norm(self._Y64))
        self._variant = variant
        self.centers_ = X
        self.coef_ = torch.zeros_like(Y)
        if variant == "alg1":
            self._setup_partition(n)
        else:
            self._setup_fresh_blocks(n)

    def _setup_partition(self, n: int):
        """Fixed random partition; per block P_b, ρ_b, L_Pb; probabilities p_b ∝ L_Pb^α."""
        self.block_indices_ = random_partition(n, self.n_blocks_, self._generator)
        preconds, smoothness, top, rho = [], [], [], []
        for idx in self.block_indices_:
            precond, apply_H = self._block_preconditioner(idx)
            smoothness.append(self._smoothness(precond, apply_H, idx.numel()))
            preconds.append(precond if self.cache_preconditioners else None)
            top.append(1.0 if precond is None else precond.largest_eigval)
            rho.append(1.0 if precond is None else precond.rho)
        self.block_preconditioners_ = preconds
        self._precond_top, self._precond_rho = torch.tensor(top, device="cpu"), torch.tensor(rho, device="cpu")
        L = torch.tensor(smoothness, dtype=torch.float64, device="cpu")
        if not bool((L > 0).all()):
            raise ValueError("a block's smoothness constant is not positive: check the kernel and penalty")
        self.block_smoothness_ = L
        weights = L ** self._sampling_exponent()
        self._S_alpha = float(weights.sum())
        self.block_probabilities_ = weights / self._S_alpha

    def _setup_fresh_blocks(self, n: int):
        raise ValueError("variant='fresh_blocks' is available for ASkotch only")

    def _sample_block(self) -> tuple[int, torch.Tensor]:
        b = int(torch.multinomial(self.block_probabilities_, 1, generator=self._generator))
        return b, self.block_indices_[b].to(self._system.X.device)

    def _preconditioned_direction(self, b: int, idx: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """v_b = (P_b + ρ_b I)⁻¹ ∇_b d(W), with P_b recomputed (Alg. 1/4) unless cached."""
        g = self._block_gradient(idx, W, 1.0 / float(self.block_probabilities_[b]))
        if not self._precondition:
            return g
        precond = self.block_preconditioners_[b]
        if precond is None:
            precond, _ = self._block_preconditioner(idx)
        return precond.solve(g)


class Skotch(_BlockCoordinateKRR):
    """Skotch (ASkotch paper Alg. 4): Nyström-preconditioned randomized block coordinate descent.

    Per iteration: sample block b with probability ∝ L_Pb^α, v_b = (P_b + ρ_bI)⁻¹(K_bn w + λw_b − y_b),
    w_b ← w_b − v_b / L_Pb. Parameters as :class:`ASkotch`, with ``alpha`` (sampling exponent,
    default 1/2, B.4) in place of ``beta``/``mu``; ``preconditioner=None`` gives plain RBCD with
    L_b = λ₁(K_bb + λI).
    """

    alpha: float = param(0.5, UNIT_INTERVAL)

    def _sampling_exponent(self) -> float:
        return float(self.alpha)

    def _steps(self, X, Y):
        W, L = self.coef_, self.block_smoothness_
        iteration = 0
        while True:
            iteration += 1
            b, idx = self._sample_block()
            v = self._preconditioned_direction(b, idx, W)
            W[idx] -= v / float(L[b])
            if self._report_due(iteration):
                yield self._evaluation_step(W, iteration)


class ASkotch(_BlockCoordinateKRR):
    """ASkotch (ASkotch paper Alg. 1): Nyström-preconditioned, NU_ACDM-accelerated block coordinate
    descent on (K + λnI) w = y.

    Per iteration, with λ the paper's ridge (= ``penalty * n``), μ the strong-convexity constant
    (``mu``), S_α = Σ_b L_Pb^α, p_b = L_Pb^α/S_α, τ = 2/(1 + √(4S_α²/μ + 1)), γ = 1/(τS_α²):

    * v_b = (P_b + ρ_bI)⁻¹(K_bn w + λw_b − y_b)                 (gradient at the coupled point w)
    * x⁺ = w − U_b v_b / L_Pb                                   (NU_ACDM's gradient step from w)
    * z⁺ = (z + γμw)/(1 + γμ);  z⁺_b −= γ v_b / ((1 + γμ) p_b L_Pb^β)
    * w⁺ = τ z⁺ + (1 − τ) x⁺;  the model is x (Alg. 1 returns x^T).

    Alg. 1 writes the x-step as "x_b ← x_b − v_b/L_Pb"; as in NU_ACDM (Allen-Zhu et al. 2016) and
    the authors' code, it starts from the coupled point w.

    Parameters
    ----------
    kernel, penalty : the kernel and λ of (K + λnI) (per sample; the paper's λ is ``penalty * n``).
    blocks : B, number of blocks (default: n/100-sized blocks, at least ``rank`` points each).
    rank : r, Nyström rank per block (default 100). Must not exceed the block size.
    beta : acceleration parameter β ∈ [0, 1] (default 0, Sec. 3.2); sampling exponent α = (1−β)/2.
    mu : strong-convexity constant of Alg. 1 (see :meth:`_strong_convexity`): "auto" (default:
        "bound" when ``variant="auto"`` chose Alg. 1; with ``variant="alg1"``, "estimate" when K
        fits the storage budget, else "bound"), "estimate"
        (a lower bound on μ_P from a Lanczos estimate of λ_min(K + λnI), 40 products with K at
        set-up), "bound" (the same bound from λn ≤ λ_min, free, often far too small), "lambda"
        (Alg. 1 as printed, μ = λn; stalls when μ_P ≪ λn) or a positive number. Used value: ``mu_``.
    damping : "damped" (ρ_b = λ + Λ̂_b[r−1], default), "regularization" (ρ_b = λ) or a number.
    preconditioner : "nystrom" (default) or None — without it ASkotch is NU_ACDM (ablation C.6).
    variant : "auto" (default): "fresh_blocks" when λn < n/|b| (its momentum needs it), else
        "alg1" — see :meth:`_resolve_variant`; neither stores K. "alg1": Alg. 1, a fixed random
        partition. "fresh_blocks": the authors' later code —
        a fresh uniformly random block of n // blocks points each iteration, its own Nyström
        preconditioner and L_P, and Nesterov parameters μ = λ, ν = n/|b|, β' = 1 − √(μ/ν),
        γ' = 1/√(μν), α' = 1/(1 + γ'ν). Unlike that code, the whole block gradient (ridge term
        included) is evaluated at the same extrapolated point. ``mu`` and ``beta`` do not apply.
    cache_preconditioners : keep the set-up preconditioners (O(rn) memory) instead of recomputing;
        they are then the fitted ``block_preconditioners_`` (P_b + ρ_bI of each block of
        ``block_indices_``; None entries otherwise), which :mod:`krrcore.diagnostics` reads.
    maxiter : block iterations. eval_every : report the residual every this many iterations
        (default: B, i.e. once per pass over the data — one float64 evaluation costs about B iterations).
    residual : "float64" (default): the exact relative residual ‖(K+λnI)x − y‖/‖y‖ in float64, timed
        as evaluation; "estimate": free, √(mean of ‖∇_b d‖²/p_b)/‖y‖ over the iterations since the last
        record — unbiased for the squared residual at the points where block gradients were taken
        (the coupled/extrapolated points, not the output x); no objective is reported then.
    memory_budget : bytes for kernel scratch per product and for K when μ's set-up stores it;
        default: krrcore's scratch and storage budgets (:mod:`krrcore.memory`).
    """

    beta: float = param(0.0, UNIT_INTERVAL)
    mu: str | float = param("auto", Options(*MU_RULES) | POSITIVE)
    variant: str = param("auto", Options(*VARIANTS))

    def _resolve_variant(self, n: int) -> str:
        """ "alg1" or "fresh_blocks" for n points (``variant``).

        "auto": the fresh-block variant whenever its momentum is defined (λn < ν = n/|b|): it needs
        no strong-convexity estimate, hence never the n×n K, and converged fastest on every problem
        measured (benchmarks.bench_askotch_default, bench_askotch_ablation). Otherwise (a ridge so
        large that λn ≥ n/|b|, or ``cache_preconditioners``) Alg. 1 with μ from the bound λn ≤
        λ_min(K + λnI), nearly tight when the ridge dominates K's small eigenvalues.
        """
        if self.variant != "auto":
            return self.variant
        blocks = self.check_sizes(n)[0]
        fits_momentum = self._penalty() * n < n / (n // blocks)
        return "fresh_blocks" if fits_momentum and not self.cache_preconditioners else "alg1"

    def _sampling_exponent(self) -> float:
        return (1.0 - float(self.beta)) / 2.0

    def _mu_rule(self, n: int, itemsize: int) -> str:
        """How μ is obtained: "value", "lambda", "bound" or "estimate" ("auto" resolved for this n)."""
        mu = self.mu
        if not isinstance(mu, str):
            return "value"
        if mu != "auto":
            return mu
        if self.variant == "auto":  # the default path never stores K: μ from the free bound λn ≤ λ_min
            return "bound"
        return "estimate" if self._kernel_fits_budget(n, itemsize) else "bound"

    def _kernel_fits_budget(self, n: int, itemsize: int) -> bool:
        """Whether the n×n kernel matrix fits ``memory_budget`` (it is then stored for μ's set-up)."""
        return resolve_kernel_storage("auto", n, itemsize, self.memory_budget, self._device()) == "stored"

    def _estimate_mu(self, model: CostModel, n: int) -> None:
        """μ "estimate": 40 Lanczos products with K, stored for them when it fits the budget."""
        if self._mu_rule(n, model.itemsize) != "estimate":
            return
        if self._kernel_fits_budget(n, model.itemsize):
            model.hold(f"kernel matrix K for μ ({n:,}×{n:,})", n * n * model.itemsize)
            model.setup += model.entry_seconds(n * n) + MU_LANCZOS_STEPS * model.stream_seconds(n * n * model.itemsize)
        else:
            model.setup += MU_LANCZOS_STEPS * model.entry_seconds(n * n)

    def _strong_convexity(self, rule: str) -> float:
        """μ used in τ, γ and the z-update of Alg. 1 (parameter ``mu``, resolved to ``rule``).

        Lemma D.2 sets τ from μ_Pβ, the strong convexity of d in the norm
        ‖v‖²_Pβ = Σ_b L_Pb^β ‖v_b‖²_{P_b+ρ_bI} (App. D.1). Alg. 1 prints μ = λ: that is a lower bound
        on μ_Pβ only without preconditioning and for β = 0. With a fixed partition into B ≥ 2
        preconditioned blocks μ_Pβ usually sits far below λ — the blocks' top eigenvectors
        (restrictions of the same smooth functions) cancel in K, giving B − 1 eigenvalues near
        λ_min(K + λI)/λ₁(K_bb) — and μ = λ then stalls (figures: docs/measurements.md). Every rule but
        "lambda" and a number is the lower bound

            μ_Pβ ≥ f / max_b λ₁(P_b + ρ_bI) / max_b L_Pb^β    for any f ≤ λ_min(K + λI),

        (from vᵀ(K + λI)v ≥ f‖v‖² and vᵀP_βv ≤ max_b L_Pb^β λ₁(P_b + ρ_bI)‖v‖²), with two sharper
        cases: no preconditioner, μ = f; one block, μ = f/(f + max(ρ − λ, 0)) (Nyström gives P ⪯ K,
        so P + ρI ⪯ K + ρI ⪯ (1 + (ρ − λ)/f)(K + λI)). The rules differ in f:

        * "bound": f = λ, free; far below μ_P at small λ with a rough kernel, where λ_min(K + λI) ≫ λ;
        * "estimate": f = the smallest Ritz value after 40 Lanczos steps on K + λI (at least λ), one
          product with K each — K is stored for the set-up if it fits the memory budget, else each
          step is a data pass. Ritz values approach λ_min from above, so f can exceed it; the
          bound's slack absorbed that in every case measured (docs/measurements.md);
        * "auto" (default): "estimate" when K fits the memory budget, else "bound";
        * "lambda": Alg. 1 as printed; a positive number is used as given.
        """
        lam = self._system.lam_n
        if rule == "value":
            return float(self.mu)
        if rule == "lambda":
            return lam
        floor = max(lam, self._smallest_eigenvalue()) if rule == "estimate" else lam
        if not self._precondition:
            mu = floor
        elif self.n_blocks_ == 1:
            mu = floor / (floor + max(float(self._precond_rho[0]) - lam, 0.0))
        else:
            mu = floor / float(self._precond_top.max())
        return mu / float((self.block_smoothness_ ** float(self.beta)).max())

    def _smallest_eigenvalue(self) -> float:
        """λ_min(K + λI) estimated by Lanczos (from above); K stored for it only if it fits the budget."""
        system = self._system
        if self._kernel_fits_budget(system.n, system.X.element_size()):
            system = FullKernelSystem(
                system.kernel, system.X, system.lam_n, storage="stored", memory_budget=system.memory_budget
            )
        ritz = lanczos_ritz_values(
            system.matvec,
            system.n,
            steps=MU_LANCZOS_STEPS,
            dtype=system.X.dtype,
            device=system.X.device,
            seed=self.seed_,
        )
        return float(ritz[0])

    def _setup_partition(self, n: int):
        rule = self._mu_rule(n, self._system.X.element_size())  # validates ``mu`` before the per-block set-up
        super()._setup_partition(n)
        self.mu_ = self._strong_convexity(rule)
        if not (0.0 < self.mu_ < math.inf) or not math.isfinite(self._S_alpha):
            raise ValueError(
                f"{type(self).__name__}: the strong-convexity estimate μ = {self.mu_:.3g} (with "
                f"S_α = {self._S_alpha:.3g}) is out of range for penalty={self.penalty!r}: the "
                f"penalty is extreme against the kernel; use a penalty nearer 1e-6 to 1e-2, or mu="
            )
        self.tau_ = 2.0 / (1.0 + math.sqrt(4.0 * self._S_alpha**2 / self.mu_ + 1.0))
        self.gamma_ = 1.0 / (self.tau_ * self._S_alpha**2)

    def _setup_fresh_blocks(self, n: int):
        self._mu_rule(n, self._system.X.element_size())  # a bad ``mu`` is named even where unused
        self.block_size_ = n // self.n_blocks_
        mu, nu = self._system.lam_n, n / self.block_size_
        if mu >= nu:
            raise ValueError(
                f"variant='fresh_blocks' needs μ = λn < ν = n/|b| (momentum 1 − √(μ/ν) must be positive); "
                f"here λn = {mu:.3g} and n/|b| = {nu:.3g}: lower penalty or use variant='alg1'"
            )
        self._momentum = 1.0 - math.sqrt(mu / nu)
        self._gamma = 1.0 / math.sqrt(mu * nu)
        self._mix = 1.0 / (1.0 + self._gamma * nu)

    def _steps(self, X, Y):
        return self._steps_alg1() if self._variant == "alg1" else self._steps_fresh_blocks()

    def _steps_alg1(self):
        x = self.coef_  # Alg. 1's output sequence x^i
        w, z = x.clone(), x.clone()  # coupled point w^i and mirror sequence z^i
        L, p, beta = self.block_smoothness_, self.block_probabilities_, float(self.beta)
        mu, tau, gamma = self.mu_, self.tau_, self.gamma_
        shrink = 1.0 / (1.0 + gamma * mu)
        iteration = 0
        while True:
            iteration += 1
            b, idx = self._sample_block()
            v = self._preconditioned_direction(b, idx, w)
            Lb = float(L[b])
            x.copy_(w)
            x[idx] -= v / Lb
            z.mul_(shrink).add_(w, alpha=gamma * mu * shrink)
            z[idx] -= (shrink * gamma / (float(p[b]) * Lb**beta)) * v
            w.copy_(x).mul_(1.0 - tau).add_(z, alpha=tau)
            if self._report_due(iteration):
                yield self._evaluation_step(x, iteration)

    def _steps_fresh_blocks(self):
        w = self.coef_  # the model (the later code's "w")
        y, v = w.clone(), w.clone()  # extrapolated point and momentum sequence
        n, size = self._system.n, self.block_size_
        iteration = 0
        while True:
            iteration += 1
            idx = torch.randperm(n, generator=self._generator, device="cpu")[:size].to(w.device)
            precond, apply_H = self._block_preconditioner(idx)
            step = 1.0 / self._smoothness(precond, apply_H, size)
            g = self._block_gradient(idx, y, n / size)  # kernel and ridge terms both at y
            d = precond.solve(g) if precond is not None else g
            w.copy_(y)
            w[idx] -= step * d
            v.mul_(self._momentum).add_(y, alpha=1.0 - self._momentum)
            v[idx] -= (step * self._gamma) * d
            y.copy_(v).mul_(self._mix).add_(w, alpha=1.0 - self._mix)
            if self._report_due(iteration):
                yield self._evaluation_step(w, iteration)

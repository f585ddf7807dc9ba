"""Conjugate gradient on the full KRR system (K + λnI) w = y, with or without a Nyström preconditioner.

The system and its float64 evaluation are :class:`~krrcore.full_system.FullKernelSystem`; the CG
iteration is :func:`krrcore.cg.conjugate_gradient`.

Penalty convention: krrcore's ``penalty`` λ is per sample, so the ASkotch paper's λ (its Eq. 3,
(K + λI) w = y) is ``penalty * n`` here.
"""

from __future__ import annotations

import torch

from .._validation import check_int
from ..cg import CGState, conjugate_gradient
from ..full_system import KERNEL_STORAGE, RESIDUAL_MODES, FullKernelSystem, resolve_kernel_storage
from ..nystrom import NystromPreconditioner, randomized_nystrom, resolve_damping
from ..memory import CostModel
from ..rows import rows_of
from .base import Step
from .loops import IterativeKRR
from .params import COUNT, DAMPING, EVERY, Options, param


class _FullSystemCG(IterativeKRR):
    """Shared (preconditioned) conjugate gradient on (K + λnI) W = Y, one column per output.

    Each iteration is one product with K + λnI: O(n²) with K stored, O(n²d) on the fly.
    ``coef_`` is W; a record every ``eval_every`` iterations reports the float64 relative residual
    (``residual="float64"``, evaluation time) or CG's recursive one (``"estimate"``, which drifts
    from the truth in float32).

    ``sample_weight`` (W, mean 1): CG solves the symmetric weighted system
    (W^½ K W^½ + λnI) c̃ = W^½ y and ``coef_`` = W^½ c̃ ((W K + λnI) c = W y, as ExactKRR); the
    residuals reported are that system's, NystromPCG's sketch is of W^½ K W^½.
    """

    kernel_storage: str = param("auto", Options(*KERNEL_STORAGE))
    eval_every: int | None = param(None, EVERY)
    residual: str = param("float64", Options(*RESIDUAL_MODES))

    def _preconditioner(self, system: FullKernelSystem, generator: torch.Generator):
        return None

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """K stored or its blocks, 5 CG vectors of n×k, the float64 evaluation every ``eval_every``."""
        storage = resolve_kernel_storage(self.kernel_storage, n, model.itemsize, self.memory_budget, self._device())
        eval_every = 1 if self.eval_every is None else self.eval_every
        product, evaluation = FullKernelSystem.estimate(
            model, n, k, storage=storage, float64_eval=self.residual == "float64"
        )
        self._hold_model(model, n, k)
        model.iteration += product + evaluation / eval_every
        model.setup += self._preconditioner_seconds(model, n, product)
        return (
            "subsample, use dtype='float32', or use ASkotch, which touches one block row of K per step"
            if storage == "stored"
            else "subsample, or use Falkon (Nyström) or ASkotch"
        )

    def _hold_model(self, model: CostModel, n: int, k: int) -> None:
        """CG's 5 vectors of n×k and the preconditioner's factors (on the client of a sharded fit)."""
        model.hold("CG vectors (n×k each)", 5 * n * k * model.itemsize)

    def _preconditioner_seconds(self, model: CostModel, n: int, product_seconds: float) -> float:
        """Seconds of the preconditioner's set-up (none without one)."""
        return 0.0

    _sharded_kind = "full"

    def _setup(self, X, Y):
        lam = self._penalty()
        n = X.shape[0]
        self._set_eval_every(1)
        generator = torch.Generator().manual_seed(self.seed_)
        self._system = rows_of(X).full_system(
            self._kernel(), X, lam * n, kernel_storage=self.kernel_storage, memory_budget=self.memory_budget
        )
        self.kernel_storage_ = self._system.storage
        if self._weights is not None:
            self._system.weigh(self._weights)
        self._precond = self._preconditioner(self._system, generator)
        # CG's vectors are n-long and live here; targets kept elsewhere are gathered once (O(n·k)).
        self._Y = rows_of(Y).gather(Y)
        self._root = None if self._weights is None else self._weights.sqrt().to(self._Y.dtype)
        if self._root is not None:
            self._Y = self._Y * self._root
        self._Y64 = self._Y.to(torch.float64)
        self.centers_ = X
        self.coef_ = torch.zeros_like(self._Y)

    def _steps(self, X, Y):
        precond = self._precond.solve if self._precond is not None else None
        Y = self._Y
        for state in conjugate_gradient(self._system.matvec, Y, preconditioner=precond):
            # One tensor, updated in place by CG; weighted: c = W^½ c̃.
            self.coef_ = state.x if self._root is None else state.x * self._root
            if state.converged or self._report_due(state.iteration):
                yield self._record(state, Y)

    def _record(self, state: CGState, Y) -> Step:
        W = state.x
        if self.residual == "float64":
            return Step.deferred(lambda: self._system.evaluate(W, self._Y64), iteration=state.iteration)
        # CG's recursive residual r = y − A w in the solve dtype; d(w) = ½wᵀ(y − r) − yᵀw.
        objective = float(-0.5 * (W * (Y + state.r)).sum())
        return Step(
            residual=state.rel_residual,
            objective=objective,
            iteration=state.iteration,
            extras={"residual_kind": "CG recursive residual"},
        )

    def _initial_step(self, X, Y) -> Step:
        return Step(residual=1.0, objective=0.0)


class NystromPCG(_FullSystemCG):
    """CG on (K + λnI) w = y with a rank-r randomized Nyström preconditioner (Frangella, Tropp,
    Udell 2023; the ASkotch paper's NyströmPCG baseline, Sec. 6).

    The preconditioner is (K̂ + ρI)⁻¹ with K̂ from Alg. 2 of the ASkotch paper on K itself and
    ρ = λn + Λ̂[r−1] by default (``damping="damped"``; ``"regularization"`` gives ρ = λn), applied by
    the Cholesky-stabilised Woodbury form (B.2.1). Set-up costs one sketch KΩ (O(n²r)).

    Parameters
    ----------
    kernel, penalty : the kernel and λ of (K + λnI) (per sample; the paper's λ is ``penalty * n``).
    rank : r, Nyström sketch size (default 100, the paper's most consistent choice, C.8).
    maxiter : CG iterations. tol : stop when the float64 relative residual is <= tol.
    kernel_storage : "auto" (store K if its n² entries fit the memory budget), "stored", or
        "on_the_fly" (K recomputed blockwise at every product; O(n²d) per iteration, O(n·budget) memory).
        The choice made is ``kernel_storage_``.
    memory_budget : bytes for K (when stored) and for kernel block scratch; default: krrcore's
        storage and scratch budgets (:mod:`krrcore.memory`).
    eval_every : report the residual every this many iterations (default 1).
    residual : "float64" (default): the true relative residual recomputed in float64 (an O(n²d) kernel
        pass on the fly unless a float64 K is stored; timed as evaluation); "estimate": CG's own
        recursive residual in the solve dtype (free, drifts in float32).
    """

    rank: int = param(100, COUNT)
    damping: str | float = param("damped", DAMPING)

    def _hold_model(self, model: CostModel, n: int, k: int) -> None:
        """CG's vectors and Alg. 2's four n×r factors of K (the sketch KΩ among them)."""
        super()._hold_model(model, n, k)
        r = min(self.rank, n)
        model.hold(f"Nyström sketch (4 × n×r, r={r})", 4 * n * r * model.itemsize)

    def _preconditioner_seconds(self, model: CostModel, n: int, product_seconds: float) -> float:
        """Alg. 2 on K: the sketch KΩ (one product with r columns) and the factorisation."""
        r = min(self.rank, n)
        return product_seconds + model.flop_seconds(2 * n * n * r + 4 * n * r * r)

    def check_sizes(self, n: int) -> int:
        """The rank r after checks against ``n`` training points (r <= n); raises ``ValueError``
        before any work, so a front end can refuse a configuration before it runs."""
        rank = check_int(self.rank, "rank")
        if rank > n:
            raise ValueError(f"rank must be <= n (n_samples={n} training points), got {rank}")
        return rank

    def _preconditioner(self, system, generator):
        rank = self.check_sizes(system.n)
        X = system.X
        trace = system.kernel_trace()
        approx = randomized_nystrom(
            system.kernel_matvec, system.n, rank, trace, generator=generator, dtype=X.dtype, device=X.device
        )
        self.nystrom_eigvals_ = approx.eigvals
        self.rho_ = resolve_damping(self.damping, approx, system.lam_n)
        return NystromPreconditioner(approx, self.rho_)


class CG(_FullSystemCG):
    """Plain conjugate gradient on (K + λnI) w = y (no preconditioner); same parameters as
    :class:`NystromPCG` without ``rank``/``damping``."""

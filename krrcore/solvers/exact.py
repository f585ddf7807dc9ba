"""Direct solvers: exact KRR (Cholesky of K + λnI) and Nyström KRR (FALKON paper Eq. 8).

Both are :class:`~krrcore.solvers.loops.DirectKRR`: ``iter_fit`` yields one record whose residual is
the float64 relative residual of the system solved (one product with the matrix already formed,
timed as evaluation) and whose objective is that system's quadratic (the same measures as the
iterative solvers of the same problem: ASkotch/NystromPCG for ExactKRR, SketchySAGA for NystromKRR).
"""

from __future__ import annotations

import torch

from ..centers import center_count, select_centers
from ..linalg import jitter_cholesky
from ..memory import CostModel
from ..ops import KernelOperator, operator_bytes
from .base import NystromCenters, Step
from .loops import DirectKRR
from .uncertainty import (
    PosteriorVariance,
    hold_nystrom_posterior,
    invert_lower_in_place,
    kmm_factor_solvers,
    nystrom_factor,
)


class ExactKRR(PosteriorVariance, DirectKRR):
    """Exact kernel ridge regression: solve (K_nn + λnI) c = y by Cholesky, in float64.

    ``uncertainty=True``: ``predict(X, return_std=True)`` gives the exact Gaussian-process posterior
    of which this model is the mean — signal variance s², noise variance s²·λn, s² = σ̂²/(λn) with
    σ̂² the residual variance over n − df (:mod:`krrcore.solvers.uncertainty`); it keeps the Cholesky
    factor L (n×n float64; n³/3 more flops for df), n² flops (a triangular solve) per test point.

    ``memory_budget`` (bytes; :mod:`krrcore.memory`) bounds the two n×n float64 matrices it holds
    (K + λnI and its Cholesky factor) and prediction's kernel blocks; default: krrcore's storage and
    scratch budgets. A fit that would not fit is refused before anything is allocated with a
    :class:`~krrcore.memory.MemoryLimitError` (a :class:`~krrcore.memory.MemoryBudgetError`) saying
    how much is needed and suggesting an approximate solver.

    ``sample_weight`` (W, mean 1): weighted KRR in its symmetric form, (W^½ K W^½ + λnI) c̃ = W^½ y
    and c = W^½ c̃, which is (W K + λnI) c = W y, the stationarity condition of
    (1/n) Σ wᵢ (f(xᵢ) − yᵢ)² + λ cᵀKc; a zero weight gives its row a zero coefficient (the row is
    left out) and the matrix stays symmetric positive definite.
    """

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """K + λnI and its Cholesky factor, both n×n float64; O(n²d) kernel and n³/3 flops."""
        model.hold(f"K + λnI ({n:,}×{n:,}, float64)", n * n * 8)
        model.hold("its Cholesky factor (float64)", n * n * 8)
        if model.itemsize != 8:
            model.hold("float64 copies of X, y", n * (model.d + k) * 8)
        model.setup += model.entry_seconds(n * n, torch.float64) + model.flop_seconds(n**3 / 3, torch.float64)
        n_fit = model.largest_fitting(2 * n * n * 8, 16)
        return f"subsample to at most n={n_fit:,}, or use Falkon, NystromPCG or ASkotch, which never hold an n×n matrix"

    _POSTERIOR_KIND = "exact GP"

    def _estimate_posterior(self, model: CostModel, n: int, k: int) -> None:
        """L is kept; a copy inverted for df while K + λnI is freed (in place on the CPU, beside an
        identity elsewhere); n³/3 flops and a residual pass."""
        if model.device.type != "cpu":
            model.hold("identity and L⁻¹ (posterior set-up, float64)", 2 * n * n * 8)
        model.setup += model.flop_seconds(n**3 / 3, torch.float64) + model.entry_seconds(n * n)

    _FACTOR_IS_CHOLESKY = True

    def _posterior_factor(self, X, Y):
        """L itself (k_xᵀ(K + λnI)⁻¹k_x = ‖L⁻¹k_x‖², a triangular solve a point) and df = n − λn‖L⁻¹‖²_F
        from a copy of L inverted in place (K + λnI is freed by now: the solve's peak is not exceeded)."""
        L = self.__dict__.pop("_cholesky")
        n = X.shape[0]
        trace = float(invert_lower_in_place(L.clone()).square().sum())
        return L, n - self._penalty() * n * trace

    def _solve(self, X, Y) -> Step:
        lam = self._penalty()
        n = X.shape[0]
        X64, Y64 = X.double(), Y.double()
        A = self._kernel()(X64, X64)
        root = None if self._weights is None else self._weights.sqrt()
        if root is not None:  # W^½ K W^½, in place
            A.mul_(root).mul_(root.T)
            Y64 = Y64 * root
        A.diagonal().add_(lam * n)
        L, self.jitter_ = jitter_cholesky(A, 0.0, name="K + λnI")
        coef = torch.cholesky_solve(Y64, L)
        if self.uncertainty:
            self._cholesky = L  # the posterior's factor (krrcore.solvers.uncertainty)
        del L
        self.centers_ = X
        self.coef_ = (coef if root is None else coef * root).to(X.dtype)
        if root is None:
            return self._solved_system_step(A, Y64)  # ‖(K+λnI)c − y‖/‖y‖ and d(c) (ASkotch Lemma 3.1)
        return self._solved_system_step(A, Y64, coef=coef)


class NystromKRR(PosteriorVariance, NystromCenters, DirectKRR):
    """Nyström KRR solved directly: (K_nMᵀK_nM + λn K_MM) α = K_nMᵀ y (FALKON paper, Eq. 8); with
    ``sample_weight`` (W, mean 1) (K_nMᵀ W K_nM + λn K_MM) α = K_nMᵀ W y.

    ``uncertainty=True``: the DTC/SGPR posterior of the same centres (:mod:`krrcore.solvers.uncertainty`),
    one more pass over the data (O(nM²)) after the solve; 2M² flops per test point.

    O(nM² + M³) time, one M×M float64 system; K_nMᵀK_nM is accumulated in blocks. When the
    system is numerically singular, jitter is raised in steps and reported in ``jitter_``.
    """

    def _center_count(self, n: int) -> int:
        return center_count(self.centers, self.M, n)

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """K_nMᵀK_nM + λnK_MM and its Cholesky factor (M×M float64); one kernel pass, 2nM² + M³/3 flops."""
        M, d = self._center_count(n), model.d
        model.hold(f"K_nMᵀK_nM + λnK_MM ({M:,}×{M:,}, float64)", M * M * 8)
        model.hold("its Cholesky factor (float64)", M * M * 8)
        model.hold(
            "kernel block buffer (float64)",
            operator_bytes(
                n, M, itemsize=8, budget_bytes=model.scratch_bytes, d=d, n_rhs=k, scratch_blocks=model.scratch_blocks
            ),
            "scratch",
        )
        model.hold(
            "float64 centres" if model.itemsize == 8 else "float64 copies of X, y, centres",
            (M * d + (0 if model.itemsize == 8 else n * (d + k))) * 8,
        )
        model.setup += model.entry_seconds(n * M, torch.float64) + model.flop_seconds(
            2 * n * M * M + M**3 / 3, torch.float64
        )
        M_fit = model.largest_fitting(2 * M * M * 8, 16)
        return (
            f"lower M to at most {M_fit:,}, or use Falkon (one M×M buffer, half the memory) or SketchySAGA "
            f"(no M×M matrix)"
        )

    def _estimate_posterior(self, model: CostModel, n: int, k: int) -> None:
        hold_nystrom_posterior(model, n, self._center_count(n))

    def _posterior_factor(self, X, Y):
        solve_Ft, solve_F = kmm_factor_solvers(self._kernel(), self.centers_)
        blocks = (K for _, _, K in self.__dict__.pop("_posterior_operator").blocks())
        return nystrom_factor(blocks, solve_Ft, solve_F, self._penalty() * X.shape[0], self.centers_.shape[0])

    def _solve(self, X, Y) -> Step:
        lam = self._penalty()
        n = X.shape[0]
        cs = select_centers(self.centers, X, self.M, self.seed_, kernel=self._kernel())
        C = cs.centers
        kernel = self._kernel()
        Y64 = Y.double()
        op = KernelOperator(kernel, X.double(), C.double(), memory_budget=self.memory_budget, n_rhs=Y.shape[1])
        # One kernel pass for K_nMᵀ W K_nM and K_nMᵀ W y (W = I without sample weights).
        H, rhs = op.gram(Y64) if self._weights is None else op.gram(Y64, weights=self._weights)
        if self.uncertainty:
            self._posterior_operator = op  # its blocks, for the posterior (krrcore.solvers.uncertainty)
        H.add_(kernel(C.double(), C.double()), alpha=lam * n)
        scale = float(H.diagonal().mean())
        L, jitter = jitter_cholesky(H, 1e-14 * scale, name="K_nMᵀK_nM + λnK_MM")
        self.jitter_ = jitter
        self.centers_ = C
        self.center_indices_ = cs.indices
        self.coef_ = torch.cholesky_solve(rhs, L).to(X.dtype)
        # Objective ½αᵀHα − αᵀK_nMᵀy + ½‖y‖² = ½‖K_nMα − y‖² + (λn/2)αᵀK_MMα, as SketchySAGA reports it.
        y_sq = (Y64**2).sum() if self._weights is None else (self._weights * Y64**2).sum()
        return self._solved_system_step(H, rhs, constant=0.5 * float(y_sq))

"""Predictive uncertainty: the Gaussian-process posterior that has the KRR model as its mean.

**The mapping.** KRR solves (K + λnI) c = y with the per-sample λ of the papers. A Gaussian process
f ~ GP(0, s²k) observed with Gaussian noise of variance σ² = s²·λn has the posterior mean
s²k_xᵀ(s²K + σ²I)⁻¹y = k_xᵀ(K + λnI)⁻¹y — the KRR predictor, whatever s — and the posterior
variance (Rasmussen & Williams 2006, Eq. 2.26)

    var f(x) = s² v(x),   v(x) = k(x, x) − k_xᵀ(K + λnI)⁻¹k_x,

so with the noise variance σ² fixed (below), s² = σ²/(λn) and a new observation at x has

    var y(x) = σ² (1 + v(x)/(λn)).

**Nyström models** (NystromKRR, Falkon and the Nyström solvers of FALKON's Figure 1) are the DTC /
SGPR sparse GP on the same M centres (Quiñonero-Candela & Rasmussen 2005, DTC; Titsias 2009, whose
variational predictive has the same form): with H = K_nMᵀK_nM + λnK_MM, the matrix of FALKON's Eq. 8,
the posterior mean is k_Mᵀ H⁻¹K_nMᵀy (the Nyström KRR predictor) and

    v(x) = k(x, x) − k_Mᵀ K_MM⁻¹ k_M + λn k_Mᵀ H⁻¹ k_M.

With the M = n training points as centres, H = K(K + λnI) and v is the exact one above.

**How it is computed.** v(x) = k(x, x) − ‖Rᵀk(x)‖² with one m×m factor R, in blocks of test rows
sized by the scratch budget (:mod:`krrcore.memory`). ExactKRR: R = L⁻ᵀ for the fit's Cholesky factor
L of K + λnI, kept as L: ‖L⁻¹k(x)‖² by a triangular solve, n² flops a point (as scikit-learn's
GP); df needs ‖L⁻¹‖²_F once, from a copy of L inverted in place once K + λnI is freed (n³/3 flops,
no more memory than the solve's peak). Nyström, 2M² flops a point: with FᵀF = K_MM (Falkon: F =
T D⁻¹ from its preconditioner, TᵀT = D K_MM D + jI; the others: a Cholesky of K_MM), G =
F⁻ᵀK_nMᵀK_nM F⁻¹ = QΛQᵀ gives K_MM⁻¹ − λnH⁻¹ = RRᵀ with R = F⁻¹Q diag(√(Λ/(Λ + λn))): one pass
over the data whitened block by block (K_b F⁻¹), O(nM² + M³) in all, three M×M float64 matrices
at its peak.

**The noise level** σ² is estimated from the training residuals corrected by the model's effective
degrees of freedom (Wahba 1983): σ̂² = ‖y − ŷ‖² / (n − df − 1), df = tr(S) for the hat matrix of
y less its mean, ŷ − ȳ = S(y − ȳ): n − λn tr((K + λnI)⁻¹) = n − λn‖R‖²_F exactly, Σ Λ/(Λ + λn) ≤ M
for Nyström; the 1 is the mean (``fit_intercept``; without it n − df). No marginal likelihood is
optimised: σ and λ stay what the fit was given (tuned, for instance, by :mod:`krrcore.tuning`), and
σ̂ is the one noise level consistent with them and the data. One σ̂ per target column; the fitted
``noise_std_``, ``effective_dof_`` and ``noise_source_`` state it.

Refused, with the reason (:class:`UncertaintyError`), where it has no meaning or no affordable form:
full-KRR iterative solvers (their posterior needs a solve with K + λnI per test point), SketchySAGA
(it exists to hold no M×M matrix), classifiers and fits on rows sharded on a cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from .._validation import as_tensor, check_features
from ..linalg import jitter_cholesky
from ..memory import CostModel, scratch_budget
from ..ops import KernelOperator, block_rows_for_budget, dense_kernel, operator_bytes
from .base import KRRBase, distributed_backend
from .params import BOOLEAN, ParameterError, param
from .refusals import UncertaintyError, std_refusal

__all__ = ["Posterior", "PosteriorVariance", "UncertaintyError", "std_refusal"]


@dataclass
class Posterior:
    """What the posterior variance needs: v(x) = k(x, x) − ‖Rᵀk(x)‖² over the model's centres, the
    noise variance σ̂² of each target column (the fit's units) and λn (module docstring)."""

    factor: torch.Tensor  # R, m×m float64; or, when ``lower``, L with ‖Rᵀk‖ = ‖L⁻¹k‖
    lam_n: float
    noise_var: torch.Tensor  # (k,) float64
    effective_dof: float
    kind: str  # "exact GP" or "DTC (Nyström)"
    lower: bool = False  # factor is a lower Cholesky factor L: a triangular solve (m² flops a point)


class PosteriorVariance(KRRBase):
    """Estimators whose model is a Gaussian-process posterior mean (module docstring).

    ``uncertainty=True`` makes ``fit`` also set up the posterior (its memory and time are in
    ``memory_estimate``) and the noise estimate: ``noise_std_`` (σ̂ per target; a float for 1-D y),
    ``effective_dof_`` (tr of the hat matrix), ``noise_source_`` (how σ̂ was obtained),
    ``posterior_`` (:class:`Posterior`) and ``uncertainty_seconds_`` (its set-up time, after the fit's
    last record). Then ``predict(X, return_std=True)`` returns the mean and the standard deviation of
    a new observation at X, and :meth:`predict_std` either that or the latent function's.
    """

    uncertainty: bool = param(False, BOOLEAN)

    #: What the posterior is (stated in ``noise_source_``).
    _POSTERIOR_KIND = "DTC (Nyström)"

    _compact_attributes = KRRBase._compact_attributes + ("posterior_", "noise_std_", "effective_dof_", "noise_source_")

    def _validate_params(self) -> None:
        super()._validate_params()
        if self.uncertainty and isinstance(self, ClassifierMixin):
            raise ParameterError(f"uncertainty=True is not available: {std_refusal(self)}")

    # -- the fit ---------------------------------------------------------------------------------
    def _start_fit(self, X, y, X_val, y_val, **options):
        X, Y, recorder = super()._start_fit(X, y, X_val, y_val, **options)
        self.__dict__.pop("posterior_", None)
        if self.uncertainty and self._weights is not None:
            # The noise estimate ‖y − ŷ‖²/(n − df − 1) and df are those of the unweighted hat matrix.
            raise UncertaintyError(
                f"uncertainty=True is not available with sample_weight: {type(self).__name__}'s "
                f"posterior and its noise estimate are those of unweighted KRR. Fit without "
                f"sample_weight for intervals, or without uncertainty for the weighted model"
            )
        if self.uncertainty:
            self._fit_rows = (X, Y)
        return X, Y, recorder

    def _records(self, X, y, X_val, y_val, *, stop_event):
        """The solver's records; then, with ``uncertainty``, the posterior set-up (coef_ is still in
        the fit's scaled units here; the noise level is stated in the targets' units). Without it, the
        solver's own generator, so its warnings point where they did."""
        if not self.uncertainty:
            return super()._records(X, y, X_val, y_val, stop_event=stop_event)
        return self._records_and_posterior(X, y, X_val, y_val, stop_event=stop_event)

    def _records_and_posterior(self, X, y, X_val, y_val, *, stop_event):
        if distributed_backend(X) is not None:
            raise UncertaintyError(
                f"uncertainty=True needs the training rows in this process; {type(self).__name__} "
                f"on rows sharded on a cluster gives no posterior variance. Fit without it, or "
                f"on a subsample held here"
            )
        try:
            yield from super()._records(X, y, X_val, y_val, stop_event=stop_event)
            start = time.perf_counter()
            self._set_up_posterior(*self._fit_rows)
            self.uncertainty_seconds_ = time.perf_counter() - start
        finally:
            self.__dict__.pop("_fit_rows", None)
            self.__dict__.pop("_posterior_operator", None)

    #: Whether ``_posterior_factor`` gives a lower Cholesky factor L (solved against) instead of R.
    _FACTOR_IS_CHOLESKY = False

    def _posterior_factor(self, X, Y) -> tuple[torch.Tensor, float]:
        """(R, df) of this model (module docstring); the solver overrides it."""
        raise NotImplementedError

    def _set_up_posterior(self, X, Y) -> None:
        R, dof = self._posterior_factor(X, Y)
        n = X.shape[0]
        lam_n = self._penalty() * n
        resid = Y.double() - self._expansion(X).double()  # Y: the solver's, less intercept_
        rss = (resid**2).sum(0)
        offset = 1 if self.fit_intercept else 0  # y's mean: one more parameter fitted to the rows
        left = n - dof - offset
        if not left >= 0.5:
            raise UncertaintyError(
                f"{type(self).__name__} interpolates its training data (effective degrees of freedom {dof:.4g} of "
                f"n={n}), so the residuals leave no estimate of the noise level; raise penalty (now "
                f"{self.penalty!r}) or fit without uncertainty"
            )
        scale = self._target_scale
        noise_var = rss / left / scale**2
        self.posterior_ = Posterior(
            factor=R,
            lam_n=lam_n,
            noise_var=noise_var,
            effective_dof=dof,
            kind=self._POSTERIOR_KIND,
            lower=self._FACTOR_IS_CHOLESKY,
        )
        std = noise_var.sqrt().cpu().numpy()
        self.noise_std_ = float(std[0]) if self._y_was_1d else std
        self.effective_dof_ = dof
        mean_part = " and 1 for the mean of y" if offset else ""
        self.noise_source_ = (
            f"estimated from the training residuals: σ̂² = ‖y − ŷ‖²/(n − df{' − 1' if offset else ''}) "
            f"with n = {n:,}, df = tr(hat matrix) = {dof:.4g}{mean_part}; the GP has noise σ̂² and signal "
            f"variance σ̂²/(λn), λn = {lam_n:.4g} ({self.posterior_.kind})"
        )

    def _estimate_posterior(self, model: CostModel, n: int, k: int) -> None:
        """Memory and seconds of the posterior set-up (``uncertainty=True``); the solver overrides it."""

    # -- prediction ------------------------------------------------------------------------------
    def _check_posterior(self) -> Posterior:
        check_is_fitted(self)
        posterior = getattr(self, "posterior_", None)
        if posterior is None:
            raise UncertaintyError(
                f"{type(self).__name__} holds no posterior: it was fitted without uncertainty=True (or its record "
                f"stream was not read to the end); refit with {type(self).__name__}(..., uncertainty=True) "
                f"(memory_estimate shows what it adds)"
            )
        return posterior

    def _latent_variance(self, Xq: torch.Tensor) -> torch.Tensor:
        """v(x) for the rows of Xq (float64, clamped at 0), in blocks of test rows sized by the scratch
        budget: each row holds its m kernel values and their product with R."""
        posterior = self._check_posterior()
        R = posterior.factor
        kernel, C = self._fitted_kernel(), self.centers_.double()
        m, nq = R.shape[0], Xq.shape[0]
        out = torch.empty(nq, dtype=torch.float64, device=R.device)
        if nq == 0:
            return out
        rows = block_rows_for_budget(
            nq,
            2 * m,
            itemsize=8,
            budget_bytes=scratch_budget(self.memory_budget, R.device),
            d=Xq.shape[1],
            scratch_blocks=kernel.scratch_blocks,
        )
        for start in range(0, nq, rows):
            block = Xq[start : start + rows].double()
            Kq = dense_kernel(kernel, block, C, memory_budget=self.memory_budget)
            if posterior.lower:
                quad = torch.linalg.solve_triangular(R, Kq.T, upper=False).square_().sum(0)
            else:
                quad = (Kq @ R).square_().sum(1)
            out[start : start + rows] = (kernel.diag(block).double() - quad).clamp_(min=0.0)
        return out

    def predict_std(self, X, *, noise: bool = True):
        """Posterior standard deviation at the rows of X: of a new observation y(x) (``noise=True``:
        σ̂ √(1 + v(x)/(λn))) or of the latent function f(x) (σ̂ √(v(x)/(λn))); (n,) for 1-D targets,
        else (n, k); a torch tensor for torch input, else a numpy array. Needs ``uncertainty=True``."""
        posterior = self._check_posterior()
        Xt = as_tensor(X, "X", dtype=self.coef_.dtype, device=self.coef_.device)
        check_features(Xt, self.n_features_in_, "X", type(self).__name__)
        ratio = self._latent_variance(Xt) / posterior.lam_n
        if noise:
            ratio = ratio + 1.0
        std = (ratio.unsqueeze(1) * posterior.noise_var.unsqueeze(0)).sqrt().to(self.coef_.dtype)
        if self._y_was_1d:
            std = std[:, 0]
        return std if isinstance(X, torch.Tensor) else std.detach().cpu().numpy()

    def _predict_with_std(self, X):
        return self.predict(X), self.predict_std(X)


def nystrom_factor(blocks, solve_Ft, solve_F, lam_n: float, M: int) -> tuple[torch.Tensor, float]:
    """(R, df) of the DTC posterior: G = F⁻ᵀK_nMᵀK_nM F⁻¹ = QΛQᵀ, R = F⁻¹Q diag(√(Λ/(Λ + λn))),
    df = Σ Λ/(Λ + λn).

    ``blocks`` yields row blocks of K_nM; G is accumulated from the whitened blocks K_b F⁻¹ (as sparse-GP
    codes do: forming K_nMᵀK_nM first and whitening it after would amplify its round-off by the
    condition number of K_MM). ``solve_Ft(B)`` = F⁻ᵀB and ``solve_F(B)`` = F⁻¹B for a factor
    FᵀF = K_MM (module docstring)."""
    G = None
    for K in blocks:
        W = solve_Ft(K.double().T)  # (K_b F⁻¹)ᵀ, M×b
        G = W @ W.T if G is None else G.addmm_(W, W.T)
    if G is None:
        G = torch.zeros(M, M, dtype=torch.float64)
    G = (G + G.T).mul_(0.5)
    eigvals, Q = torch.linalg.eigh(G)
    del G
    weights = eigvals.clamp_(min=0.0) / (eigvals + lam_n)
    return solve_F(Q.mul_(weights.sqrt().unsqueeze(0))), float(weights.sum())


def float64_blocks(kernel, X: torch.Tensor, C: torch.Tensor, operator=None, memory_budget=None):
    """Row blocks of K_nM in float64: the fit's own operator's (its cached blocks reused) when it is
    float64, else evaluated afresh from float64 copies — whitening by F⁻¹ would amplify float32
    kernel rounding by K_MM's condition number."""
    if operator is None or operator.dtype != torch.float64:
        operator = KernelOperator(kernel, X.double(), C.double(), memory_budget=memory_budget)
    return (K for _, _, K in operator.blocks())


def kmm_factor_solvers(kernel, centers: torch.Tensor):
    """F⁻ᵀ and F⁻¹ for F = Lᵀ, L the lower Cholesky factor of K_MM + jI (j = 1e-13·M·max diag, raised
    if needed: FALKON's default εM): the Nyström solvers that hold no preconditioner."""
    C = centers.double()
    K = kernel(C, C)
    L, _ = jitter_cholesky(K, 1e-13 * C.shape[0] * float(K.diagonal().max()), name="K_MM")
    del K
    return (
        lambda B: torch.linalg.solve_triangular(L, B, upper=False),
        lambda B: torch.linalg.solve_triangular(L.T, B, upper=True),
    )


def invert_lower_in_place(L: torch.Tensor) -> torch.Tensor:
    """L⁻¹ for lower-triangular L, in L's own memory on the CPU (LAPACK ``trtri``, n³/3 flops); a new
    matrix on other devices."""
    if L.device.type != "cpu" or L.dtype != torch.float64 or not L.is_contiguous():
        return torch.linalg.solve_triangular(L, torch.eye(L.shape[0], dtype=L.dtype, device=L.device), upper=False)
    from ..preconditioner import _lapack

    with _lapack() as lapack:
        # The C-ordered L is, to Fortran, the upper factor Lᵀ: inverting it in place leaves L⁻¹ in L.
        _, info = lapack.dtrtri(L.numpy().T, lower=0, overwrite_c=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"the Cholesky factor is singular (LAPACK trtri info={info})")
    return L


def hold_nystrom_posterior(model: CostModel, n: int, M: int) -> None:
    """The Nyström posterior set-up in ``model``: G, its eigenvectors and R (M×M float64 each), a
    float64 whitened block beside the kernel block; seconds of the kernel pass (at most: Falkon's
    cached blocks are read, not evaluated), the whitening (2nM² flops, as K_nMᵀK_nM would cost),
    eigh and R (about 12M³) and the residual pass."""
    model.hold("posterior: whitened K_nMᵀK_nM, its eigenvectors and R (M×M float64 each)", 3 * M * M * 8)
    block = operator_bytes(n, M, itemsize=8, budget_bytes=model.scratch_bytes, d=model.d)
    model.hold("posterior whitened kernel block (float64)", block, "scratch")
    if model.itemsize != 8:  # the kernel blocks are evaluated again in float64 (float64_blocks)
        model.hold("posterior float64 kernel block and copy of X", block + n * model.d * 8, "scratch")
    model.setup += 2 * model.entry_seconds(n * M) + model.flop_seconds(2 * n * M * M + 12 * M**3, torch.float64)

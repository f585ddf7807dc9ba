"""FALKON-BLESS centre selection: Nyström centres drawn from BLESS / BLESS-R scores (FALKON Alg. 2)."""

from __future__ import annotations

import torch

from .._validation import check_int
from ..center_set import CenterSelector, CenterSet, weighted_sample
from ._inputs import _as_float64, _kernel_scale
from .bless import bless, bless_r, DEFAULT_Q
from .dictionary import _Dictionary


class BlessCenters(CenterSelector):
    """Nyström centres for FALKON from BLESS (Alg. 1) or BLESS-R (Alg. 2) leverage scores.

    ``mode="dictionary"`` (default; the BLESS paper's FALKON-BLESS, Sect. 3.1): the final dictionary
    J_H itself is the centre set, with D derived from its A weights so that (n/M) K D² K estimates
    K_nMᵀK_nM: D_jj = √(M/(n A_jj)) (uniform sampling gives D = I). J_H holds exactly M points (BLESS
    keeps its draws up to the one that brings the M-th distinct point, BLESS-R its first M accepted
    candidates), fewer only where the λ path reaches κ²/n first. No pass over all n points is
    needed: the cost is BLESS's, which stops growing with n, and the test error is the same as or
    lower than "sample"'s on clustered data with outliers (docs/measurements.md,
    ``benchmarks.bench_falkon_bless_default``).

    ``mode="sample"`` (FALKON Alg. 2, Appendix A Def. 2): score all n points with Eq. (3) on the
    BLESS dictionary, draw exactly M centres with replacement ∝ the scores
    (:func:`krrcore.centers.weighted_sample`, duplicates merged), D_jj = 1/√(n p_j count_j) —
    O(n·|J|²) on top of BLESS.

    BLESS's λ. ``penalty`` given: BLESS runs down to it. ``penalty=None`` (default): BLESS descends
    its λ path until the dictionary reaches M points and keeps M there (``target_size=M``), i.e. λ
    such that q2·d_eff(λ) ≈ M — the finest scale a budget of M centres resolves. This λ is independent
    of FALKON's λ, as in the paper's experiments (λ_bless ≫ λ_falkon); the descent stops at
    κ²/n at the latest. ``info`` holds the BLESS result (whole path), its λ and the scores.

    ``precision``: BLESS's candidate scoring (:func:`~krrcore.leverage.bless.bless`); "sample" mode
    scores the n points in float64.

    The kernel must be the solver's: pass ``kernel=`` or let the solver forward it to ``select``.
    """

    name = "bless"

    def __init__(
        self,
        penalty=None,
        variant: str = "bless",
        M=None,
        *,
        kernel=None,
        mode: str = "dictionary",
        q: float = DEFAULT_Q,
        q1: float | None = None,
        q2: float | None = None,
        lambda0=None,
        memory_budget: int | None = None,
        precision: str = "float32",
    ):
        self.penalty = penalty
        self.variant = variant
        self.M = M
        self.kernel = kernel
        self.mode = mode
        self.q = q
        self.q1 = q1
        self.q2 = q2
        self.lambda0 = lambda0
        self.memory_budget = memory_budget
        self.precision = precision

    def select(self, X, M, generator, kernel=None) -> CenterSet:
        if self.variant not in ("bless", "bless_r"):
            raise ValueError(f"variant must be 'bless' or 'bless_r', got {self.variant!r}")
        if self.mode not in ("sample", "dictionary"):
            raise ValueError(f"mode must be 'sample' or 'dictionary', got {self.mode!r}")
        kernel = self.kernel if self.kernel is not None else kernel
        if kernel is None:
            raise ValueError(
                "BlessCenters needs the kernel: pass BlessCenters(kernel=...) or a solver that "
                "forwards its kernel to select()"
            )
        M = check_int(self.M if self.M is not None else M, "M")
        n = X.shape[0]
        if M > n:
            raise ValueError(f"M={M} centres requested but the training set has only n={n} points")
        if M == n:  # every point is a centre: nothing to sample, and Nyström is exact KRR (D = I)
            idx = torch.arange(n, device=X.device)
            return CenterSet(X, idx, None, {"method": self.variant, "mode": "all points", "penalty": None})
        X64 = _as_float64(X)
        kappa2 = _kernel_scale(kernel, X64)
        penalty, target = self.penalty, None
        if penalty is None:
            penalty, target = kappa2 / n, M  # floor κ²/n: below it d_eff ≈ n, sampling is moot
        sampler = bless if self.variant == "bless" else bless_r
        result = sampler(
            X64,
            kernel,
            penalty,
            q=self.q,
            q1=self.q1,
            q2=self.q2,
            lambda0=self.lambda0,
            seed=generator,
            target_size=target,
            memory_budget=self.memory_budget,
            precision=self.precision,
        )
        info = {
            "method": self.variant,
            "mode": self.mode,
            "penalty": result.penalty,
            "bless": result,
            "path": result.path(),
        }
        if self.mode == "dictionary":
            idx = result.indices
            weights = torch.sqrt(idx.numel() / (n * result.weights))
        else:
            scores = _Dictionary(
                kernel, X64, result.indices, result.weights, result.penalty * n, self.memory_budget
            ).scores(torch.arange(n, device=X64.device))
            info["scores"] = scores
            idx, weights = weighted_sample(scores, M, generator, n)
            idx = idx.to(X.device)
        return CenterSet(X[idx], idx, weights.to(dtype=X.dtype, device=X.device), info)


class BlessRCenters(BlessCenters):
    """:class:`BlessCenters` with BLESS-R (Alg. 2) as the default variant."""

    name = "bless_r"

    def __init__(self, penalty=None, variant: str = "bless_r", M=None, **kwargs):
        super().__init__(penalty, variant, M, **kwargs)

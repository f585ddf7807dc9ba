"""Ridge leverage scores: exact ones, and approximate ones by BLESS and BLESS-R.

Reference: Rudi, Calandriello, Carratino, Rosasco, "On Fast Leverage Score Sampling and Optimal
Learning", NeurIPS 2018 (the BLESS paper). Notation follows it: ``penalty`` is λ of (K + λnI),

* ℓ(i, λ) = (K (K + λnI)⁻¹)_ii                         (Eq. 1)
* d_eff(λ) = Σ_i ℓ(i, λ),  d_∞(λ) = n·max_i ℓ(i, λ)
* ℓ̃_J(i, λ) = (K_ii − K_J,iᵀ (K_JJ + λnA)⁻¹ K_J,i)/(λn)   (Eq. 3; A diagonal, one entry per j ∈ J)

What is here:

* :func:`exact_scores`, :func:`exact_scores_path` — float64 references (a blocked Cholesky route
  for one λ, one ``eigh`` for a whole λ grid), guarded by a memory check.
* :func:`bless` (Alg. 1, sampling with replacement), :func:`bless_r` (Alg. 2, Bernoulli sampling),
  and two comparison points, :func:`recursive_rls` (Musco & Musco 2017) and :func:`uniform`; all
  return a :class:`LeverageResult` holding every level of the λ path.
* :func:`approximate_scores` — Eq. (3) for any dictionary level on any subset of points.
* :class:`BlessCenters` / :class:`BlessRCenters` — FALKON centre selectors (FALKON Alg. 2 on BLESS
  scores), registered as ``"bless"`` and ``"bless_r"`` in :data:`krrcore.centers.CENTER_SELECTORS`.

Weights. A's diagonal is what makes Eq. (3) unbiased: K ≈ K_nJ A⁻¹ K_Jn needs A_jj = the
*marginal* probability that j enters J (Bernoulli sampling), or M_h × the marginal per-draw
probability divided by j's multiplicity (sampling with replacement, duplicates merged). The public
BLESS code stores the acceptance probability *conditional* on j being a candidate (p/β instead of
p); that inflates A, biases scores upwards and grows the dictionary. Here A is always marginal
(``bless_r(..., weight_rule="conditional")`` reproduces the defect, for comparison only).

Randomness comes from one CPU ``torch.Generator`` (``seed`` may be an int or a generator), so a
seed gives the same centres on every device; the linear algebra runs in float64 on X's device.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ._validation import as_tensor, check_int, check_positive
from .centers import CENTER_SELECTORS, CenterSelector, CenterSet, weighted_sample
from .kernels import Kernel
from .linalg import jitter_cholesky
from .memory import check_fits, scratch_budget
from .ops import block_rows_for_budget, dense_kernel

log = logging.getLogger(__name__)

#: Default dictionary oversampling q2 (|J_h| ≈ q2·d_eff(λ_h)); see the module notes on accuracy.
DEFAULT_Q2 = 4.0
#: Default candidate oversampling q1 (|U_h| ≈ q1·κ²/λ_h); q1 ≥ q2 keeps BLESS-R's p ≤ β.
DEFAULT_Q1 = 4.0
#: Default λ step q (λ_h = λ_{h−1}/q).
DEFAULT_Q = 2.0


# --------------------------------------------------------------------------------------------
# Input handling shared by every entry point
# --------------------------------------------------------------------------------------------
def _check_kernel(kernel) -> Kernel:
    if not isinstance(kernel, Kernel):
        raise ValueError(f"kernel must be a krrcore.kernels.Kernel, got {type(kernel).__name__}")
    return kernel


def _as_float64(X) -> torch.Tensor:
    """Leverage scores are computed in float64 whatever the data dtype (cancellation in Eq. 3)."""
    return as_tensor(X, "X", dtype=torch.float64, ndim=(2,))


def _generator(seed) -> torch.Generator:
    """A CPU generator from an int seed, or the given generator (used as is)."""
    if isinstance(seed, torch.Generator):
        return seed
    return torch.Generator().manual_seed(check_int(seed, "seed", minimum=0))


def _kernel_scale(kernel: Kernel, X: torch.Tensor) -> float:
    """κ² = max_i K(x_i, x_i): ℓ(i, λ) ≤ K_ii/(λn) ≤ κ²/(λn), so d_eff(λ) ≤ κ²/λ."""
    kappa2 = float(kernel.diag(X).max())
    if not kappa2 > 0:
        raise ValueError("kernel is zero on the diagonal of X: leverage scores are undefined")
    return kappa2


def _check_sampling_penalty(penalty, kappa2: float) -> float:
    lam = check_positive(penalty, "penalty")
    if lam >= kappa2:
        raise ValueError(
            f"penalty={lam:g} is not below the kernel scale κ² = max K(x,x) = {kappa2:g}: then every "
            f"leverage score is at most κ²/(λn) ≤ 1/n and d_eff(λ) ≤ κ²/λ ≤ 1, so there is nothing to "
            f"sample; choose penalty < {kappa2:g}")
    return lam


def _sampler_inputs(X, kernel, penalty, points):
    """Checks shared by every sampler, done before any work: (kernel, X64, κ², λ, point indices)."""
    kernel = _check_kernel(kernel)
    X = _as_float64(X)
    kappa2 = _kernel_scale(kernel, X)
    lam = _check_sampling_penalty(penalty, kappa2)
    point_idx = None if points is None else _index_tensor(points, X.shape[0], X.device)
    return kernel, X, kappa2, lam, point_idx


def _index_tensor(points, n: int, device) -> torch.Tensor:
    """``points``: None or "all" (every row), or integer indices into X."""
    if points is None or (isinstance(points, str) and points == "all"):
        return torch.arange(n, device=device)
    if isinstance(points, str):
        raise ValueError(f"points must be 'all', None or integer indices, got {points!r}")
    idx = torch.as_tensor(np.asarray(points) if not isinstance(points, torch.Tensor) else points)
    if idx.numel() == 0:
        raise ValueError("points is empty: ask for at least one point")
    if idx.dtype == torch.bool:
        raise ValueError("points must be integer indices, not a boolean mask (use mask.nonzero())")
    if idx.is_floating_point() or idx.is_complex():
        raise ValueError(f"points must be integer indices into X, got dtype {idx.dtype}")
    idx = idx.reshape(-1).to(device=device, dtype=torch.int64)
    if int(idx.min()) < 0 or int(idx.max()) >= n:
        raise ValueError(f"points must lie in [0, {n}) (X has n={n} rows), got range "
                         f"[{int(idx.min())}, {int(idx.max())}]")
    return idx


# --------------------------------------------------------------------------------------------
# Exact scores (float64 references)
# --------------------------------------------------------------------------------------------
@dataclass
class ExactLeveragePath:
    """Exact ℓ(i, λ) for a grid of λ, from one eigendecomposition of K (Eq. 1)."""

    penalties: np.ndarray        # (p,)
    scores: torch.Tensor         # (p, n) float64; row j holds ℓ(·, penalties[j])
    d_eff: np.ndarray            # (p,)  Σ_i ℓ(i, λ)
    d_inf: np.ndarray            # (p,)  n·max_i ℓ(i, λ)
    eigenvalues: torch.Tensor    # (n,) of K, clamped at 0, ascending


def exact_scores_path(X, kernel, penalties, *, memory_budget: int | None = None) -> ExactLeveragePath:
    """Exact leverage scores for every λ in ``penalties`` from one ``eigh`` of K (float64).

    With K = U diag(s) Uᵀ: ℓ(·, λ) = (U∘U) s/(s + λn) and d_eff(λ) = Σ s/(s + λn) (Eq. 1).
    Needs about three n×n float64 matrices; raises ``ValueError`` with the GiB needed otherwise.
    """
    kernel = _check_kernel(kernel)
    X = _as_float64(X)
    n = X.shape[0]
    lams = np.atleast_1d(np.asarray(penalties, dtype=np.float64))
    if lams.ndim != 1 or lams.size == 0:
        raise ValueError("penalties must be a non-empty 1-D sequence of positive numbers")
    for j, lam in enumerate(lams):
        check_positive(float(lam), f"penalties[{j}]")
    check_fits(3 * n * n * 8, f"exact leverage scores by eigendecomposition (n={n}, three n×n float64 matrices)",
               "use exact_scores(method='cholesky') for one λ, bless/bless_r, or subsample X",
               memory_budget, X.device)
    K = dense_kernel(kernel, X, X)
    s, U = torch.linalg.eigh(K)
    del K
    s.clamp_min_(0.0)
    U.mul_(U)                                                # U∘U in place
    ridge = torch.as_tensor(lams * n, dtype=torch.float64, device=X.device)
    shrink = s.unsqueeze(0) / (s.unsqueeze(0) + ridge.unsqueeze(1))     # (p, n): s/(s + λn)
    scores = shrink @ U.T
    d_eff = shrink.sum(1)
    return ExactLeveragePath(lams, scores, d_eff.cpu().numpy(), (n * scores.max(1).values).cpu().numpy(), s)


def exact_scores(X, kernel, penalty, *, method: str = "auto", block_size: int = 1024,
                 memory_budget: int | None = None) -> torch.Tensor:
    """Exact ℓ(i, λ) = (K(K + λnI)⁻¹)_ii for all i, in float64 (Eq. 1).

    ``method``: "cholesky" (ℓ_i = 1 − λn‖L⁻¹e_i‖² with L Lᵀ = K + λnI; columns of L⁻¹ solved
    ``block_size`` at a time on the trailing triangle, about n³/3 flops after the factorisation)
    or "eigh" (one eigendecomposition, as :func:`exact_scores_path`: ~10× the flops, but no
    cancellation, so scores near machine precision keep their relative accuracy); "auto" is
    "cholesky" — for one λ it is always the cheaper route, and on a busy 2-core machine MKL's
    threaded ``eigh`` was measured 10–100× slower still. Raises ``ValueError`` with the GiB
    needed when K does not fit.
    """
    kernel = _check_kernel(kernel)
    lam = check_positive(penalty, "penalty")
    if method not in ("auto", "eigh", "cholesky"):
        raise ValueError(f"method must be 'auto', 'eigh' or 'cholesky', got {method!r}")
    X = _as_float64(X)
    n = X.shape[0]
    if method == "eigh":
        return exact_scores_path(X, kernel, [lam], memory_budget=memory_budget).scores[0]
    block_size = check_int(block_size, "block_size")
    check_fits(2 * n * n * 8, f"exact leverage scores by Cholesky (n={n}, two n×n float64 matrices)",
               "use bless/bless_r for approximate scores, or subsample X", memory_budget, X.device)
    K = dense_kernel(kernel, X, X)
    ridge = lam * n
    K.diagonal().add_(ridge)
    info = torch.empty((), dtype=torch.int32, device=X.device)
    L, info = torch.linalg.cholesky_ex(K, out=(K, info))      # overwrites K
    if int(info) != 0:
        raise ValueError(f"K + λnI is not positive definite at penalty={lam:g} (Cholesky failed at row {int(info)})")
    inv_diag = torch.empty(n, dtype=torch.float64, device=X.device)
    for start in range(0, n, block_size):
        stop = min(start + block_size, n)
        # Columns start..stop of L⁻¹ vanish above row `start`: solve on the trailing block only.
        E = torch.zeros(n - start, stop - start, dtype=torch.float64, device=X.device)
        E.diagonal().fill_(1.0)
        Z = torch.linalg.solve_triangular(L[start:, start:], E, upper=False)
        inv_diag[start:stop] = (Z * Z).sum(0)
    return (1.0 - ridge * inv_diag).clamp_(0.0, 1.0)


# --------------------------------------------------------------------------------------------
# Eq. (3): approximate scores from a weighted dictionary
# --------------------------------------------------------------------------------------------
class _Dictionary:
    """Eq. (3) for one dictionary (J, A) and ridge λn, factorised once.

    With S = A^(−1/2) and L Lᵀ = S K_JJ S + λnI:  K_Jiᵀ(K_JJ + λnA)⁻¹K_Ji = ‖L⁻¹ S K_Ji‖², so
    ℓ̃_J(i, λ) = (K_ii − ‖L⁻¹ S K_Ji‖²)/(λn). The S-scaled form keeps the ridge λnI on the diagonal
    however small A's entries are. An empty J gives ℓ̃ = K_ii/(λn) (Alg. 1–2, first level).
    """

    def __init__(self, kernel: Kernel, X: torch.Tensor, indices: torch.Tensor, weights: torch.Tensor,
                 ridge: float, memory_budget: int | None = None):
        self.kernel, self.X, self.ridge = kernel, X, float(ridge)
        self.size = int(indices.numel())
        self.memory_budget = scratch_budget(memory_budget, X.device)
        if self.size == 0:
            return
        check_fits(3 * self.size ** 2 * 8, f"a leverage dictionary of {self.size} points",
                   "raise penalty (fewer points have large scores) or lower q2", memory_budget, X.device)
        self._PJ = kernel.prepare(X[indices])
        self._s = weights.to(dtype=torch.float64, device=X.device).rsqrt()
        B = kernel.block(self._PJ, self._PJ)
        B.mul_(self._s.unsqueeze(0)).mul_(self._s.unsqueeze(1)).diagonal().add_(self.ridge)
        self._L, _ = jitter_cholesky(B, 0.0, name="S K_JJ S + λnI")

    def scores(self, idx: torch.Tensor) -> torch.Tensor:
        """ℓ̃_J(i, λ) for the rows ``idx`` of X, kernel blocks of K(J, ·) under the memory budget."""
        m = int(idx.numel())
        out = torch.empty(m, dtype=torch.float64, device=self.X.device)
        if self.size == 0:
            return torch.div(self.kernel.diag(self.X[idx]), self.ridge, out=out)
        # Per point: one kernel column and its triangular solve (hence one extra scratch block).
        cols = block_rows_for_budget(m, self.size, itemsize=8, budget_bytes=self.memory_budget,
                                     scratch_blocks=self.kernel.scratch_blocks + 1)
        buffer = torch.empty(self.size * cols, dtype=torch.float64, device=self.X.device)
        for start in range(0, m, cols):
            stop = min(start + cols, m)
            Xb = self.X[idx[start:stop]]
            Kb = self.kernel.block(self._PJ, self.kernel.prepare(Xb),
                                   out=buffer[: self.size * (stop - start)].view(self.size, stop - start))
            Kb.mul_(self._s.unsqueeze(1))
            W = torch.linalg.solve_triangular(self._L, Kb, upper=False)
            out[start:stop] = (self.kernel.diag(Xb) - (W * W).sum(0)) / self.ridge
        return out.clamp_min_(0.0)   # ≥ 0 in exact arithmetic; round-off can dip below


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------
@dataclass
class LeverageLevel:
    """One level h of a sampler: the dictionary J_h with its Eq. (3) weights at λ_h.

    ``weights`` is A_h's diagonal (one entry per distinct index), ``probabilities`` the marginal
    probability behind it (inclusion probability for Bernoulli sampling; per-draw probability for
    sampling with replacement, where A_jj = M_h·p_j/count_j), ``counts`` the multiplicities.
    ``d_eff`` is the level's estimate of d_eff(λ_h); ``n_candidates`` is |U_h|; ``n_points`` the
    size of the set the level ranges over (n, or the nested subset for Recursive-RLS).
    """

    penalty: float
    indices: torch.Tensor
    weights: torch.Tensor
    probabilities: torch.Tensor
    counts: torch.Tensor
    d_eff: float
    n_candidates: int
    n_points: int
    expected_size: float = math.nan
    seconds: float = 0.0

    @property
    def size(self) -> int:
        return int(self.indices.numel())


@dataclass
class LeverageResult:
    """What every sampler returns: the whole λ path (``levels``) and the final dictionary.

    ``indices``/``weights``/``d_eff``/``penalty`` refer to the last level; ``scores`` holds
    Eq. (3) at the last level for ``points`` (when requested). ``seconds`` is the sampler's time
    without those scores (``score_seconds``). ``note`` explains early stops.
    """

    method: str
    n: int
    kappa2: float
    levels: list[LeverageLevel]
    params: dict = field(default_factory=dict)
    points: torch.Tensor | None = None
    scores: torch.Tensor | None = None
    seconds: float = 0.0
    score_seconds: float = 0.0
    note: str = ""

    @property
    def final(self) -> LeverageLevel:
        return self.levels[-1]

    @property
    def penalty(self) -> float:
        return self.final.penalty

    @property
    def indices(self) -> torch.Tensor:
        return self.final.indices

    @property
    def weights(self) -> torch.Tensor:
        return self.final.weights

    @property
    def d_eff(self) -> float:
        return self.final.d_eff

    def path(self):
        """The λ path as a pandas DataFrame: one row per level (for d_eff(λ) plots)."""
        import pandas as pd

        return pd.DataFrame({
            "level": np.arange(1, len(self.levels) + 1),
            "penalty": [lv.penalty for lv in self.levels],
            "d_eff": [lv.d_eff for lv in self.levels],
            "size": [lv.size for lv in self.levels],
            "expected_size": [lv.expected_size for lv in self.levels],
            "n_candidates": [lv.n_candidates for lv in self.levels],
            "n_points": [lv.n_points for lv in self.levels],
            "seconds": [lv.seconds for lv in self.levels],
        })


#: The paper's name for the same thing.
BlessResult = LeverageResult


def approximate_scores(X, kernel, penalty, result_level, points=None, *,
                       memory_budget: int | None = None) -> torch.Tensor:
    """ℓ̃_J(i, λ) of Eq. (3) for ``points`` (indices into X; None or "all": every row).

    ``result_level`` is a :class:`LeverageLevel` or a :class:`LeverageResult` (its last level);
    ``penalty`` None means the level's own λ. X must be the data the level was sampled from.
    Kernel columns K(J, i) are formed in blocks; cost O(|points|·|J|² + |J|³), float64.
    """
    kernel = _check_kernel(kernel)
    X = _as_float64(X)
    n = X.shape[0]
    if isinstance(result_level, LeverageResult):
        level = result_level.final
    elif isinstance(result_level, LeverageLevel):
        level = result_level
    else:
        raise ValueError(f"result_level must be a LeverageResult or LeverageLevel, got {type(result_level).__name__}")
    lam = level.penalty if penalty is None else check_positive(penalty, "penalty")
    if level.size and int(level.indices.max()) >= n:
        raise ValueError(f"result_level holds index {int(level.indices.max())} but X has only n={n} rows: "
                         f"pass the X it was computed on")
    idx = _index_tensor(points, n, X.device)
    J = level.indices.to(X.device)
    return _Dictionary(kernel, X, J, level.weights, lam * n, memory_budget).scores(idx)


# --------------------------------------------------------------------------------------------
# BLESS and BLESS-R (Alg. 1 and 2)
# --------------------------------------------------------------------------------------------
def _path_inputs(q, q1, lambda0, lam: float, kappa2: float) -> tuple[float, float, float]:
    """Check the λ path's step q, the candidate oversampling q1 and its start lambda0 (default κ²)."""
    q = check_positive(q, "q")
    if q <= 1:
        raise ValueError(f"q must be > 1 (λ shrinks by q per level), got {q:g}")
    q1 = check_positive(DEFAULT_Q1 if q1 is None else q1, "q1")
    lambda0 = kappa2 if lambda0 is None else check_positive(lambda0, "lambda0")
    if lambda0 <= lam:
        raise ValueError(f"lambda0 must be larger than penalty (the path runs from lambda0 down to penalty), "
                         f"got lambda0={lambda0:g} <= penalty={lam:g}")
    return q, q1, lambda0


def lambda_path(lambda0: float, penalty: float, q: float) -> list[float]:
    """λ_1 > … > λ_H = penalty with H = ⌈log(λ0/λ)/log q⌉ (Alg. 1–2, lines 1 and 3).

    The steps are equal in log scale and at most q, so the path ends exactly at ``penalty``.
    """
    H = max(1, math.ceil(math.log(lambda0 / penalty) / math.log(q) - 1e-9))
    return [lambda0 * (penalty / lambda0) ** (h / H) for h in range(1, H + 1)]


@dataclass
class _Context:
    """What every level needs: data, kernel, constants and the random stream."""

    X: torch.Tensor
    kernel: Kernel
    kappa2: float
    q1: float
    q2: float
    generator: torch.Generator
    memory_budget: int | None

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def dictionary(self, level: LeverageLevel | None, penalty: float) -> _Dictionary:
        """Eq. (3) at ``penalty`` with the previous level's J and A (empty before level 1)."""
        if level is None:
            empty = torch.empty(0, dtype=torch.int64, device=self.X.device)
            return _Dictionary(self.kernel, self.X, empty, empty.double(), penalty * self.n, self.memory_budget)
        return _Dictionary(self.kernel, self.X, level.indices, level.weights, penalty * self.n, self.memory_budget)

    def uniform_candidates(self, lam: float) -> tuple[int, torch.Tensor]:
        """Alg. 1 line 5: R_h = q1·min(κ²/λ_h, n) i.i.d. uniform indices — or all n points, once,
        when R_h reaches n (the same expectation without the sampling noise)."""
        R_target = self.q1 * min(self.kappa2 / lam, self.n)
        if R_target >= self.n:
            return self.n, torch.arange(self.n, device=self.X.device)
        R = math.ceil(R_target)
        return R, torch.randint(self.n, (R,), generator=self.generator).to(self.X.device)

    def rand(self, size: int) -> torch.Tensor:
        return torch.rand(size, generator=self.generator, dtype=torch.float64).to(self.X.device)


def _bless_level(ctx: _Context, previous: LeverageLevel | None, lam: float, _state) -> LeverageLevel:
    """One iteration of Alg. 1 (lines 3–10): R_h uniform candidates, M_h = ⌈q2 d_h⌉ draws."""
    n = ctx.n
    R, U = ctx.uniform_candidates(lam)
    scores = ctx.dictionary(previous, lam).scores(U)
    total = float(scores.sum())
    if not total > 0:
        raise ValueError(f"all approximate leverage scores are zero at penalty={lam:g}: check the kernel")
    p = scores / total                                        # P_h over the candidates (line 7)
    d_h = n / R * total                                       # line 8
    M_h = math.ceil(ctx.q2 * d_h)
    draws = torch.multinomial(p.cpu(), M_h, replacement=True, generator=ctx.generator).to(ctx.X.device)
    indices, inverse, counts = torch.unique(U[draws], return_inverse=True, return_counts=True)
    # Every draw of the same index carries the same p: scatter it onto the merged index.
    p_index = torch.zeros(indices.numel(), dtype=torch.float64, device=ctx.X.device).scatter_(0, inverse, p[draws])
    probabilities = R * p_index / n                           # marginal per-draw probability over [n]
    weights = M_h * probabilities / counts                    # A_h = (R_h M_h/n) diag(p) (line 10), merged
    return LeverageLevel(lam, indices, weights, probabilities, counts, d_h, R, n, expected_size=float(M_h))


class _NestedCandidates:
    """BLESS-R's U_h = {i : u_i < β_h} with one u ~ Uniform[0,1]ⁿ: nested as β_h grows (Sect. 2.4)."""

    def __init__(self, ctx: _Context):
        u = torch.rand(ctx.n, generator=ctx.generator, dtype=torch.float64)
        self.sorted_u, order = torch.sort(u)
        self.order = order.to(ctx.X.device)

    def below(self, beta: float) -> torch.Tensor:
        return self.order[: int(torch.searchsorted(self.sorted_u, beta))]


def _bless_r_level(ctx: _Context, previous: LeverageLevel | None, lam: float,
                   state: tuple[_NestedCandidates, str]) -> LeverageLevel:
    """One iteration of Alg. 2 (lines 3–13): Bernoulli candidates, then Bernoulli acceptance.

    β_h = min(q1κ²/(λ_h n), 1); p_j = min(q2 ℓ̃_{J_{h−1}}(j, λ_h), 1); j ∈ U_h enters J_h with
    probability p_j/β_h, so its marginal inclusion probability is min(p_j, β_h) — the weight
    A_jj. (The paper's line 10 evaluates ℓ̃ at λ_{h−1}; like Alg. 1 line 6 and Eq. (8) we use λ_h,
    the scale the level samples for; the two differ by at most the factor q.)
    """
    candidates, weight_rule = state
    n = ctx.n
    beta = min(ctx.q1 * ctx.kappa2 / (lam * n), 1.0)
    U = candidates.below(beta)
    scores = (ctx.dictionary(previous, lam).scores(U) if U.numel()
              else torch.zeros(0, dtype=torch.float64, device=ctx.X.device))
    marginal = (ctx.q2 * scores).clamp_(max=beta)             # min(p, β) ≤ 1
    accept = ctx.rand(U.numel()) < marginal / beta
    order = torch.argsort(U[accept])
    indices = U[accept][order]
    probabilities = marginal[accept][order]
    weights = probabilities / beta if weight_rule == "conditional" else probabilities
    return LeverageLevel(lam, indices, weights, probabilities, torch.ones_like(indices), float(scores.sum()) / beta,
                         int(U.numel()), n, expected_size=float(marginal.sum()) / beta)


def _bottom_up(method: str, level_fn, make_state, X, kernel, penalty, *, q, q1, q2, lambda0, seed, points,
               target_size, memory_budget, extra_params=None) -> LeverageResult:
    """The loop shared by Alg. 1 and Alg. 2: λ_1 > … > λ_H, each level sampling from the last.

    ``target_size`` stops the descent at the first level whose dictionary reaches that many
    points (the centre selectors use it to find the λ a budget of M centres can resolve).
    """
    kernel, X, kappa2, lam, point_idx = _sampler_inputs(X, kernel, penalty, points)
    n = X.shape[0]
    q, q1, lambda0 = _path_inputs(q, q1, lambda0, lam, kappa2)
    q2 = check_positive(DEFAULT_Q2 if q2 is None else q2, "q2")
    if target_size is not None:
        target_size = check_int(target_size, "target_size")
        if target_size > n:
            raise ValueError(f"target_size={target_size} exceeds the n={n} points of X")
    ctx = _Context(X, kernel, kappa2, q1, q2, _generator(seed), memory_budget)
    state = make_state(ctx)
    levels: list[LeverageLevel] = []
    note = ""
    t0 = time.perf_counter()
    previous = None
    for lam_h in lambda_path(lambda0, lam, q):
        t = time.perf_counter()
        level = level_fn(ctx, previous, lam_h, state)
        level.seconds = time.perf_counter() - t
        log.debug("%s level %d: λ=%.3g |U|=%d |J|=%d d_eff≈%.1f", method, len(levels) + 1, lam_h,
                  level.n_candidates, level.size, level.d_eff)
        levels.append(level)
        previous = level
        if target_size is not None and level.size >= target_size:
            if lam_h > lam * (1 + 1e-12):
                note = (f"stopped at λ={lam_h:.3g} (level {len(levels)}): the dictionary reached "
                        f"target_size={target_size}")
            break
    seconds = time.perf_counter() - t0
    if previous.size == 0:
        raise ValueError(f"{method} selected no points at the final level (λ={previous.penalty:g}): raise q2 "
                         f"(dictionary oversampling) or q1 (candidates)")
    params = {"q": q, "q1": q1, "q2": q2, "lambda0": lambda0, "penalty": lam, "target_size": target_size,
              **(extra_params or {})}
    result = LeverageResult(method, n, kappa2, levels, params, seconds=seconds, note=note)
    return _with_scores(result, X, kernel, point_idx, memory_budget)


def _with_scores(result: LeverageResult, X, kernel, point_idx, memory_budget) -> LeverageResult:
    """Attach Eq. (3) at the final level for the requested (validated) points; None: none."""
    if point_idx is None:
        return result
    t = time.perf_counter()
    result.points = point_idx
    result.scores = _Dictionary(kernel, X, result.indices, result.weights, result.penalty * X.shape[0],
                                memory_budget).scores(result.points)
    result.score_seconds = time.perf_counter() - t
    return result


def bless(X, kernel, penalty, *, q: float = DEFAULT_Q, q1: float | None = None, q2: float | None = None,
          lambda0: float | None = None, seed=0, points=None, target_size: int | None = None,
          memory_budget: int | None = None) -> LeverageResult:
    """BLESS, Alg. 1: leverage-score sampling with replacement along λ_0 > λ_1 > … > λ_H = λ.

    Level h draws R_h = q1·min(κ²/λ_h, n) uniform candidates U_h, scores them with Eq. (3) on
    J_{h−1}, estimates d_h = (n/R_h)Σ_U ℓ̃, and draws M_h = ⌈q2·d_h⌉ points from U_h with
    probabilities ∝ ℓ̃ (duplicates merged); A_h = (R_h M_h/n)·diag(p) (line 10), divided by the
    multiplicity of merged points. Cost O(Σ_h R_h M_{h−1}²): independent of n once n > q1κ²/λ.

    Parameters
    ----------
    penalty : λ of (K + λnI); must be below κ² = max K(x, x).
    q : λ step (> 1). q1 : candidate oversampling. q2 : dictionary oversampling
        (|J_H| ≈ q2·d_eff(λ)). Theorem 1 asks for q1, q2 ∝ log(n/δ)/t² (thousands); we default
        to 4 and 4: on N(0, I) data R-ACC's 5–95% band is then about [0.85, 1.3]. When d_eff is
        dominated by a few isolated points (clusters + outliers) the band widens to about
        [0.7, 2.3] — exact-score sampling with the same q2 does no better; q2 = 16 brings it
        back inside [0.5, 2] (tests/test_leverage.py).
    lambda0 : start of the path; default κ² (Theorem 1: κ²/min(t, 1)).
    seed : int or torch.Generator. points : indices (or "all") whose Eq. (3) scores to return.
    target_size : stop descending once the dictionary has this many points.
    """
    return _bottom_up("bless", _bless_level, lambda ctx: None, X, kernel, penalty, q=q, q1=q1, q2=q2,
                      lambda0=lambda0, seed=seed, points=points, target_size=target_size,
                      memory_budget=memory_budget)


def bless_r(X, kernel, penalty, *, q: float = DEFAULT_Q, q1: float | None = None, q2: float | None = None,
            lambda0: float | None = None, seed=0, points=None, target_size: int | None = None,
            memory_budget: int | None = None, weight_rule: str = "marginal") -> LeverageResult:
    """BLESS-R, Alg. 2: Bernoulli (without replacement) sampling along the same λ path.

    Candidates U_h are nested: U_h = {i : u_i < β_h}, β_h = min(q1κ²/(λ_h n), 1) (the paper
    notes nesting is allowed for Alg. 2). Each j ∈ U_h enters J_h with probability p_j/β_h,
    p_j = min(q2·ℓ̃_{J_{h−1}}(j, λ_h), 1); A_h = diag(min(p_j, β_h)), the marginal inclusion
    probabilities (line 13). ``weight_rule="conditional"`` stores p_j/β_h instead — the public
    code's defect, kept only to measure it. Other parameters as :func:`bless`.
    """
    if weight_rule not in ("marginal", "conditional"):
        raise ValueError(f"weight_rule must be 'marginal' or 'conditional', got {weight_rule!r}")
    return _bottom_up("bless_r", _bless_r_level, lambda ctx: (_NestedCandidates(ctx), weight_rule), X, kernel,
                      penalty, q=q, q1=q1, q2=q2, lambda0=lambda0, seed=seed, points=points,
                      target_size=target_size, memory_budget=memory_budget,
                      extra_params={"weight_rule": weight_rule})


# --------------------------------------------------------------------------------------------
# Comparison points: Recursive-RLS and uniform sampling
# --------------------------------------------------------------------------------------------
#: Musco & Musco's base-case size 192·log(1/δ), at δ = 0.05.
RRLS_BASE_SIZE = math.ceil(192 * math.log(20))


def recursive_rls(X, kernel, penalty, *, q2: float | None = None, base_size: int = RRLS_BASE_SIZE, seed=0,
                  points=None, memory_budget: int | None = None) -> LeverageResult:
    """Recursive-RLS (Musco & Musco, NIPS 2017, Alg. 2) at a fixed λ, unrolled bottom-up.

    A random permutation gives nested uniform subsets of sizes n, ⌈n/2⌉, …, down to
    ``base_size``; the smallest is taken whole (A = I, exact for that subset). Each larger subset
    is scored by Eq. (3) with the previous dictionary at the *same* ridge λn (scores of a subset
    over-estimate those of the whole set, which is what makes the recursion safe) and each point
    enters with probability p = min(q2·ℓ̃, 1), weight A_jj = p. The paper's constants (3/(2λ)
    inflation, 16·log(Σℓ̃/δ) oversampling) are replaced by the same q2 as BLESS-R so the methods
    differ only in their strategy. Every level has penalty λ; ``n_points`` gives the subset size
    and ``d_eff`` the subset's own effective dimension. Cost O(n·|J|²): the last level scores all
    n points.
    """
    kernel, X, kappa2, lam, point_idx = _sampler_inputs(X, kernel, penalty, points)
    n = X.shape[0]
    q2 = check_positive(DEFAULT_Q2 if q2 is None else q2, "q2")
    base_size = check_int(base_size, "base_size")
    ctx = _Context(X, kernel, kappa2, 1.0, q2, _generator(seed), memory_budget)
    t0 = time.perf_counter()
    perm = torch.randperm(n, generator=ctx.generator).to(X.device)
    sizes = [n]
    while sizes[-1] > base_size:
        sizes.append(math.ceil(sizes[-1] / 2))
    sizes.reverse()
    ridge = lam * n
    base = perm[: sizes[0]].sort().values
    ones = torch.ones(base.numel(), dtype=torch.float64, device=X.device)
    t = time.perf_counter()
    base_scores = _Dictionary(kernel, X, base, ones, ridge, memory_budget).scores(base)
    levels = [LeverageLevel(lam, base, ones, ones.clone(), torch.ones_like(base), float(base_scores.sum()),
                            sizes[0], sizes[0], expected_size=float(sizes[0]), seconds=time.perf_counter() - t)]
    for m in sizes[1:]:
        t = time.perf_counter()
        previous = levels[-1]
        U = perm[:m]
        scores = _Dictionary(kernel, X, previous.indices, previous.weights, ridge, memory_budget).scores(U)
        p = (q2 * scores).clamp_(max=1.0)
        accept = ctx.rand(m) < p
        order = torch.argsort(U[accept])
        indices, probabilities = U[accept][order], p[accept][order]
        levels.append(LeverageLevel(lam, indices, probabilities, probabilities.clone(), torch.ones_like(indices),
                                    float(scores.sum()), m, m, expected_size=float(p.sum()),
                                    seconds=time.perf_counter() - t))
    if levels[-1].size == 0:
        raise ValueError("recursive_rls selected no points at the final level: raise q2")
    result = LeverageResult("recursive_rls", n, kappa2, levels, {"q2": q2, "base_size": base_size, "penalty": lam},
                            seconds=time.perf_counter() - t0)
    return _with_scores(result, X, kernel, point_idx, memory_budget)


def uniform(X, kernel, penalty, *, M: int | None = None, q: float = DEFAULT_Q, q1: float | None = None,
            lambda0: float | None = None, seed=0, points=None, memory_budget: int | None = None) -> LeverageResult:
    """Uniform sampling as a leverage-score method: M distinct points, A = (M/n)·I.

    A = (M/n)I is the marginal inclusion probability, so Eq. (3) with this dictionary is the
    score estimate uniform Nyström sampling implies (the "Uniform" row of the paper's Fig. 1).
    Default M = min(n, ⌈κ²/λ⌉): the d_∞ bound uniform sampling needs (Bach 2013). The levels
    evaluate the *same* dictionary along the BLESS λ path, each d_eff estimated on
    q1·min(κ²/λ_h, n) uniform candidates, so the app can draw d_eff(λ) for it too.
    """
    kernel, X, kappa2, lam, point_idx = _sampler_inputs(X, kernel, penalty, points)
    n = X.shape[0]
    q, q1, lambda0 = _path_inputs(q, q1, lambda0, lam, kappa2)
    M = min(n, math.ceil(kappa2 / lam)) if M is None else check_int(M, "M")
    if M > n:
        raise ValueError(f"M={M} centres requested but X has only n={n} points")
    ctx = _Context(X, kernel, kappa2, q1, 1.0, _generator(seed), memory_budget)
    t0 = time.perf_counter()
    indices = torch.randperm(n, generator=ctx.generator)[:M].sort().values.to(X.device)
    probabilities = torch.full((M,), M / n, dtype=torch.float64, device=X.device)
    levels = []
    for lam_h in lambda_path(lambda0, lam, q):
        t = time.perf_counter()
        R, U = ctx.uniform_candidates(lam_h)
        d_h = n / R * float(_Dictionary(kernel, X, indices, probabilities, lam_h * n, memory_budget).scores(U).sum())
        levels.append(LeverageLevel(lam_h, indices, probabilities, probabilities, torch.ones_like(indices), d_h, R, n,
                                    expected_size=float(M), seconds=time.perf_counter() - t))
    result = LeverageResult("uniform", n, kappa2, levels, {"M": M, "q": q, "q1": q1, "lambda0": lambda0,
                                                           "penalty": lam}, seconds=time.perf_counter() - t0)
    return _with_scores(result, X, kernel, point_idx, memory_budget)


#: Samplers by name, for the app and the benchmarks.
SAMPLERS = {"bless": bless, "bless_r": bless_r, "recursive_rls": recursive_rls, "uniform": uniform}


# --------------------------------------------------------------------------------------------
# FALKON-BLESS centre selection
# --------------------------------------------------------------------------------------------
class BlessCenters(CenterSelector):
    """Nyström centres for FALKON from BLESS (Alg. 1) or BLESS-R (Alg. 2) leverage scores.

    ``mode="sample"`` (default; FALKON Alg. 2, Appendix A Def. 2): score all n points with
    Eq. (3) on the BLESS dictionary, draw M centres with replacement ∝ the scores
    (:func:`krrcore.centers.weighted_sample`, duplicates merged), D_jj = 1/√(n p_j count_j).

    ``mode="dictionary"`` (the BLESS paper's FALKON-BLESS, Sect. 3.1): the final dictionary J_H
    itself is the centre set (≈ M points, not exactly M), with D derived from its A weights so that
    (n/M) K D² K estimates K_nMᵀK_nM: D_jj = √(M/(n A_jj)) (uniform sampling gives D = I). No
    pass over all n points is needed.

    BLESS's λ. ``penalty`` given: BLESS runs down to it. ``penalty=None`` (default): BLESS descends
    its λ path until the dictionary reaches M points (``target_size=M``), i.e. λ such that
    q2·d_eff(λ) ≈ M — the finest scale a budget of M centres resolves. This λ is independent
    of FALKON's λ, as in the paper's experiments (λ_bless ≫ λ_falkon); the descent stops at
    κ²/n at the latest. ``info`` holds the BLESS result (whole path), its λ and the scores.

    The kernel must be the solver's: pass ``kernel=`` or let the solver forward it to ``select``.
    """

    name = "bless"

    def __init__(self, penalty=None, variant: str = "bless", M=None, *, kernel=None, mode: str = "sample",
                 q: float = DEFAULT_Q, q1: float | None = None, q2: float | None = None, lambda0=None,
                 memory_budget: int | None = None):
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

    def select(self, X, M, generator, kernel=None) -> CenterSet:
        if self.variant not in ("bless", "bless_r"):
            raise ValueError(f"variant must be 'bless' or 'bless_r', got {self.variant!r}")
        if self.mode not in ("sample", "dictionary"):
            raise ValueError(f"mode must be 'sample' or 'dictionary', got {self.mode!r}")
        kernel = self.kernel if self.kernel is not None else kernel
        if kernel is None:
            raise ValueError("BlessCenters needs the kernel: pass BlessCenters(kernel=...) or a solver that "
                             "forwards its kernel to select()")
        M = check_int(self.M if self.M is not None else M, "M")
        n = X.shape[0]
        if M > n:
            raise ValueError(f"M={M} centres requested but the training set has only n={n} points")
        if M == n:      # every point is a centre: nothing to sample, and Nyström is exact KRR (D = I)
            idx = torch.arange(n, device=X.device)
            return CenterSet(X, idx, None, {"method": self.variant, "mode": "all points", "penalty": None})
        X64 = _as_float64(X)
        kappa2 = _kernel_scale(kernel, X64)
        penalty, target = self.penalty, None
        if penalty is None:
            penalty, target = kappa2 / n, M       # floor κ²/n: below it d_eff ≈ n, sampling is moot
        sampler = bless if self.variant == "bless" else bless_r
        result = sampler(X64, kernel, penalty, q=self.q, q1=self.q1, q2=self.q2, lambda0=self.lambda0,
                         seed=generator, target_size=target, memory_budget=self.memory_budget)
        info = {"method": self.variant, "mode": self.mode, "penalty": result.penalty, "bless": result,
                "path": result.path()}
        if self.mode == "dictionary":
            idx = result.indices
            weights = torch.sqrt(idx.numel() / (n * result.weights))
        else:
            scores = _Dictionary(kernel, X64, result.indices, result.weights, result.penalty * n,
                                 self.memory_budget).scores(torch.arange(n, device=X64.device))
            info["scores"] = scores
            idx, weights = weighted_sample(scores, M, generator, n)
            idx = idx.to(X.device)
        return CenterSet(X[idx], idx, weights.to(dtype=X.dtype, device=X.device), info)


class BlessRCenters(BlessCenters):
    """:class:`BlessCenters` with BLESS-R (Alg. 2) as the default variant."""

    name = "bless_r"

    def __init__(self, penalty=None, variant: str = "bless_r", M=None, **kwargs):
        super().__init__(penalty, variant, M, **kwargs)


CENTER_SELECTORS["bless"] = BlessCenters
CENTER_SELECTORS["bless_r"] = BlessRCenters

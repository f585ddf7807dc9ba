"""BLESS (Alg. 1) and BLESS-R (Alg. 2): leverage-score sampling along a decreasing λ path."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import torch

from .._validation import check_int, check_positive
from ..kernels import Kernel
from ..memory import check_fits
from ._inputs import _generator, _sampler_inputs
from .cost import check_time, path_estimate
from .dictionary import PRECISIONS, _Dictionary
from .results import LeverageLevel, LeverageResult

log = logging.getLogger(__name__)


#: Default dictionary oversampling q2 (|J_h| ≈ q2·d_eff(λ_h)); see the module notes on accuracy.
DEFAULT_Q2 = 4.0
#: Default candidate oversampling q1 (|U_h| ≈ q1·κ²/λ_h); q1 ≥ q2 keeps BLESS-R's p ≤ β.
DEFAULT_Q1 = 4.0
#: Default λ step q (λ_h = λ_{h−1}/q).
DEFAULT_Q = 2.0
#: A BLESS level draws by rejection from bounds (:class:`_BoundedCandidates`) when its previous
#: dictionary has at least REJECTION_MIN_DICTIONARY points and the flops it predicts are at most
#: REJECTION_SAVING of scoring every candidate (:func:`_leading_size`): the pivots, the pass over
#: the bounds and each call's float32 check are overheads the flop count leaves out.
REJECTION_MIN_DICTIONARY = 256
REJECTION_SAVING = 0.6
#: Proposals that estimate Σ_U ℓ̃ in a level drawn by rejection.
REJECTION_PILOT = 2048
#: Below this acceptance the ~M_h/acceptance proposals (M_h ≈ 1.3|J|) would outnumber the candidates
#: a level needs before it uses bounds at all: such a level scores every candidate instead.
REJECTION_MIN_ACCEPTANCE = 0.05
#: The last level of a descent to a target draws at most this many times M_h to reach it.
TARGET_DRAWS_LIMIT = 4


def _path_inputs(q, q1, lambda0, lam: float, kappa2: float) -> tuple[float, float, float]:
    """Check the λ path's step q, the candidate oversampling q1 and its start lambda0 (default κ²)."""
    q = check_positive(q, "q")
    if q <= 1:
        raise ValueError(f"q must be > 1 (λ shrinks by q per level), got {q:g}")
    q1 = check_positive(DEFAULT_Q1 if q1 is None else q1, "q1")
    lambda0 = kappa2 if lambda0 is None else check_positive(lambda0, "lambda0")
    if lambda0 <= lam:
        raise ValueError(
            f"lambda0 must be larger than penalty (the path runs from lambda0 down to penalty), "
            f"got lambda0={lambda0:g} <= penalty={lam:g}"
        )
    return q, q1, lambda0


#: The most levels a λ path may have (q = 2 from κ² down to 1e-300·κ² is 997 levels; the paths of
#: any penalty a sampler accepts have at most ~60).
MAX_LEVELS = 10_000


def lambda_path(lambda0: float, penalty: float, q: float) -> list[float]:
    """λ_1 > … > λ_H = penalty with H = ⌈log(λ0/λ)/log q⌉ (Alg. 1–2, lines 1 and 3).

    The steps are equal in log scale and at most q, so the path ends exactly at ``penalty``.
    ``lambda0`` > ``penalty`` > 0 and ``q`` > 1 are checked (numbers, not bools), and a path of more
    than :data:`MAX_LEVELS` levels is refused before it is built.
    """
    penalty = check_positive(penalty, "penalty")
    lambda0 = check_positive(lambda0, "lambda0")
    q = check_positive(q, "q")
    if q <= 1:
        raise ValueError(f"q must be > 1 (λ shrinks by q per level), got {q:g}")
    if lambda0 <= penalty:
        raise ValueError(
            f"lambda0 must be larger than penalty (the path runs from lambda0 down to penalty), "
            f"got lambda0={lambda0:g} <= penalty={penalty:g}"
        )
    levels = math.log(lambda0 / penalty) / math.log(q)
    if levels > MAX_LEVELS:
        raise ValueError(
            f"the λ path from lambda0={lambda0:g} to penalty={penalty:g} in steps of q={q:g} has "
            f"{levels:.3g} levels (at most {MAX_LEVELS:,}): raise q or penalty"
        )
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
    precision: str = "float32"
    #: The dictionary size a descent stops at (see :func:`_bottom_up`); None: no target.
    target_size: int | None = None

    @property
    def n(self) -> int:
        return self.X.shape[0]

    def dictionary(self, level: LeverageLevel | None, penalty: float, pivots: int = 0) -> _Dictionary:
        """Eq. (3) at ``penalty`` with the previous level's J and A (empty before level 1); ``pivots``:
        J reordered to lead with that many greedy pivots (:meth:`_Dictionary.leading`)."""
        if level is None:
            empty = torch.empty(0, dtype=torch.int64, device=self.X.device)
            return _Dictionary(self.kernel, self.X, empty, empty.double(), penalty * self.n, self.memory_budget)
        return _Dictionary(
            self.kernel,
            self.X,
            level.indices,
            level.weights,
            penalty * self.n,
            self.memory_budget,
            self.precision,
            pivots=pivots,
        )

    def uniform_candidates(self, lam: float) -> tuple[int, torch.Tensor]:
        """Alg. 1 line 5: R_h = q1·min(κ²/λ_h, n) i.i.d. uniform indices — or all n points, once,
        when R_h reaches n (the same expectation without the sampling noise)."""
        R_target = self.q1 * min(self.kappa2 / lam, self.n)
        if R_target >= self.n:
            return self.n, torch.arange(self.n, device=self.X.device)
        R = math.ceil(R_target)
        return R, torch.randint(self.n, (R,), generator=self.generator, device="cpu").to(self.X.device)

    def rand(self, size: int) -> torch.Tensor:
        return torch.rand(size, generator=self.generator, dtype=torch.float64, device="cpu").to(self.X.device)


def _bless_level(ctx: _Context, previous: LeverageLevel | None, lam: float, _state) -> LeverageLevel:
    """One iteration of Alg. 1 (lines 3–10): R_h uniform candidates, M_h = ⌈q2 d_h⌉ draws.

    Where candidates far outnumber the dictionary, Eq. (3) is completed only for the candidates
    the draws propose (:class:`_BoundedCandidates`); otherwise every candidate is scored.
    """
    n = ctx.n
    R, U = ctx.uniform_candidates(lam)
    # U is drawn with replacement (a point recurs once R_h nears n): each distinct point is scored
    # once and drawn with its multiplicity's weight, the same P_h over U's draws.
    distinct, multiplicity = torch.unique(U, return_counts=True)
    leading = _leading_size(previous, distinct.numel())
    candidates = _BoundedCandidates(ctx, previous, lam, distinct, multiplicity, leading) if leading else None
    if candidates is None or candidates.total is None:
        # Bounds that accept too few: score every candidate, on the factor already made (J's order
        # changes no score).
        dictionary = ctx.dictionary(previous, lam) if candidates is None else candidates.dictionary
        candidates = _ScoredCandidates(ctx, dictionary, distinct, multiplicity)
    if not candidates.total > 0:
        raise ValueError(f"all approximate leverage scores are zero at penalty={lam:g}: check the kernel")
    d_h = n / R * candidates.total  # line 8
    _check_draws(ctx, lam, d_h)
    draws = _line9_draws(ctx, candidates.draw, math.ceil(ctx.q2 * d_h))  # positions in distinct
    M_h = draws.numel()
    chosen, counts = torch.unique(draws, return_counts=True)  # duplicates merged
    probabilities = R * (candidates.scores[chosen] / candidates.total) / n  # per-draw probability over [n]
    weights = M_h * probabilities / counts  # A_h = (R_h M_h/n) diag(p) (line 10), merged
    return LeverageLevel(
        lam,
        distinct[chosen],
        weights,
        probabilities,
        counts,
        d_h,
        R,
        n,
        expected_size=float(M_h),
        scored=candidates.scored,
    )


#: How far above n an estimate of d_eff may go before the level is refused (ℓ̃ over-estimates ℓ
#: by design, by a bounded factor while the dictionary resolves the scores).
D_EFF_EXCESS = 4.0


def _check_draws(ctx: _Context, lam: float, d_h: float) -> None:
    """Line 9 draws ⌈q2·d_h⌉ points. d_h estimates d_eff(λ_h) ≤ n; an estimate above
    :data:`D_EFF_EXCESS`·n (or not finite) says the dictionary no longer resolves the scores at this
    λ (ℓ̃ of the points it misses grows as 1/λ: n = 300 points at λ = 1e-10 estimate d_eff ≈ 2e5
    and draw ~1e6 points, which is how λ = 1e-300 ran out of memory) — refused, before the draws
    are allocated; so are draws that would not fit the memory policy (:func:`check_fits`)."""
    n = ctx.n
    if not math.isfinite(d_h) or d_h > D_EFF_EXCESS * n:
        raise ValueError(
            f"BLESS's estimate of d_eff at λ={lam:.3g} is {d_h:.3g}, above the n={n:,} points any "
            f"d_eff is at most: the dictionary no longer resolves the scores at this penalty; raise "
            f"penalty, or for n this small compute exact_scores"
        )
    check_fits(
        int(math.ceil(ctx.q2 * d_h)) * 8 * 4,
        f"BLESS's {math.ceil(ctx.q2 * d_h):,} draws at λ={lam:.3g}",
        "lower q2 or raise penalty",
        ctx.memory_budget,
        ctx.X.device,
    )


def _line9_draws(ctx: _Context, draw, M_h: int) -> torch.Tensor:
    """Line 9: M_h i.i.d. draws (``draw(m)`` gives m more, in order), except at the last level of a
    descent to ``target_size`` — the first whose M_h reaches it — which keeps drawing until its
    dictionary holds target_size distinct points and keeps the draws up to the one that brought
    the last of them. (Fewer than M_h where duplicates are few, more where many: the q2 that M
    distinct points need at that λ; a prefix of i.i.d. draws is still i.i.d.) Where duplicates
    are so many that :data:`TARGET_DRAWS_LIMIT`·M_h draws fall short, the M_h draws stand and the
    descent goes on."""
    draws = draw(M_h)
    target = ctx.target_size
    if target is None or M_h < target:
        return draws
    extended = draws
    while torch.unique(extended).numel() < target and extended.numel() < TARGET_DRAWS_LIMIT * M_h:
        extended = torch.cat([extended, draw(max(M_h // 8, 1))])
    values, inverse = torch.unique(extended, return_inverse=True)
    if values.numel() < target:
        return draws
    position = torch.arange(extended.numel(), device=extended.device)
    first = torch.full_like(values, extended.numel()).scatter_reduce_(0, inverse, position, "amin")
    return extended[: int(torch.sort(first).values[target - 1]) + 1]


class _ScoredCandidates:
    """Every distinct candidate scored with Eq. (3): P_h (line 7) and Σ_U ℓ̃ (line 8) exact."""

    def __init__(self, ctx: _Context, dictionary: _Dictionary, distinct: torch.Tensor, multiplicity: torch.Tensor):
        self.generator = ctx.generator
        self.scores = dictionary.scores(distinct)
        self.mass = (self.scores * multiplicity).cpu()
        self.total = float(self.mass.sum())
        self.scored = int(distinct.numel())

    def draw(self, m: int) -> torch.Tensor:
        """m i.i.d. draws from P_h: positions in the distinct candidates."""
        return torch.multinomial(self.mass, m, replacement=True, generator=self.generator).to(self.scores.device)


def _leading_size(previous: LeverageLevel | None, candidates: int) -> int:
    """How many of J_{h−1}'s points bound the candidates' scores in :class:`_BoundedCandidates`
    (0: score every candidate in full).

    Scoring all |U| distinct candidates costs |U|·|J|². Bounding them with r leading points costs
    |U|·r², and completing the proposed ones P·|J|², P = min(|U|, pilot + M_h/acceptance) with
    M_h ≈ 1.3|J| and the acceptance ≈ 0.45 (0.45–0.65 measured with this r). Taking the acceptance
    ∝ r/|J|, the sum is least near r = |J|·(|J|/|U|)^(1/3).
    """
    size = previous.size if previous is not None else 0
    if size < REJECTION_MIN_DICTIONARY:
        return 0
    leading = math.ceil(size * (size / candidates) ** (1 / 3))
    proposed = min(candidates, REJECTION_PILOT + 3 * size)
    bounded = candidates * leading**2 + proposed * size**2
    return leading if bounded <= REJECTION_SAVING * candidates * size**2 else 0


class _BoundedCandidates:
    """Alg. 1 lines 6–9 with Eq. (3) completed only for the candidates that draws propose.

    Every candidate gets a bound b_i ≥ ℓ̃_{J_{h−1}}(i, λ_h) from J_{h−1}'s ``leading`` greedy pivots
    (:meth:`_Dictionary.leading`: the first entries of the same triangular solve). A draw proposes
    candidate i with probability ∝ (its multiplicity in U_h)·b_i and accepts it with probability
    ℓ̃_i/b_i, so every accepted draw is an exact draw from P_h (line 9). Σ_U ℓ̃ — d_h (line 8) and
    p in A_h (line 10) — is Σ_U b times the mean of ℓ̃/b over :data:`REJECTION_PILOT` proposals drawn
    before and apart from line 9's: an unbiased estimate whose relative error is the ratio's
    coefficient of variation over √REJECTION_PILOT. ``total`` is None when that pilot accepts too
    few (:data:`REJECTION_MIN_ACCEPTANCE`).
    ``scores`` holds ℓ̃ where it was computed (NaN elsewhere).
    """

    def __init__(
        self,
        ctx: _Context,
        previous: LeverageLevel,
        lam: float,
        distinct: torch.Tensor,
        multiplicity: torch.Tensor,
        leading: int,
    ):
        self.ctx, self.distinct = ctx, distinct
        self.dictionary = ctx.dictionary(previous, lam, pivots=leading)
        self.bound = self.dictionary.leading(leading).scores(distinct)
        self.mass = (self.bound * multiplicity).cpu()
        bound_total = float(self.mass.sum())
        if not bound_total > 0:
            raise ValueError(f"all approximate leverage scores are zero at penalty={lam:g}: check the kernel")
        self.scores = torch.full_like(self.bound, math.nan)
        _, ratio = self._propose(REJECTION_PILOT)
        self.acceptance = float(ratio.mean())
        worth_it = self.acceptance >= REJECTION_MIN_ACCEPTANCE
        self.total = bound_total * self.acceptance if worth_it else None  # ≈ Σ_U ℓ̃
        log.debug(
            "bless level λ=%.3g: %d leading points bound %d candidates, acceptance %.3f",
            lam,
            leading,
            distinct.numel(),
            self.acceptance,
        )

    @property
    def scored(self) -> int:
        return int((~torch.isnan(self.scores)).sum())

    def _propose(self, m: int) -> tuple[torch.Tensor, torch.Tensor]:
        """m proposals ∝ multiplicity·bound, with ℓ̃/b for each (Eq. 3 completed where new)."""
        k = torch.multinomial(self.mass, m, replacement=True, generator=self.ctx.generator).to(self.bound.device)
        new = torch.unique(k[torch.isnan(self.scores[k])])
        if new.numel():
            self.scores[new] = self.dictionary.scores(self.distinct[new])
        return k, self.scores[k] / self.bound[k]

    def draw(self, m: int) -> torch.Tensor:
        """m i.i.d. draws from P_h, in the order accepted: positions in the distinct candidates."""
        accepted, count = [], 0
        while count < m:
            tries = math.ceil(1.2 * (m - count) / self.acceptance) + 16
            k, ratio = self._propose(tries)
            k = k[self.ctx.rand(tries) < ratio]
            accepted.append(k)
            count += k.numel()
        return torch.cat(accepted)[:m]


class _NestedCandidates:
    """BLESS-R's U_h = {i : u_i < β_h} with one u ~ Uniform[0,1]ⁿ: nested as β_h grows (Sect. 2.4)."""

    def __init__(self, ctx: _Context):
        u = torch.rand(ctx.n, generator=ctx.generator, dtype=torch.float64, device="cpu")
        self.sorted_u, order = torch.sort(u)
        self.order = order.to(ctx.X.device)

    def below(self, beta: float) -> torch.Tensor:
        return self.order[: int(torch.searchsorted(self.sorted_u, beta))]


def _bless_r_level(
    ctx: _Context, previous: LeverageLevel | None, lam: float, state: tuple[_NestedCandidates, str]
) -> LeverageLevel:
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
    scores = (
        ctx.dictionary(previous, lam).scores(U)
        if U.numel()
        else torch.zeros(0, dtype=torch.float64, device=ctx.X.device)
    )
    marginal = (ctx.q2 * scores).clamp_(max=beta)  # min(p, β) ≤ 1
    accept = ctx.rand(U.numel()) < marginal / beta
    kept = 1.0
    if ctx.target_size is not None and int(accept.sum()) > ctx.target_size:
        # U runs in increasing u: keeping the accepted candidates up to the target-th is Alg. 2 with
        # the candidates u < β' (β' that one's u), so each inclusion probability shrinks by β'/β.
        last = int(torch.nonzero(accept)[ctx.target_size - 1])
        accept[last + 1 :] = False
        kept = min(float(candidates.sorted_u[last]) / beta, 1.0)
    order = torch.argsort(U[accept])
    indices = U[accept][order]
    conditional = marginal[accept][order] / beta
    probabilities = conditional * beta * kept
    weights = conditional if weight_rule == "conditional" else probabilities
    return LeverageLevel(
        lam,
        indices,
        weights,
        probabilities,
        torch.ones_like(indices),
        float(scores.sum()) / beta,
        int(U.numel()),
        n,
        expected_size=float(marginal.sum()) / beta * kept,
    )


def _bottom_up(
    method: str,
    level_fn,
    make_state,
    X,
    kernel,
    penalty,
    *,
    q,
    q1,
    q2,
    lambda0,
    seed,
    points,
    target_size,
    memory_budget,
    precision,
    timeout=None,
    extra_params=None,
) -> LeverageResult:
    """The loop shared by Alg. 1 and Alg. 2: λ_1 > … > λ_H, each level sampling from the last.

    ``target_size`` stops the descent at the first level whose dictionary reaches that many
    points, and keeps exactly that many there (BLESS: its draws until then, :func:`_line9_draws`,
    which also lets the first level whose M_h reaches the target draw on to it; BLESS-R: the accepted
    candidates of smallest u): the centre selectors use it to find the λ a budget of M centres can
    resolve, and to keep to the budget.
    """
    kernel, X, kappa2, lam, point_idx = _sampler_inputs(X, kernel, penalty, points)
    n = X.shape[0]
    q, q1, lambda0 = _path_inputs(q, q1, lambda0, lam, kappa2)
    q2 = check_positive(DEFAULT_Q2 if q2 is None else q2, "q2")
    if target_size is not None:
        target_size = check_int(target_size, "target_size")
        if target_size > n:
            raise ValueError(f"target_size={target_size} exceeds the n={n} points of X")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    ctx = _Context(X, kernel, kappa2, q1, q2, _generator(seed), memory_budget, precision, target_size)
    penalties = lambda_path(lambda0, lam, q)
    check_time(path_estimate(method, X, kernel, q1, q2, penalties, memory_budget), timeout)
    state = make_state(ctx)
    levels: list[LeverageLevel] = []
    note = ""
    t0 = time.perf_counter()
    previous = None
    for lam_h in penalties:
        t = time.perf_counter()
        level = level_fn(ctx, previous, lam_h, state)
        level.seconds = time.perf_counter() - t
        log.debug(
            "%s level %d: λ=%.3g |U|=%d |J|=%d d_eff≈%.1f",
            method,
            len(levels) + 1,
            lam_h,
            level.n_candidates,
            level.size,
            level.d_eff,
        )
        levels.append(level)
        previous = level
        if target_size is not None and level.size >= target_size:
            if lam_h > lam * (1 + 1e-12):
                note = (
                    f"stopped at λ={lam_h:.3g} (level {len(levels)}): the dictionary reached target_size={target_size}"
                )
            break
    seconds = time.perf_counter() - t0
    if previous.size == 0:
        raise ValueError(
            f"{method} selected no points at the final level (λ={previous.penalty:g}): raise q2 "
            f"(dictionary oversampling) or q1 (candidates)"
        )
    params = {
        "q": q,
        "q1": q1,
        "q2": q2,
        "lambda0": lambda0,
        "penalty": lam,
        "target_size": target_size,
        "precision": precision,
        **(extra_params or {}),
    }
    result = LeverageResult(method, n, kappa2, levels, params, seconds=seconds, note=note)
    return _with_scores(result, X, kernel, point_idx, memory_budget)


def _with_scores(result: LeverageResult, X, kernel, point_idx, memory_budget) -> LeverageResult:
    """Attach Eq. (3) at the final level for the requested (validated) points; None: none."""
    if point_idx is None:
        return result
    t = time.perf_counter()
    result.points = point_idx
    result.scores = _Dictionary(
        kernel, X, result.indices, result.weights, result.penalty * X.shape[0], memory_budget
    ).scores(result.points)
    result.score_seconds = time.perf_counter() - t
    return result


def bless(
    X,
    kernel,
    penalty,
    *,
    q: float = DEFAULT_Q,
    q1: float | None = None,
    q2: float | None = None,
    lambda0: float | None = None,
    seed=0,
    points=None,
    target_size: int | None = None,
    memory_budget: int | None = None,
    precision: str = "float32",
    timeout: float | None = None,
) -> LeverageResult:
    """BLESS, Alg. 1: leverage-score sampling with replacement along λ_0 > λ_1 > … > λ_H = λ.

    Level h draws R_h = q1·min(κ²/λ_h, n) uniform candidates U_h, scores them with Eq. (3) on
    J_{h−1}, estimates d_h = (n/R_h)Σ_U ℓ̃, and draws M_h = ⌈q2·d_h⌉ points from U_h with
    probabilities ∝ ℓ̃ (duplicates merged); A_h = (R_h M_h/n)·diag(p) (line 10), divided by the
    multiplicity of merged points. Cost O(Σ_h R_h M_{h−1}²): independent of n once n > q1κ²/λ.
    Where the candidates far outnumber the dictionary (:func:`_leading_size`), a level scores them
    all against a few of its points only, and completes Eq. (3) for the candidates its draws
    propose (:class:`_BoundedCandidates`; the draws are still exact draws from P_h).

    Parameters
    ----------
    penalty : λ of (K + λnI); must be below κ² = max K(x, x).
    q : λ step (> 1). q1 : candidate oversampling. q2 : dictionary oversampling
        (|J_H| ≈ q2·d_eff(λ)). Theorem 1 asks for q1, q2 ∝ log(n/δ)/t² (thousands); we default
        to 4 and 4: on N(0, I) data R-ACC's 5–95% band is then about [0.85, 1.3]. When d_eff is
        dominated by a few isolated points (clusters + outliers) the band widens to about
        [0.7, 2.3] — exact-score sampling with the same q2 does no better; q2 = 16 brings it
        back inside [0.5, 2] (tests/core/test_leverage.py).
    lambda0 : start of the path; default κ² (Theorem 1: κ²/min(t, 1)).
    seed : int or torch.Generator. points : indices (or "all") whose Eq. (3) scores to return.
    target_size : stop descending at the first level whose dictionary reaches this many points,
        and keep this many there (:func:`_bottom_up`).
    precision : "float32" (default) or "float64": the candidates' kernel columns and triangular
        solves (line 6, Eq. 3), the cost of every level. float32 halves it; its rounding is checked
        on each level's smallest scores and the level falls back to float64 when it matters
        (:class:`~krrcore.leverage.dictionary._Dictionary`). The dictionary's factor, the scores
        returned for ``points`` and everything else stay float64.
    timeout : seconds; a path whose estimated time exceeds it is refused before it starts
        (:class:`~krrcore.memory.TimeLimitError`), and one estimated past a minute warns
        (:class:`~krrcore.memory.SlowFitWarning`), as for the estimators (:mod:`krrcore.leverage.cost`).
    """
    return _bottom_up(
        "bless",
        _bless_level,
        lambda ctx: None,
        X,
        kernel,
        penalty,
        q=q,
        q1=q1,
        q2=q2,
        lambda0=lambda0,
        seed=seed,
        points=points,
        target_size=target_size,
        memory_budget=memory_budget,
        precision=precision,
        timeout=timeout,
    )


def bless_r(
    X,
    kernel,
    penalty,
    *,
    q: float = DEFAULT_Q,
    q1: float | None = None,
    q2: float | None = None,
    lambda0: float | None = None,
    seed=0,
    points=None,
    target_size: int | None = None,
    memory_budget: int | None = None,
    weight_rule: str = "marginal",
    precision: str = "float32",
    timeout: float | None = None,
) -> LeverageResult:
    """BLESS-R, Alg. 2: Bernoulli (without replacement) sampling along the same λ path.

    Candidates U_h are nested: U_h = {i : u_i < β_h}, β_h = min(q1κ²/(λ_h n), 1) (the paper
    notes nesting is allowed for Alg. 2). Each j ∈ U_h enters J_h with probability p_j/β_h,
    p_j = min(q2·ℓ̃_{J_{h−1}}(j, λ_h), 1); A_h = diag(min(p_j, β_h)), the marginal inclusion
    probabilities (line 13). ``weight_rule="conditional"`` stores p_j/β_h instead — the public
    code's defect, kept only to measure it. Other parameters as :func:`bless`.
    """
    if weight_rule not in ("marginal", "conditional"):
        raise ValueError(f"weight_rule must be 'marginal' or 'conditional', got {weight_rule!r}")
    return _bottom_up(
        "bless_r",
        _bless_r_level,
        lambda ctx: (_NestedCandidates(ctx), weight_rule),
        X,
        kernel,
        penalty,
        q=q,
        q1=q1,
        q2=q2,
        lambda0=lambda0,
        seed=seed,
        points=points,
        target_size=target_size,
        memory_budget=memory_budget,
        precision=precision,
        timeout=timeout,
        extra_params={"weight_rule": weight_rule},
    )

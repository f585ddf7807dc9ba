"""Eq. (3) of the BLESS paper: approximate leverage scores from a weighted dictionary (J, A)."""

from __future__ import annotations

import copy
import logging
import math

import torch

from .._validation import check_positive
from ..kernels import Kernel
from ..linalg import jitter_cholesky
from ..memory import check_fits, scratch_budget, worker_memory_left
from ..ops import block_rows_for_budget
from ..rows import rows_of
from ._inputs import _as_float64, _check_kernel, _index_tensor
from .results import LeverageLevel, LeverageResult

log = logging.getLogger(__name__)

#: Scoring in float32 (``precision="float32"``) is checked: the candidates with the smallest float32
#: scores (the largest cancellation in K_ii − ‖w‖²) and as many drawn at random are scored again in
#: float64. The errors found, relative to max(score, mean score), must stay below
#: FLOAT32_SCORE_RTOL / FLOAT32_TAIL, else every candidate is scored in float64. The errors are
#: heavy-tailed: on clustered data with outliers the largest of all was up to 20× the largest of
#: such a sample (tests/core/test_leverage.py), hence the margin. Within 1% of max(score, mean), each
#: score above the mean moves by at most 1% and the sampling probabilities ∝ ℓ̃ by at most 2% in
#: total variation (Σ|δᵢ| ≤ 1%·(Σℓ̃ + n·mean)).
FLOAT32_CHECKED = 256
FLOAT32_SCORE_RTOL = 1e-2
FLOAT32_TAIL = 30
PRECISIONS = ("float64", "float32")


class _Dictionary:
    """Eq. (3) for one dictionary (J, A) and ridge λn, factorised once.

    With S = A^(−1/2) and L Lᵀ = S K_JJ S + λnI:  K_Jiᵀ(K_JJ + λnA)⁻¹K_Ji = ‖L⁻¹ S K_Ji‖², so
    ℓ̃_J(i, λ) = (K_ii − ‖L⁻¹ S K_Ji‖²)/(λn). The S-scaled form keeps the ridge λnI on the diagonal
    however small A's entries are. An empty J gives ℓ̃ = K_ii/(λn) (Alg. 1–2, first level).

    ``precision="float32"`` (BLESS's candidate scoring, where the scores only set sampling
    probabilities) forms K_Ji and solves with L in float32: the solve, |J|²
    flops per point, is what BLESS's levels cost, and it runs about twice as fast. L is factorised
    in float64 either way, and K_ii − ‖w‖² is taken in float64. The rounding this adds to a score is
    checked on each call, not assumed (:data:`FLOAT32_CHECKED`): on the nycflights13 table (σ = 3,
    |J| = 1,522, λn = 7.3) the largest relative error of 20,000 float32 scores was 2e-4 and the
    sampling probabilities moved by 5e-6 in total variation; where λn is small against ‖S K_JJ S‖
    (an ill-conditioned L) float32 loses percents and the check falls back to float64.
    """

    def __init__(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        indices: torch.Tensor,
        weights: torch.Tensor,
        ridge: float,
        memory_budget: int | None = None,
        precision: str = "float64",
        pivots: int = 0,
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        self.kernel, self.X, self.ridge, self.precision = kernel, X, float(ridge), precision
        self.size = int(indices.numel())
        self.indices = indices  # J, in the order of the factor's rows
        self._given_budget = memory_budget
        self.memory_budget = scratch_budget(memory_budget, X.device)
        if self.size == 0:
            return
        check_fits(
            3 * self.size**2 * 8,
            f"a leverage dictionary of {self.size} points",
            "raise penalty (fewer points have large scores) or lower q2",
            memory_budget,
            X.device,
        )
        self._PJ = kernel.prepare(X[indices])
        self._s = weights.to(dtype=torch.float64, device=X.device).rsqrt()
        B = kernel.block(self._PJ, self._PJ)
        B.mul_(self._s.unsqueeze(0)).mul_(self._s.unsqueeze(1)).diagonal().add_(self.ridge)
        if pivots:  # J reordered so that its leading points span most of the others (see leading())
            order = _pivot_order(B, min(int(pivots), self.size))
            indices, self._s, B = indices[order], self._s[order], B[order][:, order]
            self._PJ, self.indices = kernel.prepare(X[indices]), indices
        self._L, _ = jitter_cholesky(B, 0.0, name="S K_JJ S + λnI")
        self._float32 = None
        if precision == "float32":  # K(J, ·)'s dictionary side, S and L, rounded once
            self._float32 = (kernel.prepare(X[indices].float()), self._s.float(), self._L.float())

    #: The attributes :meth:`state` carries, in order (the factor, not the data).
    _STATE = ("kernel", "ridge", "_given_budget", "size", "_PJ", "_s", "_L", "precision", "_float32")
    #: What an empty dictionary has no value for.
    _FACTOR = ("_PJ", "_s", "_L", "_float32")

    def state(self) -> tuple:
        """What :meth:`from_state` needs to score rows elsewhere (a Dask worker holding a shard):
        the factor, not the data."""
        empty = self.size == 0
        return tuple(None if empty and name in self._FACTOR else getattr(self, name) for name in self._STATE)

    @classmethod
    def from_state(cls, state: tuple, X: torch.Tensor) -> "_Dictionary":
        """The dictionary of :meth:`state`, scoring rows of ``X`` (no new factorisation) with a
        scratch budget from this process's memory (a worker's limit, on a worker)."""
        self = cls.__new__(cls)
        for name, value in zip(cls._STATE, state, strict=True):
            setattr(self, name, value)
        self.indices = None  # J's rows stay on the client: here only K(J, ·) is needed
        self.memory_budget = scratch_budget(self._given_budget, available=worker_memory_left())
        self.X = X
        return self

    def scores(self, idx: torch.Tensor) -> torch.Tensor:
        """ℓ̃_J(i, λ) for the rows ``idx`` of X, computed where the rows are (:mod:`krrcore.rows`:
        on rows sharded on a Dask cluster each worker scores its own, from :meth:`state`).

        In float32 some scores are computed again in float64 to check the rounding, all at once
        wherever the rows are (:data:`FLOAT32_CHECKED`); the checked ones keep their float64 value."""
        rows = rows_of(self.X)
        out = rows.leverage_scores(self, idx)
        if self.precision == "float64" or self.size == 0:
            return out
        m = out.numel()
        smallest = torch.topk(out, min(FLOAT32_CHECKED, m), largest=False).indices
        drawn = torch.randperm(m, generator=torch.Generator().manual_seed(0), device="cpu")  # the generator's device
        drawn = drawn[:FLOAT32_CHECKED].to(out.device)
        checked = torch.unique(torch.cat([smallest, drawn]))
        exact = rows.leverage_scores(self._in_float64(), idx[checked])
        error = float(((out[checked] - exact).abs() / exact.clamp_min(float(out.mean()))).max())
        if error * FLOAT32_TAIL > FLOAT32_SCORE_RTOL:
            log.info(
                "float32 leverage scores off by up to %.3g (relative) on %d of %d points checked in float64: "
                "scoring all in float64",
                error,
                checked.numel(),
                m,
            )
            return rows.leverage_scores(self._in_float64(), idx)
        out[checked] = exact
        return out

    def leading(self, size: int) -> "_Dictionary":
        """The dictionary of J's first ``size`` points with their own weights, sharing the factor.

        Its factor is L's leading block, and its solve is the first ``size`` entries of this one's:
        w = L⁻¹SK_Ji gives ‖w‖² ≥ ‖w_{:size}‖², so its scores bound this dictionary's from above
        (exactly; float32 rounding aside) at size²/|J|² of the cost. Built with ``pivots`` ≥ ``size``,
        the leading points are greedy pivots and the bound is tight where it matters.
        """
        size = int(size)
        if not 0 < size <= self.size:
            raise ValueError(f"a leading sub-dictionary needs 1 to {self.size} points, got {size}")
        part = copy.copy(self)
        part.size, part.indices = size, self.indices[:size]
        part._PJ, part._s, part._L = self._PJ.rows(0, size), self._s[:size], self._L[:size, :size].contiguous()
        if self._float32 is not None:
            PJ, s, L = self._float32
            part._float32 = (PJ.rows(0, size), s[:size], L[:size, :size].contiguous())
        return part

    def _in_float64(self) -> "_Dictionary":
        """The same dictionary, scoring in float64 (shares the factor)."""
        twin = copy.copy(self)
        twin.precision, twin._float32 = "float64", None
        return twin

    def local_scores(self, idx: torch.Tensor) -> torch.Tensor:
        """ℓ̃_J(i, λ) for the rows ``idx`` of X held here, in the dictionary's precision, kernel blocks of
        K(J, ·) under the memory budget."""
        if self.size == 0:
            return torch.div(self.kernel.diag(self.X[idx]), self.ridge)
        return self._scores_in(idx, torch.float64 if self.precision == "float64" else torch.float32)

    def _scores_in(self, idx: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Eq. (3) for ``idx`` with K_Ji and the solve in ``dtype``; K_ii − ‖w‖² in float64."""
        m = int(idx.numel())
        out = torch.empty(m, dtype=torch.float64, device=self.X.device)
        PJ, s, L = (self._PJ, self._s, self._L) if dtype == torch.float64 else self._float32
        itemsize = torch.finfo(dtype).bits // 8
        # Per point: one kernel column and its triangular solve (hence one extra scratch block).
        cols = block_rows_for_budget(
            m,
            self.size,
            itemsize=itemsize,
            budget_bytes=self.memory_budget,
            scratch_blocks=self.kernel.scratch_blocks + 1,
        )
        buffer = torch.empty(self.size * cols, dtype=dtype, device=self.X.device)
        for start in range(0, m, cols):
            stop = min(start + cols, m)
            Xb = self.X[idx[start:stop]]
            Kb = self.kernel.block(
                PJ,
                self.kernel.prepare(Xb.to(dtype)),
                out=buffer[: self.size * (stop - start)].view(self.size, stop - start),
            )
            Kb.mul_(s.unsqueeze(1))
            W = torch.linalg.solve_triangular(L, Kb, upper=False, out=Kb)  # in place: no |J|×cols temporaries
            # Summed in the solve's dtype (cascade summation: ~1e-7 relative in float32, below the solve's rounding).
            out[start:stop] = (_checked_rows_diag(self.kernel, Xb) - W.square_().sum(0).double()) / self.ridge
        return out.clamp_min_(0.0)  # ≥ 0 in exact arithmetic; round-off can dip below


def _pivot_order(B: torch.Tensor, count: int, block: int = 16) -> torch.Tensor:
    """A permutation of B's rows whose first ``count`` are the pivots of a greedy partial Cholesky of
    B, chosen ``block`` at a time: the points of largest residual diagonal (those the points before
    them span worst), then the residual updated for all of them at once with one small Cholesky of
    their Schur complement (positive definite: B = SK_JJS + λnI). O(|J|·count²) in matrix products."""
    size = B.shape[0]
    residual = B.diagonal().clone()
    columns = B.new_empty(size, count)
    chosen = torch.zeros(size, dtype=torch.bool, device=B.device)
    pivots, k = [], 0
    while k < count:
        P = torch.topk(residual.masked_fill(chosen, -math.inf), min(block, count - k)).indices
        schur = B[:, P] - columns[:, :k] @ columns[P, :k].T  # the residual's columns P
        factor = torch.linalg.cholesky(schur[P])
        new = torch.linalg.solve_triangular(factor, schur.T, upper=False).T
        columns[:, k : k + P.numel()] = new
        residual.sub_(new.square().sum(1))
        chosen[P] = True
        pivots.append(P)
        k += P.numel()
    return torch.cat([*pivots, torch.arange(size, device=B.device)[~chosen]])


def _checked_rows_diag(kernel: Kernel, rows: torch.Tensor) -> torch.Tensor:
    """K(x, x) for rows of an X already checked on entry: a stationary kernel's is K(0), the same for
    every row (``Kernel.diag`` would check every block's rows again, ~20% of BLESS's time)."""
    if kernel.constant_diag:
        return kernel.diag(rows[:1]).expand(rows.shape[0])
    return kernel.diag(rows)


def approximate_scores(
    X, kernel, penalty, result_level, points=None, *, memory_budget: int | None = None
) -> torch.Tensor:
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
        raise ValueError(
            f"result_level holds index {int(level.indices.max())} but X has only n={n} rows: "
            f"pass the X it was computed on"
        )
    idx = _index_tensor(points, n, X.device)
    J = level.indices.to(X.device)
    return _Dictionary(kernel, X, J, level.weights, lam * n, memory_budget).scores(idx)


def scores_from_state(state: tuple, X: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """Eq. (3) for the rows ``idx`` of ``X``, from a dictionary's :meth:`~_Dictionary.state` (its
    factor, not its data): how a process that holds only some rows, e.g. a Dask worker holding a
    shard, scores them without factorising again."""
    return _Dictionary.from_state(state, X).scores(idx)

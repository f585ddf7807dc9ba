"""Eq. (3) of the BLESS paper: approximate leverage scores from a weighted dictionary (J, A)."""
from __future__ import annotations

import torch

from .._validation import check_positive
from ..kernels import Kernel
from ..linalg import jitter_cholesky
from ..memory import check_fits, scratch_budget, worker_memory_left
from ..ops import block_rows_for_budget
from ..rows import rows_of
from ._inputs import _as_float64, _check_kernel, _index_tensor
from .results import LeverageLevel, LeverageResult


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
        self._given_budget = memory_budget
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

    def state(self) -> tuple:
        """What :meth:`from_state` needs to score rows elsewhere (a Dask worker holding a shard):
        the factor, not the data."""
        if self.size == 0:
            return (self.kernel, self.ridge, self._given_budget, 0, None, None, None)
        return (self.kernel, self.ridge, self._given_budget, self.size, self._PJ, self._s, self._L)

    @classmethod
    def from_state(cls, state: tuple, X: torch.Tensor) -> "_Dictionary":
        """The dictionary of :meth:`state`, scoring rows of ``X`` (no new factorisation) with a
        scratch budget from this process's memory (a worker's limit, on a worker)."""
        self = cls.__new__(cls)
        self.kernel, self.ridge, self._given_budget, self.size, self._PJ, self._s, self._L = state
        self.memory_budget = scratch_budget(self._given_budget, available=worker_memory_left())
        self.X = X
        return self

    def scores(self, idx: torch.Tensor) -> torch.Tensor:
        """ℓ̃_J(i, λ) for the rows ``idx`` of X, computed where the rows are (:mod:`krrcore.rows`:
        on rows sharded on a Dask cluster each worker scores its own, from :meth:`state`)."""
        return rows_of(self.X).leverage_scores(self, idx)

    def local_scores(self, idx: torch.Tensor) -> torch.Tensor:
        """ℓ̃_J(i, λ) for the rows ``idx`` of X held here, kernel blocks of K(J, ·) under the memory budget."""
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
            W = torch.linalg.solve_triangular(self._L, Kb, upper=False, out=Kb)    # in place: no |J|×cols temporaries
            out[start:stop] = (self.kernel.diag(Xb) - W.square_().sum(0)) / self.ridge
        return out.clamp_min_(0.0)   # ≥ 0 in exact arithmetic; round-off can dip below


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

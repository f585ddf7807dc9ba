"""The rows a tuning's answer is chosen and checked on: k folds, or one held-out part, drawn once by seed.

Whatever objective drives the search, :class:`~krrcore.tuning.FalkonCV` lets the candidates it
proposes compete on rows the models did not fit. For fixed σ and centres the Nyström model fitted
without the rows of block b has the sums of the others, G − G_b, R − R_b (FALKON Eq. 8 reads the
rows only through them, :mod:`krrcore.tuning.objectives`), so one blocked pass over the rows,
kept per block, gives every fold's model, and each fold's closed form in λ
(:class:`~krrcore.tuning.objectives.PenaltyProfile`) gives its held-out errors at every λ: the
check costs one pass and one M×M eigenproblem per fold, never a refit per candidate.

* ``folds = k > 1``: every row is held out once (k-fold cross-validation), so the error is an
  average over all n rows: on small tables a held-out fifth of a few hundred rows is too noisy to
  choose by (concrete, 824 rows: the fifth's choice had a test error 11% above the best point of a
  10 × 10 grid).
* ``folds = 1``: one held-out part of ``fraction`` of the rows, the rest fitted (large tables,
  where the part has thousands of rows and k eigenproblems would cost more than the pass).
"""

from __future__ import annotations

import torch

from ..memory import storage_budget
from .objectives import (
    PenaltyProfile,
    Stats,
    gaussian_block,
    jittered_factor,
    minimise_log,
    row_stats,
    sigma_value,
)

#: folds="auto": k-fold below this many tuning rows, one held-out part above.
KFOLD_BELOW = 5_000
#: folds="auto": k.
AUTO_FOLDS = 5


def fold_count(folds, n: int) -> int:
    """k for ``folds`` ("auto", or an integer ≥ 1) on n rows."""
    if folds == "auto":
        return AUTO_FOLDS if n < KFOLD_BELOW else 1
    return max(1, min(int(folds), n // 2))


def draw_folds(n: int, k: int, fraction: float, seed: int) -> list[torch.Tensor]:
    """The held-out blocks (row indices into the n tuning rows), drawn once by seed: k disjoint
    folds covering every row, or (k = 1) one part of ``fraction`` of the rows."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed) + 7919))
    if k == 1:
        n_val = min(max(1, round(fraction * n)), n - 2)
        return [order[:n_val].sort().values]
    return [order[i::k].sort().values for i in range(k)]


class Checker:
    """Held-out errors of the Nyström model at any (σ, centres, λ), on the blocks of
    :func:`draw_folds` (see the module docstring). ``errors(log_sigma, Z, λ)``: one squared error
    per held-out row (averaged over the outputs), in the order of :attr:`rows`; ``best``: the λ
    with the lowest mean."""

    def __init__(self, X: torch.Tensor, Y: torch.Tensor, blocks: list[torch.Tensor], memory_budget=None):
        self.X, self.Y, self.blocks, self.memory_budget = X, Y, blocks, memory_budget
        self.rows = torch.cat(blocks)
        covered = torch.zeros(X.shape[0], dtype=torch.bool)
        covered[self.rows] = True
        self.rest = torch.nonzero(~covered).reshape(-1)  # rows never held out (one held-out part)
        self._key, self._profiles, self._best = None, None, {}

    def profiles(self, log_sigma: torch.Tensor, Z: torch.Tensor, total: Stats | None = None) -> list[PenaltyProfile]:
        """One closed form per held-out block: the model fitted on the other rows, its validation
        outputs on the block (kept for the next call at the same σ and centres). ``total``: the
        sums over all the rows at this σ and centres, when the caller has them (the search does):
        then the rows never held out need no pass of their own, and where its operator holds K_nM
        whole the blocks' kernel rows are taken from it."""
        key = (log_sigma.detach().numpy().tobytes(), Z.detach().numpy().tobytes())
        if key == self._key:
            return self._profiles
        sigma = sigma_value(log_sigma)
        # The folds hold their kernel rows within a quarter of the storage budget (the search keeps
        # its own blocks within half): taken from the search's cached K_nM where its gathered copy
        # and the folds' rows (two n × M matrices) fit that quarter, else kept from their own passes.
        room = storage_budget(self.memory_budget, self.X.device) // 4
        held = total is not None and total.op is not None and total.op.cached_rows == total.n == self.X.shape[0]
        whole = total.op.cached_matrix() if held and 2 * total.n * Z.shape[0] * self.X.element_size() <= room else None
        if whole is not None:  # the search's K_nM: rows picked, not recomputed
            parts = []
            for b in self.blocks:
                K, Y = whole[b], self.Y[b]
                parts.append(Stats(K.T @ K, K.T @ Y, float((Y * Y).sum()), len(b), None, Y, K))
        else:
            n = max(int(self.rows.numel()), 1)
            parts = [
                row_stats(self.X[b], self.Y[b], Z, sigma, self.memory_budget, cache_bytes=room * len(b) // n)
                for b in self.blocks
            ]
        total_G = sum(p.G for p in parts)
        total_R = sum(p.R for p in parts)
        total_yy, total_n = sum(p.yy for p in parts), sum(p.n for p in parts)
        if len(self.rest) and total is not None:
            total_G, total_R, total_yy, total_n = total.G, total.R, total.yy, total.n
        elif len(self.rest):
            rest = row_stats(self.X[self.rest], self.Y[self.rest], Z, sigma, self.memory_budget)
            total_G, total_R = total_G + rest.G, total_R + rest.R
            total_yy, total_n = total_yy + rest.yy, total_n + rest.n
        Kmm = gaussian_block(Z, Z, log_sigma.detach())
        factor = jittered_factor(Kmm)  # one K_MM for every fold
        profiles = []
        for part in parts:
            fitted = Stats(total_G - part.G, total_R - part.R, total_yy - part.yy, total_n - part.n)
            profiles.append(PenaltyProfile("holdout", fitted, Kmm, part, factor=factor))
        self._key, self._profiles, self._best = key, profiles, {}
        return profiles

    def errors(self, log_sigma: torch.Tensor, Z: torch.Tensor, penalty: float, total=None) -> torch.Tensor:
        return torch.cat([p.val_residual(penalty).pow(2).mean(1) for p in self.profiles(log_sigma, Z, total)])

    def values(self, log_sigma: torch.Tensor, Z: torch.Tensor, penalties, total=None) -> torch.Tensor:
        """Mean held-out error over all held-out rows at each λ of ``penalties``."""
        profiles = self.profiles(log_sigma, Z, total)
        n = sum(p.val.n for p in profiles)
        return sum(p.values(penalties) * p.val.n for p in profiles) / n

    def best(
        self, log_sigma: torch.Tensor, Z: torch.Tensor, low: float, high: float, total=None
    ) -> tuple[float, float]:
        """(λ, mean held-out error) minimising the held-out error over [low, high] (kept with the
        profiles: a probe of the held-out line asks for it twice, to move and to propose)."""
        self.profiles(log_sigma, Z, total)  # a new σ or centres clears what is kept
        if (low, high) not in self._best:
            self._best[low, high] = minimise_log(lambda lam: self.values(log_sigma, Z, lam, total), low, high)
        return self._best[low, high]

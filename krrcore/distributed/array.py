"""The sharded array: an (n, k) array whose row shards live on Dask workers as futures.

Made once and never re-sent (:mod:`krrcore.distributed.data` makes them); tasks on a shard run on
its worker, so only inputs and results of O(M·k) (or O(k) per row, where the algorithm needs it)
travel.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..ops import KernelOperator
from ..memory import scratch_budget, worker_memory_left
from .workers import use_worker_threads


# What runs on a worker, on the rows of one shard.
def _cast(X, dtype):
    return X.to(dtype)


def _take(X, idx):
    return X[idx]


def concat(*parts):
    """One tensor of the parts' rows, in order (the part itself when there is one)."""
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def _shift(Y, offset):
    return (Y.double() - offset).to(Y.dtype)


def _sum_of_squares(Y):
    return float((Y.double() ** 2).sum())


def _moments(X):
    X64 = X.double()
    mean = X64.mean(0)
    return X.shape[0], mean, ((X64 - mean) ** 2).sum(0)


def _distinct_rows(Y, limit):
    return torch.unique(Y, dim=0)[: limit + 1]


def _kernel_diag(X, kernel, how):
    diag = kernel.diag(X)
    return float(diag.max()) if how == "max" else float(diag.double().sum())


def _expansion(X, kernel, Xq, W, memory_budget):
    """Σ over this shard's rows x_j of K(Xq, x_j) W_j: a prediction from sharded centres."""
    use_worker_threads()
    budget = scratch_budget(memory_budget, available=worker_memory_left())
    return KernelOperator(kernel, Xq, X, memory_budget=budget, n_rhs=W.shape[1]).matvec(W)


def _dictionary_scores(X, dictionary_state, idx):
    """Eq. (3) of the BLESS paper for this shard's rows ``idx`` (local indices), float64."""
    from ..leverage.dictionary import scores_from_state

    use_worker_threads()
    return scores_from_state(dictionary_state, X, idx)


def sum_in_order(parts, dtype) -> torch.Tensor:
    """Σ parts in shard order (the client-side reduction), accumulated in ``dtype``."""
    total = parts[0].to(dtype=dtype, copy=True)
    for part in parts[1:]:
        total.add_(part)
    return total


class ShardedArray:
    """An (n, k) array whose row shards live on Dask workers: ``futures[s]`` holds rows
    ``offsets[s]:offsets[s+1]`` as a CPU tensor on worker ``workers[s]``.

    Tasks on a shard run on its worker (``workers=[...]``, never moved), so the rows stay where
    they are; only inputs and results of O(M·k) (or O(k) per row, where the algorithm needs it)
    travel. ``X[idx]`` gathers a few rows by global index (centres, a BLESS dictionary). Targets
    are a ShardedArray of shape (n, k) with the same shards; ``was_1d`` says y was 1-D.
    """

    def __init__(self, client, futures, sizes, workers, width: int, dtype: torch.dtype, *, was_1d: bool = False):
        self.client = client
        self.futures = list(futures)
        self.sizes = [int(s) for s in sizes]
        self.workers = list(workers)
        self.width = int(width)
        self.dtype = dtype
        self.device = torch.device("cpu")
        self.was_1d = bool(was_1d)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)

    ndim = 2

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.offsets[-1]), self.width

    @property
    def n_shards(self) -> int:
        return len(self.futures)

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return (
            f"ShardedArray(shape={self.shape}, dtype={str(self.dtype).removeprefix('torch.')}, "
            f"{self.n_shards} shards on {len(set(self.workers))} workers)"
        )

    def element_size(self) -> int:
        return torch.finfo(self.dtype).bits // 8

    def submit(self, fn, shard: int, *args):
        """``fn(rows of shard, *args)`` on the shard's worker."""
        return self.client.submit(
            fn, self.futures[shard], *args, workers=[self.workers[shard]], allow_other_workers=False, pure=False
        )

    def map(self, fn, *args, per_shard=None) -> list:
        """``fn(rows, *args[, per_shard[s]])`` on every shard's worker: a future per shard."""
        return [
            self.submit(fn, s, *args, *(() if per_shard is None else (per_shard[s],))) for s in range(self.n_shards)
        ]

    def like(self, futures, *, width: int | None = None, dtype: torch.dtype | None = None) -> "ShardedArray":
        """An array with the same shards (sizes, workers) holding ``futures``."""
        return ShardedArray(
            self.client,
            futures,
            self.sizes,
            self.workers,
            self.width if width is None else width,
            self.dtype if dtype is None else dtype,
            was_1d=self.was_1d,
        )

    def to(self, dtype: torch.dtype) -> "ShardedArray":
        """The same rows in ``dtype`` (cast on the workers; self when it already is)."""
        return self if dtype == self.dtype else self.like(self.map(_cast, dtype), dtype=dtype)

    def shifted(self, offset: torch.Tensor) -> "ShardedArray":
        """The rows less ``offset`` (one value per column, float64), computed on the workers: a fit's
        targets less their mean (``fit_intercept``)."""
        return self.like(self.map(_shift, offset.detach().double().cpu()))

    def cast_futures(self, dtype: torch.dtype) -> list:
        """The shards' futures in ``dtype`` (the futures themselves when they already are)."""
        return self.futures if dtype == self.dtype else self.map(_cast, dtype)

    def split(self, rows: torch.Tensor) -> list[torch.Tensor]:
        """An n-row tensor of this process cut along the shards (what a shard's task receives)."""
        return [rows[self.offsets[s] : self.offsets[s + 1]] for s in range(self.n_shards)]

    def gather(self) -> torch.Tensor:
        """All rows in this process (O(n·k): for targets or a test, not for a large X)."""
        return concat(*self.client.gather(self.futures))

    def locate(self, idx) -> tuple[torch.Tensor, dict[int, np.ndarray]]:
        """Global row indices as a tensor, and for each shard holding some of them their positions in it."""
        idx = torch.as_tensor(idx).reshape(-1).to(device="cpu", dtype=torch.int64)
        n = self.shape[0]
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n):
            raise IndexError(f"row indices must lie in [0, {n}), got [{int(idx.min())}, {int(idx.max())}]")
        shard = np.searchsorted(self.offsets, idx.numpy(), side="right") - 1
        return idx, {int(s): np.flatnonzero(shard == s) for s in np.unique(shard)}

    def _rowwise(self, fn, idx, *args, width: tuple = (), dtype=None) -> torch.Tensor:
        """``fn(rows, *args, local indices)`` on each shard holding some of the global indices
        ``idx``; the per-row results put back in ``idx`` order."""
        idx, where = self.locate(idx)
        futures = {s: self.submit(fn, s, *args, idx[pos] - int(self.offsets[s])) for s, pos in where.items()}
        out = torch.empty(idx.numel(), *width, dtype=dtype or self.dtype)
        for s, part in zip(futures, self.client.gather(list(futures.values()))):
            out[torch.from_numpy(where[s])] = part
        return out

    def __getitem__(self, idx) -> torch.Tensor:
        """Rows by global index, gathered in this process (a few: centres, a dictionary)."""
        if isinstance(idx, (slice, int)):
            raise TypeError("index a ShardedArray with an index tensor or array (rows are gathered by index)")
        return self._rowwise(_take, idx, width=(self.width,))

    def sum_of_squares(self) -> float:
        """Σ of the squared entries, in float64 on the workers."""
        return math.fsum(self.client.gather(self.map(_sum_of_squares)))

    def moments(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Column means and (unbiased) standard deviations in float64: each shard's mean and centred
        sum of squares, combined pairwise (Chan, Golub & LeVeque's update), so that an offset far
        larger than the spread (X + 1e8) costs no digits, as Σx² − n·mean² would."""
        n, mean, m2 = 0, None, None
        for count, m, s in self.client.gather(self.map(_moments)):
            if count == 0:
                continue
            if mean is None:
                n, mean, m2 = count, m, s
                continue
            delta, total = m - mean, n + count
            mean = mean + delta * (count / total)
            m2 = m2 + s + delta**2 * (n * count / total)
            n = total
        return mean, (m2 / max(n - 1, 1)).sqrt()

    def distinct_rows(self, limit: int = 3) -> torch.Tensor:
        """Up to ``limit + 1`` distinct rows from every shard: enough to tell ±1 or one-hot targets
        from regression targets without gathering them."""
        return torch.unique(concat(*self.client.gather(self.map(_distinct_rows, limit))), dim=0)

    def kernel_diag(self, kernel, how: str = "max") -> float:
        """max_i K(x_i, x_i) (``how="max"``: κ² of BLESS) or Σ_i K(x_i, x_i) (``"sum"``: Tr K)."""
        parts = self.client.gather(self.map(_kernel_diag, kernel, how))
        return max(parts) if how == "max" else math.fsum(parts)

    def leverage_scores(self, dictionary_state: tuple, idx) -> torch.Tensor:
        """Eq. (3) of the BLESS paper for the rows ``idx`` (global indices), each scored on its
        shard's worker from the dictionary's factor (sent once per call), in ``idx`` order."""
        state = self.client.scatter(dictionary_state, broadcast=True, hash=False)
        return self._rowwise(_dictionary_scores, idx, state, dtype=torch.float64)

    def kernel_expansion(self, kernel, Xq: torch.Tensor, W: torch.Tensor, memory_budget=None) -> torch.Tensor:
        """Σ_j K(Xq, x_j) W_j over the sharded rows x_j (a full-KRR model's prediction): each
        worker takes its shard's rows of W; the partial sums add up here in shard order."""
        Xq = Xq.to(dtype=self.dtype, device="cpu")
        Xq_future = self.client.scatter(Xq, broadcast=True, hash=False)
        W = W.to(dtype=self.dtype, device="cpu")
        futures = [self.submit(_expansion, s, kernel, Xq_future, w, memory_budget) for s, w in enumerate(self.split(W))]
        return sum_in_order(self.client.gather(futures), W.dtype)

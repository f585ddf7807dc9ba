"""Sharded rows behind krrcore's seam (:mod:`krrcore.rows`): the same operations as rows held here,
run where the rows are. Registered for :class:`~krrcore.distributed.array.ShardedArray` when
:mod:`krrcore.distributed` is imported."""

from __future__ import annotations

import torch

from ..rows import rows_of
from .array import ShardedArray
from .operators import ShardedFullSystem, ShardedKernelOperator


class ShardedRows:
    """:class:`~krrcore.rows.LocalRows`'s operations on a :class:`ShardedArray` (each of them: a
    missing one is a test failure, not a silent local fallback)."""

    local = False

    def float64(self, X) -> ShardedArray:
        return X.to(torch.float64)

    def operator(self, kernel, X, C, *, cache_bytes: int | None = None, **options):
        """A :class:`ShardedKernelOperator`; ``cache_bytes`` None: what each worker's storage budget leaves."""
        return ShardedKernelOperator(kernel, X, C, cache_bytes=cache_bytes, **options)

    def full_system(self, kernel, X, lam_n: float, *, kernel_storage: str = "auto", memory_budget=None):
        """A :class:`ShardedFullSystem`, which resolves ``kernel_storage`` per worker."""
        return ShardedFullSystem(kernel, X, lam_n, storage=kernel_storage, memory_budget=memory_budget)

    def max_kernel_diag(self, X, kernel) -> float:
        return X.kernel_diag(kernel, "max")

    def leverage_scores(self, dictionary, idx):
        return dictionary.X.leverage_scores(dictionary.state(), idx)

    def expansion(self, X, kernel, Xq, W, memory_budget=None):
        return X.kernel_expansion(kernel, Xq, W, memory_budget)

    def sum_of_squares(self, Y) -> float:
        return Y.sum_of_squares()

    def target_rows(self, Y):
        return Y.distinct_rows()

    def gather(self, Y):
        return Y.gather()


#: The rows of a :class:`ShardedArray`.
SHARDED = ShardedRows()
rows_of.register(ShardedArray, lambda X: SHARDED)

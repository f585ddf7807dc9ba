"""Where a training set's rows live: the seam between krrcore's computations and rows kept elsewhere.

krrcore computes on rows held in this process as tensors. A few operations have to run where the
rows are when they are not here (rows sharded on Dask workers, :mod:`krrcore.distributed`): the
blocked kernel operator K(X, C), the full system K + λnI, the largest kernel diagonal κ² over X,
a BLESS dictionary's scores of some rows (Eq. 3 of the BLESS paper), a prediction expanding over
the rows, and the reductions of the targets a fit needs.

:func:`rows_of` returns the :class:`LocalRows` that serves an array: :data:`LOCAL` for anything
held here. A package that keeps rows elsewhere registers its array type when it is imported
(``rows_of.register(ShardedArray)``; no such array exists before that), so this module and its
callers never import it — the way scikit-learn's ``get_namespace`` picks an array namespace. The
other half of the seam is in the solvers' layer (:func:`krrcore.solvers.base.distributed_backend`):
it hands a fit's inputs to :mod:`krrcore.distributed` when they are not local.
"""

from __future__ import annotations

import functools

import torch

from ._validation import as_tensor
from .full_system import make_full_system
from .ops import KernelOperator


class LocalRows:
    """The operations on rows held in this process (the interface a remote implementation follows)."""

    #: Whether the rows are in this process.
    local = True

    def float64(self, X) -> torch.Tensor:
        """X in float64 (leverage scores are computed in float64 whatever the data dtype)."""
        return as_tensor(X, "X", dtype=torch.float64, ndim=(2,))

    def operator(self, kernel, X, C, *, cache_bytes: int | None = None, **options):
        """The blocked operator for K(X, C) (:class:`~krrcore.ops.KernelOperator`'s products);
        ``cache_bytes`` None keeps no K(X, C) rows."""
        return KernelOperator(kernel, X, C, cache_bytes=cache_bytes or 0, **options)

    def full_system(self, kernel, X, lam_n: float, *, kernel_storage: str = "auto", memory_budget=None):
        """The system K + λnI on X (:func:`krrcore.full_system.make_full_system`); ``storage`` says
        what was chosen."""
        return make_full_system(kernel, X, lam_n, kernel_storage=kernel_storage, memory_budget=memory_budget)

    def max_kernel_diag(self, X, kernel) -> float:
        """κ² = max_i K(x_i, x_i)."""
        return float(kernel.diag(X).max())

    def leverage_scores(self, dictionary, idx: torch.Tensor) -> torch.Tensor:
        """Eq. (3) of the BLESS paper for the rows ``idx`` of the dictionary's X."""
        return dictionary.local_scores(idx)

    def expansion(self, X, kernel, Xq: torch.Tensor, W: torch.Tensor, memory_budget=None) -> torch.Tensor:
        """Σ_j K(Xq, x_j) W_j over the rows x_j of X (a prediction from these centres)."""
        return KernelOperator(kernel, Xq, X, memory_budget=memory_budget, n_rhs=W.shape[1]).matvec(W)

    def sum_of_squares(self, Y) -> float:
        """Σ of the squared entries, in float64."""
        return float((Y.double() ** 2).sum())

    def target_rows(self, Y) -> torch.Tensor:
        """Rows enough to tell ±1 or one-hot targets from regression targets (here: all of them)."""
        return Y

    def gather(self, Y) -> torch.Tensor:
        """All rows, in this process."""
        return Y


#: The rows of anything held in this process.
LOCAL = LocalRows()


@functools.singledispatch
def rows_of(X) -> LocalRows:
    """The :class:`LocalRows` implementation for ``X``'s rows: :data:`LOCAL` unless X's type was
    registered by the package keeping such rows elsewhere."""
    return LOCAL

"""One problem on many machines: training rows kept on Dask workers, kernel products computed there.

Every solver's cost is in row-blocked kernel products, and those split exactly by rows: with the
rows of X (and of the targets) partitioned into shards, K_nMᵀ(K_nM v + w) = Σ_s K_sMᵀ(K_sM v + w_s)
(FALKON Alg. 1, ``KnM_times_vector``), K_nM v stacks the shards' K_sM v, and a leverage score of
Eq. (3) of the BLESS paper needs its own row only. The package, bottom up:

* :mod:`~krrcore.distributed.workers` — what a worker sets up (torch threads);
* :mod:`~krrcore.distributed.cluster` — which cluster: :func:`connect` (an existing scheduler or an
  embedded local cluster) and :func:`resolve_client` (the ``cluster=`` argument, else the default
  ``Client``, else ``KRR_DASK_SCHEDULER``);
* :mod:`~krrcore.distributed.processes` — the embedded cluster's processes: a session of their
  own, and an end with the process that started them;
* :mod:`~krrcore.distributed.array` — :class:`ShardedArray`, row shards living on workers as futures;
* :mod:`~krrcore.distributed.data` — rows onto the cluster: :func:`generate`, :func:`read_table`,
  :func:`from_dask`, :func:`scatter`;
* :mod:`~krrcore.distributed.operators` — :class:`ShardedKernelOperator` and
  :class:`ShardedFullSystem`, the products of :class:`~krrcore.ops.KernelOperator` and
  :class:`~krrcore.full_system.FullKernelSystem` over sharded rows;
* :mod:`~krrcore.distributed.admission` — a fit's start on sharded data: inputs, and memory
  checked per worker through the estimator's own cost model;
* :mod:`~krrcore.distributed.rows` — these behind krrcore's seam, :mod:`krrcore.rows`.

This package imports the core and nothing imports it from below: the solvers hand it a fit's
inputs when they are distributed (:func:`krrcore.solvers.base.distributed_backend`), and every
other operation reaches the sharded rows through :func:`krrcore.rows.rows_of`. Its public name is
``krrcore.sharded`` (``from krrcore import sharded``).
"""

from __future__ import annotations

from .admission import as_sharded, start_fit
from .array import ShardedArray
from .cluster import SCHEDULER_ENV, ClusterConnection, ClusterUnavailable, LocalClusterShape, connect, resolve_client
from .data import ShardedDataset, from_dask, generate, read_table, scatter
from .operators import ProductTimes, ShardedFullSystem, ShardedKernelOperator
from .rows import SHARDED

__all__ = [
    "ShardedArray",
    "ShardedDataset",
    "ShardedKernelOperator",
    "ShardedFullSystem",
    "ProductTimes",
    "scatter",
    "from_dask",
    "generate",
    "read_table",
    "as_sharded",
    "start_fit",
    "resolve_client",
    "connect",
    "ClusterConnection",
    "ClusterUnavailable",
    "LocalClusterShape",
    "SCHEDULER_ENV",
    "SHARDED",
]

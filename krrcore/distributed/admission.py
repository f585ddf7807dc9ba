"""A fit on sharded data: its inputs as sharded arrays, and its memory checked on every worker.

Each part of the estimate comes from the estimator's own cost model: what the fit holds whatever
the place of its rows (:meth:`~krrcore.solvers.base.KRRBase._hold_model`: FALKON's M×M matrices,
CG's vectors) is checked here, on the client; what it allocates for rows where they are — a
Nyström solver's :meth:`_hold_rows` for a shard, or the sharded full system's
:meth:`~krrcore.distributed.operators.ShardedFullSystem.estimate_worker` — against each worker's
own memory: its Dask memory limit minus what it holds (:func:`krrcore.memory.worker_memory_left`).
The CPU cost model describes one machine, not a cluster, so a sharded fit's estimate carries no
seconds (no ``TimeLimitError`` before it starts).
"""

from __future__ import annotations

import dataclasses

from .._validation import feature_names
from ..memory import CostModel, MemoryEstimate, MemoryLimitError, gib, worker_memory_left
from .array import ShardedArray
from .data import from_dask
from .operators import ShardedFullSystem

#: How a solver runs on sharded rows (its ``_sharded_kind``): its products are K_nM's, or K + λnI's.
NYSTROM, FULL = "nystrom", "full"


def as_sharded(X, y, *, dtype) -> tuple[ShardedArray, ShardedArray]:
    """``fit``'s inputs as sharded arrays in ``dtype``: a ShardedArray pair, or Dask collections
    (sharded by :func:`~krrcore.distributed.data.from_dask` on the default Client)."""
    if isinstance(X, ShardedArray):
        if not isinstance(y, ShardedArray):
            raise ValueError(
                f"X is a ShardedArray, so y must be one too (the targets on the same shards), got "
                f"{type(y).__name__}; make both with krrcore.sharded.scatter/generate/read_table"
            )
        if y.sizes != X.sizes or y.workers != X.workers:
            raise ValueError("X and y are sharded differently: make them together (scatter, generate, from_dask)")
    else:
        X, y = from_dask(X, y, dtype=dtype)
    return X.to(dtype), y.to(dtype)


def _worker_memory(_rows):
    """On a worker: its address, the bytes its memory limit leaves, its limit and its resident memory."""
    import psutil
    from distributed import get_worker

    worker = get_worker()
    return worker.address, worker_memory_left(), worker.memory_manager.memory_limit, psutil.Process().memory_info().rss


def _worker_estimate(estimator, kind: str, rows: int, n: int, k: int, model: CostModel) -> MemoryEstimate:
    if kind == NYSTROM:
        estimator._hold_rows(model, rows, n, k)
        advice = "use more workers (smaller shards) or workers with more memory, or lower M"
    else:
        advice = ShardedFullSystem.estimate_worker(
            model, rows, n, k, storage=estimator.kernel_storage, float64_eval=estimator.residual == "float64"
        )
    return model.build(type(estimator).__name__, rows, k, advice)


def _client_estimate(estimator, kind: str, n: int, d: int, k: int, dtype) -> MemoryEstimate:
    model = CostModel(d=d, dtype=dtype, device="cpu", memory_budget=estimator.memory_budget)
    estimator._hold_model(model, n, k)
    if kind == NYSTROM:
        M = estimator._center_count(n)
        advice = f"lower M (the {M:,}×{M:,} matrix on the client grows as M²)"
    else:
        model.hold("targets (float64)", n * k * 8)  # CG's vectors live here: the targets are gathered
        advice = "subsample: full KRR holds n-long vectors on the client"
    estimate = model.build(type(estimator).__name__, n, k, advice)
    return dataclasses.replace(estimate, setup_seconds=None, seconds_per_iteration=None)


def start_fit(estimator, X, y):
    """``fit``'s start on distributed data (:meth:`krrcore.solvers.base.KRRBase._start_fit`): sharded
    X, y in the estimator's dtype, memory checked on every worker against its own limit
    (``worker_memory_estimates_``) and here; returns (X, Y, the client's estimate)."""
    kind = estimator._sharded_kind
    if kind is None:
        raise ValueError(
            f"{type(estimator).__name__} does not run on sharded data; Falkon, NystromCG, NystromGD, "
            f"NystromPCG and CG do (ASkotch, Skotch and SketchySAGA walk kernel blocks themselves, "
            f"the direct solvers factor an n×n or M×M system built in one place)"
        )
    if estimator.eval_train:
        raise ValueError(
            "eval_train=True would gather the n training predictions and targets every iteration; on "
            "sharded data pass a validation set (X_val, y_val) instead"
        )
    dtype = estimator._dtype()
    if estimator._device().type != "cpu":
        raise ValueError(
            "sharded fits keep the client's matrices on the CPU: leave device unset (see "
            "docs/distributed.md for GPU workers)"
        )
    names = feature_names(X)  # a dask DataFrame's columns, as an in-memory fit records them
    X, Y = as_sharded(X, y, dtype=dtype)
    n, d = X.shape
    k = Y.shape[1]
    estimator.n_features_in_ = d
    if names is not None:
        estimator.feature_names_in_ = names
    else:
        vars(estimator).pop("feature_names_in_", None)
    estimator._y_was_1d = Y.was_1d
    vars(estimator).pop("x_origin_", None)  # the kernel measures from this data's origin, as in memory
    if n >= 2:
        estimator._origin_from_moments(*X.moments(), dtype)
    scratch_blocks = estimator._kernel().scratch_blocks
    estimates = []
    for rows, (address, available, limit, used) in zip(X.sizes, X.client.gather(X.map(_worker_memory))):
        model = CostModel(
            d=d,
            dtype=dtype,
            device="cpu",
            memory_budget=estimator.memory_budget,
            scratch_blocks=scratch_blocks,
            available=available,
        )
        estimate = _worker_estimate(estimator, kind, rows, n, k, model)
        try:
            estimate.check()
        except MemoryLimitError as exc:
            where = (
                f"On Dask worker {address} (memory limit {gib(limit)}, {gib(used)} in use)"
                if limit
                else f"On Dask worker {address}"
            )
            raise MemoryLimitError(f"{where}, for its shard of {rows:,} of the n={n:,} rows: {exc}", estimate) from None
        estimates.append(estimate)
    estimator.worker_memory_estimates_ = list(zip(X.workers, estimates))
    return X, Y, _client_estimate(estimator, kind, n, d, k, dtype).check()

"""Kernel products on the shards: the operators the solvers use, with the products of one process.

* :class:`ShardedKernelOperator` — :class:`~krrcore.ops.KernelOperator`'s interface over a
  sharded X: each worker keeps a ``KernelOperator`` on its shard (its block buffer and its cache of
  K_nM row blocks, sized from *that worker's* memory limit by krrcore's one policy,
  :mod:`krrcore.memory`); a product sends v (M×k) to the workers and sums their M×k results on
  the client in a fixed shard order, in float64 when FALKON asks for float64 sums. The centres and
  the M×M preconditioner stay on the client.
* :class:`ShardedFullSystem` — :class:`~krrcore.full_system.FullKernelSystem`'s interface for
  NyströmPCG/CG matrix-free: each worker holds all of X once as columns (fetched worker to
  worker) and its rows of K (stored, if its memory allows, or recomputed per product);
  :meth:`ShardedFullSystem.estimate_worker` is what a worker holds for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..full_system import KERNEL_STORAGE
from ..linalg import residual_and_objective
from ..memory import CostModel, scratch_budget, storage_budget, worker_memory_left
from ..ops import KernelOperator, dense_kernel, operator_bytes
from .array import ShardedArray, concat, sum_in_order
from .workers import use_worker_threads


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


@dataclass
class ProductTimes:
    """Where the time of the sharded products went, summed over the calls so far.

    ``wall``: seconds from submitting a product to holding its reduced result here; ``worker``:
    the slowest shard's compute seconds per call (what the call would cost if sending, scheduling
    and gathering were free); ``worker_total``: all shards' compute seconds; ``reduce``: the
    client's summing of the shards' results. :attr:`communication` = wall − slowest shard −
    reduce: sending, scheduling and gathering."""

    calls: int = 0
    wall: float = 0.0
    worker: float = 0.0
    worker_total: float = 0.0
    reduce: float = 0.0

    def add(self, wall: float, shard_seconds, reduce: float) -> None:
        self.calls += 1
        self.wall += wall
        self.worker += max(shard_seconds)
        self.worker_total += sum(shard_seconds)
        self.reduce += reduce

    @property
    def communication(self) -> float:
        return max(self.wall - self.worker - self.reduce, 0.0)


class _ShardOperator:
    """A worker's :class:`~krrcore.ops.KernelOperator` on its shard, kept between products: its
    block buffer and K_nM row-block cache are sized from this worker's memory by krrcore's policy
    applied to what the worker's memory limit leaves (the scratch budget for blocks; the storage
    budget for the cache unless ``cache_bytes`` is given)."""

    def __init__(self, X, kernel, C, memory_budget, block_rows, n_rhs, accumulate_dtype, cache_bytes):
        use_worker_threads()
        available = worker_memory_left()
        scratch = scratch_budget(memory_budget, available=available)
        if cache_bytes is None:
            cache_bytes = storage_budget(memory_budget, available=available)
        self.op = KernelOperator(
            kernel,
            X,
            C,
            memory_budget=scratch,
            block_rows=block_rows,
            n_rhs=n_rhs,
            accumulate_dtype=accumulate_dtype,
            cache_bytes=cache_bytes,
        )


def _op_describe(state):
    op = state.op
    return {"rows": op.n, "block_rows": op.block_rows, "buffer_bytes": op.buffer_bytes, "cached_rows": op.cached_rows}


def _op_fused(state, v, dtype, w):
    return _timed(lambda: state.op.fused(v, w, dtype=dtype))


def _op_rmatvec(state, u):
    return _timed(state.op.rmatvec, u)


def _op_matvec(state, v, rows):
    return _timed(lambda: state.op.matvec(v, rows=rows))


def _op_gram(state, u):
    return _timed(state.op.gram, u)


class ShardedKernelOperator:
    """:class:`~krrcore.ops.KernelOperator`'s products with K_nM = kernel(X, C) for a sharded X.

    The centres C (M×d) are sent once to every worker; each shard's worker builds and keeps a
    :class:`~krrcore.ops.KernelOperator` on its rows (``memory_budget`` as on one machine, else
    krrcore's defaults from the worker's own memory limit; ``cache_bytes`` None: the worker's
    storage budget holds cached K_nM row blocks). A product sends its M×k (or per-shard n_s×k)
    inputs to the shards' workers and adds their results here in shard order, in
    ``accumulate_dtype`` (float64 for FALKON: FALKON Alg. 1's KnM_times_vector, summed over shards).
    ``times`` (:class:`ProductTimes`) says where each product's time went.
    """

    def __init__(
        self,
        kernel,
        X: ShardedArray,
        C: torch.Tensor,
        *,
        memory_budget: int | None = None,
        block_rows: int | None = None,
        n_rhs: int = 1,
        accumulate_dtype: torch.dtype | None = None,
        cache_bytes: int | None = None,
    ):
        if X.shape[1] != C.shape[1]:
            raise ValueError(f"X and centres have mismatched shapes: {X.shape[1]} vs {C.shape[1]} features")
        self.kernel, self.X = kernel, X
        self.n, self.M = X.shape[0], C.shape[0]
        self.dtype, self.device = X.dtype, torch.device("cpu")
        self.accumulate_dtype = accumulate_dtype or self.dtype
        self.client = X.client
        C = C.to(dtype=self.dtype, device="cpu")
        centers = self.client.scatter(C, broadcast=True, hash=False)
        self._states = X.map(
            _ShardOperator, kernel, centers, memory_budget, block_rows, n_rhs, self.accumulate_dtype, cache_bytes
        )
        self.shards = self._gather_each(_op_describe)
        self.block_rows = max(s["block_rows"] for s in self.shards)
        self.buffer_bytes = max(s["buffer_bytes"] for s in self.shards)
        self.times = ProductTimes()

    @property
    def cached_rows(self) -> int:
        """Rows of K_nM held in the workers' caches."""
        return sum(s["cached_rows"] for s in self._gather_each(_op_describe))

    def _submit(self, fn, s: int, *args):
        return self.client.submit(
            fn, self._states[s], *args, workers=[self.X.workers[s]], allow_other_workers=False, pure=False
        )

    def _gather_each(self, fn, *args):
        return self.client.gather([self._submit(fn, s, *args) for s in range(self.X.n_shards)])

    def _products(self, fn, *args, per_shard=None):
        """Run ``fn(state, *args[, per_shard[s]])`` on every shard; (results, wall start)."""
        start = time.perf_counter()
        futures = [
            self._submit(fn, s, *args, *(() if per_shard is None else (per_shard[s],))) for s in range(self.X.n_shards)
        ]
        return self.client.gather(futures), start

    def _reduce(self, results, start, dtype) -> torch.Tensor:
        reduce_start = time.perf_counter()
        total = sum_in_order([r[0] for r in results], dtype)
        end = time.perf_counter()
        self.times.add(end - start, [r[1] for r in results], end - reduce_start)
        return total

    def _rhs(self, v: torch.Tensor, rows: int, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        v = v.to(dtype=dtype or self.dtype, device="cpu")
        v = v[:, None] if v.ndim == 1 else v
        if v.shape[0] != rows:
            raise ValueError(f"{name} has {v.shape[0]} rows, expected {rows}")
        return v

    def _row_inputs(self, w, name: str, dtype: torch.dtype | None = None) -> list:
        """Per-shard pieces of an n-row input: a ShardedArray's own futures, or slices of a tensor."""
        if isinstance(w, ShardedArray):
            if w.sizes != self.X.sizes or w.workers != self.X.workers:
                raise ValueError(f"{name} is sharded differently from X")
            return w.cast_futures(dtype or self.dtype)
        return self.X.split(self._rhs(w, self.n, name, dtype))

    def fused(self, v: torch.Tensor | None, w=None, *, dtype: torch.dtype | None = None) -> torch.Tensor:
        """K_nMᵀ (K_nM v + w) = Σ_s K_sMᵀ (K_sM v + w_s) (FALKON Alg. 1, KnM_times_vector); ``w`` a
        tensor or a :class:`ShardedArray` with X's shards (the targets), either may be None;
        ``dtype`` as in :meth:`krrcore.ops.KernelOperator.fused`."""
        if v is None and w is None:
            raise ValueError("fused needs v or w")
        squeeze = v.ndim == 1 if v is not None else (not isinstance(w, ShardedArray) and w.ndim == 1)
        v = None if v is None else self._rhs(v, self.M, "v", dtype)
        pieces = [None] * self.X.n_shards if w is None else self._row_inputs(w, "w", dtype)
        results, start = self._products(_op_fused, v, dtype, per_shard=pieces)
        out = self._reduce(results, start, torch.promote_types(self.accumulate_dtype, dtype or self.dtype))
        return out[:, 0] if squeeze else out

    def rmatvec(self, u) -> torch.Tensor:
        """K_nMᵀ u = Σ_s K_sMᵀ u_s for u (n,) / (n, k), or a :class:`ShardedArray` (the targets)."""
        squeeze = not isinstance(u, ShardedArray) and u.ndim == 1
        results, start = self._products(_op_rmatvec, per_shard=self._row_inputs(u, "u"))
        out = self._reduce(results, start, self.accumulate_dtype)
        return out[:, 0] if squeeze else out

    def matvec(self, v: torch.Tensor, *, rows: torch.Tensor | None = None) -> torch.Tensor:
        """K_nM v (n×k, gathered here), or K_nM[rows] v for global row indices ``rows``."""
        squeeze = v.ndim == 1
        v = self._rhs(v, self.M, "v")
        start = time.perf_counter()
        if rows is None:
            results, start = self._products(_op_matvec, v, None)
            out = concat(*(r[0] for r in results))
        else:
            idx, where = self.X.locate(rows)
            futures = {s: self._submit(_op_matvec, s, v, idx[pos] - int(self.X.offsets[s])) for s, pos in where.items()}
            results = self.client.gather(list(futures.values()))
            out = torch.empty(idx.numel(), v.shape[1], dtype=self.dtype)
            for s, r in zip(futures, results):
                out[torch.from_numpy(where[s])] = r[0]
        self.times.add(time.perf_counter() - start, [r[1] for r in results], 0.0)
        return out[:, 0] if squeeze else out

    def gram(self, u=None):
        """K_nMᵀ K_nM = Σ_s K_sMᵀ K_sM (and K_nMᵀ u with ``u``, as a pair)."""
        pieces = [None] * self.X.n_shards if u is None else self._row_inputs(u, "u")
        results, start = self._products(_op_gram, per_shard=pieces)
        if u is None:
            return self._reduce(results, start, self.dtype)
        grams = self._reduce([(r[0][0], r[1]) for r in results], start, self.dtype)
        return grams, sum_in_order([r[0][1] for r in results], self.dtype)

    def blocks(self, rows=None):
        raise NotImplementedError(
            "a sharded operator computes its kernel blocks on the workers and never "
            "hands them out: use fused, matvec, rmatvec or gram (SketchySAGA and ASkotch, "
            "which walk blocks themselves, do not run on sharded data)"
        )


class _ShardRows:
    """A worker's rows K(X_s, X) of the full kernel matrix: stored when ``storage="stored"``, else
    recomputed per product in blocks; float64 copies for the exact residual made on first use."""

    def __init__(self, X, kernel, columns, storage, memory_budget):
        use_worker_threads()
        self.kernel, self.X, self.columns, self.memory_budget = kernel, X, columns, memory_budget
        self.scratch = scratch_budget(memory_budget, available=worker_memory_left())
        self.K = dense_kernel(kernel, X, columns, memory_budget=self.scratch) if storage == "stored" else None
        self._X64 = self._C64 = None

    def product(self, W):
        if self.K is not None:
            return self.K @ W
        return KernelOperator(self.kernel, self.X, self.columns, memory_budget=self.scratch, n_rhs=W.shape[1]).matvec(W)

    def product64(self, W64):
        if self.K is not None and self.K.dtype == torch.float64:
            return self.K @ W64
        if self._X64 is None:
            self._X64, self._C64 = self.X.to(torch.float64), self.columns.to(torch.float64)
        return KernelOperator(self.kernel, self._X64, self._C64, memory_budget=self.scratch, n_rhs=W64.shape[1]).matvec(
            W64
        )


def _rows_product(state, W):
    return _timed(state.product, W)


def _rows_product64(state, W):
    return _timed(state.product64, W)


def _storage_fits(X, n, memory_budget) -> bool:
    """Whether this worker may store its rows of K (n_s × n entries) under its storage budget."""
    need = X.shape[0] * n * X.element_size()
    return need <= storage_budget(memory_budget, available=worker_memory_left())


class ShardedFullSystem:
    """:class:`~krrcore.full_system.FullKernelSystem`'s products for a sharded X (ASkotch paper
    Eq. 3 with its λ = λn): every worker gathers all of X once, worker to worker, as the columns of
    its rows K(X_s, X); a product sends W (n×k) to the workers once and stacks their K_s W.
    ``storage``: "stored" keeps each worker's rows of K, "on_the_fly" recomputes them, "auto"
    stores them when every worker's rows fit its storage budget (``storage`` after resolution)."""

    def __init__(
        self, kernel, X: ShardedArray, lam_n: float, *, storage: str = "auto", memory_budget: int | None = None
    ):
        if storage not in KERNEL_STORAGE:
            raise ValueError(f"kernel_storage must be one of {KERNEL_STORAGE}, got {storage!r}")
        self.kernel, self.X, self.n, self.lam_n = kernel, X, X.shape[0], float(lam_n)
        self.dtype, self.device, self.memory_budget = X.dtype, torch.device("cpu"), memory_budget
        self.client = X.client
        if storage == "auto":
            fits = self.client.gather(X.map(_storage_fits, self.n, memory_budget))
            storage = "stored" if all(fits) else "on_the_fly"
        self.storage = storage
        columns = {
            w: self.client.submit(concat, *X.futures, workers=[w], allow_other_workers=False, pure=False)
            for w in sorted(set(X.workers))
        }
        self._states = [
            self.client.submit(
                _ShardRows,
                f,
                kernel,
                columns[w],
                storage,
                memory_budget,
                workers=[w],
                allow_other_workers=False,
                pure=False,
            )
            for f, w in zip(X.futures, X.workers)
        ]
        self.times = ProductTimes()

    @staticmethod
    def estimate_worker(model: CostModel, rows: int, n: int, k: int, *, storage: str, float64_eval: bool) -> str:
        """Add what a worker holds for its ``rows`` of the n to ``model`` (all of X as columns; its
        rows of K, or a block buffer over them; float64 copies for the exact residual); return
        what to change if it does not fit."""
        s, d = model.itemsize, model.d
        model.hold(f"all of X as columns ({n:,}×{d})", n * d * s)
        if storage == "stored" or (storage == "auto" and rows * n * s <= model.limit_bytes):
            model.hold(f"rows of K ({rows:,}×{n:,})", rows * n * s)
        else:
            model.hold(
                "kernel block buffer",
                operator_bytes(
                    rows,
                    n,
                    itemsize=s,
                    budget_bytes=model.scratch_bytes,
                    d=d,
                    n_rhs=k,
                    scratch_blocks=model.scratch_blocks,
                ),
                "scratch",
            )
        if float64_eval and s != 8:
            model.hold("float64 copies of the shard and the columns", (rows + n) * d * 8)
        return (
            "use kernel_storage='on_the_fly' or 'auto', more workers, or workers with more memory"
            if storage == "stored"
            else "use more workers or workers with more memory, or subsample"
        )

    def _stacked(self, fn, W: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        W_future = self.client.scatter(W, broadcast=True, hash=False)
        futures = [
            self.client.submit(fn, st, W_future, workers=[w], allow_other_workers=False, pure=False)
            for st, w in zip(self._states, self.X.workers)
        ]
        results = self.client.gather(futures)
        out = concat(*(r[0] for r in results))
        self.times.add(time.perf_counter() - start, [r[1] for r in results], 0.0)
        return out

    def kernel_matvec(self, W: torch.Tensor) -> torch.Tensor:
        """K W for W of shape (n, k): rows K_s W from each shard, stacked."""
        return self._stacked(_rows_product, W.to(self.dtype))

    def matvec(self, W: torch.Tensor) -> torch.Tensor:
        """(K + λnI) W."""
        return self.kernel_matvec(W).add_(W, alpha=self.lam_n)

    def kernel_trace(self) -> float:
        return self.X.kernel_diag(self.kernel, "sum")

    def evaluate(self, W: torch.Tensor, Y64: torch.Tensor) -> tuple[float, float]:
        """(‖(K+λnI)W − Y‖/‖Y‖, ½⟨W, (K+λnI)W⟩ − ⟨Y, W⟩) in float64, K W on the workers."""
        W64 = W.to(torch.float64)
        AW = self._stacked(_rows_product64, W64)
        return residual_and_objective(AW.add_(W64, alpha=self.lam_n), W64, Y64)

    def rows_matvec(self, idx, W):
        raise NotImplementedError("block rows K_bn are not offered on sharded data (ASkotch does not run on it)")

    def principal_block(self, idx):
        raise NotImplementedError("principal blocks K_bb are not offered on sharded data (ASkotch does not run on it)")

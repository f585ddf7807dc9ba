"""One problem on many machines: training rows kept on Dask workers, kernel products computed there.

Every solver's cost is in row-blocked kernel products, and those split exactly by rows: with the
rows of X (and of the targets) partitioned into shards, K_nMᵀ(K_nM v + w) = Σ_s K_sMᵀ(K_sM v + w_s)
(FALKON Alg. 1, ``KnM_times_vector``), K_nM v stacks the shards' K_sM v, and a leverage score of
Eq. (3) of the BLESS paper needs its own row only. So:

* :class:`ShardedArray` — an (n, k) array whose row shards live on Dask workers as futures, made
  once and never re-sent: generated there (:func:`generate`, by seed and shard index), read there
  from a path every worker sees (:func:`read_table`, CSV/Parquet through ``dask.dataframe``),
  taken from a ``dask.array``/``dask.dataframe`` (:func:`from_dask`), or scattered from this
  process (:func:`scatter`).
* :class:`ShardedKernelOperator` — :class:`~krrcore.ops.KernelOperator`'s interface over a
  sharded X: each worker keeps a ``KernelOperator`` on its shard (its block buffer and its cache of
  K_nM row blocks, sized from *that worker's* memory limit by krrcore's one policy,
  :mod:`krrcore.memory`); a product sends v (M×k) to the workers and sums their M×k results on
  the client in a fixed shard order, in float64 when FALKON asks for float64 sums. The centres and
  the M×M preconditioner stay on the client.
* :class:`ShardedFullSystem` — :class:`~krrcore.full_system.FullKernelSystem`'s interface for
  NyströmPCG/CG matrix-free: each worker holds all of X once as columns (fetched worker to
  worker) and its rows of K (stored, if its memory allows, or recomputed per product).

The seam: :func:`krrcore.ops.make_operator` and :func:`krrcore.full_system.make_full_system`
return these for sharded data, and an estimator's ``fit`` accepts a :class:`ShardedArray` pair or
a ``dask.array``/``dask.dataframe`` (:func:`start_sharded_fit`); the solvers hold no distributed
code of their own. Which cluster: the ``cluster=`` argument of the functions that place data on it
(a ``distributed.Client``, a :class:`krrcore.cluster.ClusterConnection` or a scheduler address),
else the active default ``Client``, else the one setting ``KRR_DASK_SCHEDULER``.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ._validation import check_int
from .memory import CostModel, MemoryLimitError, gib, scratch_budget, storage_budget, worker_memory_left
from .ops import KernelOperator, dense_kernel, operator_bytes

#: Solvers whose kernel work runs on a sharded operator, by how they use it.
NYSTROM, FULL = "nystrom", "full"


# ------------------------------------------------------------------------------------------------
# Which cluster
# ------------------------------------------------------------------------------------------------
_connections: dict = {}


def is_distributed(data) -> bool:
    """Whether ``data`` is sharded on a cluster (a :class:`ShardedArray`) or a Dask collection."""
    return isinstance(data, ShardedArray) or type(data).__module__.split(".")[0] == "dask"


def resolve_client(cluster=None):
    """The ``distributed.Client`` of ``cluster``: a Client, a :class:`~krrcore.cluster.ClusterConnection`,
    a scheduler address (connected once per process), or None: the active default Client, else
    ``$KRR_DASK_SCHEDULER``."""
    from distributed import Client, default_client

    from .cluster import SCHEDULER_ENV, ClusterConnection, connect

    if isinstance(cluster, Client):
        return cluster
    if isinstance(cluster, ClusterConnection):
        return cluster.client
    if cluster is None:
        try:
            return default_client()
        except ValueError:
            cluster = os.environ.get(SCHEDULER_ENV) or None
        if cluster is None:
            raise ValueError(f"no Dask cluster to shard the data on: pass cluster= (a distributed.Client, a "
                             f"krrcore.cluster.ClusterConnection or a scheduler address), create a Client, or "
                             f"set {SCHEDULER_ENV}")
    if not isinstance(cluster, str):
        raise ValueError(f"cluster must be a distributed.Client, a krrcore.cluster.ClusterConnection or a "
                         f"scheduler address, got {type(cluster).__name__}")
    if cluster not in _connections:
        _connections[cluster] = connect(cluster)
    return _connections[cluster].client


def _workers(client) -> list[str]:
    workers = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if not workers:
        raise ValueError("the Dask cluster has no workers")
    return workers


# ------------------------------------------------------------------------------------------------
# What runs on a worker
# ------------------------------------------------------------------------------------------------
def _use_worker_threads() -> None:
    """torch's threads = the worker's thread slots (``KRR_TORCH_THREADS`` wins): Dask's nanny starts
    workers with OMP_NUM_THREADS=1, and workers × threads must not exceed the cores."""
    from .worker_setup import TORCH_THREADS_ENV, set_torch_threads

    if os.environ.get(TORCH_THREADS_ENV):
        set_torch_threads()
        return
    try:
        from distributed import get_worker

        threads = get_worker().state.nthreads
    except (ImportError, ValueError):
        return
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def _cast(X, dtype):
    return X.to(dtype)


def _take(X, idx):
    return X[idx]


def _pick(pair, position):
    return pair[position]


def _concat(*parts):
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def _concat_pairs(*pairs):
    return _concat(*(p[0] for p in pairs)), _concat(*(p[1] for p in pairs))


def _sum_of_squares(Y):
    return float((Y.double() ** 2).sum())


def _distinct_rows(Y, limit):
    return torch.unique(Y, dim=0)[: limit + 1]


def _kernel_diag(X, kernel, how):
    diag = kernel.diag(X)
    return float(diag.max()) if how == "max" else float(diag.double().sum())


def _expansion(X, kernel, Xq, W, memory_budget):
    """Σ over this shard's rows x_j of K(Xq, x_j) W_j: a prediction from sharded centres."""
    _use_worker_threads()
    budget = scratch_budget(memory_budget, available=worker_memory_left())
    return KernelOperator(kernel, Xq, X, memory_budget=budget, n_rhs=W.shape[1]).matvec(W)


def _dictionary_scores(X, dictionary_state, idx):
    """Eq. (3) of the BLESS paper for this shard's rows ``idx`` (local indices), float64."""
    from .leverage.dictionary import _Dictionary

    _use_worker_threads()
    return _Dictionary.from_state(dictionary_state, X).scores(idx)


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
        return (f"ShardedArray(shape={self.shape}, dtype={str(self.dtype).removeprefix('torch.')}, "
                f"{self.n_shards} shards on {len(set(self.workers))} workers)")

    def element_size(self) -> int:
        return torch.finfo(self.dtype).bits // 8

    def submit(self, fn, shard: int, *args):
        """``fn(rows of shard, *args)`` on the shard's worker."""
        return self.client.submit(fn, self.futures[shard], *args, workers=[self.workers[shard]],
                                  allow_other_workers=False, pure=False)

    def map(self, fn, *args, per_shard=None) -> list:
        """``fn(rows, *args[, per_shard[s]])`` on every shard's worker: a future per shard."""
        return [self.submit(fn, s, *args, *(() if per_shard is None else (per_shard[s],)))
                for s in range(self.n_shards)]

    def like(self, futures, *, width: int | None = None, dtype: torch.dtype | None = None) -> "ShardedArray":
        """An array with the same shards (sizes, workers) holding ``futures``."""
        return ShardedArray(self.client, futures, self.sizes, self.workers, self.width if width is None else width,
                            self.dtype if dtype is None else dtype, was_1d=self.was_1d)

    def to(self, dtype: torch.dtype) -> "ShardedArray":
        """The same rows in ``dtype`` (cast on the workers; self when it already is)."""
        return self if dtype == self.dtype else self.like(self.map(_cast, dtype), dtype=dtype)

    def split(self, rows: torch.Tensor) -> list[torch.Tensor]:
        """An n-row tensor of this process cut along the shards (what a shard's task receives)."""
        return [rows[self.offsets[s]:self.offsets[s + 1]] for s in range(self.n_shards)]

    def gather(self) -> torch.Tensor:
        """All rows in this process (O(n·k): for targets or a test, not for a large X)."""
        return _concat(*self.client.gather(self.futures))

    def _locate(self, idx) -> tuple[torch.Tensor, dict[int, np.ndarray]]:
        idx = torch.as_tensor(idx).reshape(-1).to(device="cpu", dtype=torch.int64)
        n = self.shape[0]
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= n):
            raise IndexError(f"row indices must lie in [0, {n}), got [{int(idx.min())}, {int(idx.max())}]")
        shard = np.searchsorted(self.offsets, idx.numpy(), side="right") - 1
        return idx, {int(s): np.flatnonzero(shard == s) for s in np.unique(shard)}

    def _rowwise(self, fn, idx, *args, width: tuple = (), dtype=None) -> torch.Tensor:
        """``fn(rows, *args, local indices)`` on each shard holding some of the global indices
        ``idx``; the per-row results put back in ``idx`` order."""
        idx, where = self._locate(idx)
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

    def distinct_rows(self, limit: int = 3) -> torch.Tensor:
        """Up to ``limit + 1`` distinct rows from every shard: enough to tell ±1 or one-hot targets
        from regression targets without gathering them."""
        return torch.unique(_concat(*self.client.gather(self.map(_distinct_rows, limit))), dim=0)

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
        return _sum_in_order(self.client.gather(futures), W.dtype)


def _sum_in_order(parts, dtype) -> torch.Tensor:
    """Σ parts in shard order (the client-side reduction), accumulated in ``dtype``."""
    total = parts[0].to(dtype=dtype, copy=True)
    for part in parts[1:]:
        total.add_(part)
    return total


# ------------------------------------------------------------------------------------------------
# Data onto the cluster
# ------------------------------------------------------------------------------------------------
def _pairs_to_arrays(client, pairs, sizes, workers, d, k, was_1d) -> tuple[ShardedArray, ShardedArray]:
    """Split futures of (X_s, Y_s) into the X and y arrays (same shards, same workers)."""
    xs = [client.submit(_pick, f, 0, workers=[w], allow_other_workers=False, pure=False) for f, w in zip(pairs, workers)]
    ys = [client.submit(_pick, f, 1, workers=[w], allow_other_workers=False, pure=False) for f, w in zip(pairs, workers)]
    dtype = client.submit(lambda p: p[0].dtype, pairs[0], workers=[workers[0]], pure=False).result()
    return (ShardedArray(client, xs, sizes, workers, d, dtype),
            ShardedArray(client, ys, sizes, workers, k, dtype, was_1d=was_1d))


def _even_sizes(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if s < n % parts else 0) for s in range(parts)]


def scatter(X, y, *, cluster=None, n_shards: int | None = None, dtype=None) -> tuple[ShardedArray, ShardedArray]:
    """Arrays of this process cut into ``n_shards`` contiguous row shards (default: one per worker),
    sent once to the workers in turn. The data passes through this process, which already holds
    it; for data that should never do so use :func:`generate`, :func:`read_table` or :func:`from_dask`."""
    from ._validation import check_X_y

    client = resolve_client(cluster)
    X, Y, was_1d = check_X_y(X, y, dtype=dtype, device="cpu")
    workers = _workers(client)
    n_shards = len(workers) if n_shards is None else check_int(n_shards, "n_shards")
    if n_shards > X.shape[0]:
        raise ValueError(f"n_shards={n_shards} exceeds the {X.shape[0]} rows")
    sizes = _even_sizes(X.shape[0], n_shards)
    where = [workers[s % len(workers)] for s in range(n_shards)]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    xs, ys = [], []
    for s, w in enumerate(where):
        rows = slice(int(offsets[s]), int(offsets[s + 1]))
        xs.append(client.scatter(X[rows].clone(), workers=[w], hash=False))
        ys.append(client.scatter(Y[rows].clone(), workers=[w], hash=False))
    return (ShardedArray(client, xs, sizes, where, X.shape[1], X.dtype),
            ShardedArray(client, ys, sizes, where, Y.shape[1], X.dtype, was_1d=was_1d))


def _as_tensor_pair(x, y, dtype_name):
    """A dask chunk pair as float tensors (y as a column)."""
    X = torch.as_tensor(np.ascontiguousarray(np.asarray(x, dtype=dtype_name)))
    Y = torch.as_tensor(np.ascontiguousarray(np.asarray(y, dtype=dtype_name)))
    return X, (Y[:, None] if Y.ndim == 1 else Y)


def _dask_rows(data, name: str):
    """A dask dataframe/series as a dask array with known chunk sizes."""
    if hasattr(data, "to_dask_array"):
        data = data.to_dask_array(lengths=True)
    if not hasattr(data, "chunks"):
        raise ValueError(f"{name} must be a dask.array or dask.dataframe here, got {type(data).__name__}")
    if any(math.isnan(c) for c in data.chunks[0]):
        raise ValueError(f"{name} has chunks of unknown length: call .compute_chunk_sizes() (or "
                         f"to_dask_array(lengths=True)) first")
    return data


def from_dask(X, y, *, cluster=None, dtype=None) -> tuple[ShardedArray, ShardedArray]:
    """A ``dask.array``/``dask.dataframe`` X and its y (array, series or dataframe) as sharded
    arrays: each row chunk is computed on a worker and stays there (chunks of y follow X's);
    contiguous chunks on one worker are joined into one shard there, keeping the row order."""
    import dask

    client = resolve_client(cluster)
    X, y = _dask_rows(X, "X"), _dask_rows(y, "y")
    if X.ndim != 2:
        raise ValueError(f"X must have 2 dimensions, got shape {X.shape}")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"X and y have mismatched shapes: X has {X.shape[0]} rows, y has {y.shape[0]}")
    was_1d = y.ndim == 1
    X = X.rechunk({1: -1})
    y = y.rechunk((X.chunks[0],) if was_1d else (X.chunks[0], -1))
    dtype_name = "float32" if dtype in ("float32", torch.float32) else "float64"
    parts = [dask.delayed(_as_tensor_pair)(xc, yc, dtype_name)
             for xc, yc in zip(X.to_delayed().ravel(), y.to_delayed().ravel())]
    return _shards_of(client, parts, X.shape[1], 1 if was_1d else y.shape[1], was_1d)


def _pair_rows(pair):
    return pair[0].shape[0]


def _shards_of(client, parts, d: int, k: int, was_1d: bool) -> tuple[ShardedArray, ShardedArray]:
    """Delayed (X_s, Y_s) tensor pairs computed on the workers and kept there, in order;
    contiguous pairs on one worker joined into one shard there."""
    from distributed import wait

    futures = client.compute(parts)
    wait(futures)
    for future in futures:
        if future.status == "error":
            future.result()                  # raises the chunk's error here, moves no rows
    holders = client.who_has(futures)
    owner = [sorted(holders[f.key])[0] for f in futures]
    rows = client.gather([client.submit(_pair_rows, f, workers=[w], pure=False) for f, w in zip(futures, owner)])
    runs: list[tuple[str, list, int]] = []
    for f, w, n in zip(futures, owner, rows):
        if n == 0:
            continue
        if runs and runs[-1][0] == w:
            runs[-1][1].append(f)
            runs[-1][2] += n
        else:
            runs.append([w, [f], n])
    if not runs:
        raise ValueError("the data has no rows")
    pairs = [group[0] if len(group) == 1 else
             client.submit(_concat_pairs, *group, workers=[w], allow_other_workers=False, pure=False)
             for w, group, _ in runs]
    return _pairs_to_arrays(client, pairs, [n for *_, n in runs], [w for w, *_ in runs], d, k, was_1d)


@dataclass
class ShardedDataset:
    """Training rows on the cluster (``X``, ``y``: :class:`ShardedArray`) and, optionally, a small
    test split in this process, standardised with the training rows' statistics (computed on the
    workers): the distributed counterpart of :class:`krrcore.datasets.Dataset`."""

    name: str
    task: str
    X: ShardedArray
    y: ShardedArray
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    classes: np.ndarray | None = None
    feature_mean: np.ndarray | None = None
    feature_scale: np.ndarray | None = None
    y_mean: float = 0.0
    y_scale: float = 1.0
    info: dict = field(default_factory=dict)


def _generate_shard(name: str, n: int, seed_sequence, params: dict):
    """Rows of one shard of registry entry ``name``: (features, encoded targets) as float64 numpy."""
    from .datasets.catalog import get_info
    from .datasets.core import encode_targets

    info = get_info(name)
    table = info.loader(n, np.random.default_rng(seed_sequence), **params)
    classes = table.classes if info.task != "regression" else None
    if info.task != "regression" and classes is None:
        raise ValueError(f"{name} does not list its classes: it cannot be generated in shards")
    return np.ascontiguousarray(table.X, dtype=np.float64), encode_targets(info.task, table.target, classes)


def _moments(pair):
    """(count, Σx, Σx²) per column of features and targets, float64 (for z-scoring across shards)."""
    X, y = pair
    y = y[:, None] if y.ndim == 1 else y
    return (X.shape[0], X.sum(0), (X * X).sum(0), y.sum(0), (y * y).sum(0))


def _finish_shard(pair, mean, scale, y_mean, y_scale, dtype_name):
    from .datasets.core import z_scores

    X, y = pair
    Z = z_scores(X, mean, scale)
    y = (y[:, None] if y.ndim == 1 else y)
    y = (y - y_mean) / y_scale
    return (torch.from_numpy(np.ascontiguousarray(Z, dtype=dtype_name)),
            torch.from_numpy(np.ascontiguousarray(y, dtype=dtype_name)))


def _standardise(client, raw, workers, task, standardize, dtype_name):
    """z-score features (and regression targets) with statistics summed over all shards."""
    from .datasets.core import _constant_mask

    stats = client.gather([client.submit(_moments, r, workers=[w], pure=False) for r, w in zip(raw, workers)])
    count = sum(s[0] for s in stats)
    mean = sum(s[1] for s in stats) / count
    var = np.maximum(sum(s[2] for s in stats) / count - mean ** 2, 0.0)
    std = np.sqrt(var)
    scale = np.where(_constant_mask(std, mean), 1.0, std)
    if not standardize:
        mean, scale = np.zeros_like(mean), np.ones_like(scale)
    y_mean, y_scale = 0.0, 1.0
    if task == "regression":
        y_mean = float(sum(s[3] for s in stats)[0] / count)
        y_var = float(sum(s[4] for s in stats)[0] / count) - y_mean ** 2
        y_scale = math.sqrt(y_var) if y_var > 0 else 1.0
    pairs = [client.submit(_finish_shard, r, mean, scale, y_mean, y_scale, dtype_name, workers=[w], pure=False)
             for r, w in zip(raw, workers)]
    return pairs, mean, scale, y_mean, y_scale


def generate(name: str, n: int, seed: int = 0, *, cluster=None, n_shards: int | None = None, dtype="float64",
             standardize: bool = True, n_test: int = 0, **knobs) -> ShardedDataset:
    """``n`` rows of the synthetic registry entry ``name`` (e.g. "higgs_like", "sine_projection"),
    generated on the workers: shard s draws its rows from ``SeedSequence(seed).spawn(n_shards)[s]``,
    so the data depends on (seed, n_shards) and never passes through this process. Features are
    z-scored with the statistics of all shards (Σx, Σx² gathered, O(d) per shard); regression
    targets likewise; binary targets are ±1, multiclass one-hot, as :func:`krrcore.datasets.load`.
    ``n_test`` rows more come from one further seed, standardised alike, into this process.
    These are not the rows :func:`krrcore.datasets.load` draws for the same seed (other streams)."""
    from .datasets.catalog import _resolve_knobs, get_info

    info = get_info(name)
    if not info.synthetic:
        raise ValueError(f"{name} is not a synthetic set: read it with read_table from a path every worker "
                         f"sees, or load it here and use scatter")
    params = _resolve_knobs(info, None, knobs)
    n = check_int(n, "n", minimum=2)
    client = resolve_client(cluster)
    workers = _workers(client)
    n_shards = len(workers) if n_shards is None else check_int(n_shards, "n_shards")
    sizes = _even_sizes(n, n_shards)
    where = [workers[s % len(workers)] for s in range(n_shards)]
    seeds = np.random.SeedSequence(check_int(seed, "seed", minimum=0)).spawn(n_shards + 1)
    raw = [client.submit(_generate_shard, name, size, seeds[s], params, workers=[w], allow_other_workers=False,
                         pure=False) for s, (size, w) in enumerate(zip(sizes, where))]
    dtype_name = "float32" if dtype in ("float32", torch.float32) else "float64"
    pairs, mean, scale, y_mean, y_scale = _standardise(client, raw, where, info.task, standardize, dtype_name)
    del raw
    k = client.submit(lambda p: p[1].shape[1], pairs[0], workers=[where[0]], pure=False).result()
    X, y = _pairs_to_arrays(client, pairs, sizes, where, len(mean), k, was_1d=(k == 1))
    data = ShardedDataset(name, info.task, X, y, classes=None, feature_mean=mean, feature_scale=scale,
                          y_mean=y_mean, y_scale=y_scale, info={"seed": seed, "n_shards": n_shards, **params})
    if n_test:
        Xt, yt = _generate_shard(name, check_int(n_test, "n_test"), seeds[-1], params)
        Xt_t, yt_t = _finish_shard((Xt, yt), mean, scale, y_mean, y_scale, dtype_name)
        data.X_test, data.y_test = Xt_t.numpy(), yt_t.numpy()
    return data


def read_table(path, target: str, *, cluster=None, features=None, dtype="float64", standardize: bool = True,
               **read_options) -> ShardedDataset:
    """A CSV or Parquet table (``path``: a file, a glob or a folder every worker can read) read by
    the workers through ``dask.dataframe``; ``target`` names the regression target column,
    ``features`` the feature columns (default: every other numeric column). Features and target
    are z-scored with statistics summed over the shards on the workers; rows never pass through here."""
    import dask
    import dask.dataframe as dd

    client = resolve_client(cluster)
    text = str(path)
    reader = dd.read_parquet if text.endswith((".parquet", ".pq")) or os.path.isdir(text) else dd.read_csv
    frame = reader(text, **read_options)
    if target not in frame.columns:
        raise ValueError(f"target column {target!r} is not in {path}: it has {list(frame.columns)}")
    if features is None:
        features = [c for c in frame.select_dtypes("number").columns if c != target]
    missing = [c for c in features if c not in frame.columns]
    if missing:
        raise ValueError(f"feature column(s) {missing} are not in {path}: it has {list(frame.columns)}")
    # Each partition becomes a shard where it is read: no row comes here. (Dask's dataframe
    # optimiser looks for the current client.)
    with client.as_current():
        parts = [dask.delayed(_frame_pair)(part, list(features), target) for part in frame.to_delayed()]
        Xs, ys = _shards_of(client, parts, len(features), 1, was_1d=True)
    raw = [client.submit(_as_numpy_pair, xf, yf, workers=[w], allow_other_workers=False, pure=False)
           for xf, yf, w in zip(Xs.futures, ys.futures, Xs.workers)]
    dtype_name = "float32" if dtype in ("float32", torch.float32) else "float64"
    pairs, mean, scale, y_mean, y_scale = _standardise(client, raw, Xs.workers, "regression", standardize, dtype_name)
    Xn, yn = _pairs_to_arrays(client, pairs, Xs.sizes, Xs.workers, Xs.width, 1, was_1d=True)
    name = os.path.basename(text.rstrip("/")) or text
    return ShardedDataset(name, "regression", Xn, yn, feature_mean=mean, feature_scale=scale, y_mean=y_mean,
                          y_scale=y_scale, info={"path": text, "features": list(features)})


def _frame_pair(frame, features, target):
    """A pandas partition as (features, target column) float64 tensors."""
    return (torch.as_tensor(frame[features].to_numpy(dtype="float64")),
            torch.as_tensor(frame[target].to_numpy(dtype="float64"))[:, None])


def _as_numpy_pair(X, Y):
    return X.numpy(), Y.numpy()


# ------------------------------------------------------------------------------------------------
# Kernel products on the shards
# ------------------------------------------------------------------------------------------------
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

    def __init__(self, X, kernel, C, memory_budget, block_rows, n_rhs, accumulate_dtype, cache_bytes, dtype=None):
        _use_worker_threads()
        available = worker_memory_left()
        scratch = scratch_budget(memory_budget, available=available)
        if cache_bytes is None:
            cache_bytes = storage_budget(memory_budget, available=available)
        self.op = KernelOperator(kernel, X, C, memory_budget=scratch, block_rows=block_rows, n_rhs=n_rhs,
                                 accumulate_dtype=accumulate_dtype, cache_bytes=cache_bytes, dtype=dtype)


def _op_describe(state):
    op = state.op
    return {"rows": op.n, "block_rows": op.block_rows, "buffer_bytes": op.buffer_bytes, "cached_rows": op.cached_rows}


def _op_fused(state, v, w):
    return _timed(state.op.fused, v, w)


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

    def __init__(self, kernel, X: ShardedArray, C: torch.Tensor, *, memory_budget: int | None = None,
                 block_rows: int | None = None, n_rhs: int = 1, accumulate_dtype: torch.dtype | None = None,
                 cache_bytes: int | None = None, dtype: torch.dtype | None = None):
        if X.shape[1] != C.shape[1]:
            raise ValueError(f"X and centres have mismatched shapes: {X.shape[1]} vs {C.shape[1]} features")
        self.kernel, self.X = kernel, X
        self.n, self.M = X.shape[0], C.shape[0]
        self.dtype, self.device = dtype or X.dtype, torch.device("cpu")
        self.accumulate_dtype = accumulate_dtype or self.dtype
        self.client = X.client
        C = C.to(dtype=self.dtype, device="cpu")
        centres = self.client.scatter(C, broadcast=True, hash=False)
        self._states = X.map(_ShardOperator, kernel, centres, memory_budget, block_rows, n_rhs,
                             self.accumulate_dtype, cache_bytes, dtype)
        self.shards = self._gather_each(_op_describe)
        self.block_rows = max(s["block_rows"] for s in self.shards)
        self.buffer_bytes = max(s["buffer_bytes"] for s in self.shards)
        self.times = ProductTimes()

    @property
    def cached_rows(self) -> int:
        """Rows of K_nM held in the workers' caches."""
        return sum(s["cached_rows"] for s in self._gather_each(_op_describe))

    def _submit(self, fn, s: int, *args):
        return self.client.submit(fn, self._states[s], *args, workers=[self.X.workers[s]], allow_other_workers=False,
                                  pure=False)

    def _gather_each(self, fn, *args):
        return self.client.gather([self._submit(fn, s, *args) for s in range(self.X.n_shards)])

    def _products(self, fn, *args, per_shard=None):
        """Run ``fn(state, *args[, per_shard[s]])`` on every shard; (results, wall start)."""
        start = time.perf_counter()
        futures = [self._submit(fn, s, *args, *(() if per_shard is None else (per_shard[s],)))
                   for s in range(self.X.n_shards)]
        return self.client.gather(futures), start

    def _reduce(self, results, start, dtype) -> torch.Tensor:
        reduce_start = time.perf_counter()
        total = _sum_in_order([r[0] for r in results], dtype)
        end = time.perf_counter()
        self.times.add(end - start, [r[1] for r in results], end - reduce_start)
        return total

    def _rhs(self, v: torch.Tensor, rows: int, name: str) -> torch.Tensor:
        v = v.to(dtype=self.dtype, device="cpu")
        v = v[:, None] if v.ndim == 1 else v
        if v.shape[0] != rows:
            raise ValueError(f"{name} has {v.shape[0]} rows, expected {rows}")
        return v

    def _row_inputs(self, w, name: str) -> list:
        """Per-shard pieces of an n-row input: a ShardedArray's own futures, or slices of a tensor."""
        if isinstance(w, ShardedArray):
            if w.sizes != self.X.sizes or w.workers != self.X.workers:
                raise ValueError(f"{name} is sharded differently from X")
            return [f if w.dtype == self.dtype else self.client.submit(_cast, f, self.dtype, workers=[wk], pure=False)
                    for f, wk in zip(w.futures, w.workers)]
        return self.X.split(self._rhs(w, self.n, name))

    def fused(self, v: torch.Tensor | None, w=None) -> torch.Tensor:
        """K_nMᵀ (K_nM v + w) = Σ_s K_sMᵀ (K_sM v + w_s) (FALKON Alg. 1, KnM_times_vector); ``w`` a
        tensor or a :class:`ShardedArray` with X's shards (the targets), either may be None."""
        if v is None and w is None:
            raise ValueError("fused needs v or w")
        squeeze = v.ndim == 1 if v is not None else (not isinstance(w, ShardedArray) and w.ndim == 1)
        v = None if v is None else self._rhs(v, self.M, "v")
        pieces = [None] * self.X.n_shards if w is None else self._row_inputs(w, "w")
        results, start = self._products(_op_fused, v, per_shard=pieces)
        out = self._reduce(results, start, self.accumulate_dtype)
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
            out = _concat(*(r[0] for r in results))
        else:
            idx, where = self.X._locate(rows)
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
        return grams, _sum_in_order([r[0][1] for r in results], self.dtype)

    def blocks(self, rows=None):
        raise NotImplementedError("a sharded operator computes its kernel blocks on the workers and never "
                                  "hands them out: use fused, matvec, rmatvec or gram (SketchySAGA and ASkotch, "
                                  "which walk blocks themselves, do not run on sharded data)")


# ------------------------------------------------------------------------------------------------
# The full system K + λnI on the shards (NyströmPCG, CG)
# ------------------------------------------------------------------------------------------------
class _ShardRows:
    """A worker's rows K(X_s, X) of the full kernel matrix: stored when ``storage="stored"``, else
    recomputed per product in blocks; float64 copies for the exact residual made on first use."""

    def __init__(self, X, kernel, columns, storage, memory_budget):
        _use_worker_threads()
        self.kernel, self.X, self.columns, self.memory_budget = kernel, X, columns, memory_budget
        self.scratch = scratch_budget(memory_budget, available=worker_memory_left())
        self.K = dense_kernel(kernel, X, columns, memory_budget=self.scratch) if storage == "stored" else None
        self._X64 = self._C64 = None

    def product(self, W):
        if self.K is not None:
            return self.K @ W
        return KernelOperator(self.kernel, self.X, self.columns, memory_budget=self.scratch,
                              n_rhs=W.shape[1]).matvec(W)

    def product64(self, W64):
        if self.K is not None and self.K.dtype == torch.float64:
            return self.K @ W64
        if self._X64 is None:
            self._X64, self._C64 = self.X.to(torch.float64), self.columns.to(torch.float64)
        return KernelOperator(self.kernel, self._X64, self._C64, memory_budget=self.scratch,
                              n_rhs=W64.shape[1]).matvec(W64)


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

    def __init__(self, kernel, X: ShardedArray, lam_n: float, *, storage: str = "auto",
                 memory_budget: int | None = None):
        from .full_system import KERNEL_STORAGE

        if storage not in KERNEL_STORAGE:
            raise ValueError(f"kernel_storage must be one of {KERNEL_STORAGE}, got {storage!r}")
        self.kernel, self.X, self.n, self.lam_n = kernel, X, X.shape[0], float(lam_n)
        self.dtype, self.device, self.memory_budget = X.dtype, torch.device("cpu"), memory_budget
        self.client = X.client
        if storage == "auto":
            fits = self.client.gather(X.map(_storage_fits, self.n, memory_budget))
            storage = "stored" if all(fits) else "on_the_fly"
        self.storage = storage
        columns = {w: self.client.submit(_concat, *X.futures, workers=[w], allow_other_workers=False, pure=False)
                   for w in sorted(set(X.workers))}
        self._states = [self.client.submit(_ShardRows, f, kernel, columns[w], storage, memory_budget, workers=[w],
                                           allow_other_workers=False, pure=False)
                        for f, w in zip(X.futures, X.workers)]
        self.times = ProductTimes()

    def _stacked(self, fn, W: torch.Tensor) -> torch.Tensor:
        start = time.perf_counter()
        W_future = self.client.scatter(W, broadcast=True, hash=False)
        futures = [self.client.submit(fn, st, W_future, workers=[w], allow_other_workers=False, pure=False)
                   for st, w in zip(self._states, self.X.workers)]
        results = self.client.gather(futures)
        out = _concat(*(r[0] for r in results))
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
        from .linalg import residual_and_objective

        W64 = W.to(torch.float64)
        AW = self._stacked(_rows_product64, W64)
        return residual_and_objective(AW.add_(W64, alpha=self.lam_n), W64, Y64)

    def rows_matvec(self, idx, W):
        raise NotImplementedError("block rows K_bn are not offered on sharded data (ASkotch does not run on it)")

    def principal_block(self, idx):
        raise NotImplementedError("principal blocks K_bb are not offered on sharded data (ASkotch does not run on it)")


# ------------------------------------------------------------------------------------------------
# A fit on sharded data: inputs, memory checks per worker
# ------------------------------------------------------------------------------------------------
def as_sharded(X, y, *, dtype: torch.dtype) -> tuple[ShardedArray, ShardedArray]:
    """``fit``'s inputs as sharded arrays in ``dtype``: a ShardedArray pair, or Dask collections
    (sharded by :func:`from_dask` on the default Client)."""
    if isinstance(X, ShardedArray):
        if not isinstance(y, ShardedArray):
            raise ValueError(f"X is a ShardedArray, so y must be one too (the targets on the same shards), got "
                             f"{type(y).__name__}; make both with krrcore.sharded.scatter/generate/read_table")
        if y.sizes != X.sizes or y.workers != X.workers:
            raise ValueError("X and y are sharded differently: make them together (scatter, generate, from_dask)")
    else:
        X, y = from_dask(X, y, dtype=dtype)
    return X.to(dtype), y.to(dtype)


def _worker_parts(X, kind: str, n: int, M: int, k: int, dtype, memory_budget, scratch_blocks, options: dict):
    """On a worker: a :class:`~krrcore.memory.MemoryEstimate` of what its shard's part of the fit
    allocates, against the memory its limit leaves (its rows are resident already)."""
    from distributed import get_worker

    import psutil

    available = worker_memory_left()
    n_s, d = X.shape
    model = CostModel(d=d, dtype=dtype, device="cpu", memory_budget=memory_budget, scratch_blocks=scratch_blocks,
                      available=available)
    s = model.itemsize
    if kind == NYSTROM:
        model.hold("kernel block buffer", operator_bytes(n_s, M, itemsize=s, budget_bytes=model.scratch_bytes, d=d,
                                                         n_rhs=k, scratch_blocks=scratch_blocks), "scratch")
        if options.get("bless"):
            model.hold("BLESS scoring blocks", model.scratch_bytes, "scratch")
            if s != 8:
                model.hold("float64 copy of the shard (BLESS)", n_s * d * 8)
        advice = "use more workers (smaller shards) or workers with more memory, or lower M"
    else:
        storage = options["storage"]
        model.hold(f"all of X as columns ({n:,}×{d})", n * d * s)
        if storage == "stored" or (storage == "auto" and n_s * n * s <= model.limit_bytes):
            model.hold(f"rows of K ({n_s:,}×{n:,})", n_s * n * s)
        else:
            model.hold("kernel block buffer", operator_bytes(n_s, n, itemsize=s, budget_bytes=model.scratch_bytes,
                                                             d=d, n_rhs=k, scratch_blocks=scratch_blocks), "scratch")
        if options.get("float64_eval") and s != 8:
            model.hold("float64 copies of the shard and the columns", (n_s + n) * d * 8)
        advice = ("use kernel_storage='on_the_fly' or 'auto', more workers, or workers with more memory"
                  if storage == "stored" else "use more workers or workers with more memory, or subsample")
    worker = get_worker()
    estimate = model.build(options["solver"], n_s, k, advice)
    try:
        estimate.check()
    except MemoryLimitError as exc:
        limit = worker.memory_manager.memory_limit
        used = psutil.Process().memory_info().rss
        where = (f"On Dask worker {worker.address} (memory limit {gib(limit)}, {gib(used)} in use)" if limit
                 else f"On Dask worker {worker.address}")
        raise MemoryLimitError(f"{where}, for its shard of {n_s:,} of the n={n:,} rows: {exc}", estimate) from None
    return estimate


def _client_estimate(estimator, kind: str, n: int, d: int, k: int, M: int):
    """What the client holds: the M×M matrices and O(M) vectors (Nyström), or the n-row CG vectors,
    targets and Nyström sketch (full KRR)."""
    dtype = estimator._dtype()
    model = CostModel(d=d, dtype=dtype, device="cpu", memory_budget=getattr(estimator, "memory_budget", None))
    s = model.itemsize
    if kind == NYSTROM:
        system = estimator._SYSTEM_ITEMSIZE or s
        model.hold(f"{estimator._SYSTEM_MATRIX} ({M:,}×{M:,})", M * M * system)
        model.hold("centres and CG vectors", M * d * (s + 8) + 10 * M * k * 8)
        advice = f"lower M (the {M:,}×{M:,} matrix on the client grows as M²)"
    else:
        model.hold("CG vectors (n×k each)", 5 * n * k * s)
        model.hold("targets (float64)", n * k * 8)
        rank = getattr(estimator, "rank", None)
        if rank is not None:
            model.hold(f"Nyström sketch (4 × n×r, r={rank})", 4 * n * min(int(rank), n) * s)
        advice = "subsample: full KRR holds n-long vectors on the client"
    return model.build(type(estimator).__name__, n, k, advice).check()


def start_sharded_fit(estimator, X, y):
    """``fit``'s start on distributed data (:meth:`krrcore.solvers.base.KRRBase._start_fit`): sharded
    X, y in the estimator's dtype, memory checked on every worker against its own limit
    (``worker_memory_estimates_``) and here; returns (X, Y, the client's estimate)."""
    from .centers import center_count

    kind = getattr(estimator, "_sharded_kind", None)
    if kind is None:
        raise ValueError(f"{type(estimator).__name__} does not run on sharded data; Falkon, NystromCG, NystromGD, "
                         f"NystromPCG and CG do (ASkotch, Skotch and SketchySAGA walk kernel blocks themselves, "
                         f"the direct solvers factor an n×n or M×M system built in one place)")
    if getattr(estimator, "eval_train", False):
        raise ValueError("eval_train=True would gather the n training predictions and targets every iteration; on "
                         "sharded data pass a validation set (X_val, y_val) instead")
    dtype = estimator._dtype()
    if estimator._device().type != "cpu":
        raise ValueError("sharded fits keep the client's matrices on the CPU: leave device unset (see "
                         "docs/distributed.md for GPU workers)")
    X, Y = as_sharded(X, y, dtype=dtype)
    n, d = X.shape
    k = Y.shape[1]
    estimator.n_features_in_ = d
    estimator._y_was_1d = Y.was_1d
    kernel = estimator._kernel()
    centers = getattr(estimator, "centers", None)
    bless = isinstance(centers, str) and centers.startswith("bless") or type(centers).__name__.startswith("Bless")
    M = center_count(centers, estimator.M, n) if kind == NYSTROM else n
    if kind == NYSTROM and bless:
        M = min(n, math.ceil(1.25 * M))      # a BLESS dictionary holds ≈ M points (as in Falkon's estimate)
    options = {"solver": type(estimator).__name__, "bless": bless,
               "storage": getattr(estimator, "kernel_storage", None),
               "float64_eval": getattr(estimator, "residual", None) == "float64"}
    budget = getattr(estimator, "memory_budget", None)
    estimates = X.client.gather(X.map(_worker_parts, kind, n, M, k, dtype, budget, kernel.scratch_blocks, options))
    estimator.worker_memory_estimates_ = list(zip(X.workers, estimates))
    return X, Y, _client_estimate(estimator, kind, n, d, k, M)

"""Training rows onto a Dask cluster, where they stay: generated there, read there, taken from a
Dask collection, or scattered from this process.

* :func:`generate` — a synthetic entry of :mod:`krrcore.datasets`, drawn on the workers by seed
  and shard index;
* :func:`read_table` — CSV/Parquet files every worker can read, through ``dask.dataframe``;
* :func:`from_dask` — the chunks of a ``dask.array``/``dask.dataframe`` (``fit`` takes these too);
* :func:`scatter` — arrays this process already holds.

Generated and read rows are standardised as :func:`krrcore.datasets.load` standardises its rows
(:func:`krrcore.datasets.core.standardize_columns`, z-scores, target encoding), from the moments of
every shard merged here (O(d) per shard; the rows never come here).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np
import torch

from .._validation import check_int
from ..datasets.core import column_moments, encode_targets, merge_moments, moments_statistics, z_scores
from .array import ShardedArray, concat
from .cluster import resolve_client, worker_addresses


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


def _dtype_name(dtype) -> str:
    return "float32" if dtype in ("float32", torch.float32) else "float64"


def _even_sizes(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if s < n % parts else 0) for s in range(parts)]


def _pick(pair, position):
    return pair[position]


def _concat_pairs(*pairs):
    return concat(*(p[0] for p in pairs)), concat(*(p[1] for p in pairs))


def _pairs_to_arrays(client, pairs, sizes, workers, d, k, was_1d) -> tuple[ShardedArray, ShardedArray]:
    """Split futures of (X_s, Y_s) into the X and y arrays (same shards, same workers)."""
    xs = [
        client.submit(_pick, f, 0, workers=[w], allow_other_workers=False, pure=False) for f, w in zip(pairs, workers)
    ]
    ys = [
        client.submit(_pick, f, 1, workers=[w], allow_other_workers=False, pure=False) for f, w in zip(pairs, workers)
    ]
    dtype = client.submit(lambda p: p[0].dtype, pairs[0], workers=[workers[0]], pure=False).result()
    return (
        ShardedArray(client, xs, sizes, workers, d, dtype),
        ShardedArray(client, ys, sizes, workers, k, dtype, was_1d=was_1d),
    )


def scatter(X, y, *, cluster=None, n_shards: int | None = None, dtype=None) -> tuple[ShardedArray, ShardedArray]:
    """Arrays of this process cut into ``n_shards`` contiguous row shards (default: one per worker),
    sent once to the workers in turn. The data passes through this process, which already holds
    it; for data that should never do so use :func:`generate`, :func:`read_table` or :func:`from_dask`."""
    from .._validation import check_X_y

    client = resolve_client(cluster)
    X, Y, was_1d = check_X_y(X, y, dtype=dtype, device="cpu")
    workers = worker_addresses(client)
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
    return (
        ShardedArray(client, xs, sizes, where, X.shape[1], X.dtype),
        ShardedArray(client, ys, sizes, where, Y.shape[1], X.dtype, was_1d=was_1d),
    )


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
        raise ValueError(
            f"{name} has chunks of unknown length: call .compute_chunk_sizes() (or to_dask_array(lengths=True)) first"
        )
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
    parts = [
        dask.delayed(_as_tensor_pair)(xc, yc, _dtype_name(dtype))
        for xc, yc in zip(X.to_delayed().ravel(), y.to_delayed().ravel())
    ]
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
            future.result()  # raises the chunk's error here, moves no rows
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
    pairs = [
        group[0]
        if len(group) == 1
        else client.submit(_concat_pairs, *group, workers=[w], allow_other_workers=False, pure=False)
        for w, group, _ in runs
    ]
    return _pairs_to_arrays(client, pairs, [n for *_, n in runs], [w for w, *_ in runs], d, k, was_1d)


def _generate_shard(name: str, n: int, seed_sequence, params: dict):
    """Rows of one shard of registry entry ``name``: (features, encoded targets) as float64 numpy."""
    from ..datasets.catalog import get_info

    info = get_info(name)
    table = info.loader(n, np.random.default_rng(seed_sequence), **params)
    classes = table.classes if info.task != "regression" else None
    if info.task != "regression" and classes is None:
        raise ValueError(f"{name} does not list its classes: it cannot be generated in shards")
    return np.ascontiguousarray(table.X, dtype=np.float64), encode_targets(info.task, table.target, classes)


def _moments(pair):
    """The column moments of a shard's features and targets (:func:`krrcore.datasets.core.column_moments`)."""
    X, y = pair
    return column_moments(X), column_moments(y[:, None] if y.ndim == 1 else y)


def _finish_shard(pair, mean, scale, y_mean, y_scale, dtype_name):
    X, y = pair
    y = y[:, None] if y.ndim == 1 else y
    return (
        torch.from_numpy(np.ascontiguousarray(z_scores(X, mean, scale), dtype=dtype_name)),
        torch.from_numpy(np.ascontiguousarray(z_scores(y, y_mean, y_scale), dtype=dtype_name)),
    )


def _standardise(client, raw, workers, task, standardize, dtype_name):
    """z-score features (and regression targets) as :func:`krrcore.datasets.core.assemble` does,
    with the moments of all shards merged."""
    stats = client.gather([client.submit(_moments, r, workers=[w], pure=False) for r, w in zip(raw, workers)])
    mean, scale, _ = moments_statistics(merge_moments(s[0] for s in stats))
    if not standardize:
        mean, scale = np.zeros_like(mean), np.ones_like(scale)
    k = stats[0][1].mean.shape[0]
    y_mean, y_scale = np.zeros(k), np.ones(k)
    if task == "regression":
        try:
            y_mean, y_scale, _ = moments_statistics(merge_moments(s[1] for s in stats))
        except ValueError:
            raise ValueError("the target cannot be standardised: its values overflow float64; rescale it") from None
    pairs = [
        client.submit(_finish_shard, r, mean, scale, y_mean, y_scale, dtype_name, workers=[w], pure=False)
        for r, w in zip(raw, workers)
    ]
    return pairs, mean, scale, float(y_mean[0]), float(y_scale[0])


def generate(
    name: str,
    n: int,
    seed: int = 0,
    *,
    cluster=None,
    n_shards: int | None = None,
    dtype="float64",
    standardize: bool = True,
    n_test: int = 0,
    **knobs,
) -> ShardedDataset:
    """``n`` rows of the synthetic registry entry ``name`` (e.g. "higgs_like", "sine_projection"),
    generated on the workers: shard s draws its rows from ``SeedSequence(seed).spawn(n_shards)[s]``,
    so the data depends on (seed, n_shards) and never passes through this process. Features are
    z-scored with the statistics of all shards (their moments gathered, O(d) per shard); regression
    targets likewise; binary targets are ±1, multiclass one-hot, as :func:`krrcore.datasets.load`.
    ``n_test`` rows more come from one further seed, standardised alike, into this process.
    These are not the rows :func:`krrcore.datasets.load` draws for the same seed (other streams)."""
    from ..datasets.catalog import get_info, resolve_knobs

    info = get_info(name)
    if not info.synthetic:
        raise ValueError(
            f"{name} is not a synthetic set: read it with read_table from a path every worker "
            f"sees, or load it here and use scatter"
        )
    params = resolve_knobs(info, None, knobs)
    n = check_int(n, "n", minimum=2)
    client = resolve_client(cluster)
    workers = worker_addresses(client)
    n_shards = len(workers) if n_shards is None else check_int(n_shards, "n_shards")
    sizes = _even_sizes(n, n_shards)
    where = [workers[s % len(workers)] for s in range(n_shards)]
    seeds = np.random.SeedSequence(check_int(seed, "seed", minimum=0)).spawn(n_shards + 1)
    raw = [
        client.submit(_generate_shard, name, size, seeds[s], params, workers=[w], allow_other_workers=False, pure=False)
        for s, (size, w) in enumerate(zip(sizes, where))
    ]
    dtype_name = _dtype_name(dtype)
    pairs, mean, scale, y_mean, y_scale = _standardise(client, raw, where, info.task, standardize, dtype_name)
    del raw
    k = client.submit(lambda p: p[1].shape[1], pairs[0], workers=[where[0]], pure=False).result()
    X, y = _pairs_to_arrays(client, pairs, sizes, where, len(mean), k, was_1d=(k == 1))
    data = ShardedDataset(
        name,
        info.task,
        X,
        y,
        classes=None,
        feature_mean=mean,
        feature_scale=scale,
        y_mean=y_mean,
        y_scale=y_scale,
        info={"seed": seed, "n_shards": n_shards, **params},
    )
    if n_test:
        Xt, yt = _generate_shard(name, check_int(n_test, "n_test"), seeds[-1], params)
        Xt_t, yt_t = _finish_shard((Xt, yt), mean, scale, y_mean, y_scale, dtype_name)
        data.X_test, data.y_test = Xt_t.numpy(), yt_t.numpy()
    return data


def read_table(
    path, target: str, *, cluster=None, features=None, dtype="float64", standardize: bool = True, **read_options
) -> ShardedDataset:
    """A CSV or Parquet table (``path``: a file, a glob or a folder every worker can read) read by
    the workers through ``dask.dataframe``; ``target`` names the regression target column,
    ``features`` the feature columns (default: every other numeric column). Features and target
    are z-scored with statistics merged over the shards; rows never pass through here."""
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
    raw = [
        client.submit(_as_numpy_pair, xf, yf, workers=[w], allow_other_workers=False, pure=False)
        for xf, yf, w in zip(Xs.futures, ys.futures, Xs.workers)
    ]
    pairs, mean, scale, y_mean, y_scale = _standardise(
        client, raw, Xs.workers, "regression", standardize, _dtype_name(dtype)
    )
    Xn, yn = _pairs_to_arrays(client, pairs, Xs.sizes, Xs.workers, Xs.width, 1, was_1d=True)
    name = os.path.basename(text.rstrip("/")) or text
    return ShardedDataset(
        name,
        "regression",
        Xn,
        yn,
        feature_mean=mean,
        feature_scale=scale,
        y_mean=y_mean,
        y_scale=y_scale,
        info={"path": text, "features": list(features)},
    )


def _frame_pair(frame, features, target):
    """A pandas partition as (features, target column) float64 tensors."""
    return (
        torch.as_tensor(frame[features].to_numpy(dtype="float64")),
        torch.as_tensor(frame[target].to_numpy(dtype="float64"))[:, None],
    )


def _as_numpy_pair(X, Y):
    return X.numpy(), Y.numpy()

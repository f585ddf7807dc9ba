"""The :class:`Dataset` every loader returns, and the one pipeline that builds it.

Every source (generator, bundled table, QM9, user CSV) hands :func:`assemble` its rows already
in a seeded random order; :func:`assemble` cuts the test split off the front, z-scores features
with training-split statistics only, standardises regression targets on the training split and
encodes classification targets for least squares (±1 for binary, one-hot for multiclass).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from .._validation import check_int, check_positive

TASKS = ("regression", "binary", "multiclass")

#: Environment variable naming the on-disk cache directory (default ``~/.cache/krr-explorer``).
CACHE_ENV = "KRR_CACHE_DIR"


def cache_dir() -> Path:
    """Directory for derived data worth keeping between runs (e.g. QM9 Coulomb matrices)."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "krr-explorer")


#: A feature whose training standard deviation is below this fraction of its magnitude is
#: treated as constant: it is centred but not divided (no division by ~0, no blown-up noise).
CONSTANT_RTOL = 1e-12


@dataclass(eq=False)
class Dataset:
    """A train/test split ready for kernel ridge regression, with its provenance.

    Features are z-scored with the training split's mean and standard deviation
    (``feature_mean``/``feature_scale``, original units; constant columns keep scale 1), unless
    the loader was asked for ``standardize=False`` (then mean 0 and scale 1 are recorded).
    Regression targets are centred and scaled on the training split (``y_mean``, ``y_scale``):
    :meth:`to_original_units` maps predictions back so metrics can be reported in the units of
    ``target_unit``; :attr:`y_train_original`/:attr:`y_test_original` are the targets in those
    units, and :meth:`pipeline` predicts in them. Binary targets are ±1 (``+1`` is ``classes[1]``),
    multiclass targets are one-hot of shape (n, k) in the order of ``classes``; the original labels are kept in
    ``labels_train``/``labels_test``.
    """

    name: str
    title: str
    task: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    labels_train: np.ndarray | None
    labels_test: np.ndarray | None
    classes: np.ndarray | None
    feature_names: tuple[str, ...]
    source: str
    description: str
    suggested_kernel: dict
    suggested_penalty: float
    synthetic: bool
    note: str = ""
    target_name: str = "y"
    target_unit: str = ""
    feature_mean: np.ndarray | None = None
    feature_scale: np.ndarray | None = None
    # training mean and std in original units, whatever standardisation was applied
    feature_mean_raw: np.ndarray | None = None
    feature_scale_raw: np.ndarray | None = None
    standardized: bool = True
    y_mean: float = 0.0
    y_scale: float = 1.0
    train_index: np.ndarray | None = None
    test_index: np.ndarray | None = None
    seed: int = 0
    knobs: dict = field(default_factory=dict)
    row_info_train: dict = field(default_factory=dict)
    row_info_test: dict = field(default_factory=dict)
    # a user's table (krrcore.datasets.from_frame / from_csv): the fitted preprocessing, the
    # decision per column, the decisions as sentences, and the table as read (not copied; its
    # rows train_index / test_index are the splits' original rows)
    preprocess: object | None = None
    columns: tuple = ()
    # the table's weight column (role "weight"), as given, per split: fit(..., sample_weight=weight_train)
    weight_name: str | None = None
    weight_train: np.ndarray | None = None
    weight_test: np.ndarray | None = None
    notes: tuple[str, ...] = ()
    table: object | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Total rows used (train + test)."""
        return self.X_train.shape[0] + self.X_test.shape[0]

    @property
    def n_train(self) -> int:
        return self.X_train.shape[0]

    @property
    def n_test(self) -> int:
        return self.X_test.shape[0]

    @property
    def d(self) -> int:
        return self.X_train.shape[1]

    @property
    def suggested_sigma(self) -> float | None:
        return self.suggested_kernel.get("sigma")

    @property
    def constant_features(self) -> tuple[str, ...]:
        """Features that were constant on the training split (centred, not scaled)."""
        const = _constant_mask(self.feature_scale_raw, self.feature_mean_raw)
        return tuple(name for name, c in zip(self.feature_names, const) if c)

    def to_original_units(self, y):
        """Undo the target standardisation (regression); classification targets pass through."""
        if self.task != "regression":
            return y
        return y * self.y_scale + self.y_mean

    def standardize(self, X_raw) -> np.ndarray:
        """Z-score new rows given in original feature units with the training statistics."""
        X_raw = np.asarray(X_raw, dtype=np.float64)
        if X_raw.ndim != 2 or X_raw.shape[1] != self.d:
            raise ValueError(f"X_raw must have shape (m, {self.d}), got {X_raw.shape}")
        return z_scores(X_raw, self.feature_mean, self.feature_scale)

    @property
    def raw_train(self):
        """The training rows of the table as read (a DataFrame; None when not a user's table)."""
        return None if self.table is None else self.table.iloc[self.train_index]

    @property
    def raw_test(self):
        return None if self.table is None else self.table.iloc[self.test_index]

    def transform(self, rows) -> np.ndarray:
        """Model inputs for rows of the original table (a DataFrame with its columns, as read):
        :attr:`preprocess` (fitted on the training rows) for a user's table, z-scoring otherwise."""
        if self.preprocess is None:
            return self.standardize(rows)
        return np.asarray(self.preprocess.transform(rows), dtype=np.float64)

    @property
    def y_train_original(self) -> np.ndarray:
        """The training targets in the target's own units (:attr:`y_train` is standardised for a
        regression; for classification both are the least-squares encoding)."""
        return self.to_original_units(self.y_train)

    @property
    def y_test_original(self) -> np.ndarray:
        """The test targets in the target's own units (see :attr:`y_train_original`)."""
        return self.to_original_units(self.y_test)

    def pipeline(self, model):
        """A scikit-learn ``Pipeline`` of :attr:`preprocess` and ``model`` (a krrcore estimator
        fitted on :attr:`X_train`, :attr:`y_train`, or fitted later: the pipeline holds ``model``
        itself): its ``predict`` takes raw rows of the table. For a regression the model is wrapped
        in :class:`OriginalUnits`, so ``predict`` answers in the target's own units and ``score`` is
        R² on them, as scikit-learn's ``TransformedTargetRegressor`` would; the standardised model
        stays reachable as ``pipeline["model"].regressor``."""
        from sklearn.pipeline import Pipeline

        if self.preprocess is None:
            raise ValueError(f"{self.name} has no preprocessing step: it is not a user's table")
        if self.task == "regression":
            model = OriginalUnits(model, y_mean=self.y_mean, y_scale=self.y_scale)
        return Pipeline([("preprocess", self.preprocess), ("model", model)])

    def arrays_only(self) -> "Dataset":
        """A copy without the table as read (what a worker needs to fit: arrays and metadata)."""
        return replace(self, table=None)

    def make_kernel(self):
        """The suggested kernel as a :mod:`krrcore.kernels` object."""
        from ..kernels import make_kernel

        params = dict(self.suggested_kernel)
        return make_kernel(params.pop("name"), **params)

    def __repr__(self) -> str:
        return (
            f"Dataset({self.name!r}, task={self.task!r}, n_train={self.n_train}, n_test={self.n_test}, "
            f"d={self.d}, synthetic={self.synthetic})"
        )


class OriginalUnits(RegressorMixin, BaseEstimator):
    """A regressor fitted on standardised targets, answering in the target's own units.

    ``predict(X) = regressor.predict(X)·y_scale + y_mean``; ``score`` is R² on those predictions.
    Unlike scikit-learn's ``TransformedTargetRegressor`` it may wrap a regressor that is already
    fitted (a :class:`Dataset`'s model, fitted on :attr:`Dataset.y_train`), and ``y_mean``/``y_scale``
    are fixed (the training split's): ``fit(X, y)`` takes ``y`` in original units and fits
    ``regressor`` in place on ``(y − y_mean)/y_scale``, as a ``Pipeline`` fits its steps.
    """

    def __init__(self, regressor, y_mean: float = 0.0, y_scale: float = 1.0):
        self.regressor = regressor
        self.y_mean = y_mean
        self.y_scale = y_scale

    def fit(self, X, y, **fit_params):
        y = np.asarray(y, dtype=np.float64)
        self.regressor.fit(X, (y - self.y_mean) / self.y_scale, **fit_params)
        return self

    def predict(self, X):
        return np.asarray(self.regressor.predict(X)) * self.y_scale + self.y_mean

    def __sklearn_is_fitted__(self) -> bool:
        from sklearn.utils.validation import check_is_fitted

        try:
            check_is_fitted(self.regressor)
        except Exception:  # NotFittedError, or an object scikit-learn cannot judge
            return False
        return True


@dataclass
class Table:
    """Rows of one source before splitting: features, raw targets (values or labels), extras.

    ``classes`` lists every class of the whole source (so one-hot widths do not depend on the
    subsample); ``row_info`` holds per-row annotations such as an outlier flag.
    """

    X: np.ndarray
    target: np.ndarray
    feature_names: tuple[str, ...]
    classes: np.ndarray | None = None
    row_info: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return self.X.shape[0]

    def take(self, index: np.ndarray) -> "Table":
        return Table(
            self.X[index],
            self.target[index],
            self.feature_names,
            self.classes,
            {k: np.asarray(v)[index] for k, v in self.row_info.items()},
        )


def _constant_mask(std: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
    ref = np.maximum(np.abs(mean), 1.0) if mean is not None else 1.0
    return ~(std > CONSTANT_RTOL * ref)


def check_split_args(n: int, seed, test_fraction) -> tuple[int, int]:
    """Validate ``seed`` and ``test_fraction`` and return ``(n_train, n_test)`` for ``n`` rows.

    The test split gets ``round(test_fraction·n)`` rows, clamped so each split keeps at least
    one row and the training split at least two (z-scoring needs a spread).
    """
    check_int(seed, "seed", minimum=0)
    test_fraction = check_positive(test_fraction, "test_fraction")
    if not test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    n_test = min(max(int(round(test_fraction * n)), 1), n - 2)
    return n - n_test, n_test


def check_n(n, available: int, what: str) -> int:
    """``n`` as an int in [4, available]; the message names ``n`` and what limits it."""
    n = check_int(n, "n", minimum=4)
    if n > available:
        raise ValueError(f"n={n} exceeds the {available:,} rows {what}")
    return n


@dataclass(frozen=True)
class ColumnMoments:
    """What :func:`standardize_columns` needs of some rows, per column: their count, largest
    magnitude, and the mean and summed squared deviations of the columns divided by that magnitude
    (so values near the float64 limit do not overflow). Moments of row shards merge
    (:func:`merge_moments`), so rows kept on several machines are standardised by the same rule."""

    count: int
    magnitude: np.ndarray
    mean: np.ndarray
    m2: np.ndarray


def _unit(magnitude: np.ndarray) -> np.ndarray:
    return np.where(magnitude > 0, magnitude, 1.0)


def column_moments(X: np.ndarray) -> ColumnMoments:
    """The :class:`ColumnMoments` of the rows of X (two passes over X)."""
    magnitude = np.abs(X).max(axis=0)
    unit = X / _unit(magnitude)
    mean = unit.mean(axis=0)
    return ColumnMoments(X.shape[0], magnitude, mean, ((unit - mean) ** 2).sum(axis=0))


def merge_moments(parts) -> ColumnMoments:
    """The moments of all the parts' rows together (Chan, Golub and LeVeque's pairwise update,
    after rescaling each part to the largest magnitude)."""
    parts = list(parts)
    magnitude = np.maximum.reduce([p.magnitude for p in parts])
    count, mean, m2 = 0, np.zeros_like(magnitude), np.zeros_like(magnitude)
    for p in parts:
        ratio = _unit(p.magnitude) / _unit(magnitude)
        p_mean, p_m2 = p.mean * ratio, p.m2 * ratio**2
        total = count + p.count
        delta = p_mean - mean
        mean = mean + delta * (p.count / total)
        m2 = m2 + p_m2 + delta**2 * (count * p.count / total)
        count = total
    return ColumnMoments(count, magnitude, mean, m2)


def moments_statistics(moments: ColumnMoments):
    """Mean, scale and standard deviation per column from its moments; constant columns get
    scale 1 (centred only); a column whose statistics are not finite is named in a ValueError."""
    magnitude = _unit(moments.magnitude)
    mean = moments.mean * magnitude
    std = np.sqrt(moments.m2 / moments.count) * magnitude
    bad = ~(np.isfinite(mean) & np.isfinite(std))
    if bad.any():
        raise ValueError(
            f"feature column(s) {np.flatnonzero(bad).tolist()} cannot be standardised: their "
            f"values (up to {float(magnitude[bad].max()):.3g}) overflow float64; rescale them"
        )
    scale = np.where(_constant_mask(std, mean), 1.0, std)
    return mean, scale, std


def standardize_columns(X_train: np.ndarray):
    """Training mean and scale per column; constant columns get scale 1 (centred only).

    The statistics are taken on each column divided by its largest magnitude and scaled back, so
    values near the float64 limit (1e307) give their true mean and spread instead of overflowing
    in the sum of squares; a column whose statistics still are not finite is named in a ValueError.
    """
    return moments_statistics(column_moments(X_train))


def z_scores(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(X − mean)/scale per column; where X − mean would overflow (values near 1e308 of both
    signs), X/scale − mean/scale instead."""
    with np.errstate(over="ignore", invalid="ignore"):
        Z = (X - mean) / scale
        if not np.isfinite(Z).all():
            Z = np.where(np.isfinite(Z), Z, X / scale - mean / scale)
    if not np.isfinite(Z).all():
        bad = np.flatnonzero(~np.isfinite(Z).all(axis=0)).tolist()
        raise ValueError(f"feature column(s) {bad} overflow float64 when standardised; rescale them")
    return Z


def encode_targets(task: str, target: np.ndarray, classes: np.ndarray | None):
    """Least-squares targets: raw floats (regression), ±1 (binary), one-hot (multiclass)."""
    if task == "regression":
        return np.asarray(target, dtype=np.float64)
    if task == "binary":
        if len(classes) != 2:
            raise ValueError(f"a binary task needs exactly 2 classes, got {len(classes)}: {list(classes)}")
        return np.where(target == classes[1], 1.0, -1.0)
    if task == "multiclass":
        return (target[:, None] == classes[None, :]).astype(np.float64)
    raise ValueError(f"task must be one of {TASKS}, got {task!r}")


def assemble(
    *,
    X: np.ndarray,
    target: np.ndarray,
    index: np.ndarray,
    n_test: int,
    task: str,
    classes: np.ndarray | None = None,
    row_info: dict | None = None,
    standardize: bool = True,
    **meta,
) -> Dataset:
    """Build a :class:`Dataset` from rows in their (seeded) random order.

    The first ``n_test`` rows become the test split. ``index`` gives each row's position in
    its source, kept as ``train_index``/``test_index``. ``standardize=False`` keeps features in
    their original units (mean 0, scale 1 recorded). ``meta`` fills the descriptive fields.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    if not np.isfinite(X).all():
        raise ValueError("X contains NaN or infinite values")
    test, train = slice(0, n_test), slice(n_test, None)
    if task != "regression" and classes is None:
        classes = np.unique(target)
    mean_raw, scale, std = standardize_columns(X[train])
    mean = mean_raw
    if not standardize:
        mean, scale = np.zeros_like(mean), np.ones_like(scale)
    Z = z_scores(X, mean, scale)
    y = encode_targets(task, target, classes)
    y_mean, y_scale = 0.0, 1.0
    if task == "regression":
        if not np.isfinite(y).all():
            raise ValueError("the target contains NaN or infinite values")
        try:
            y_mean, y_scale = (float(v[0]) for v in standardize_columns(y[train, None])[:2])
        except ValueError:
            raise ValueError("the target cannot be standardised: its values overflow float64; rescale it") from None
        y = z_scores(y[:, None], np.array([y_mean]), np.array([y_scale]))[:, 0]
    labels = None if task == "regression" else np.asarray(target)
    row_info = row_info or {}
    return Dataset(
        task=task,
        X_train=np.ascontiguousarray(Z[train]),
        y_train=np.ascontiguousarray(y[train]),
        X_test=np.ascontiguousarray(Z[test]),
        y_test=np.ascontiguousarray(y[test]),
        labels_train=None if labels is None else labels[train].copy(),
        labels_test=None if labels is None else labels[test].copy(),
        classes=None if classes is None else np.asarray(classes),
        feature_mean=mean,
        feature_scale=scale,
        feature_mean_raw=mean_raw,
        feature_scale_raw=std,
        standardized=bool(standardize),
        y_mean=y_mean,
        y_scale=y_scale,
        train_index=np.asarray(index[train]),
        test_index=np.asarray(index[test]),
        row_info_train={k: np.asarray(v)[train] for k, v in row_info.items()},
        row_info_test={k: np.asarray(v)[test] for k, v in row_info.items()},
        **meta,
    )


def describe(dataset: Dataset, *, max_points: int = 1000) -> dict:
    """Diagnostics for the app's Dataset page: shapes, target summary, feature scales, distances.

    ``median_pairwise_distance`` is the median Euclidean distance between (at most
    ``max_points``) z-scored training rows: the usual starting point for a Gaussian σ.
    """
    from ..kernels import median_heuristic

    out = {
        "name": dataset.name,
        "title": dataset.title,
        "task": dataset.task,
        "synthetic": dataset.synthetic,
        "n": dataset.n,
        "n_train": dataset.n_train,
        "n_test": dataset.n_test,
        "d": dataset.d,
        "suggested_kernel": dict(dataset.suggested_kernel),
        "suggested_penalty": dataset.suggested_penalty,
        "constant_features": list(dataset.constant_features),
        "note": dataset.note,
    }
    if dataset.task == "regression":
        y = dataset.to_original_units(dataset.y_train)
        q = np.quantile(y, [0.0, 0.25, 0.5, 0.75, 1.0])
        out["target"] = {
            "name": dataset.target_name,
            "unit": dataset.target_unit,
            "mean": float(y.mean()),
            "std": float(y.std()),
            "min": float(q[0]),
            "q25": float(q[1]),
            "median": float(q[2]),
            "q75": float(q[3]),
            "max": float(q[4]),
        }
    else:
        counts = {}
        for split, labels in (("train", dataset.labels_train), ("test", dataset.labels_test)):
            values, n = np.unique(labels, return_counts=True)
            tally = dict(zip(values.tolist(), n.tolist()))
            counts[split] = {str(c): int(tally.get(c, 0)) for c in dataset.classes.tolist()}
        out["target"] = {
            "name": dataset.target_name,
            "classes": [str(c) for c in dataset.classes.tolist()],
            "counts": counts,
        }
    out["features"] = [
        {"name": name, "mean": float(m), "std": float(s)}
        for name, m, s in zip(dataset.feature_names, dataset.feature_mean_raw, dataset.feature_scale_raw)
    ]
    try:
        out["median_pairwise_distance"] = median_heuristic(dataset.X_train, max_points=max_points)
    except ValueError:  # all training rows identical
        out["median_pairwise_distance"] = math.nan
    return out

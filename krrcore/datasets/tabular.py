"""User CSVs: :func:`inspect_csv` reports what would stop a fit, :func:`from_csv` builds the split.

Nothing is dropped silently: non-numeric feature columns and missing values raise a
``ValueError`` naming the columns unless the caller opts in with ``drop_columns=[...]`` or
``dropna=True``. Constant columns are harmless (z-scoring only centres them) and are kept, with a
note on the returned :class:`Dataset`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core import TASKS, Dataset, assemble, check_n, check_split_args

#: A numeric target with at most this many distinct integer values is taken as class labels.
MAX_AUTO_CLASSES = 20
#: Starting penalty for a user CSV (λ per sample); the app's controls let the user tune it.
CSV_PENALTY = 1e-4


@dataclass
class CsvReport:
    """What :func:`inspect_csv` found. ``missing`` maps column → number of missing cells."""

    n_rows: int
    columns: tuple[str, ...]
    numeric: tuple[str, ...]
    non_numeric: tuple[str, ...]
    missing: dict[str, int]
    constant: tuple[str, ...]
    target: str | None = None
    target_task: str | None = None     # what task="auto" would pick, or None if it cannot
    target_distinct: int | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    @property
    def ok(self) -> bool:
        """True when :func:`from_csv` would succeed without drop_columns/dropna."""
        return not self.problems


def read_frame(source) -> pd.DataFrame:
    """A DataFrame (copied), a path or a file-like object read with :func:`pandas.read_csv`."""
    if isinstance(source, pd.DataFrame):
        return source.copy()
    if isinstance(source, (str, os.PathLike)) and not os.path.exists(source):
        raise ValueError(f"source: no such file {os.fspath(source)!r}")
    try:
        if hasattr(source, "seek"):
            source.seek(0)
        return pd.read_csv(source)
    except pd.errors.EmptyDataError:
        raise ValueError("source: the CSV is empty (no header and no rows)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"source: could not parse the CSV ({exc})") from None


def _is_numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)


def detect_task(target: pd.Series) -> str:
    """binary for 2 distinct values; multiclass for ≤ 20 distinct integers or labels; else regression.
    Raises ``ValueError`` for a single-valued target or free-text labels."""
    distinct = target.nunique(dropna=True)
    if distinct < 2:
        raise ValueError(f"target column {target.name!r} has a single value; nothing to learn")
    if distinct == 2:
        return "binary"
    if not _is_numeric(target):
        if distinct <= MAX_AUTO_CLASSES:
            return "multiclass"
        raise ValueError(f"target column {target.name!r} is not numeric and has {distinct} distinct values: "
                         f"neither a number to regress nor a class label with ≤ {MAX_AUTO_CLASSES} classes")
    values = target.dropna().to_numpy(dtype=np.float64)
    if distinct <= MAX_AUTO_CLASSES and np.all(values == np.round(values)):
        return "multiclass"
    return "regression"


def inspect_csv(source, target: str | None = None) -> CsvReport:
    """Report row count, non-numeric, missing-valued and constant columns (and, with ``target``,
    the task auto-detection would choose). ``source``: DataFrame, path or file-like."""
    frame = read_frame(source)
    columns = tuple(str(c) for c in frame.columns)
    frame.columns = columns
    features = [c for c in columns if c != target]
    non_numeric = tuple(c for c in features if not _is_numeric(frame[c]))
    counts = frame.isna().sum()
    missing = {c: int(counts[c]) for c in columns if counts[c] > 0}
    constant = tuple(c for c in features if frame[c].nunique(dropna=True) <= 1)
    report = CsvReport(len(frame), columns, tuple(c for c in columns if _is_numeric(frame[c])), non_numeric,
                       missing, constant, target=target)
    if len(frame) < 4:
        report.problems.append(f"the CSV has {len(frame)} data row(s); at least 4 are needed")
    if non_numeric:
        report.problems.append(f"non-numeric column(s) {list(non_numeric)}")
    feature_missing = {c: k for c, k in missing.items() if c != target}
    if feature_missing:
        report.problems.append(f"missing values in column(s) {feature_missing}")
    if target is not None:
        if target not in columns:
            report.problems.append(f"target column {target!r} not found")
        else:
            report.target_distinct = int(frame[target].nunique(dropna=True))
            if target in missing:
                report.problems.append(f"target column {target!r} has {missing[target]} missing value(s)")
            try:
                report.target_task = detect_task(frame[target])
            except ValueError as exc:
                report.problems.append(str(exc))
    return report


def _check_target_for_task(task: str, target: pd.Series) -> str:
    if task == "auto":
        return detect_task(target)
    if task not in TASKS:
        raise ValueError(f"task must be 'auto' or one of {TASKS}, got {task!r}")
    distinct = target.nunique()
    if task == "regression" and not _is_numeric(target):
        raise ValueError(f"target column {target.name!r} is not numeric (dtype {target.dtype}); regression needs "
                         "numbers (use task='binary' or 'multiclass' for labels)")
    if task == "binary" and distinct != 2:
        raise ValueError(f"task='binary' needs exactly 2 distinct target values; {target.name!r} has {distinct}")
    if task == "multiclass" and distinct < 2:
        raise ValueError(f"target column {target.name!r} has a single value; nothing to learn")
    return task


def _source_label(source) -> str:
    if isinstance(source, pd.DataFrame):
        return "DataFrame"
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return getattr(source, "name", None) or "uploaded CSV"


def from_csv(source, target: str, *, task: str = "auto", seed: int = 0, test_fraction: float = 0.2,
             n: int | None = None, drop_columns=(), dropna: bool = False, title: str | None = None) -> Dataset:
    """A seeded train/test :class:`Dataset` from a user CSV (path, file-like or DataFrame).

    All columns but ``target`` and ``drop_columns`` are features and must be numeric. Rows with
    missing values raise unless ``dropna=True``. ``task="auto"`` follows :func:`detect_task`.
    ``n`` subsamples the rows (after ``dropna``) as :func:`~krrcore.datasets.load` does. The
    suggested kernel is Gaussian with σ = median pairwise distance of the z-scored training rows.
    """
    frame = read_frame(source)
    frame.columns = [str(c) for c in frame.columns]
    if len(frame) < 4:
        raise ValueError(f"source: the CSV has {len(frame)} data row(s); at least 4 are needed")
    if not isinstance(target, str) or target not in frame.columns:
        raise ValueError(f"target column {target!r} not found; the CSV has columns {list(frame.columns)}")
    drop_columns = [str(c) for c in ([drop_columns] if isinstance(drop_columns, str) else drop_columns)]
    unknown = sorted(set(drop_columns) - set(frame.columns))
    if unknown:
        raise ValueError(f"drop_columns names column(s) not in the CSV: {unknown}")
    if target in drop_columns:
        raise ValueError(f"drop_columns includes the target column {target!r}")
    frame = frame.drop(columns=drop_columns)
    features = [c for c in frame.columns if c != target]
    if not features:
        raise ValueError("the CSV has no feature columns besides the target")
    non_numeric = [c for c in features if not _is_numeric(frame[c])]
    if non_numeric:
        raise ValueError(f"column(s) {non_numeric} are not numeric; encode them as numbers or pass "
                         f"drop_columns={non_numeric}")
    notes = [f"dropped column(s) {drop_columns}"] if drop_columns else []
    counts = frame.isna().sum()
    missing = {c: int(counts[c]) for c in frame.columns if counts[c] > 0}
    if missing and not dropna:
        raise ValueError(f"column(s) with missing values {missing}; pass dropna=True to drop those rows "
                         f"or drop_columns=[...] to drop the columns")
    if missing:
        before = len(frame)
        frame = frame.dropna()
        notes.append(f"dropped {before - len(frame)} row(s) with missing values")
        if len(frame) < 4:
            raise ValueError(f"only {len(frame)} row(s) remain after dropna; at least 4 are needed")
    task = _check_target_for_task(task, frame[target])
    constant = [c for c in features if frame[c].nunique() <= 1]
    if constant:
        notes.append(f"constant column(s) {constant} kept (they carry no information)")
    n = check_n(len(frame) if n is None else n, len(frame), "in the CSV")
    _, n_test = check_split_args(n, seed, test_fraction)
    index = np.random.default_rng(seed).permutation(len(frame))[:n]
    X = frame[features].to_numpy(dtype=np.float64)[index]
    column = frame[target].to_numpy()
    classes = None if task == "regression" else np.unique(column)
    label = _source_label(source)
    dataset = assemble(
        X=X, target=column[index] if classes is not None else column[index].astype(np.float64), index=index,
        n_test=n_test, task=task, classes=classes, name="csv",
        title=title or ("user table" if isinstance(source, pd.DataFrame) else os.path.basename(label)), feature_names=tuple(features), source=label,
        description=f"user CSV, target {target!r} ({task})", suggested_kernel={"name": "gaussian", "sigma": 1.0},
        suggested_penalty=CSV_PENALTY, synthetic=False, note="; ".join(notes), target_name=target, seed=seed,
        knobs={"drop_columns": drop_columns, "dropna": dropna},
    )
    dataset.suggested_kernel["sigma"] = _median_sigma(dataset.X_train)
    return dataset


def _median_sigma(X: np.ndarray) -> float:
    from ..kernels import median_heuristic

    try:
        return median_heuristic(X, max_points=1000)
    except ValueError:          # every training row identical: any σ will do
        return 1.0


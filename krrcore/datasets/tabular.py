"""User CSVs: :func:`inspect_csv` reports what would stop a fit, :func:`from_csv` builds the split.

Files are read with :func:`read_frame`, which detects the delimiter (comma, semicolon, tab or
vertical bar) and a decimal comma (``1,5`` in a semicolon- or tab-separated file) from the first
lines, and reads the usual missing-value markers (empty cells, ``NA``, ``?``, ``-``...) as missing,
so a numeric column with gaps stays numeric. Nothing is dropped silently: non-numeric feature
columns and missing values raise a ``ValueError`` naming the columns unless the caller opts in
with ``drop_columns=[...]`` or ``dropna=True``. Constant columns are harmless (z-scoring only
centres them) and are kept, with a note on the returned :class:`Dataset`.
"""
from __future__ import annotations

import csv
import io
import os
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core import TASKS, Dataset, assemble, check_n, check_split_args

#: A numeric target with at most this many distinct integer values is taken as class labels.
MAX_AUTO_CLASSES = 20
#: Starting penalty for a user CSV (λ per sample); the app's controls let the user tune it.
CSV_PENALTY = 1e-4
#: Delimiters :func:`detect_format` chooses from, with the names messages use.
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar"}
#: Cells read as missing besides pandas' own markers (empty, NA, N/A, NaN, null, None, ...).
MISSING_MARKERS = ("?", "-", "--", ".", "n.a.", "missing")
#: How much of a file :func:`detect_format` looks at.
SAMPLE_BYTES, SAMPLE_LINES = 1 << 16, 50
_COMMA_DECIMAL = re.compile(r"^\s*[-+]?\d+,\d+(?:[eE][-+]?\d+)?\s*$")
_POINT_DECIMAL = re.compile(r"^\s*[-+]?\d*\.\d+(?:[eE][-+]?\d+)?\s*$")


@dataclass(frozen=True)
class CsvFormat:
    """How a CSV file is written: its field delimiter and decimal mark."""

    delimiter: str = ","
    decimal: str = "."

    def describe(self) -> str:
        """E.g. "semicolon-separated, decimal comma"."""
        text = f"{DELIMITERS.get(self.delimiter, repr(self.delimiter))}-separated"
        return text + (", decimal comma" if self.decimal == "," else "")


@dataclass
class CsvReport:
    """What :func:`inspect_csv` found. ``missing`` maps column → number of missing cells;
    ``examples`` maps a non-numeric column to a few of its cells that are not numbers."""

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
    format: CsvFormat | None = None    # None for a DataFrame source
    examples: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    @property
    def ok(self) -> bool:
        """True when :func:`from_csv` would succeed without drop_columns/dropna."""
        return not self.problems


def detect_format(text: str) -> CsvFormat:
    """The delimiter whose split gives the same number (≥ 2) of fields on the most of the first
    :data:`SAMPLE_LINES` lines (then the most fields), and a decimal comma when the delimiter is
    not a comma and the data cells hold numbers like ``1,5`` but none like ``1.5``."""
    lines = [line for line in text.splitlines()[:SAMPLE_LINES + 1] if line.strip()]
    best, best_score = ",", (0.0, 1)
    for delimiter in DELIMITERS:
        counts = [len(row) for row in csv.reader(lines, delimiter=delimiter)]
        if not counts or counts[0] < 2:
            continue
        score = (sum(count == counts[0] for count in counts) / len(counts), counts[0])
        if score > best_score:
            best, best_score = delimiter, score
    decimal = "."
    if best != ",":
        cells = [cell for row in csv.reader(lines[1:], delimiter=best) for cell in row]
        if any(_COMMA_DECIMAL.match(c) for c in cells) and not any(_POINT_DECIMAL.match(c) for c in cells):
            decimal = ","
    return CsvFormat(best, decimal)


def _read_bytes(source) -> bytes:
    if isinstance(source, (str, os.PathLike)):
        if not os.path.exists(source):
            raise ValueError(f"source: no such file {os.fspath(source)!r}")
        with open(source, "rb") as fh:
            return fh.read()
    if hasattr(source, "seek"):
        source.seek(0)
    data = source.read()
    return data.encode("utf-8") if isinstance(data, str) else data


def read_csv_bytes(data: bytes, fmt: CsvFormat | None = None) -> tuple[pd.DataFrame, CsvFormat]:
    """Parse CSV bytes with ``fmt`` (detected from the first :data:`SAMPLE_BYTES` when None)."""
    if fmt is None:
        fmt = detect_format(data[:SAMPLE_BYTES].decode("utf-8", errors="replace"))
    try:
        frame = pd.read_csv(io.BytesIO(data), sep=fmt.delimiter, decimal=fmt.decimal,
                            na_values=list(MISSING_MARKERS), skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise ValueError("source: the CSV is empty (no header and no rows)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ValueError(f"source: could not parse the CSV as {fmt.describe()} ({exc})") from None
    return frame, fmt


def read_frame(source) -> tuple[pd.DataFrame, CsvFormat | None]:
    """A DataFrame (copied; format None) or a CSV path/file-like object, read by
    :func:`read_csv_bytes` with a detected format. Object columns whose every non-missing cell
    is a number (e.g. a pandas column holding ``pd.NA``) become numeric."""
    if isinstance(source, pd.DataFrame):
        frame, fmt = source.copy(), None
    else:
        frame, fmt = read_csv_bytes(_read_bytes(source))
    frame.columns = [str(c) for c in frame.columns]
    for name in frame.columns:
        column = frame[name]
        if _is_numeric(column) or not column.notna().any():
            continue
        converted = pd.to_numeric(column, errors="coerce")
        if converted.notna().sum() == column.notna().sum():
            frame[name] = converted.astype(np.float64)
    return frame, fmt


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
    the task auto-detection would choose). ``source``: DataFrame, path or file-like.

    A column is non-numeric only when some of its non-missing cells are not numbers (a few are
    kept in ``examples``); a numeric column with gaps is reported under ``missing``."""
    frame, fmt = read_frame(source)
    columns = tuple(frame.columns)
    features = [c for c in columns if c != target]
    non_numeric = tuple(c for c in features if not _is_numeric(frame[c]))
    counts = frame.isna().sum()
    missing = {c: int(counts[c]) for c in columns if counts[c] > 0}
    constant = tuple(c for c in features if frame[c].nunique(dropna=True) <= 1)
    report = CsvReport(len(frame), columns, tuple(c for c in columns if _is_numeric(frame[c])), non_numeric,
                       missing, constant, target=target, format=fmt,
                       examples={c: _text_cells(frame[c]) for c in non_numeric})
    if len(columns) < 2:
        how = f" (read as {fmt.describe()})" if fmt is not None else ""
        report.problems.append(f"only one column was found{how}: a CSV needs feature columns and a target column")
    if len(frame) < 4:
        report.problems.append(f"the CSV has {len(frame)} data row(s); at least 4 are needed")
    if non_numeric:
        shown = "; ".join(f"{c!r}: {', '.join(map(repr, report.examples[c]))}" for c in non_numeric)
        report.problems.append(f"non-numeric column(s) {list(non_numeric)} (cells that are not numbers: {shown})")
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


def _text_cells(column: pd.Series, limit: int = 3) -> tuple[str, ...]:
    """Up to ``limit`` distinct non-missing cells of ``column`` that are not numbers."""
    present = column[column.notna()]
    text = present[pd.to_numeric(present, errors="coerce").isna()]
    return tuple(str(v) for v in pd.unique(text)[:limit])


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

    A file is read by :func:`read_frame` (delimiter and decimal comma detected; the note says
    which were used when not plain commas). All columns but ``target`` and ``drop_columns`` are
    features and must be numeric. Rows with missing values raise unless ``dropna=True``. ``task="auto"`` follows :func:`detect_task`.
    ``n`` subsamples the rows (after ``dropna``) as :func:`~krrcore.datasets.load` does. The
    suggested kernel is Gaussian with σ = median pairwise distance of the z-scored training rows.
    """
    frame, fmt = read_frame(source)
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
    if fmt is not None and fmt != CsvFormat():
        notes.insert(0, f"read as {fmt.describe()}")
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


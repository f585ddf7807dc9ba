"""A user's table as a :class:`Dataset`: :func:`from_frame`, :func:`from_csv` and :func:`inspect_csv`.

The table is read by :mod:`.reading` (CSV in any common encoding and delimiter, Parquet, bytes,
DataFrame); each column gets a decision from :mod:`.columns`; rows without a target are dropped
and the task is detected (:func:`detect_task`) unless given. The preprocessing is one scikit-learn
``ColumnTransformer`` (:func:`~.columns.build_transformer`) fitted on the training rows only: it is
the dataset's :attr:`~Dataset.preprocess`, so a model fitted on ``X_train`` predicts on raw rows of
the table (:meth:`Dataset.transform`, :meth:`Dataset.pipeline`). Every decision is one sentence
in ``dataset.notes``, and the ones that change the data are issued as a :class:`PreprocessingWarning`.
:func:`inspect_csv` reports the same decisions before anything is fitted.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .columns import (
    MISSING_RULES,
    SAMPLE_ROWS,
    ColumnDecision,
    build_transformer,
    cell_missing,
    check_missing_rule,
    plan_columns,
)
from .._validation import check_sample_weight
from .core import TASKS, Dataset, assemble, check_n, check_split_args
from .reading import DELIMITERS, MISSING_MARKERS, read_csv_bytes  # noqa: F401  (re-exported)
from .reading import MAX_COLUMNS, CsvFormat, detect_format, is_numeric, read_frame, source_label

#: A numeric target with at most this many distinct integer values is taken as class labels.
MAX_AUTO_CLASSES = 20
#: Most classes a classification target may have (one least-squares problem per class).
MAX_CLASSES = 100
#: Starting penalty for a user table (λ per sample); the app's controls let the user tune it.
CSV_PENALTY = 1e-4
#: Fewest rows a table needs (after dropping rows without a target).
MIN_ROWS = 4


class PreprocessingWarning(UserWarning):
    """A user's table was changed on the way to the model (columns left out, gaps filled, rows
    dropped, text encoded); the message lists each decision."""


@dataclass
class CsvReport:
    """What :func:`inspect_csv` found. ``missing`` maps column → number of missing cells;
    ``examples`` maps a text column to a few of its cells that are not numbers; ``decisions``
    has one :class:`~.columns.ColumnDecision` per column but the target; ``problems`` are what
    stops the table from being used at all."""

    n_rows: int
    columns: tuple[str, ...]
    numeric: tuple[str, ...]
    non_numeric: tuple[str, ...]
    missing: dict[str, int]
    constant: tuple[str, ...]
    target: str | None = None
    target_task: str | None = None  # what task="auto" would pick, or None if it cannot
    target_distinct: int | None = None
    problems: list[str] = field(default_factory=list)
    format: CsvFormat | None = None  # None for a DataFrame source
    examples: dict[str, tuple[str, ...]] = field(default_factory=dict)
    decisions: tuple[ColumnDecision, ...] = ()
    notes: tuple[str, ...] = ()
    sample_rows: int = 0  # rows the type detection looked at
    usable_rows: int = 0  # rows left after dropping those without a target (or with gaps)

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    @property
    def ok(self) -> bool:
        """True when :func:`from_csv` would succeed with the same arguments."""
        return not self.problems


def detect_task(target: pd.Series) -> str:
    """binary for 2 distinct values; multiclass for ≤ 20 distinct integers or labels; else regression.
    Raises ``ValueError`` for a single-valued target or free-text labels."""
    distinct = target.nunique(dropna=True)
    if distinct < 2:
        raise ValueError(f"target column {target.name!r} has a single value; nothing to learn")
    if distinct == 2:
        return "binary"
    if not is_numeric(target):
        if distinct <= MAX_AUTO_CLASSES:
            return "multiclass"
        raise ValueError(
            f"target column {target.name!r} is not numeric and has {distinct:,} distinct values: "
            f"neither a number to regress nor a class label with ≤ {MAX_AUTO_CLASSES} classes (pass "
            f"task='multiclass' for up to {MAX_CLASSES})"
        )
    values = target.dropna().to_numpy(dtype=np.float64)
    if distinct <= MAX_AUTO_CLASSES and np.all(values == np.round(values)):
        return "multiclass"
    return "regression"


def _check_target_for_task(task: str, target: pd.Series) -> str:
    if task == "auto":
        return detect_task(target)
    if task not in TASKS:
        raise ValueError(f"task must be 'auto' or one of {TASKS}, got {task!r}")
    distinct = target.nunique()
    if task == "regression" and not is_numeric(target):
        raise ValueError(
            f"target column {target.name!r} is not numeric (dtype {target.dtype}); regression needs "
            "numbers (use task='binary' or 'multiclass' for labels)"
        )
    if task == "binary" and distinct != 2:
        raise ValueError(f"task='binary' needs exactly 2 distinct target values; {target.name!r} has {distinct}")
    if task == "multiclass" and distinct < 2:
        raise ValueError(f"target column {target.name!r} has a single value; nothing to learn")
    if task == "multiclass" and distinct > MAX_CLASSES:
        raise ValueError(
            f"target column {target.name!r} has {distinct:,} classes; at most {MAX_CLASSES} can be "
            f"fitted: each class is one least-squares problem (a column of the one-hot target), and "
            f"with {distinct:,} classes there are {len(target.dropna()) / distinct:.1f} rows per class "
            "on average to learn from"
        )
    return task


def _roles(roles, drop_columns) -> dict:
    """``roles`` with the older ``drop_columns`` spelling folded in as role "ignore"."""
    drop = [str(c) for c in ([drop_columns] if isinstance(drop_columns, str) else drop_columns)]
    if roles is not None and not isinstance(roles, dict):
        raise TypeError(f"roles must be a dict of column name → role, got {type(roles).__name__}")
    return {**{c: "ignore" for c in drop}, **(roles or {})}


def _names(items, limit: int = 8) -> str:
    items = list(items)
    shown = ", ".join(str(i) for i in items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def table_notes(
    decisions,
    *,
    missing: str,
    gap_rows: int = 0,
    n_rows: int = 0,
    target: str | None = None,
    no_target: int = 0,
    fmt: CsvFormat | None = None,
    sampled: int | None = None,
) -> tuple[str, ...]:
    """The decisions on a table as sentences, one per kind of decision (what the page and the
    warning show)."""
    notes = []
    if fmt is not None and not fmt.plain:
        notes.append(f"The file was read as {fmt.describe()}.")
    if sampled:
        notes.append(f"Column types were detected on a random sample of {sampled:,} of the {n_rows:,} rows.")
    if no_target:
        notes.append(f"{no_target:,} row(s) without a value of {target!r} (the target) dropped.")
    by = {}
    for d in decisions:
        by.setdefault(d.encoding, []).append(d)
    if by.get("numeric"):
        notes.append(
            f"Numbers standardised (training mean and standard deviation): {_names(d.name for d in by['numeric'])}."
        )
    if by.get("date"):
        notes.append(
            f"Dates converted to numbers (year, day of year, hour where times are given), then "
            f"standardised: {_names(d.name for d in by['date'])}."
        )
    if by.get("one-hot"):
        notes.append(
            f"Categories one-hot encoded (a missing cell is a category of its own; a value not seen in "
            f"training is ignored): {_names(d.name for d in by['one-hot'])}."
        )
    gaps = [d for d in decisions if d.used and d.missing and d.encoding != "one-hot"]
    if gaps and missing == "impute":
        notes.append(
            f"Gaps filled with the training median, plus a column marking where a value was missing: "
            f"{_names(f'{d.name} ({d.missing:,})' for d in gaps)}."
        )
    if missing == "drop" and gap_rows:
        notes.append(f"{gap_rows:,} of {n_rows:,} rows dropped for a gap in a column used.")
    weights = [d for d in decisions if d.role == "weight"]
    if weights:
        notes.append(f"Sample weights of the fit (not a feature): {_names(d.name for d in weights)}.")
    left_out = [d for d in decisions if not d.used and d.role != "weight"]
    if left_out:
        notes.append(f"Left out: {_names((f'{d.name} ({d.reason})' for d in left_out), limit=12)}.")
    return tuple(notes)


def _prepare(frame: pd.DataFrame, target, roles, missing: str):
    """Rows with a target, the column decisions, and the rows kept after the missing-value rule.
    Returns (frame, positions of its rows in the original, decisions, rows without a target, rows
    dropped for gaps)."""
    if not isinstance(target, str) or target not in frame.columns:
        shown = list(frame.columns[:30]) + ([f"… {frame.shape[1] - 30} more"] if frame.shape[1] > 30 else [])
        raise ValueError(f"target column {target!r} not found; the table has columns {shown}")
    if frame[target].notna().sum() == 0:
        raise ValueError(f"target column {target!r} has no values (all {len(frame):,} rows are missing)")
    has_target = frame[target].notna().to_numpy()
    positions = np.flatnonzero(has_target)
    no_target = len(frame) - len(positions)
    if no_target:
        frame = frame.iloc[positions]
    decisions = plan_columns(frame, target, roles, missing)
    gap_rows = 0
    if missing == "drop":
        gaps = np.zeros(len(frame), dtype=bool)
        for d in decisions:
            if d.used and d.missing:
                gaps |= cell_missing(frame, d).to_numpy()
        gap_rows = int(gaps.sum())
        frame, positions = frame.iloc[~gaps], positions[~gaps]
    return frame, positions, decisions, no_target, gap_rows


def _shape_problems(frame: pd.DataFrame, fmt: CsvFormat | None) -> list[str]:
    """Why a table is too small to use: one column, or fewer than MIN_ROWS rows."""
    out = []
    if frame.shape[1] < 2:
        how = f" (read as {fmt.describe()})" if fmt is not None else ""
        out.append(f"only one column was found{how}: a table needs feature columns and a target column")
    if len(frame) == 0:
        out.append(
            f"the file has a header ({_names(frame.columns)}) but no data rows"
            if frame.shape[1]
            else "the file has no columns and no rows"
        )
    elif len(frame) < MIN_ROWS:
        out.append(f"the table has {len(frame)} data row(s); at least {MIN_ROWS} are needed")
    return out


def inspect_csv(
    source, target: str | None = None, *, roles=None, missing: str = "impute", task: str = "auto"
) -> CsvReport:
    """What a table holds and what :func:`from_csv` would do with it, without fitting anything:
    the row count, per-column types, missing cells and decisions (``decisions``, ``notes``), the
    task, and ``problems`` that stop it from being used. ``source``: as for :func:`from_csv`."""
    frame, fmt = read_frame(source)
    return inspect_frame(frame, target, roles=roles, missing=missing, task=task, fmt=fmt)


def inspect_frame(
    frame: pd.DataFrame,
    target: str | None = None,
    *,
    roles=None,
    missing: str = "impute",
    task: str = "auto",
    fmt: CsvFormat | None = None,
) -> CsvReport:
    """:func:`inspect_csv` of a table already read by :func:`~.reading.read_frame` (``fmt``: how
    its file was written)."""
    check_missing_rule(missing)
    columns = tuple(frame.columns)
    non_numeric = tuple(c for c in columns if c != target and not is_numeric(frame[c]))
    counts = frame.isna().sum()
    report = CsvReport(
        len(frame),
        columns,
        tuple(c for c in columns if is_numeric(frame[c])),
        non_numeric,
        {c: int(counts[c]) for c in columns if counts[c] > 0},
        (),
        target=target,
        format=fmt,
        sample_rows=min(len(frame), SAMPLE_ROWS),
    )
    report.problems += _shape_problems(frame, fmt)
    if report.problems:
        return report
    try:
        if target is None:
            report.decisions = plan_columns(frame, None, _roles(roles, ()), missing)
        else:
            kept, _, report.decisions, no_target, gap_rows = _prepare(frame, target, _roles(roles, ()), missing)
            report.target_distinct, report.usable_rows = int(kept[target].nunique()), len(kept)
            report.notes = table_notes(
                report.decisions,
                missing=missing,
                gap_rows=gap_rows,
                n_rows=len(frame),
                target=target,
                no_target=no_target,
                fmt=fmt,
                sampled=SAMPLE_ROWS if len(frame) > SAMPLE_ROWS else None,
            )
            try:
                report.target_task = detect_task(kept[target])
            except ValueError:
                report.target_task = None
            _check_target_for_task(task, kept[target])
            _check_rows(kept, report.decisions)
    except ValueError as exc:
        report.problems.append(str(exc))
    report.constant = tuple(d.name for d in report.decisions if d.reason.startswith("constant"))
    report.examples = {d.name: d.examples for d in report.decisions if d.name in non_numeric}
    return report


def _check_rows(frame: pd.DataFrame, decisions) -> None:
    if len(frame) < MIN_ROWS:
        raise ValueError(
            f"only {len(frame)} row(s) remain after dropping rows without a target or with gaps; "
            f"at least {MIN_ROWS} are needed"
        )
    if not any(d.used for d in decisions):
        raise ValueError(
            "no column can be used as a feature: "
            + "; ".join(d.sentence for d in decisions)
            + " Mark a column as feature or categorical"
        )
    infinite = {}
    for d in decisions:
        if d.used and d.name in frame.columns and is_numeric(frame[d.name]):
            cells = np.isinf(frame[d.name].to_numpy(dtype=np.float64, na_value=np.nan))
            if cells.any():
                infinite[d.name] = (int(cells.sum()), [int(i) + 1 for i in np.flatnonzero(cells)[:3]])
    if infinite:
        where = "; ".join(
            f"{name!r} ({k} cell{'s' if k != 1 else ''}, e.g. data row {', '.join(map(str, rows))})"
            for name, (k, rows) in infinite.items()
        )
        raise ValueError(
            f"infinite values (inf) in column(s) {where}: replace them with numbers, leave the cells "
            f"empty to have them imputed, or set the column's role to ignore"
        )


def from_frame(
    frame: pd.DataFrame,
    target: str,
    *,
    roles: dict | None = None,
    missing: str = "impute",
    task: str = "auto",
    seed: int = 0,
    test_fraction: float = 0.2,
    n: int | None = None,
    title: str | None = None,
    drop_columns=(),
    dropna: bool = False,
    source=None,
    fmt: CsvFormat | None = None,
) -> Dataset:
    """A seeded train/test :class:`Dataset` from a table (see the module docstring).

    ``roles`` maps column names to "feature", "categorical" or "ignore" (overriding what was
    detected); ``missing`` is "impute" (gaps get the training median and an indicator column;
    in a category column a gap is a category) or "drop" (rows with a gap in a used column are
    dropped). ``drop_columns=[...]`` (role "ignore") and ``dropna=True`` (``missing="drop"``)
    are older spellings. ``task="auto"`` follows :func:`detect_task`. ``n`` subsamples the rows
    as :func:`~krrcore.datasets.load` does. The suggested kernel is Gaussian with σ = the median
    pairwise distance of the preprocessed training rows. ``source`` (where the table came from:
    a path, a file name) and ``fmt`` (how it was written) are for a table already read by
    :func:`~.reading.read_frame`, which is then used as it is.
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"from_frame needs a pandas DataFrame, got {type(frame).__name__}; use from_csv for files")
    if source is None:
        frame, _ = read_frame(frame)
    missing = "drop" if dropna else check_missing_rule(missing)
    table = frame
    problems = _shape_problems(frame, fmt)
    if problems:
        raise ValueError(f"source: {problems[-1]}")
    n_rows = len(frame)
    frame, positions, decisions, no_target, gap_rows = _prepare(frame, target, _roles(roles, drop_columns), missing)
    task = _check_target_for_task(task, frame[target])
    where = ("in the CSV" if source is not None else "in the table") + (
        " after dropping rows" if no_target or gap_rows else ""
    )
    n = check_n(len(frame) if n is None else n, len(frame), where)
    _check_rows(frame, decisions)
    notes = table_notes(
        decisions,
        missing=missing,
        gap_rows=gap_rows,
        n_rows=n_rows,
        target=target,
        no_target=no_target,
        fmt=fmt,
        sampled=SAMPLE_ROWS if n_rows > SAMPLE_ROWS else None,
    )
    _, n_test = check_split_args(n, seed, test_fraction)
    index = np.random.default_rng(seed).permutation(len(frame))[:n]
    rows = frame.iloc[index]
    preprocess = build_transformer(decisions, missing)
    with warnings.catch_warnings():  # scikit-learn's note on columns without a median (all missing in training)
        warnings.simplefilter("ignore", UserWarning)
        preprocess.fit(rows.iloc[n_test:])
    X = np.asarray(preprocess.transform(rows), dtype=np.float64)
    column = rows[target].to_numpy()
    if task != "regression" and column.dtype == object:
        column = column.astype(str)
    classes = None if task == "regression" else np.unique(column)
    label = source_label(frame if source is None else source)
    if title is None:
        named = (
            None
            if isinstance(source, (pd.DataFrame, bytes, bytearray, memoryview))
            else os.fspath(source)
            if isinstance(source, (str, os.PathLike))
            else getattr(source, "name", None)
        )
        title = os.path.basename(named) if isinstance(named, str) and named else "user table"
    dataset = assemble(
        X=X,
        target=column if classes is not None else column.astype(np.float64),
        index=positions[index],
        n_test=n_test,
        task=task,
        classes=classes,
        name="csv",
        title=title,
        feature_names=tuple(str(f) for f in preprocess.get_feature_names_out()),
        source=label,
        description=f"user table, target {target!r} ({task})",
        suggested_kernel={"name": "gaussian", "sigma": 1.0},
        suggested_penalty=CSV_PENALTY,
        synthetic=False,
        note=" ".join(notes),
        target_name=target,
        seed=seed,
        knobs={"roles": _roles(roles, drop_columns), "missing": missing},
        standardize=False,
        preprocess=preprocess,
        columns=decisions,
        notes=notes,
        table=table,
    )
    dataset.feature_mean_raw, dataset.feature_scale_raw = _input_units(preprocess, dataset)
    _set_weights(dataset, rows, decisions, n_test)
    dataset.suggested_kernel["sigma"] = _median_sigma(dataset.X_train)
    changed = [note for note in notes if not note.startswith(("Numbers standardised", "The file was", "Column types"))]
    if changed:
        warnings.warn(f"{title}: " + " ".join(changed), PreprocessingWarning, stacklevel=3)
    return dataset


def _set_weights(dataset: Dataset, rows: pd.DataFrame, decisions, n_test: int) -> None:
    """The weight column's values per split (``weight_train``, ``weight_test``), each checked by
    :func:`krrcore._validation.check_sample_weight`'s rules (no gaps or text, no negatives, not all
    zero), the message naming the column."""
    (name,) = [d.name for d in decisions if d.role == "weight"] or [None]
    if name is None:
        return
    raw = rows[name]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(values)
    if bad.any():
        shown = _names(str(v) for v in raw[bad].head(3))
        raise ValueError(
            f"weight column {name!r} has {int(bad.sum()):,} row(s) without a finite number ({shown}): "
            f"sample weights must be numbers >= 0; fill them in, or give the column another role"
        )
    for split, part in (("training", values[n_test:]), ("test", values[:n_test])):
        try:
            check_sample_weight(part, len(part))
        except ValueError as exc:
            raise ValueError(f"weight column {name!r} ({split} rows): {exc}") from None
    dataset.weight_name, dataset.weight_train, dataset.weight_test = name, values[n_test:], values[:n_test]


def from_csv(
    source,
    target: str,
    *,
    roles: dict | None = None,
    missing: str = "impute",
    task: str = "auto",
    seed: int = 0,
    test_fraction: float = 0.2,
    n: int | None = None,
    drop_columns=(),
    dropna: bool = False,
    title: str | None = None,
) -> Dataset:
    """A seeded train/test :class:`Dataset` from a user's table file: a path, raw ``bytes`` or a
    file-like object holding CSV (any common delimiter, decimal comma and encoding) or Parquet, or
    a DataFrame. See :func:`from_frame` for the arguments and the module docstring for the steps."""
    frame, fmt = read_frame(source)
    return from_frame(
        frame,
        target,
        roles=roles,
        missing=missing,
        task=task,
        seed=seed,
        test_fraction=test_fraction,
        n=n,
        title=title,
        drop_columns=drop_columns,
        dropna=dropna,
        source=source,
        fmt=fmt,
    )


def _input_units(preprocess, dataset: Dataset) -> tuple[np.ndarray, np.ndarray]:
    """Training mean and standard deviation of each model input in the table's own units: the
    standardising step's statistics for numbers and date parts, the 0/1 columns' own otherwise."""
    mean, std = dataset.X_train.mean(axis=0), dataset.X_train.std(axis=0)
    for name, block in preprocess.output_indices_.items():
        scaler = preprocess.named_transformers_[name][-1] if name in ("numeric", "date") else None
        if scaler is not None and block.stop > block.start:
            mean[block], std[block] = scaler.mean_, np.sqrt(scaler.var_)
    return mean, std


def _median_sigma(X: np.ndarray) -> float:
    from ..kernels import median_heuristic

    try:
        return median_heuristic(X, max_points=1000)
    except ValueError:  # every training row identical: any σ will do
        return 1.0


__all__ = [
    "CsvReport",
    "CsvFormat",
    "PreprocessingWarning",
    "MISSING_RULES",
    "detect_format",
    "detect_task",
    "inspect_csv",
    "inspect_frame",
    "from_frame",
    "from_csv",
    "read_frame",
    "MAX_COLUMNS",
]

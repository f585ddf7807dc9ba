"""A user's table as a :class:`Dataset`: :func:`from_frame` and :func:`from_csv`.

The table is read by :mod:`.reading` (CSV in any common encoding and delimiter, Parquet, bytes,
DataFrame); each column gets a decision from :mod:`.columns`; rows without a target are dropped
and the task is detected (:func:`detect_task`) unless given. The preprocessing is one scikit-learn
``ColumnTransformer`` (:func:`~.columns.build_transformer`) fitted on the training rows only: it is
the dataset's :attr:`~Dataset.preprocess`, so a model fitted on ``X_train`` predicts on raw rows of
the table (:meth:`Dataset.transform`, :meth:`Dataset.pipeline`). Every decision is one sentence
in ``dataset.notes``, and the ones that change the data are issued as a :class:`PreprocessingWarning`.
:func:`~.inspection.inspect_csv` reports the same decisions before anything is fitted.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd

from .columns import (
    MISSING_RULES,
    SAMPLE_ROWS,
    build_transformer,
    check_missing_rule,
)
from .._validation import check_sample_weight
from .core import Dataset, assemble, check_n, check_split_args
from .inspection import (
    CsvReport,
    check_rows,
    check_target_for_task,
    detect_task,
    inspect_csv,
    inspect_frame,
    listed,
    prepare_rows,
    role_map,
    shape_problems,
    table_notes,
)
from .reading import DELIMITERS, MISSING_MARKERS, read_csv_bytes  # noqa: F401  (re-exported)
from .reading import MAX_COLUMNS, CsvFormat, detect_format, read_frame, source_label

#: Starting penalty for a user table (λ per sample); the app's controls let the user tune it.
CSV_PENALTY = 1e-4


class PreprocessingWarning(UserWarning):
    """A user's table was changed on the way to the model (columns left out, gaps filled, rows
    dropped, text encoded); the message lists each decision."""


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
    problems = shape_problems(frame, fmt)
    if problems:
        raise ValueError(f"source: {problems[-1]}")
    n_rows = len(frame)
    frame, positions, decisions, no_target, gap_rows = prepare_rows(
        frame, target, role_map(roles, drop_columns), missing
    )
    task = check_target_for_task(task, frame[target])
    where = ("in the CSV" if source is not None else "in the table") + (
        " after dropping rows" if no_target or gap_rows else ""
    )
    n = check_n(len(frame) if n is None else n, len(frame), where)
    check_rows(frame, decisions)
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
        knobs={"roles": role_map(roles, drop_columns), "missing": missing},
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
        shown = listed(str(v) for v in raw[bad].head(3))
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

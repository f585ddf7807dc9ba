"""What a user's table holds and what :func:`~.tabular.from_frame` would do with it, before
anything is fitted: :func:`inspect_csv` / :func:`inspect_frame` and their :class:`CsvReport`, and
the checks both share — the task of a target (:func:`detect_task`), the rows kept (:func:`prepare_rows`,
:func:`check_rows`) and the sentences that say each decision (:func:`table_notes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .columns import SAMPLE_ROWS, ColumnDecision, cell_missing, check_missing_rule, plan_columns
from .core import TASKS
from .reading import CsvFormat, is_numeric, read_frame

#: A numeric target with at most this many distinct integer values is taken as class labels.
MAX_AUTO_CLASSES = 20
#: Most classes a classification target may have (one least-squares problem per class).
MAX_CLASSES = 100
#: Fewest rows a table needs (after dropping rows without a target).
MIN_ROWS = 4


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


def check_target_for_task(task: str, target: pd.Series) -> str:
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


def role_map(roles, drop_columns) -> dict:
    """``roles`` with the older ``drop_columns`` spelling folded in as role "ignore"."""
    drop = [str(c) for c in ([drop_columns] if isinstance(drop_columns, str) else drop_columns)]
    if roles is not None and not isinstance(roles, dict):
        raise TypeError(f"roles must be a dict of column name → role, got {type(roles).__name__}")
    return {**{c: "ignore" for c in drop}, **(roles or {})}


def listed(items, limit: int = 8) -> str:
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
            f"Numbers standardised (training mean and standard deviation): {listed(d.name for d in by['numeric'])}."
        )
    if by.get("date"):
        notes.append(
            f"Dates converted to numbers (year, day of year, hour where times are given), then "
            f"standardised: {listed(d.name for d in by['date'])}."
        )
    if by.get("one-hot"):
        notes.append(
            f"Categories one-hot encoded (a missing cell is a category of its own; a value not seen in "
            f"training is ignored): {listed(d.name for d in by['one-hot'])}."
        )
    gaps = [d for d in decisions if d.used and d.missing and d.encoding != "one-hot"]
    if gaps and missing == "impute":
        notes.append(
            f"Gaps filled with the training median, plus a column marking where a value was missing: "
            f"{listed(f'{d.name} ({d.missing:,})' for d in gaps)}."
        )
    if missing == "drop" and gap_rows:
        notes.append(f"{gap_rows:,} of {n_rows:,} rows dropped for a gap in a column used.")
    weights = [d for d in decisions if d.role == "weight"]
    if weights:
        notes.append(f"Sample weights of the fit (not a feature): {listed(d.name for d in weights)}.")
    left_out = [d for d in decisions if not d.used and d.role != "weight"]
    if left_out:
        notes.append(f"Left out: {listed((f'{d.name} ({d.reason})' for d in left_out), limit=12)}.")
    return tuple(notes)


def prepare_rows(frame: pd.DataFrame, target, roles, missing: str):
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


def shape_problems(frame: pd.DataFrame, fmt: CsvFormat | None) -> list[str]:
    """Why a table is too small to use: one column, or fewer than MIN_ROWS rows."""
    out = []
    if frame.shape[1] < 2:
        how = f" (read as {fmt.describe()})" if fmt is not None else ""
        out.append(f"only one column was found{how}: a table needs feature columns and a target column")
    if len(frame) == 0:
        out.append(
            f"the file has a header ({listed(frame.columns)}) but no data rows"
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
    report.problems += shape_problems(frame, fmt)
    if report.problems:
        return report
    try:
        if target is None:
            report.decisions = plan_columns(frame, None, role_map(roles, ()), missing)
        else:
            kept, _, report.decisions, no_target, gap_rows = prepare_rows(frame, target, role_map(roles, ()), missing)
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
            check_target_for_task(task, kept[target])
            check_rows(kept, report.decisions)
    except ValueError as exc:
        report.problems.append(str(exc))
    report.constant = tuple(d.name for d in report.decisions if d.reason.startswith("constant"))
    report.examples = {d.name: d.examples for d in report.decisions if d.name in non_numeric}
    return report


def check_rows(frame: pd.DataFrame, decisions) -> None:
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

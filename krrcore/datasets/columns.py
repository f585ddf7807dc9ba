"""What each column of a user's table becomes, and the scikit-learn transformer that does it.

:func:`plan_columns` looks at every column (types and distinct values from a seeded random sample
of at most :data:`SAMPLE_ROWS` rows, missing cells counted in all rows) and decides, with one
sentence per column (:attr:`ColumnDecision.sentence`):

* numbers: standardised (a text column whose cells are numbers but for a few, like ``T`` for a
  trace of rain, is numeric with those cells missing); a row number or a whole number different in
  every row named like an ID is left out;
* text with few values (≤ :data:`MAX_CATEGORIES`, and few per row), and booleans: one-hot encoded,
  a value not seen in training ignored;
* text with a different value in most rows (a title, a name, an ID) and text with too many values
  to one-hot: left out;
* dates and date-times: converted to numbers (year, day of year, hour of day when times are given);
* constant and empty columns: left out.

A per-column ``role`` override ("feature", "categorical", "ignore", "weight") replaces the detected
one; "weight" (at most one column) is no feature: it holds each row's ``sample_weight``
(:func:`krrcore.datasets.tabular.from_frame` checks it by ``check_sample_weight``'s rules).
:func:`build_transformer` turns the decisions into a :class:`~sklearn.compose.ColumnTransformer`
(``SimpleImputer`` with ``add_indicator``, ``StandardScaler``, ``OneHotEncoder``): the caller
fits it on the training rows only, and it turns raw rows of the same table into model inputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .reading import is_numeric

#: Roles a user may give a column (the target is named separately).
ROLES = ("feature", "categorical", "ignore", "weight")
#: Rules for missing cells: fill (median, with an indicator column) or drop the row.
MISSING_RULES = ("impute", "drop")
#: Rows the type detection looks at (a seeded random sample of a larger table).
SAMPLE_ROWS = 20_000
#: A text column is one-hot encoded when it has at most this many values (and few per row); a
#: column marked categorical gets at most this many one-hot columns (its rarest values share one).
MAX_CATEGORIES = 100
#: ... and at most this fraction of its rows are distinct (or at most MIN_CATEGORIES values).
CATEGORY_SHARE, MIN_CATEGORIES = 0.2, 10
#: Text with more than MIN_CATEGORIES values, distinct in more than this share of rows, is free text
#: (or an ID).
FREE_TEXT_SHARE = 0.5
#: A text column is numeric when this share of its cells are numbers; the rest become missing.
NUMERIC_SHARE = 0.9
#: A text column is a date column when this share of its cells parse with one format.
DATE_SHARE = 0.95
#: Date formats tried in order (ISO 8601 covers year-month-day, with or without a time and a zone).
DATE_FORMATS = (
    "ISO8601",
    "%m/%d/%Y",
    "%d/%m/%Y",
    "%d.%m.%Y",
    "%Y/%m/%d",
    "%m/%d/%Y %H:%M",
    "%d/%m/%Y %H:%M",
    "%d.%m.%Y %H:%M",
    "%m/%d/%Y %H:%M:%S",
    "%d/%m/%Y %H:%M:%S",
)
DATE_FORMAT_NAMES = {
    "ISO8601": "ISO 8601",
    "%m/%d/%Y": "month/day/year",
    "%d/%m/%Y": "day/month/year",
    "%d.%m.%Y": "day.month.year",
    "%Y/%m/%d": "year/month/day",
}
_DATE_SHAPE = re.compile(r"^\s*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}")
_ID_NAME = re.compile(r"^(id|rownames|row|row_?id|index|unnamed: ?0|.*[_ .]id|.*ID)$", re.IGNORECASE)


@dataclass(frozen=True)
class ColumnDecision:
    """One column: what it holds (``kind``: "numeric", "text", "date", "boolean", "empty"), its
    role, how it is encoded ("numeric", "one-hot", "date", or None when left out), its missing
    cells (all rows) and distinct values (in the sample), and the decision in one sentence."""

    name: str
    kind: str
    role: str
    encoding: str | None
    missing: int
    distinct: int
    sentence: str
    reason: str = ""  # why it is left out or how it was read, in a few words
    date_format: str | None = None
    with_time: bool = False
    examples: tuple[str, ...] = ()  # a few of its cells that are not numbers (text columns)

    @property
    def used(self) -> bool:
        return self.encoding is not None


def _sample(frame: pd.DataFrame, rows: int, seed: int = 0) -> pd.DataFrame:
    if len(frame) <= rows:
        return frame
    return frame.iloc[np.sort(np.random.default_rng(seed).choice(len(frame), size=rows, replace=False))]


def _date_format(values: pd.Series) -> tuple[str | None, bool]:
    """The first of :data:`DATE_FORMATS` that reads :data:`DATE_SHARE` of ``values`` (text), and
    whether any value has a time of day."""
    text = values.astype(str).head(1000)
    if text.empty or text.str.match(_DATE_SHAPE).mean() < DATE_SHARE:
        return None, False
    for fmt in DATE_FORMATS:
        parsed = pd.to_datetime(text, format=fmt, errors="coerce", utc=True)
        if parsed.notna().mean() >= DATE_SHARE:
            stamps = parsed.dropna()
            return fmt, bool(((stamps.dt.hour != 0) | (stamps.dt.minute != 0)).any())
    return None, False


def _number_share(values: pd.Series) -> tuple[float, tuple[str, ...]]:
    numbers = pd.to_numeric(values, errors="coerce")
    text = values[numbers.isna()]
    return float(numbers.notna().mean()) if len(values) else 0.0, tuple(str(v) for v in pd.unique(text)[:3])


def _looks_like_id(name: str, column: pd.Series) -> bool:
    """Whole numbers different in every row, named like an ID or numbering the rows (0, 1, 2, … or
    1, 2, 3, … in row order; a column of years 1950, 1951, … is kept)."""
    values = column.dropna()
    if len(values) < 2 or not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return False
    numbers = values.to_numpy(dtype=np.float64)
    if not np.all(np.mod(numbers, 1) == 0) or not values.is_unique:
        return False
    row_numbers = len(values) == len(column) and numbers[0] in (0, 1) and np.all(np.diff(numbers) == 1)
    return bool(row_numbers or _ID_NAME.match(name))


def _shown(values, limit: int = 4) -> str:
    items = [str(v) for v in values[:limit]]
    return ", ".join(items) + (", …" if len(values) > limit else "")


def _gaps(missing: int, rule: str, category: bool = False) -> str:
    """What happens to a column's missing cells, as a clause ("" when it has none)."""
    if not missing:
        return ""
    if rule == "drop":
        return f"; its rows with a gap ({missing:,}) are dropped"
    if category:
        return f"; a gap ({missing:,}) is a category of its own"
    return f"; its gaps ({missing:,}) get the training median and an indicator column"


def _decide(name: str, column: pd.Series, sample: pd.Series, role: str | None, rule: str) -> ColumnDecision:
    """The decision for one column (see the module docstring); ``role`` is the user's override and
    ``rule`` the missing-value rule."""
    missing = int(column.isna().sum())
    present = sample.dropna()
    distinct = int(present.nunique())
    base = dict(name=name, missing=missing, distinct=distinct)
    if column.notna().sum() == 0:
        return ColumnDecision(
            **base,
            kind="empty",
            role="ignore",
            encoding=None,
            reason="empty",
            sentence=f"{name!r} has no values: left out.",
        )
    kind, date_format, with_time, examples = "text", None, False, ()
    if pd.api.types.is_bool_dtype(column):
        kind = "boolean"
    elif is_numeric(column):
        kind = "numeric"
    elif pd.api.types.is_datetime64_any_dtype(column):
        kind = "date"
        stamps = present
        with_time = bool(((stamps.dt.hour != 0) | (stamps.dt.minute != 0)).any())
    else:
        date_format, with_time = _date_format(present)
        share, examples = _number_share(present)
        if date_format is not None:
            kind = "date"
        elif share >= NUMERIC_SHARE:
            kind = "numeric"
    base.update(kind=kind, date_format=date_format, with_time=with_time, examples=examples)
    unreadable = 0
    if kind in ("numeric", "date") and not is_numeric(column) and not pd.api.types.is_datetime64_any_dtype(column):
        # cells the transformer will read as missing: text in a number column, a date it cannot read
        probe = ColumnDecision(**base, role="feature", encoding="numeric" if kind == "numeric" else "date", sentence="")
        unreadable = int(cell_missing(pd.DataFrame({name: column}), probe).sum()) - missing
        base["missing"] = missing + unreadable
    if role == "weight":
        return ColumnDecision(
            **base,
            role="weight",
            encoding=None,
            reason="sample weight",
            sentence=f"{name!r}: each row's sample weight, not a feature (its squared error counts that many times).",
        )
    if role == "ignore":
        return ColumnDecision(
            **base,
            role="ignore",
            encoding=None,
            reason="marked ignore",
            sentence=f"{name!r}: left out (marked ignore).",
        )
    if role == "categorical" or (role is None and kind == "boolean"):
        how = "marked categorical" if role == "categorical" else "true/false"
        return _one_hot(base, how, role or "categorical", rule)
    if distinct <= 1 and role is None:
        value = _shown(pd.unique(present), 1)
        return ColumnDecision(
            **base,
            role="ignore",
            encoding=None,
            reason=f"constant: {value}",
            sentence=f"{name!r} has one value ({value}): left out.",
        )
    if kind == "date":
        parts = "year, day of year" + (" and hour of day" if with_time else "")
        read = f" ({DATE_FORMAT_NAMES.get(date_format, date_format)})" if date_format else ""
        bad = (
            f", {unreadable:,} cell{'s' if unreadable != 1 else ''} that {'are' if unreadable != 1 else 'is'} not a "
            f"date read as missing"
            if unreadable
            else ""
        )
        return ColumnDecision(
            **base,
            role=role or "feature",
            encoding="date",
            reason=f"dates{read}",
            sentence=f"{name!r} holds dates{' and times' if with_time else ''}{read}{bad}: "
            f"converted to numbers ({parts}), then standardised"
            f"{_gaps(base['missing'], rule)}.",
        )
    if kind == "numeric":
        if role is None and _looks_like_id(name, column):
            return ColumnDecision(
                **base,
                role="ignore",
                encoding=None,
                reason="a row ID",
                sentence=f"{name!r} looks like a row ID (a different whole number in every row): left out.",
            )
        read = ""
        if unreadable:
            read = f" (its {unreadable:,} cells that are not numbers, e.g. {_shown(examples)}, are read as missing)"
        return ColumnDecision(
            **base,
            role=role or "feature",
            encoding="numeric",
            reason="numbers" + read,
            sentence=f"{name!r} holds numbers{read}: standardised{_gaps(base['missing'], rule)}.",
        )
    rows = max(len(present), 1)
    if role == "feature":
        return _one_hot(base, "marked feature", "feature", rule)
    if distinct > FREE_TEXT_SHARE * rows and distinct > MIN_CATEGORIES:
        what = "an ID" if distinct == rows else "free text"
        return ColumnDecision(
            **base,
            role="ignore",
            encoding=None,
            reason=what,
            sentence=f"{name!r} is {what} (a different value in {distinct / rows:.0%} of the "
            f"rows looked at): left out.",
        )
    if distinct > MAX_CATEGORIES or (distinct > CATEGORY_SHARE * rows and distinct > MIN_CATEGORIES):
        return ColumnDecision(
            **base,
            role="ignore",
            encoding=None,
            reason=f"text, {distinct:,} values",
            sentence=f"{name!r} is text with {distinct:,} values, too many to one-hot: left out "
            f"(mark it categorical to one-hot its {MAX_CATEGORIES - 1} most frequent).",
        )
    return _one_hot(base, "text", "categorical", rule)


def _one_hot(base: dict, how: str, role: str, rule: str) -> ColumnDecision:
    name, distinct = base["name"], base["distinct"]
    what = {"text": f"is text with {distinct:,} values", "true/false": "holds true/false values"}.get(
        how, f"({how}, {distinct:,} values)"
    )
    rare = (
        f" (its {MAX_CATEGORIES - 1} most frequent values; the rest share one column)"
        if distinct > MAX_CATEGORIES
        else ""
    )
    return ColumnDecision(
        **base,
        role=role,
        encoding="one-hot",
        reason=how,
        sentence=f"{name!r} {what}: one-hot encoded{rare}{_gaps(base['missing'], rule, True)}; "
        "a value not seen in training is ignored.",
    )


def plan_columns(
    frame: pd.DataFrame,
    target: str | None,
    roles: dict | None = None,
    missing: str = "impute",
    *,
    sample_rows: int = SAMPLE_ROWS,
    seed: int = 0,
) -> tuple[ColumnDecision, ...]:
    """One :class:`ColumnDecision` per column of ``frame`` but ``target`` (in the frame's order).

    Kinds and distinct values come from a seeded random sample of ``sample_rows`` rows, so the
    same table gets the same decisions in the app and in Python; ``roles`` maps column names to
    one of :data:`ROLES`; ``missing`` (one of :data:`MISSING_RULES`) is said in the sentences.
    """
    roles = check_roles(roles, frame.columns, target)
    sample = _sample(frame, sample_rows, seed)
    return tuple(
        _decide(name, frame[name], sample[name], roles.get(name), missing) for name in frame.columns if name != target
    )


def check_roles(roles, columns, target) -> dict:
    """``roles`` as a dict of column → role, every name a column and every role one of :data:`ROLES`."""
    if roles is None:
        return {}
    if not isinstance(roles, dict):
        raise TypeError(f"roles must be a dict of column name → role, got {type(roles).__name__}")
    roles = {str(k): v for k, v in roles.items()}
    unknown = [name for name in roles if name not in set(columns)]
    if unknown:
        raise ValueError(f"roles names column(s) not in the table: {unknown}; its columns are {list(columns)}")
    if target in roles:
        raise ValueError(f"roles gives the target column {target!r} a role; it is the target")
    bad = {name: role for name, role in roles.items() if role not in ROLES}
    if bad:
        raise ValueError(f"roles must be one of {ROLES}; got {bad}")
    weights = [name for name, role in roles.items() if role == "weight"]
    if len(weights) > 1:
        raise ValueError(
            f"roles give {len(weights)} columns the role 'weight' ({weights}): a table has one weight column"
        )
    return roles


def check_missing_rule(missing) -> str:
    if missing not in MISSING_RULES:
        raise ValueError(
            f"missing must be one of {MISSING_RULES} (fill gaps with the median and an indicator "
            f"column, or drop the rows), got {missing!r}"
        )
    return missing


# -- the transformer ------------------------------------------------------------------------------
def as_numbers(X) -> pd.DataFrame:
    """Each column as float64; cells that are not numbers become missing (NaN)."""
    frame = pd.DataFrame(X)
    return frame.apply(lambda column: pd.to_numeric(column, errors="coerce")).astype(np.float64)


#: The category a missing cell of a categorical column becomes (one-hot column "<name>_(missing)").
MISSING_CATEGORY = "(missing)"


def as_categories(X) -> np.ndarray:
    """Each cell as text (object array), a missing cell as :data:`MISSING_CATEGORY`: one-hot encoding
    needs one type per column, and a number marked categorical should match the same number read
    from text (3.0 and "3" are both "3"). Vectorised: scikit-learn's encoder is slow on NaN in text."""
    frame = pd.DataFrame(X)
    out = np.empty(frame.shape, dtype=object)
    for i, name in enumerate(frame.columns):
        column = frame[name]
        missing = column.isna().to_numpy()
        if is_numeric(column) and not pd.api.types.is_bool_dtype(column):
            numbers = column.to_numpy(dtype=np.float64, na_value=np.nan)
            whole = np.isfinite(numbers) & (np.mod(numbers, 1) == 0)
            text = np.where(whole, np.nan_to_num(numbers).astype(np.int64).astype(str), numbers.astype(str))
        else:
            text = column.astype(str).to_numpy(dtype=object)
        out[:, i] = np.where(missing, MISSING_CATEGORY, text)
    return out


def date_numbers(X, formats: tuple = (), with_time: tuple = ()) -> np.ndarray:
    """Year, day of year and (where ``with_time``) hour of day of each date column, as floats;
    a cell that is not a date with the column's format becomes missing (NaN)."""
    frame = pd.DataFrame(X)
    parts = []
    for i, name in enumerate(frame.columns):
        column = frame[name]
        if pd.api.types.is_datetime64_any_dtype(column):
            stamps = pd.to_datetime(column, utc=True)
        else:
            stamps = pd.to_datetime(column.astype("string"), format=formats[i], errors="coerce", utc=True)
        parts += [stamps.dt.year, stamps.dt.day_of_year]
        if with_time[i]:
            parts.append(stamps.dt.hour + stamps.dt.minute / 60)
    return np.column_stack([np.asarray(p, dtype=np.float64) for p in parts])


def date_names(transformer, input_features) -> np.ndarray:
    """Feature names of :func:`date_numbers` (the ``feature_names_out`` of its FunctionTransformer)."""
    names = []
    for name, time in zip(input_features, transformer.kw_args["with_time"]):
        names += [f"{name} year", f"{name} day of year"] + ([f"{name} hour"] if time else [])
    return np.asarray(names, dtype=object)


def build_transformer(decisions, missing: str = "impute"):
    """The :class:`~sklearn.compose.ColumnTransformer` of ``decisions`` (unfitted): numbers →
    ``SimpleImputer(median, add_indicator=True)`` (with ``missing="impute"``) → ``StandardScaler``;
    dates → numbers, then the same; categories → ``OneHotEncoder(handle_unknown="ignore")``."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, StandardScaler

    def fill():
        return [SimpleImputer(strategy="median", add_indicator=True)] if missing == "impute" else []

    by = {encoding: [d for d in decisions if d.encoding == encoding] for encoding in ("numeric", "date", "one-hot")}
    parts = []
    if by["numeric"]:
        numbers = FunctionTransformer(as_numbers, feature_names_out="one-to-one")
        parts.append(("numeric", make_pipeline(numbers, *fill(), StandardScaler()), [d.name for d in by["numeric"]]))
    if by["date"]:
        dates = FunctionTransformer(
            date_numbers,
            feature_names_out=date_names,
            kw_args={
                "formats": tuple(d.date_format for d in by["date"]),
                "with_time": tuple(d.with_time for d in by["date"]),
            },
        )
        parts.append(("date", make_pipeline(dates, *fill(), StandardScaler()), [d.name for d in by["date"]]))
    if by["one-hot"]:
        categories = FunctionTransformer(as_categories, feature_names_out="one-to-one")
        encoder = OneHotEncoder(handle_unknown="ignore", max_categories=MAX_CATEGORIES, sparse_output=False)
        parts.append(("categorical", make_pipeline(categories, encoder), [d.name for d in by["one-hot"]]))
    return ColumnTransformer(parts, remainder="drop", sparse_threshold=0, verbose_feature_names_out=False)


def cell_missing(frame: pd.DataFrame, decision: ColumnDecision) -> pd.Series:
    """Rows whose cell of ``decision``'s column is missing as the transformer reads it (a text cell
    in a numeric column, an unreadable date)."""
    column = frame[decision.name]
    if decision.encoding == "numeric" and not is_numeric(column):
        return pd.to_numeric(column, errors="coerce").isna()
    if decision.encoding == "date" and not pd.api.types.is_datetime64_any_dtype(column):
        return pd.to_datetime(column.astype("string"), format=decision.date_format, errors="coerce", utc=True).isna()
    return column.isna()

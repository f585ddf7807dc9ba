"""Data sets for kernel ridge regression: one registry, seeded train/test splits, users' tables.

``load(name, n, seed)`` returns a :class:`Dataset` (z-scored features from training statistics,
standardised regression targets, ±1 / one-hot classification targets) for any entry of
:data:`DATASETS`; ``from_csv`` (a CSV or Parquet file, or bytes) and ``from_frame`` (a DataFrame)
do the same for a user's table, with a scikit-learn preprocessing step fitted on the training rows
and every decision stated in ``dataset.notes``; ``inspect_csv`` reports those decisions before
anything is fitted; ``describe`` summarises a split for display. Everything works offline.
"""

from .catalog import DATASETS, DatasetInfo, get_info, load
from .core import CACHE_ENV, Dataset, OriginalUnits, cache_dir, describe
from .columns import MISSING_RULES, ROLES, ColumnDecision
from .reading import MAX_COLUMNS, read_frame
from .inspection import CsvReport, detect_task, inspect_csv, inspect_frame
from .tabular import CsvFormat, PreprocessingWarning, detect_format, from_csv, from_frame


def clear_caches() -> None:
    """Forget parsed sources held in memory (disk caches are kept)."""
    from . import qm9, real

    for loader in (
        real.diabetes,
        real.breast_cancer,
        real.digits,
        real.diamonds_frame,
        real.diamonds,
        real.concrete,
        qm9.molecules,
    ):
        loader.cache_clear()


__all__ = [
    "DATASETS",
    "DatasetInfo",
    "Dataset",
    "OriginalUnits",
    "load",
    "get_info",
    "from_csv",
    "from_frame",
    "inspect_csv",
    "inspect_frame",
    "read_frame",
    "MAX_COLUMNS",
    "CsvReport",
    "CsvFormat",
    "ColumnDecision",
    "PreprocessingWarning",
    "ROLES",
    "MISSING_RULES",
    "detect_format",
    "detect_task",
    "describe",
    "cache_dir",
    "CACHE_ENV",
    "clear_caches",
]

"""Data sets for kernel ridge regression: one registry, seeded train/test splits, user CSVs.

``load(name, n, seed)`` returns a :class:`Dataset` (z-scored features from training statistics,
standardised regression targets, ±1 / one-hot classification targets) for any entry of
:data:`DATASETS`; ``from_csv`` does the same for a user table after ``inspect_csv`` has reported
what is wrong with it; ``describe`` summarises a split for display. Everything works offline.
"""
from .catalog import DATASETS, DatasetInfo, get_info, load
from .core import CACHE_ENV, Dataset, cache_dir, describe
from .tabular import CsvFormat, CsvReport, detect_format, detect_task, from_csv, inspect_csv


def clear_caches() -> None:
    """Forget parsed sources held in memory (disk caches are kept)."""
    from . import qm9, real

    for loader in (real.diabetes, real.breast_cancer, real.digits, real.diamonds_frame, real.diamonds,
                   real.concrete, qm9.molecules):
        loader.cache_clear()


__all__ = ["DATASETS", "DatasetInfo", "Dataset", "load", "get_info", "from_csv", "inspect_csv", "CsvReport",
           "CsvFormat", "detect_format", "detect_task", "describe", "cache_dir", "CACHE_ENV", "clear_caches"]

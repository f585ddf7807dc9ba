"""Input checks shared by every public entry point.

Each check raises ``ValueError`` whose message names the offending parameter, so a user (or the
app, which shows the message verbatim) knows what to fix.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from .device import default_device


def check_positive(value, name: str, *, allow_zero: bool = False) -> float:
    """Return ``value`` as a float after checking it is a finite positive number."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


def check_int(value, name: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def as_tensor(
    data,
    name: str,
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    ndim: tuple[int, ...] = (2,),
) -> torch.Tensor:
    """Convert numpy/pandas/torch/list input to a finite floating tensor.

    ``dtype`` defaults to the input's floating dtype (float64 for non-float input); ``device``
    defaults to the input's device for tensors and to :func:`default_device` otherwise.
    1-D input is accepted where ``ndim`` allows it. Raises ``ValueError`` naming ``name`` for
    empty arrays, non-numeric or complex entries, NaN/inf and wrong dimensionality, and
    ``TypeError`` for sparse matrices and non-number objects (as numpy does); the messages also carry the
    phrases scikit-learn's
    estimator checks look for ("Reshape your data", "0 feature(s)", "Sparse data"). A tensor that
    requires grad is read for its values (detached: nothing here differentiates through its inputs);
    a tensor on the ``meta`` device, which has no values, is refused.
    """
    if data is None:
        raise ValueError(f"{name} is required, got None")
    if isinstance(data, torch.Tensor):
        if data.layout != torch.strided:
            raise TypeError(f"{name} is a sparse tensor: Sparse data is not supported, pass X.to_dense()")
        if data.device.type == "meta":
            raise ValueError(
                f"{name} is on the 'meta' device, which holds a shape but no values: pass the tensor on 'cpu' or 'cuda'"
            )
        t = data.detach()  # its values: krrcore fits and predicts, it never differentiates through them
        if device is None:
            device = t.device
    else:
        if hasattr(data, "toarray") or hasattr(data, "tocsr"):  # scipy.sparse matrices and arrays
            raise TypeError(
                f"{name} is a sparse matrix: Sparse data was passed, but dense data is required; "
                f"use {name}.toarray() if it fits in memory"
            )
        if hasattr(data, "to_numpy") and hasattr(data, "isna"):  # pandas
            _check_pandas_cells(data, name)
            data = data.to_numpy()
        arr = np.asarray(data)
        if arr.dtype.kind == "c":
            raise ValueError(
                f"{name} must be real-valued: Complex data not supported (got dtype {arr.dtype}); "
                f"pass {name}.real if the imaginary parts are meant to be dropped"
            )
        if arr.dtype.kind in "US":  # as scikit-learn: text is not read as numbers, even "1"
            raise ValueError(
                f"{name} must contain only numbers; found text (dtype {arr.dtype}): convert it to numbers "
                f"explicitly ({name}.astype(float)) if it holds them"
            )
        if arr.dtype.kind not in "biuf":
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError) as exc:  # same type: a dict entry is a TypeError in numpy too
                raise type(exc)(
                    f"{name} must contain only numbers; found non-numeric entries (dtype {arr.dtype}: {exc})"
                ) from None
        arr = np.ascontiguousarray(arr)
        t = torch.from_numpy(arr if arr.flags.writeable else arr.copy())  # torch wants writable memory
        if device is None:
            device = default_device()
    if t.is_complex():
        raise ValueError(f"{name} must be real-valued, got a complex tensor")
    if dtype is None:
        dtype = t.dtype if t.is_floating_point() else torch.float64
    if t.is_floating_point() and t.numel() and bool(torch.isfinite(t).all()):
        _check_fits_dtype(t, name, dtype)
    t = t.to(device=device, dtype=dtype)
    if t.ndim not in ndim:
        hint = ""
        if t.ndim == 1 and 2 in ndim:
            hint = (
                f". Reshape your data: {name}.reshape(-1, 1) if it has a single feature, "
                f"{name}.reshape(1, -1) if it is a single sample"
            )
        raise ValueError(f"{name} must have {' or '.join(map(str, ndim))} dimensions, got shape {tuple(t.shape)}{hint}")
    if t.shape[0] == 0:
        raise ValueError(f"{name} is empty: 0 sample(s) (shape={tuple(t.shape)}) while a minimum of 1 is required.")
    if t.numel() == 0:
        raise ValueError(f"{name} is empty: 0 feature(s) (shape={tuple(t.shape)}) while a minimum of 1 is required.")
    if not bool(torch.isfinite(t).all()):
        counts = [
            f"{int(k)} {what}"
            for k, what in (
                (torch.isnan(t).sum(), "NaN (missing) value(s)"),
                (torch.isinf(t).sum(), "infinite value(s)"),
            )
            if k
        ]
        columns = torch.nonzero(~torch.isfinite(t).reshape(t.shape[0], -1).all(0)).flatten().tolist()
        where = f" in column(s) {columns[:10]}{' ...' if len(columns) > 10 else ''}" if t.ndim == 2 else ""
        raise ValueError(
            f"{name} contains {' and '.join(counts)}{where}: drop or impute them; nothing is filled in for you"
        )
    return t


def _check_pandas_cells(data, name: str) -> None:
    """A pandas DataFrame or Series: missing cells (NaN, None, pd.NA — in any column dtype, nullable
    integers included) and cells that are not numbers are each named by column, so a numeric column
    with gaps is never called non-numeric."""
    import pandas as pd

    frame = data.to_frame() if data.ndim == 1 else data
    missing = frame.isna().sum()
    missing = missing[missing > 0]
    if len(missing):
        where = ", ".join(f"{col!r} ({int(k)} of {len(frame)} rows)" for col, k in missing.items())
        raise ValueError(
            f"{name} has missing values (NaN, None or pd.NA) in column(s) {where}: drop those rows "
            f"({name}.dropna()) or impute them (e.g. sklearn.impute.SimpleImputer); nothing is "
            f"filled in for you"
        )
    text = {}
    for col in frame.columns:
        column = frame[col]
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            cells = column[pd.to_numeric(column, errors="coerce").isna()]
            if len(cells):
                text[col] = cells.head(3).tolist()
    if text:
        shown = "; ".join(f"{col!r} (e.g. {', '.join(map(repr, cells))})" for col, cells in text.items())
        raise ValueError(
            f"{name} must contain only numbers; found non-numeric entries in column(s) {shown}: "
            f"encode them as numbers or drop those columns"
        )


def _check_fits_dtype(t: torch.Tensor, name: str, dtype: torch.dtype) -> None:
    """Finite values that the conversion to ``dtype`` would turn into ±inf get a message of their own."""
    largest = float(t.detach().abs().max())
    limit = torch.finfo(dtype).max
    if largest > limit:
        kind = str(dtype).removeprefix("torch.")
        raise ValueError(
            f"{name} has values up to {largest:.3g}, beyond {kind}'s range ({limit:.3g}): "
            f"rescale it or use dtype='float64'"
        )


def check_X_y(X, y, *, dtype=None, device=None, X_name="X", y_name="y"):
    """Validate a design matrix and its targets: same number of rows, finite, numeric.

    Returns ``(X, y2d, y_was_1d)``, with ``y2d`` of shape (n, k).
    """
    X = as_tensor(X, X_name, dtype=dtype, device=device, ndim=(2,))
    if y is None:
        raise ValueError(f"{y_name} is required: this estimator requires y to be passed, but the target y is None")
    y = as_tensor(y, y_name, dtype=X.dtype, device=X.device, ndim=(1, 2))
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"{X_name} and {y_name} have mismatched shapes: {X_name} has {X.shape[0]} rows, {y_name} has {y.shape[0]}"
        )
    was_1d = y.ndim == 1
    return X, (y[:, None] if was_1d else y), was_1d


def check_features(X, n_features: int, name: str = "X", estimator: str = "the model") -> None:
    """``X`` has the ``n_features`` columns the estimator was fitted with (scikit-learn's wording)."""
    if X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features, but {estimator} is expecting {n_features} features as input"
        )


def check_sample_weight(sample_weight, n: int, *, device=None) -> torch.Tensor | None:
    """``fit``'s ``sample_weight`` as an (n, 1) float64 tensor normalised to mean 1, or None.

    Weighted KRR minimises (1/n) Σ wᵢ (f(xᵢ) − yᵢ)² + λ‖f‖² with the weights rescaled to mean 1
    (Σ wᵢ = n), so λ keeps its per-sample meaning: integer weights give the model of the data with
    each row repeated wᵢ times, and a zero weight that of the data without the row. Raises
    ``ValueError`` for a weight vector of the wrong shape or length, negative or non-finite
    weights, and weights that are all zero."""
    if sample_weight is None:
        return None
    w = as_tensor(sample_weight, "sample_weight", dtype=torch.float64, device=device, ndim=(1,))
    if w.shape[0] != n:
        raise ValueError(f"sample_weight has {w.shape[0]} entries, but X has {n} rows: give one weight per sample")
    if bool((w < 0).any()):
        raise ValueError(
            f"sample_weight has {int((w < 0).sum())} negative weight(s) (smallest "
            f"{float(w.min()):.3g}): weights must be >= 0"
        )
    total = float(w.sum())
    if total == 0:
        raise ValueError("sample_weight is zero for every sample: at least one weight must be positive")
    return (w * (n / total))[:, None]


def feature_names(X):
    """The column names of a DataFrame as scikit-learn records them in ``feature_names_in_`` (an
    object array of str), or None: not a DataFrame, or names that are not all strings (integer
    labels, the default). Names of mixed types are refused, as scikit-learn refuses them."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "isna"):
        return None
    names = np.asarray(list(columns), dtype=object)
    strings = [isinstance(name, str) for name in names]
    if all(strings) and len(names):
        return names
    if any(strings):
        kinds = sorted({type(name).__name__ for name in names})
        raise TypeError(
            f"X has column names of mixed types {kinds}: feature names must be all strings "
            f"(X.columns = X.columns.astype(str)) or none"
        )
    return None


def check_feature_names(X, fitted, estimator: str) -> None:
    """``X``'s column names against ``feature_names_in_`` (``fitted``; None when fit saw none), in
    scikit-learn's words: other or reordered names raise ``ValueError`` (the model would read its
    inputs from the wrong columns); names on one side only warn, as scikit-learn warns."""
    import warnings

    names = feature_names(X)
    if names is None and fitted is None:
        return
    if fitted is None:
        warnings.warn(
            f"X has feature names, but {estimator} was fitted without feature names", UserWarning, stacklevel=4
        )
        return
    if names is None:
        warnings.warn(
            f"X does not have valid feature names, but {estimator} was fitted with feature names",
            UserWarning,
            stacklevel=4,
        )
        return
    if len(names) == len(fitted) and (names == fitted).all():
        return
    unseen = [n for n in names if n not in set(fitted)]
    missing = [n for n in fitted if n not in set(names)]
    message = "The feature names should match those that were passed during fit.\n"
    if not unseen and not missing:
        message += "Feature names must be in the same order as they were in fit.\n"

    def listed(items):
        shown = "".join(f"- {item}\n" for item in items[:5])
        return shown + ("- ...\n" if len(items) > 5 else "")

    if unseen:
        message += "Feature names unseen at fit time:\n" + listed(sorted(unseen))
    if missing:
        message += "Feature names seen at fit time, yet now missing:\n" + listed(sorted(missing))
    raise ValueError(message)

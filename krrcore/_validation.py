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


def check_penalty(penalty) -> float:
    """λ of (K + λnI): finite and non-negative (0 is allowed only where a solver says so)."""
    return check_positive(penalty, "penalty", allow_zero=True)


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
    empty arrays, non-numeric entries, NaN/inf and wrong dimensionality.
    """
    if data is None:
        raise ValueError(f"{name} is required, got None")
    if isinstance(data, torch.Tensor):
        t = data
        if device is None:
            device = t.device
    else:
        if hasattr(data, "to_numpy"):  # pandas
            data = data.to_numpy()
        arr = np.asarray(data)
        if arr.dtype.kind not in "biuf":
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError):
                raise ValueError(
                    f"{name} must contain only numbers; found non-numeric entries "
                    f"(dtype {arr.dtype})"
                ) from None
        t = torch.from_numpy(np.ascontiguousarray(arr))
        if device is None:
            device = default_device()
    if t.is_complex():
        raise ValueError(f"{name} must be real-valued, got a complex tensor")
    if dtype is None:
        dtype = t.dtype if t.is_floating_point() else torch.float64
    t = t.to(device=device, dtype=dtype)
    if t.ndim not in ndim:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndim))} dimensions, got shape {tuple(t.shape)}")
    if t.numel() == 0 or t.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {tuple(t.shape)})")
    if not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s)")
    return t


def check_X_y(X, y, *, dtype=None, device=None, X_name="X", y_name="y"):
    """Validate a design matrix and its targets: same number of rows, finite, numeric.

    Returns ``(X, y2d, y_was_1d)``, with ``y2d`` of shape (n, k).
    """
    X = as_tensor(X, X_name, dtype=dtype, device=device, ndim=(2,))
    y = as_tensor(y, y_name, dtype=X.dtype, device=X.device, ndim=(1, 2))
    if y.shape[0] != X.shape[0]:
        raise ValueError(
            f"{X_name} and {y_name} have mismatched shapes: {X_name} has {X.shape[0]} rows, "
            f"{y_name} has {y.shape[0]}"
        )
    was_1d = y.ndim == 1
    return X, (y[:, None] if was_1d else y), was_1d


def check_features(X, n_features: int, name: str = "X") -> None:
    if X.shape[1] != n_features:
        raise ValueError(f"{name} has {X.shape[1]} features, but the model was fitted with {n_features}")

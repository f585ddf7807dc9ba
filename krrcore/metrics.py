"""Metrics on numpy or torch inputs; each returns a Python float.

Classification metrics take real-valued least-squares outputs: for ±1 targets the sign decides,
for one-hot targets the arg-max does.
"""

from __future__ import annotations

import numpy as np
import torch


def _np(a) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    return np.asarray(a, dtype=np.float64)


def _pair(y_true, y_pred):
    t, p = _np(y_true), _np(y_pred)
    if t.shape != p.shape:
        t, p = t.reshape(p.shape) if t.size == p.size else t, p
    if t.shape != p.shape:
        raise ValueError(f"y_true and y_pred have mismatched shapes: {t.shape} vs {p.shape}")
    if t.size == 0:
        raise ValueError("y_true is empty")
    return t, p


def mse(y_true, y_pred) -> float:
    t, p = _pair(y_true, y_pred)
    return float(np.mean((t - p) ** 2))


def rmse(y_true, y_pred) -> float:
    return float(np.sqrt(mse(y_true, y_pred)))


def mae(y_true, y_pred) -> float:
    t, p = _pair(y_true, y_pred)
    return float(np.mean(np.abs(t - p)))


def relative_error(y_true, y_pred) -> float:
    """‖y − ŷ‖ / ‖y‖ (Frobenius for several outputs)."""
    t, p = _pair(y_true, y_pred)
    denom = np.linalg.norm(t)
    if denom == 0:
        raise ValueError("relative_error is undefined for an all-zero y_true")
    return float(np.linalg.norm(t - p) / denom)


def smape(y_true, y_pred) -> float:
    """Symmetric MAPE as in ASkotch: mean of |y − ŷ| / ((|y| + |ŷ|)/2), terms with 0/0 counted as 0."""
    t, p = _pair(y_true, y_pred)
    denom = (np.abs(t) + np.abs(p)) / 2
    ratio = np.divide(np.abs(t - p), denom, out=np.zeros_like(denom), where=denom > 0)
    return float(np.mean(ratio))


def predicted_labels(y_pred) -> np.ndarray:
    """Labels from least-squares outputs: sign for a single column (±1), arg-max for one-hot."""
    p = _np(y_pred)
    if p.ndim == 2 and p.shape[1] > 1:
        return p.argmax(1)
    return np.where(p.reshape(-1) >= 0, 1.0, -1.0)


def _labels_of_targets(y_true) -> np.ndarray:
    t = _np(y_true)
    if t.ndim == 2 and t.shape[1] > 1:
        return t.argmax(1)
    return np.where(t.reshape(-1) >= 0, 1.0, -1.0)


def classification_error(y_true, y_pred) -> float:
    """Fraction of wrong labels; y_true as ±1 or one-hot targets (or integer class labels)."""
    t, p = _np(y_true), _np(y_pred)
    pred = predicted_labels(p)
    true = t.astype(np.int64) if (t.ndim == 1 and p.ndim == 2 and p.shape[1] > 1) else _labels_of_targets(t)
    if true.shape[0] != pred.shape[0]:
        raise ValueError(f"y_true and y_pred have mismatched lengths: {true.shape[0]} vs {pred.shape[0]}")
    return float(np.mean(true != pred))


def auc(y_true, y_score) -> float:
    """Area under the ROC curve for ±1 (or 0/1) labels and real scores."""
    from sklearn.metrics import roc_auc_score

    t, s = _np(y_true).reshape(-1), _np(y_score).reshape(-1)
    if np.unique(t).size < 2:
        raise ValueError("auc needs both classes present in y_true")
    return float(roc_auc_score(t > 0, s))


#: Metric functions by name; lower is better except for AUC.
METRICS = {
    "mse": mse,
    "rmse": rmse,
    "mae": mae,
    "relative_error": relative_error,
    "smape": smape,
    "classification_error": classification_error,
    "auc": auc,
}

#: The metric recorded per iteration for each task.
DEFAULT_METRIC = {"regression": "mse", "binary": "classification_error", "multiclass": "classification_error"}


def evaluate(task: str, y_true, y_pred) -> dict[str, float]:
    """All metrics that make sense for ``task`` ('regression', 'binary', 'multiclass')."""
    if task == "regression":
        names = ["mse", "rmse", "mae", "relative_error", "smape"]
    elif task == "binary":
        names = ["classification_error", "auc", "mse"]
    elif task == "multiclass":
        names = ["classification_error", "mse"]
    else:
        raise ValueError(f"task must be 'regression', 'binary' or 'multiclass', got {task!r}")
    out = {}
    for name in names:
        try:
            out[name] = METRICS[name](y_true, y_pred)
        except ValueError:
            out[name] = float("nan")
    return out

"""The units a regression error is shown in: the target's own, as the run's final metrics are.

A solver's per-iteration test metric is computed on the standardised target (krrcore fits on
``data.y_train``): for a regression the default MSE there is ``MSE / y_scale²`` of the target's.
Every chart, hover text and download shows it as the RMSE in the target's units instead
(``√MSE · y_scale``), the number the "Test RMSE" tile shows at the end; RMSE and MAE scale by
``y_scale``. Scale-free metrics (classification error, AUC, relative error, SMAPE) are left as
they are. The solver's residual is relative, so it has no unit.
"""

from __future__ import annotations

import math

METRIC_NAMES = {
    "mse": "MSE",
    "rmse": "RMSE",
    "mae": "MAE",
    "relative_error": "relative error",
    "smape": "SMAPE",
    "classification_error": "classification error",
    "auc": "AUC",
}


def metric_title(name: str) -> str:
    return METRIC_NAMES.get(name, name or "metric")


#: Metrics that become the target's units: name shown, value from the standardised one and y_scale.
_IN_UNITS = {
    "mse": ("rmse", lambda v, s: math.sqrt(v) * s if v >= 0 else math.nan),
    "rmse": ("rmse", lambda v, s: v * s),
    "mae": ("mae", lambda v, s: v * s),
}


def unit_of(data) -> str:
    """The word a regression error is measured in: the target's unit, else its name."""
    if data is None or data.task != "regression":
        return ""
    return getattr(data, "target_unit", "") or getattr(data, "target_name", "") or "target units"


def shown_metric(data, metric: str | None) -> str | None:
    """The metric name a record's ``metric`` is shown as (``mse`` on a regression: ``rmse``)."""
    if metric in _IN_UNITS and unit_of(data):
        return _IN_UNITS[metric][0]
    return metric


def shown_value(data, metric: str | None, value: float) -> float:
    """A record's metric value in the units it is shown in (see :func:`shown_metric`)."""
    if metric in _IN_UNITS and unit_of(data) and value is not None and math.isfinite(value):
        return _IN_UNITS[metric][1](value, float(data.y_scale))
    return value


def metric_label(data, metric: str | None) -> str:
    """A record metric's name with its unit: ``RMSE (salary)``, ``classification error``."""
    name = metric_title(shown_metric(data, metric))
    unit = unit_of(data) if metric in _IN_UNITS else ""
    return f"{name} ({unit})" if unit else name

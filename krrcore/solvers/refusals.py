"""Why a model gives no predictive standard deviation (:mod:`krrcore.solvers.uncertainty`), apart
from the estimators so that their base class can refuse ``predict(X, return_std=True)`` by name."""

from __future__ import annotations

from sklearn.base import ClassifierMixin

__all__ = ["UncertaintyError", "std_refusal"]


class UncertaintyError(ValueError):
    """Predictive uncertainty asked of a model that cannot give it; the message says why and what to use."""


_USE_INSTEAD = (
    "use ExactKRR(uncertainty=True) (the exact posterior, while an n×n matrix fits) or "
    "Falkon(uncertainty=True) (the DTC posterior of its M centres, O(M²) per point)"
)


def std_refusal(estimator) -> str:
    """Why ``estimator`` gives no predictive standard deviation, and what gives one."""
    name = type(estimator).__name__
    if isinstance(estimator, ClassifierMixin):
        return (
            f"{name} predicts class labels; a Gaussian-process variance is a regression model's. Fit the "
            f"regressor on ±1 targets with uncertainty=True for the spread of the decision function"
        )
    if hasattr(estimator, "M"):
        return (
            f"{name} solves the Nyström problem without any M×M matrix, and the DTC posterior needs two "
            f"M×M factors; fit Falkon(uncertainty=True) on the same centres for it"
        )
    if callable(getattr(estimator, "_steps", None)):
        return (
            f"{name} solves full KRR, whose posterior variance needs a solve with K + λnI for every test "
            f"point (or the n×n factorisation {name} exists to avoid); {_USE_INSTEAD}"
        )
    return f"{name} gives no predictive variance; {_USE_INSTEAD}"

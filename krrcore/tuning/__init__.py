"""Hyperparameters found, not guessed: σ (one, or one per feature), λ and the Nyström centres of
FALKON tuned by gradient (Meanti, Carratino, De Vito, Rosasco, "Efficient Hyperparameter Tuning
for Large Scale Kernel Ridge Regression", AISTATS 2022).

``result = krrcore.tune(X, y, M=500, ard=False, seed=0)`` tunes and refits; ``result.estimator``
is the fitted :class:`FalkonCV` (``predict`` at the tuned values), ``result.sigma`` (a float, or one per
feature with ``ard=True``), ``result.penalty`` and ``result.trace`` (one
:class:`~krrcore.stream.IterationRecord` per evaluation of the objective: its value in
``objective``, the validation error in ``val_metric`` when validation data is given, σ and λ in
``extras``). :class:`FalkonCV` is the same tuning as a scikit-learn estimator.

* :mod:`.objectives` — hold-out, GCV and the complexity-regularised objective from the sums
  K_nMᵀK_nM, K_nMᵀY, and their exact hypergradients in two blocked passes; λ in closed form.
* :mod:`.search` — L-BFGS-B over log σ (λ profiled, or moved by gradient), the stopping rule.
* :mod:`.estimator` — :class:`FalkonCV`: start values, the uniform-or-BLESS centres decision, the
  final FALKON fit, the record stream.
* :mod:`.validation` — the k folds (or the held-out part) the answer is chosen and checked on.
* :mod:`.maps` — the objective over a (σ, λ) grid, for pictures of where the search went.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .choice import TuningBoundWarning, TuningDisagreement
from .estimator import STAGES, FalkonCV
from .search import PENALTY_BOUNDS
from .maps import validation_map
from .objectives import OBJECTIVES

__all__ = [
    "tune",
    "TuneResult",
    "FalkonCV",
    "OBJECTIVES",
    "STAGES",
    "PENALTY_BOUNDS",
    "validation_map",
    "TuningDisagreement",
    "TuningBoundWarning",
]


@dataclass
class TuneResult:
    """What :func:`tune` found: the fitted FALKON at the tuned values, and how it got there."""

    estimator: object  # the fitted FalkonCV: predict at the tuned σ, λ and centres
    sigma: float | np.ndarray  # one σ, or one per feature (ARD)
    penalty: float  # λ of (K + λnI)
    trace: list = field(default_factory=list)  # IterationRecord per evaluation, then the final fit
    objective: str = "gcv"
    objective_value: float = float("nan")
    centers: str = "uniform"  # "uniform", "bless" or "optimised"
    centers_comparison: dict = field(default_factory=dict)
    path: list = field(default_factory=list)  # σ, λ, objective and stage of every record
    stop_reason: str = ""
    converged: bool = False
    validation_error: float = float("nan")  # mean squared error on the held-out rows (units of y's mean square)
    validation_stderr: float = float("nan")  # its standard error: std of the rows' squared errors / √rows
    validation_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # indices into X
    validation_folds: int = 1  # k of the k folds (1: one held-out part)
    M: int = 0  # the centres the model uses
    M_curve: list = field(default_factory=list)  # (M, validation error) by increasing M, with M="auto"
    candidates: list = field(default_factory=list)  # what competed on the held-out rows, and which won
    disagreement: str = ""  # the sentence when the objectives disagree beyond the noise
    bound_note: str = ""  # the sentence when σ or λ ended on the search's bound

    @property
    def relevance(self) -> np.ndarray:
        """1/σ_j per feature: how strongly each feature moves the kernel (ARD's feature ranking)."""
        return self.estimator.relevance_

    @property
    def seconds(self) -> float:
        """Tuning and final fit, solver time (evaluation of validation errors excluded)."""
        return self.trace[-1].seconds if self.trace else float("nan")


def tune(
    X, y, M: int | str = 500, ard: bool = False, seed: int = 0, *, X_val=None, y_val=None, stop_event=None, **params
) -> TuneResult:
    """Tune σ (one per feature with ``ard``), λ and the centres of FALKON on (X, y), then refit.

    The answer is chosen and checked on rows the models did not fit (k folds or one held-out part,
    drawn once by seed: :mod:`krrcore.tuning.validation`): the candidates the objectives propose
    compete there, and ``validation_error`` ± ``validation_stderr`` is the winner's error on them.
    ``M="auto"``: M grows by doubling until the validated error stops improving (``M_curve``).

    ``params`` are :class:`FalkonCV`'s (``kernel`` and ``penalty``: where to start; ``objective``,
    ``penalty_search``, ``centers``,
    ``tune_centers``, ``max_steps``, ``timeout``, ``dtype``, ...). ``X_val``/``y_val``: data to
    report the validation error on at every step (the tuning itself never reads them).
    """
    tuner = FalkonCV(M=M, ard=ard, seed=seed, **params).fit(X, y, X_val, y_val, stop_event=stop_event)
    return TuneResult(
        estimator=tuner,
        sigma=tuner.sigma_,
        penalty=tuner.penalty_,
        trace=list(tuner.trace_),
        objective=tuner.objective,
        objective_value=tuner.objective_value_,
        centers=tuner.centers_choice_,
        centers_comparison=dict(tuner.centers_comparison_),
        path=list(tuner.path_),
        stop_reason=tuner.stop_reason_,
        converged=tuner.converged_,
        validation_error=tuner.validation_error_,
        validation_stderr=tuner.validation_stderr_,
        validation_rows=tuner.validation_rows_,
        validation_folds=tuner.validation_folds_,
        M=int(tuner.centers_.shape[0]),
        M_curve=list(tuner.M_curve_),
        candidates=list(tuner.candidates_),
        disagreement=tuner.disagreement_,
        bound_note=tuner.bound_note_,
    )

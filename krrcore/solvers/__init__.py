"""Every krrcore estimator, one import away: ``from krrcore.solvers import Falkon``.

Regressors — direct: :class:`ExactKRR`, :class:`NystromKRR`; Nyström (M centres): :class:`Falkon`,
:class:`NystromCG`, :class:`NystromGD`, :class:`SketchySAGA`; full KRR (all n points):
:class:`ASkotch`, :class:`Skotch`, :class:`NystromPCG`, :class:`CG`. Each has a classifier on the
same solver (``FalkonClassifier``, ...; :mod:`krrcore.solvers.classifiers`, ``CLASSIFIERS`` maps
one to the other). The contract they share is :mod:`krrcore.solvers.base`;
:data:`krrcore.registry.SOLVERS` describes the regressors for front ends. :class:`LogisticFalkon`
fits the logistic loss by Newton steps of weighted FALKON solves (:mod:`krrcore.solvers.logistic`).
"""

from .askotch import ASkotch, Skotch
from .classifiers import (
    CLASSIFIERS,
    ASkotchClassifier,
    CGClassifier,
    ExactKRRClassifier,
    FalkonClassifier,
    KRRClassifierMixin,
    NystromCGClassifier,
    NystromGDClassifier,
    NystromKRRClassifier,
    NystromPCGClassifier,
    SketchySAGAClassifier,
    SkotchClassifier,
)
from .exact import ExactKRR, NystromKRR
from .falkon import Falkon, NystromCG, NystromGD
from .logistic import LogisticFalkon
from .pcg import CG, NystromPCG
from .sketchysaga import SketchySAGA

REGRESSORS = [
    "ExactKRR",
    "NystromKRR",
    "Falkon",
    "NystromCG",
    "NystromGD",
    "SketchySAGA",
    "ASkotch",
    "Skotch",
    "NystromPCG",
    "CG",
]
__all__ = [
    *REGRESSORS,
    *(f"{name}Classifier" for name in REGRESSORS),
    "KRRClassifierMixin",
    "CLASSIFIERS",
    "LogisticFalkon",
]

"""krrcore: large-scale kernel ridge regression in torch (FALKON, BLESS, ASkotch and baselines).

Public estimators share one contract: ``penalty`` is λ of (K + λnI); ``fit``/``predict``; every
solver streams :class:`~krrcore.stream.IterationRecord` from ``iter_fit`` (a direct solver yields
one) and keeps them in ``trace_``. Every estimator (regressors and their classifiers) is
importable from here and from :mod:`krrcore.solvers`; :data:`SOLVERS` describes the solvers
for front ends. :func:`tune` (and :class:`FalkonCV`, its scikit-learn face) finds σ — one, or one
per feature — and λ by gradient (:mod:`krrcore.tuning`).
"""

from __future__ import annotations

from .kernels import (
    GaussianKernel,
    KERNELS,
    LaplacianKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    make_kernel,
    median_heuristic,
)
from .registry import SOLVERS, get_solver
from .solvers import (
    CG,
    CLASSIFIERS,
    ASkotch,
    ASkotchClassifier,
    CGClassifier,
    ExactKRR,
    ExactKRRClassifier,
    Falkon,
    FalkonClassifier,
    KRRClassifierMixin,
    LogisticFalkon,
    NystromCG,
    NystromCGClassifier,
    NystromGD,
    NystromGDClassifier,
    NystromKRR,
    NystromKRRClassifier,
    NystromPCG,
    NystromPCGClassifier,
    SketchySAGA,
    SketchySAGAClassifier,
    Skotch,
    SkotchClassifier,
)
from .solvers import __all__ as _solvers
from .stream import IterationRecord, SolverDivergedError
from .tuning import FalkonCV, TuneResult, tune

__all__ = [
    *_solvers,
    "GaussianKernel",
    "LaplacianKernel",
    "MaternKernel",
    "LinearKernel",
    "PolynomialKernel",
    "KERNELS",
    "make_kernel",
    "median_heuristic",
    "SOLVERS",
    "get_solver",
    "IterationRecord",
    "SolverDivergedError",
    "tune",
    "TuneResult",
    "FalkonCV",
]

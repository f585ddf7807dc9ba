"""krrcore: large-scale kernel ridge regression in torch (FALKON, BLESS, ASkotch and baselines).

Public estimators share one contract: ``penalty`` is λ of (K + λnI); ``fit``/``predict``; every
solver streams :class:`~krrcore.stream.IterationRecord` from ``iter_fit`` (a direct solver yields
one) and keeps them in ``trace_``. Every estimator is importable from here and from
:mod:`krrcore.solvers`; :data:`SOLVERS` describes them for front ends.
"""
from __future__ import annotations

from .kernels import (GaussianKernel, KERNELS, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel,
                      make_kernel, median_heuristic)
from .registry import SOLVERS, get_solver
from .solvers import (CG, ASkotch, ExactKRR, Falkon, NystromCG, NystromGD, NystromKRR, NystromPCG, SketchySAGA,
                      Skotch)
from .stream import IterationRecord, SolverDivergedError

__all__ = ["ExactKRR", "NystromKRR", "Falkon", "NystromCG", "NystromGD", "SketchySAGA", "ASkotch", "Skotch",
           "NystromPCG", "CG", "GaussianKernel", "LaplacianKernel", "MaternKernel", "LinearKernel",
           "PolynomialKernel", "KERNELS", "make_kernel", "median_heuristic", "SOLVERS", "get_solver",
           "IterationRecord", "SolverDivergedError"]

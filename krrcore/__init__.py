"""krrcore: large-scale kernel ridge regression in torch (FALKON, BLESS, ASkotch and baselines).

Public estimators share one contract: ``penalty`` is λ of (K + λnI); ``fit``/``predict``; every
solver streams :class:`~krrcore.stream.IterationRecord` from ``iter_fit`` (a direct solver yields
one) and keeps them in ``trace_``. Optional solvers are imported lazily so ``import krrcore`` stays light.
"""
from __future__ import annotations

import importlib

from .kernels import (GaussianKernel, KERNELS, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel,
                      make_kernel, median_heuristic)
from .registry import SOLVERS, get_solver
from .solvers.exact import ExactKRR, NystromKRR
from .stream import IterationRecord, SolverDivergedError

_LAZY = {
    "Falkon": "krrcore.solvers.falkon",
    "NystromCG": "krrcore.solvers.falkon",
    "NystromGD": "krrcore.solvers.falkon",
    "ASkotch": "krrcore.solvers.askotch",
    "Skotch": "krrcore.solvers.askotch",
    "NystromPCG": "krrcore.solvers.pcg",
    "SketchySAGA": "krrcore.solvers.sketchysaga",
}

__all__ = ["ExactKRR", "NystromKRR", "GaussianKernel", "LaplacianKernel", "MaternKernel", "LinearKernel",
           "PolynomialKernel", "KERNELS", "make_kernel", "median_heuristic", "SOLVERS", "get_solver",
           "IterationRecord", "SolverDivergedError", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'krrcore' has no attribute {name!r}")

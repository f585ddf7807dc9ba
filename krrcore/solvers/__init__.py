"""Every krrcore estimator, one import away: ``from krrcore.solvers import Falkon``.

Direct: :class:`ExactKRR`, :class:`NystromKRR`. Nyström (M centres): :class:`Falkon`,
:class:`NystromCG`, :class:`NystromGD`, :class:`SketchySAGA`. Full KRR (all n points):
:class:`ASkotch`, :class:`Skotch`, :class:`NystromPCG`, :class:`CG`. The contract they share is
:mod:`krrcore.solvers.base`; :data:`krrcore.registry.SOLVERS` describes them for front ends.
"""
from .askotch import ASkotch, Skotch
from .exact import ExactKRR, NystromKRR
from .falkon import Falkon, NystromCG, NystromGD
from .pcg import CG, NystromPCG
from .sketchysaga import SketchySAGA

__all__ = ["ExactKRR", "NystromKRR", "Falkon", "NystromCG", "NystromGD", "SketchySAGA", "ASkotch", "Skotch",
           "NystromPCG", "CG"]

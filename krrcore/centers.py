"""Nyström centre selection: the seam between FALKON-type solvers and how centres are chosen.

``centers=`` of every Nyström solver is a name of :data:`CENTER_SELECTORS` ("uniform", "bless",
"bless_r"), a :class:`CenterSelector`, or an array of centres; :func:`select_centers` turns it
into a :class:`CenterSet` (centres, their rows in X, the diagonal of FALKON's D). The primitives
live in :mod:`krrcore.center_set`, the leverage-score selectors in :mod:`krrcore.leverage`; this
module sits above both, so the table is static and nothing imports in a circle.
"""

from __future__ import annotations

import warnings

import torch

from ._validation import check_int
from .center_set import CenterSelector, CenterSet, FixedCenters, UniformCenters, weighted_sample
from .leverage.centers import BlessCenters, BlessRCenters

__all__ = [
    "CENTER_SELECTORS",
    "CenterSelector",
    "CenterSet",
    "FixedCenters",
    "UniformCenters",
    "BlessCenters",
    "BlessRCenters",
    "weighted_sample",
    "resolve_selector",
    "select_centers",
    "center_count",
]


#: Every selector by name: a static table (nothing registers into it at import time).
CENTER_SELECTORS: dict[str, type[CenterSelector]] = {
    "uniform": UniformCenters,
    "bless": BlessCenters,
    "bless_r": BlessRCenters,
}


def resolve_selector(spec) -> CenterSelector:
    """Turn ``centers=`` (a name, a selector, or an array of centres) into a selector."""
    if isinstance(spec, CenterSelector):
        return spec
    if isinstance(spec, str):
        try:
            return CENTER_SELECTORS[spec]()
        except KeyError:
            raise ValueError(f"centers must be one of {sorted(CENTER_SELECTORS)} or an array, got {spec!r}") from None
    return FixedCenters(spec)


def center_count(spec, M, n: int) -> int:
    """How many centres ``centers=spec`` with ``M`` will give on n points, without selecting them
    (for estimates before a fit): an array's rows, else M (a selector's own ``M`` first), at most n
    (:func:`select_centers` lowers a larger M to n, with a warning)."""
    if not isinstance(spec, (str, CenterSelector)):
        return int(len(spec))
    return min(check_int(getattr(spec, "M", None) or M, "M"), n)


def select_centers(spec, X: torch.Tensor, M: int | None, seed: int, kernel=None) -> CenterSet:
    """Centres for a solver: ``spec`` as in :func:`resolve_selector`, ``kernel`` the solver's.

    M larger than the training set is lowered to n with a warning that says so (as scikit-learn's
    ``Nystroem`` does): cross-validation trains on fewer points than the whole set, and Nyström with
    every training point as a centre is exact KRR.
    """
    selector = resolve_selector(spec)
    if not isinstance(selector, FixedCenters):
        M = check_int(M, "M")
        n = X.shape[0]
        if M > n:
            warnings.warn(
                f"M={M} centres requested but the training set has only n={n} points: using M={n} "
                f"(every training point; the Nyström problem is then exact KRR)",
                UserWarning,
                stacklevel=3,
            )
            M = n
    generator = torch.Generator().manual_seed(int(seed))
    return selector.select(X, M, generator, kernel=kernel)

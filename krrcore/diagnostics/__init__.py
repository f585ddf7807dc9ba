"""The numbers behind the papers' story, computed without any front end: spectra and condition
numbers, ASkotch's blocks, effective dimensions, centre comparisons and first hyper-parameters.

Modules, by topic:

* :mod:`.spectra` — :class:`Spectrum` of K + λnI, the Nyström system H̃ (FALKON Eq. 8) and FALKON's
  preconditioned W (Def. 4); condition numbers swept over λ and M.
* :mod:`.blocks` — ASkotch's partition from the solver's own set-up: per-block κ with and without the
  Nyström preconditioner, L_Pb, and μ_P with Theorem 5.1's iteration factors.
* :mod:`.dimension` — d_eff(λ) (BLESS Eq. 1), exact or from a Nyström estimate of K's spectrum.
* :mod:`.suggest` — kernel/σ, λ and M for a first run, with the reasoning.
* :mod:`.centres` — uniform against BLESS centres and FALKON's κ(W) with each.
* :mod:`.data` — the seeded subsample the diagnostics look at, a 2-D view of the points.

Small problems use dense eigenvalues ("exact"); large ones Lanczos extreme-eigenvalue estimates
or Nyström estimates, and every result carries a ``method`` saying which, so a page can label
estimates as such. The size thresholds are parameters (``exact_max_n``, ``exact_max_M``, ...);
the app passes its own limits (:mod:`krr_app.settings`). Leverage-score accuracy (R-ACC) is
:func:`krrcore.leverage.compare_with_exact`.
"""

from ..linalg import lanczos_ritz_values
from .blocks import askotch_blocks, askotch_partition, partition_constants
from .centers import compare_centers
from .data import projection_2d, subsample
from .dimension import effective_dimension, effective_dimension_curve, interpolate_deff, nystrom_kernel_eigenvalues
from .spectra import (
    SYSTEMS,
    Spectrum,
    condition_vs_M,
    condition_vs_penalty,
    full_krr_spectrum,
    kernel_eigenvalues,
    nystrom_spectra,
    shifted_spectrum,
    spectrum_summary,
)
from .suggest import PARAM_SYMBOLS, suggest_hyperparameters, suggested_kernel, theory_penalty

__all__ = [
    "Spectrum",
    "SYSTEMS",
    "nystrom_spectra",
    "kernel_eigenvalues",
    "full_krr_spectrum",
    "shifted_spectrum",
    "spectrum_summary",
    "condition_vs_penalty",
    "condition_vs_M",
    "askotch_blocks",
    "askotch_partition",
    "partition_constants",
    "effective_dimension",
    "effective_dimension_curve",
    "interpolate_deff",
    "nystrom_kernel_eigenvalues",
    "suggest_hyperparameters",
    "suggested_kernel",
    "theory_penalty",
    "PARAM_SYMBOLS",
    "compare_centers",
    "projection_2d",
    "subsample",
    "lanczos_ritz_values",
]

compare_centres = compare_centers  # former spelling, kept so that code written against it still runs

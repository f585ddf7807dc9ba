"""Ridge leverage scores: exact ones, and approximate ones by BLESS and BLESS-R.

Reference: Rudi, Calandriello, Carratino, Rosasco, "On Fast Leverage Score Sampling and Optimal
Learning", NeurIPS 2018 (the BLESS paper). Notation follows it: ``penalty`` is λ of (K + λnI),

* ℓ(i, λ) = (K (K + λnI)⁻¹)_ii                         (Eq. 1)
* d_eff(λ) = Σ_i ℓ(i, λ),  d_∞(λ) = n·max_i ℓ(i, λ)
* ℓ̃_J(i, λ) = (K_ii − K_J,iᵀ (K_JJ + λnA)⁻¹ K_J,i)/(λn)   (Eq. 3; A diagonal, one entry per j ∈ J)

What is here:

* :func:`exact_scores`, :func:`exact_scores_path` — float64 references (a blocked Cholesky route
  for one λ, one ``eigh`` for a whole λ grid), guarded by a memory check.
* :func:`bless` (Alg. 1, sampling with replacement), :func:`bless_r` (Alg. 2, Bernoulli sampling),
  and two comparison points, :func:`recursive_rls` (Musco & Musco 2017) and :func:`uniform`; all
  return a :class:`LeverageResult` holding every level of the λ path.
* :func:`approximate_scores` — Eq. (3) for any dictionary level on any subset of points.
* :class:`BlessCenters` / :class:`BlessRCenters` — FALKON centre selectors (FALKON Alg. 2 on BLESS
  scores), listed as ``"bless"`` and ``"bless_r"`` in :data:`krrcore.centers.CENTER_SELECTORS`.
* :func:`compare_with_exact` — R-ACC ℓ̃/ℓ and d_eff/d_∞ along a sampler's λ path, against exact scores.

Modules, by topic: ``exact`` (references), ``dictionary`` (Eq. 3), ``results``, ``bless`` (Alg. 1–2),
``baselines`` (Recursive-RLS, uniform), ``centers`` (FALKON-BLESS), ``accuracy`` (R-ACC).

Weights. A's diagonal is what makes Eq. (3) unbiased: K ≈ K_nJ A⁻¹ K_Jn needs A_jj = the
*marginal* probability that j enters J (Bernoulli sampling), or M_h × the marginal per-draw
probability divided by j's multiplicity (sampling with replacement, duplicates merged). The public
BLESS code stores the acceptance probability *conditional* on j being a candidate (p/β instead of
p); that inflates A, biases scores upwards and grows the dictionary. Here A is always marginal
(``bless_r(..., weight_rule="conditional")`` reproduces the defect, for comparison only).

Randomness comes from one CPU ``torch.Generator`` (``seed`` may be an int or a generator), so a
seed gives the same centres on every device; the linear algebra runs in float64 on X's device.
"""

from .accuracy import LeverageComparison, compare_with_exact, r_acc_summary
from .baselines import RRLS_BASE_SIZE, recursive_rls, uniform
from .bless import DEFAULT_Q, DEFAULT_Q1, DEFAULT_Q2, bless, bless_r, lambda_path
from .centers import BlessCenters, BlessRCenters
from .dictionary import approximate_scores
from .exact import ExactLeveragePath, exact_scores, exact_scores_path
from .results import BlessResult, LeverageLevel, LeverageResult
from .samplers import SAMPLERS

__all__ = [
    "exact_scores",
    "exact_scores_path",
    "ExactLeveragePath",
    "approximate_scores",
    "bless",
    "bless_r",
    "lambda_path",
    "recursive_rls",
    "uniform",
    "SAMPLERS",
    "LeverageLevel",
    "LeverageResult",
    "BlessResult",
    "BlessCenters",
    "BlessRCenters",
    "compare_with_exact",
    "LeverageComparison",
    "r_acc_summary",
    "DEFAULT_Q",
    "DEFAULT_Q1",
    "DEFAULT_Q2",
    "RRLS_BASE_SIZE",
]

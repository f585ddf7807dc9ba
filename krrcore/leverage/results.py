"""What every sampler returns: the levels of its λ path (:class:`LeverageLevel`) and the whole
result (:class:`LeverageResult`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class LeverageLevel:
    """One level h of a sampler: the dictionary J_h with its Eq. (3) weights at λ_h.

    ``weights`` is A_h's diagonal (one entry per distinct index), ``probabilities`` the marginal
    probability behind it (inclusion probability for Bernoulli sampling; per-draw probability for
    sampling with replacement, where A_jj = M_h·p_j/count_j), ``counts`` the multiplicities.
    ``d_eff`` is the level's estimate of d_eff(λ_h); ``n_candidates`` is |U_h|; ``n_points`` the
    size of the set the level ranges over (n, or the nested subset for Recursive-RLS).
    """

    penalty: float
    indices: torch.Tensor
    weights: torch.Tensor
    probabilities: torch.Tensor
    counts: torch.Tensor
    d_eff: float
    n_candidates: int
    n_points: int
    expected_size: float = math.nan
    seconds: float = 0.0
    #: Candidates whose Eq. (3) score was computed in full (None: not recorded by this sampler).
    scored: int | None = None

    @property
    def size(self) -> int:
        return int(self.indices.numel())


@dataclass
class LeverageResult:
    """What every sampler returns: the whole λ path (``levels``) and the final dictionary.

    ``indices``/``weights``/``d_eff``/``penalty`` refer to the last level; ``scores`` holds
    Eq. (3) at the last level for ``points`` (when requested). ``seconds`` is the sampler's time
    without those scores (``score_seconds``). ``note`` explains early stops.
    """

    method: str
    n: int
    kappa2: float
    levels: list[LeverageLevel]
    params: dict = field(default_factory=dict)
    points: torch.Tensor | None = None
    scores: torch.Tensor | None = None
    seconds: float = 0.0
    score_seconds: float = 0.0
    note: str = ""

    @property
    def final(self) -> LeverageLevel:
        return self.levels[-1]

    @property
    def penalty(self) -> float:
        return self.final.penalty

    @property
    def indices(self) -> torch.Tensor:
        return self.final.indices

    @property
    def weights(self) -> torch.Tensor:
        return self.final.weights

    @property
    def d_eff(self) -> float:
        return self.final.d_eff

    def path(self):
        """The λ path as a pandas DataFrame: one row per level (for d_eff(λ) plots)."""
        import pandas as pd

        return pd.DataFrame(
            {
                "level": np.arange(1, len(self.levels) + 1),
                "penalty": [lv.penalty for lv in self.levels],
                "d_eff": [lv.d_eff for lv in self.levels],
                "size": [lv.size for lv in self.levels],
                "expected_size": [lv.expected_size for lv in self.levels],
                "n_candidates": [lv.n_candidates for lv in self.levels],
                "scored": [math.nan if lv.scored is None else lv.scored for lv in self.levels],
                "n_points": [lv.n_points for lv in self.levels],
                "seconds": [lv.seconds for lv in self.levels],
            }
        )


#: The paper's name for the same thing.
BlessResult = LeverageResult

"""Every leverage-score sampler by name, for the app, the benchmarks and :func:`compare_with_exact`."""

from __future__ import annotations

from .baselines import recursive_rls, uniform
from .bless import bless, bless_r

#: Samplers by name; each is ``f(X, kernel, penalty, *, seed, points, memory_budget, ...) -> LeverageResult``.
SAMPLERS = {"bless": bless, "bless_r": bless_r, "recursive_rls": recursive_rls, "uniform": uniform}

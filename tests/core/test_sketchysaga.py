"""SketchySAGA (ASkotch paper Alg. 5) on the inducing-points problem FALKON solves.

Checked against the direct Nyström solution on the same centres (and FALKON's), for linear
convergence (C.4, Fig. 8), float32, and for never allocating an M×M matrix (peak RSS measured in
a subprocess against NystromKRR, which must form K_nMᵀK_nM).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from krrcore.kernels import LaplacianKernel
from krrcore.registry import SOLVERS
from krrcore.solvers.exact import NystromKRR
from krrcore.solvers.falkon import Falkon
from krrcore.solvers.sketchysaga import NystromObjective, SketchySAGA
from solver_problems import make_problem, one_thread  # noqa: F401 (one_thread: a fixture)

# A Laplacian kernel keeps K_MM well conditioned: SketchySAGA's Nyström preconditioner captures
# K_nMᵀK_nM but not λK_MM, so with a Gaussian kernel its κ_P here is 10⁵ (measured) and SAGA
# crawls; with this kernel κ_P ≈ 30.
KERNEL = LaplacianKernel(4.0)
PENALTY = 1e-2
M = 100


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def problem():
    X, y = make_problem(n=1500, d=5)
    direct = NystromKRR(KERNEL, PENALTY, M=M, seed=0).fit(X, y)
    return X, y, direct


def rel_error(a, b):
    return float(torch.linalg.norm(a.double() - b.double()) / torch.linalg.norm(b.double()))


def test_converges_linearly_to_the_direct_nystrom_solution(problem):
    X, y, direct = problem
    model = SketchySAGA(KERNEL, PENALTY, M=M, rank=50, batch_size=256, maxiter=800, seed=0).fit(X, y)
    assert torch.equal(model.centers_, direct.centers_)
    assert rel_error(model.coef_, direct.coef_) < 1e-5
    # Relative suboptimality of the Nyström objective falls on a line in log scale (C.4, Fig. 8).
    objective = NystromObjective(
        KERNEL,
        torch.as_tensor(X),
        direct.centers_,
        torch.as_tensor(y)[:, None],
        PENALTY * X.shape[0],
        memory_budget=1 << 26,
    )
    _, f_star = objective.evaluate(direct.coef_)
    pts = [
        (r.iteration, math.log10(abs(r.objective - f_star) / abs(f_star)))
        for r in model.trace_
        if r.iteration > 0 and abs(r.objective - f_star) / abs(f_star) > 1e-12
    ]
    it, logs = np.array(pts).T
    slope, intercept = np.polyfit(it, logs, 1)
    r2 = 1 - (logs - slope * it - intercept).var() / logs.var()
    assert len(it) >= 10 and slope < 0 and r2 > 0.9
    # The residual falls by orders of magnitude, not just a little.
    assert model.trace_[-1].residual < 1e-6 * model.trace_[1].residual


def test_reaches_falkons_solution(problem):
    X, y, direct = problem
    falkon = Falkon(KERNEL, PENALTY, M=M, maxiter=50, seed=0).fit(X, y)
    assert torch.equal(falkon.centers_, direct.centers_)
    saga = SketchySAGA(KERNEL, PENALTY, M=M, rank=50, batch_size=256, maxiter=600, seed=0).fit(X, y)
    assert rel_error(saga.coef_, falkon.coef_) < 1e-4
    X_new = make_problem(n=50, d=5, seed=7)[0]
    assert np.allclose(saga.predict(X_new), falkon.predict(X_new), rtol=1e-4, atol=1e-6)


def test_float32_reaches_a_float64_residual_threshold(problem):
    X, y, direct = problem
    model = SketchySAGA(KERNEL, PENALTY, M=M, rank=50, batch_size=256, maxiter=400, tol=1e-4, dtype="float32").fit(X, y)
    assert model.coef_.dtype == torch.float32
    assert model.stop_reason_.startswith("converged")
    assert rel_error(model.coef_, direct.coef_) < 1e-2


def test_defaults_follow_the_paper(problem):
    X, y, _ = problem
    model = SketchySAGA(KERNEL, PENALTY, M=M, rank=20, maxiter=1).fit(X, y)
    n = X.shape[0]
    assert model.precond_batch_size_ == math.isqrt(n)  # b_H1 = ⌊√n⌋ (B.5)
    assert model.lr_batch_size_ == n // 50  # b_H2 = ⌊n/50⌋ (B.5)
    assert model.batch_size_ == 1024  # b_g (C.2.1)
    assert model.lr_ == pytest.approx(0.5 / model.smoothness_)  # η = α/L_P, α = 1/2
    assert model.rho_ >= PENALTY * n  # "damped": λn + Λ̂[r−1]
    assert model.eval_every_ == math.ceil(n / 1024)


_MEMORY_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np, torch
    torch.set_num_threads(1)
    from krrcore.kernels import LaplacianKernel
    from krrcore.memory import PeakMemory
    from krrcore.solvers.exact import NystromKRR
    from krrcore.solvers.sketchysaga import SketchySAGA
    n, M, budget = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.standard_normal((n, 5)))
    y = torch.as_tensor(rng.standard_normal(n))
    kernel = LaplacianKernel(4.0)
    solvers = {
        "sketchysaga": lambda m: SketchySAGA(kernel, 1e-2, M=m, rank=20, batch_size=256, maxiter=4, eval_every=4,
                                             memory_budget=budget),
        "nystrom_direct": lambda m: NystromKRR(kernel, 1e-2, M=m),   # it stores M×M: a 4 MB budget refuses it
    }
    for make in solvers.values():       # warm-up: load every code path before measuring
        make(50).fit(X[:300], y[:300])
    report = {}
    for name, make in solvers.items():  # peak RSS only grows: measure the lean solver first
        with PeakMemory() as mem:       # resets the high-water mark: earlier peaks cannot hide this one
            model = make(M).fit(X, y)
        report[name] = {"peak_increase_bytes": mem.extra_bytes,
                        "finite": bool(torch.isfinite(model.coef_).all())}
    print(json.dumps(report))
""")


def test_never_allocates_an_M_by_M_matrix():
    """With M = 2500 an M×M float64 matrix is 50 MB; under a 4 MB block budget SketchySAGA's peak
    RSS grows by far less than that (measured ≈ 10 MB), while NystromKRR, which forms K_nMᵀK_nM,
    grows by several times that much in the same process."""
    n, m, budget = 3000, 2500, 4 << 20
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_SCRIPT, str(n), str(m), str(budget)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(out.stdout.strip().splitlines()[-1])
    mm_bytes = m * m * 8
    assert report["sketchysaga"]["finite"] and report["nystrom_direct"]["finite"]
    assert report["sketchysaga"]["peak_increase_bytes"] < 0.5 * mm_bytes
    assert report["nystrom_direct"]["peak_increase_bytes"] > mm_bytes


def test_registry_entry_builds_and_approaches_the_direct_nystrom_solution(problem):
    """20 passes from the registry entry: predictions within 10% of the direct Nyström solve on the
    same centres (same seed) — measured 4.2%."""
    X, y, direct = problem
    info = SOLVERS["sketchysaga"]
    knobs = {"M": M, "maxiter": 20, "dtype": "float64", "seed": 0}
    model = info.make(kernel=KERNEL, penalty=PENALTY, **{k: v for k, v in knobs.items() if k in info.knobs})
    model.fit(X, y)
    assert torch.equal(model.centers_, direct.centers_)
    reference = direct.predict(X)
    assert np.linalg.norm(model.predict(X) - reference) / np.linalg.norm(reference) < 0.1
    assert model.predict(X[:4]).shape == (4,)


def test_default_rank_is_capped_at_the_number_of_centers(problem):
    """rank=None means min(100, M): a small M works without naming a rank; an explicit one is kept."""
    X, y, _ = problem
    small = SketchySAGA(KERNEL, PENALTY, M=40, maxiter=3).fit(X, y)
    assert small.get_params()["rank"] is None and small.rank_ == 40
    explicit = SketchySAGA(KERNEL, PENALTY, M=40, rank=40, maxiter=3).fit(X, y)
    assert torch.equal(small.coef_, explicit.coef_)  # None is exactly rank=min(100, M)
    assert SketchySAGA(KERNEL, PENALTY, M=150, maxiter=1).fit(X, y).rank_ == 100
    assert SketchySAGA(KERNEL, PENALTY, M=40, rank=7, maxiter=1).fit(X, y).rank_ == 7


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(M=50, rank=60), r"rank must be <= M \(50 centres\), got 60"),
        (dict(rank=0), "rank must be >= 1"),
        (dict(batch_size=5000), "batch_size must be <= n"),
        (dict(precond_batch_size=0), "precond_batch_size must be >= 1"),
        (dict(lr_scale=0.0), "lr_scale must be > 0"),
        (dict(damping="loose"), "damping must be"),
        (dict(eval_every=0), "eval_every must be >= 1"),
    ],
)
def test_bad_parameters_raise_clear_errors(problem, kwargs, message):
    X, y, _ = problem
    params = dict(M=M, rank=20, maxiter=2)
    params.update(kwargs)
    with pytest.raises(ValueError, match=message):
        SketchySAGA(KERNEL, PENALTY, **params).fit(X, y)

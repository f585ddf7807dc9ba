"""sample_weight: weighted KRR, (1/n) Σ wᵢ (f(xᵢ) − yᵢ)² + λ‖f‖² with the weights normalised to mean 1.

Each solver that takes weights gives, with integer weights, the model of the data with each row
repeated wᵢ times, and with zero weights that of the data without those rows (Nyström solvers on
the same centres, given as an array, since drawing centres from repeated rows draws others);
FALKON's preconditioner built from the weights makes the weighted system as easy as the
unweighted one; the solvers that refuse weights say why.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from krrcore import (
    CG,
    ASkotch,
    ExactKRR,
    Falkon,
    FalkonClassifier,
    FalkonCV,
    NystromCG,
    NystromGD,
    NystromKRR,
    NystromPCG,
    SketchySAGA,
    Skotch,
)
from krrcore.kernels import GaussianKernel
from krrcore.ops import KernelOperator
from krrcore.preconditioner import FalkonPreconditioner
from solver_problems import make_problem, one_thread  # noqa: F401 (one_thread: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

KERNEL = GaussianKernel(2.0)


@pytest.fixture(scope="module")
def problem():
    X, y = make_problem(80, 3, seed=4)
    weights = np.random.default_rng(5).integers(0, 4, len(y))
    return X, y, weights


#: Each solver with the settings that solve its system to the tolerance it is checked at.
SOLVERS = [
    (ExactKRR, {}, 1e-10),
    (CG, {"maxiter": 400, "tol": 1e-13}, 1e-8),
    (NystromPCG, {"rank": 20, "maxiter": 400, "tol": 1e-13}, 1e-8),
    (NystromKRR, {"centers": "fixed"}, 1e-8),
    (Falkon, {"centers": "fixed", "maxiter": 60}, 1e-8),
    (NystromCG, {"centers": "fixed", "maxiter": 300}, 1e-8),
    (NystromGD, {"centers": "fixed", "maxiter": 4000}, 1e-8),
]


def _make(cls, params, X):
    params = dict(params)
    if params.get("centers") == "fixed":
        params["centers"] = X[:25]
    return cls(KERNEL, 1e-3, **params)


@pytest.mark.parametrize("cls, params, atol", SOLVERS, ids=[cls.__name__ for cls, _, _ in SOLVERS])
def test_integer_weights_are_repeated_rows_and_zero_weights_dropped_rows(problem, cls, params, atol):
    X, y, weights = problem
    weighted = _make(cls, params, X).fit(X, y, sample_weight=weights)
    repeated = _make(cls, params, X).fit(X.repeat(weights, 0), y.repeat(weights))
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), atol=atol)
    keep = weights > 0
    binary = _make(cls, params, X).fit(X, y, sample_weight=keep.astype(float))
    dropped = _make(cls, params, X).fit(X[keep], y[keep])
    np.testing.assert_allclose(binary.predict(X), dropped.predict(X), atol=atol)
    # Weights of one are no weights, and only their ratios matter (they are normalised to mean 1).
    ones = _make(cls, params, X).fit(X, y, sample_weight=np.full(len(y), 3.0))
    plain = _make(cls, params, X).fit(X, y)
    np.testing.assert_allclose(ones.predict(X), plain.predict(X), atol=atol)


def test_weighted_products_of_the_operator():
    """K_nMᵀ W (K_nM v + w), K_nMᵀ W u and K_nMᵀ W K_nM against the dense matrices, blocks of 7 rows."""
    g = torch.Generator().manual_seed(0)
    X, C = torch.randn(50, 3, generator=g, dtype=torch.float64), torch.randn(9, 3, generator=g, dtype=torch.float64)
    v, w = torch.randn(9, 2, generator=g, dtype=torch.float64), torch.randn(50, 2, generator=g, dtype=torch.float64)
    omega = torch.rand(50, 1, generator=g, dtype=torch.float64)
    op = KernelOperator(KERNEL, X, C, block_rows=7)
    K = KERNEL(X, C)
    torch.testing.assert_close(op.fused(v, w, weights=omega), K.T @ (omega * (K @ v + w)))
    torch.testing.assert_close(op.fused(v, weights=omega.expand(50, 2)), K.T @ (omega * (K @ v)))
    torch.testing.assert_close(op.rmatvec(w, weights=omega), K.T @ (omega * w))
    gram, proj = op.gram(w, weights=omega)
    torch.testing.assert_close(gram, K.T @ (omega * K))
    torch.testing.assert_close(proj, K.T @ (omega * w))
    with pytest.raises(ValueError, match="weights has 49 rows, expected 50"):
        op.fused(v, weights=omega[:49])


def test_falkon_preconditioner_built_from_the_weights_solves_the_weighted_system_at_once():
    """With every row a centre, K_nMᵀ W K_nM = K_MM W_M K_MM (n = M), so A from T W_M Tᵀ makes P exact:
    CG is done in one step (to the jitter), a hundred times further than with the unweighted one."""
    X, y = make_problem(60, 2, seed=1)
    weights = np.random.default_rng(2).uniform(0.05, 20.0, len(y))
    model = Falkon(KERNEL, 1e-4, M=60, maxiter=3).fit(X, y, sample_weight=weights)
    assert model.trace_[1].residual < 1e-4
    unweighted = FalkonPreconditioner(KERNEL, model.centers_, 1e-4)
    model.preconditioner_ = unweighted
    matvec = lambda beta: model._W(beta)  # noqa: E731 — W with the unweighted P
    from krrcore.cg import conjugate_gradient

    rhs = unweighted.apply_t(model._b)
    states = [s.rel_residual for s, _ in zip(conjugate_gradient(matvec, rhs), range(3))]
    assert states[0] > 100 * model.trace_[1].residual


def test_weighted_falkon_on_uniform_centers_is_weighted_nystrom():
    """Uniform centres, drawn from the rows alike: Falkon and the direct weighted solve agree."""
    X, y = make_problem(300, 3, seed=3)
    weights = np.random.default_rng(0).exponential(size=len(y))
    falkon = Falkon(KERNEL, 1e-4, M=60, maxiter=60, seed=7).fit(X, y, sample_weight=weights)
    direct = NystromKRR(KERNEL, 1e-4, M=60, seed=7).fit(X, y, sample_weight=weights)
    torch.testing.assert_close(falkon.centers_, direct.centers_)
    np.testing.assert_allclose(falkon.predict(X), direct.predict(X), atol=1e-6)
    assert falkon.trace_[-1].residual < 1e-10
    assert falkon.preconditioner_._row_scale is not None


def test_float32_falkon_takes_weights():
    X, y = make_problem(300, 3, seed=3)
    weights = np.random.default_rng(0).integers(1, 4, len(y))
    f32 = Falkon(KERNEL, 1e-3, M=40, maxiter=40, dtype="float32").fit(X, y, sample_weight=weights)
    f64 = Falkon(KERNEL, 1e-3, M=40, maxiter=40).fit(X, y, sample_weight=weights)
    assert f32.trace_[-1].extras["residual_kind"] == "float64 refinement"  # the weighted true residual
    assert f32.trace_[-1].residual < 1e-4
    np.testing.assert_allclose(f32.predict(X), f64.predict(X), atol=1e-3)


def test_classifier_passes_the_weights_to_its_regressor():
    X, y = make_problem(120, 2, seed=6)
    labels = np.where(y > 0, "up", "down")
    weights = np.random.default_rng(1).integers(0, 4, len(y))
    classifier = FalkonClassifier(KERNEL, 1e-3, M=30, maxiter=20).fit(X, labels, sample_weight=weights)
    regressor = Falkon(KERNEL, 1e-3, M=30, maxiter=20).fit(X, np.where(y > 0, 1.0, -1.0), sample_weight=weights)
    np.testing.assert_allclose(classifier.decision_function(X), regressor.predict(X), atol=1e-12)
    only_up = (labels == "up").astype(float)
    with pytest.raises(ValueError, match=r"at least 2 classes with a positive sample_weight; got 1 class \['up'\]"):
        FalkonClassifier(KERNEL, 1e-3, M=30, maxiter=2).fit(X, labels, sample_weight=only_up)


@pytest.mark.parametrize(
    "cls, reason",
    [(ASkotch, "block preconditioners"), (Skotch, "block preconditioners"), (SketchySAGA, "gradient table")],
)
def test_solvers_that_cannot_weigh_say_why(problem, cls, reason):
    X, y, weights = problem
    with pytest.raises(ValueError, match=f"{cls.__name__} does not take sample_weight: its {reason}"):
        cls(KERNEL, 1e-3).fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match="FalkonCV does not take sample_weight"):
        FalkonCV(M=10).fit(X, y, sample_weight=weights)


@pytest.mark.parametrize(
    "weights, message",
    [
        (np.ones(79), "sample_weight has 79 entries, but X has 80 rows"),
        (-np.ones(80), r"sample_weight has 80 negative weight\(s\)"),
        (np.zeros(80), "sample_weight is zero for every sample"),
        (np.full(80, np.nan), "sample_weight contains 80 NaN"),
        (np.ones((80, 2)), "sample_weight must have 1 dimensions"),
    ],
)
def test_bad_weights_are_named(problem, weights, message):
    X, y, _ = problem
    with pytest.raises(ValueError, match=message):
        Falkon(KERNEL, 1e-3, M=10).fit(X, y, sample_weight=weights)


def test_memory_estimate_holds_the_weights():
    estimate = Falkon(KERNEL, 1e-3, M=100).memory_estimate(10_000, 5, weighted=True)
    part = next(p for p in estimate.parts if p.name == "sample weights (float64)")
    assert part.bytes == 10_000 * 8
    assert estimate.peak_bytes > Falkon(KERNEL, 1e-3, M=100).memory_estimate(10_000, 5).peak_bytes

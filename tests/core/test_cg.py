"""krrcore.cg: (preconditioned) conjugate gradient against dense solves."""

from __future__ import annotations

import torch

from krrcore.cg import conjugate_gradient


def _ill_conditioned_spd(n=60, seed=0):
    """A = D^½ S D^½ with S well conditioned and D spanning six decades: Jacobi fixes most of κ."""
    g = torch.Generator().manual_seed(seed)
    Q, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    S = Q @ torch.diag(torch.linspace(1.0, 3.0, n, dtype=torch.float64)) @ Q.T
    d = torch.logspace(0, 6, n, dtype=torch.float64).sqrt()
    A = d[:, None] * S * d[None, :]
    B = torch.randn(n, 2, generator=g, dtype=torch.float64)
    return A, B


def _run(A, B, maxiter, **kwargs):
    states = []
    for state in conjugate_gradient(lambda V: A @ V, B, **kwargs):
        states.append((state.iteration, state.rel_residual, state.x.clone(), state.r.clone(), state.converged))
        if state.iteration >= maxiter or state.converged:
            break
    return states


def test_preconditioned_cg_solves_and_reports_the_unpreconditioned_residual():
    A, B = _ill_conditioned_spd()
    diag = A.diagonal()[:, None]
    states = _run(A, B, 60, preconditioner=lambda R: R / diag)
    exact = torch.linalg.solve(A, B)
    *_, (iteration, rel_residual, x, r, _) = states
    assert torch.allclose(x, exact, rtol=1e-8, atol=1e-10)
    # The reported residual is ‖b − A x‖/‖b‖ (recursive r ≈ true r), not the P⁻¹-weighted one.
    for _, rel, x_i, r_i, _ in states[:10]:
        assert rel == torch.linalg.norm(r_i).item() / torch.linalg.norm(B).item()
        assert torch.allclose(r_i, B - A @ x_i, rtol=1e-6, atol=1e-9 * torch.linalg.norm(B).item())


def test_jacobi_preconditioning_cuts_iterations_and_identity_preconditioner_changes_nothing():
    A, B = _ill_conditioned_spd()
    diag = A.diagonal()[:, None]

    def iterations_to(threshold, **kwargs):
        return next(i for i, rel, *_ in _run(A, B, 500, **kwargs) if rel <= threshold)

    assert 3 * iterations_to(1e-6, preconditioner=lambda R: R / diag) < iterations_to(1e-6)
    plain, identity = _run(A, B, 15), _run(A, B, 15, preconditioner=lambda R: R.clone())
    for (_, rel_p, x_p, *_), (_, rel_i, x_i, *_) in zip(plain, identity):
        assert torch.allclose(x_p, x_i, rtol=1e-12, atol=0)
        assert abs(rel_p - rel_i) <= 1e-12 * rel_p


def test_exact_convergence_is_flagged_and_ends_the_generator():
    A = torch.diag(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    B = torch.tensor([[1.0], [0.0], [0.0]], dtype=torch.float64)  # an eigenvector: one step
    states = list(conjugate_gradient(lambda V: A @ V, B))
    assert len(states) == 1 and states[0].converged and states[0].rel_residual == 0.0

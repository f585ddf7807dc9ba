"""(Preconditioned) conjugate gradient as a generator, for several right-hand sides at once.

Each column of B is an independent system sharing the operator, so one blocked kernel pass
serves all outputs (multiclass one-hot targets). ``refresh_every`` restarts CG from the current
iterate at that period: the exact residual r = b − A x and a fresh search direction p = P⁻¹r.
Replacing r alone, as the FALKON library does, breaks the recurrences that keep the directions
conjugate (float32 FALKON's error rose after each such refresh and blew up refreshing every
iteration); a restart is CG again, from a better starting point.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CGState:
    iteration: int
    x: torch.Tensor  # current iterate (m×k), updated in place from one state to the next
    r: torch.Tensor  # current (recursive) residual b − A x (m×k)
    rel_residual: float  # ‖r‖_F / ‖b‖_F, whether or not a preconditioner is used
    converged: bool = False  # every column's residual is exactly zero: the generator ends here
    step: torch.Tensor | None = None  # this iteration's step sizes (k,): x moved by step·p along p


def conjugate_gradient(
    matvec, b: torch.Tensor, *, x0: torch.Tensor | None = None, refresh_every: int = 0, preconditioner=None
):
    """Yield a :class:`CGState` after every CG iteration on A x = b (A symmetric positive definite).

    Textbook CG (Hestenes–Stiefel; FALKON Alg. 1 ``conjgrad``), column-wise step sizes. With
    ``preconditioner`` (a callable z = P⁻¹ r, P symmetric positive definite) it is preconditioned CG
    (Saad, *Iterative Methods*, Alg. 9.1): rᵀz takes the place of rᵀr in the step sizes, and the
    reported residual is still the unpreconditioned ‖r‖/‖b‖. Stops by itself only when every
    column's residual is exactly zero (the last state then has ``converged=True``); the caller
    decides when to stop otherwise.
    """

    def precondition(r: torch.Tensor) -> torch.Tensor:
        return r if preconditioner is None else preconditioner(r)

    x = torch.zeros_like(b) if x0 is None else x0.clone()
    r = b - matvec(x) if x0 is not None else b.clone()
    z = precondition(r)
    p = z.clone()
    rz_old = (r * z).sum(0)
    b_norm = float(torch.linalg.norm(b)) or 1.0
    tiny = torch.finfo(b.dtype).tiny
    iteration = 0
    while True:
        iteration += 1
        Ap = matvec(p)
        pAp = (p * Ap).sum(0)
        active = rz_old > 0
        step = torch.where(active, rz_old / pAp.clamp_min(tiny), torch.zeros_like(rz_old))
        x.addcmul_(p, step.unsqueeze(0))
        restart = bool(refresh_every) and iteration % refresh_every == 0
        if restart:
            r = b - matvec(x)
        else:
            r.addcmul_(Ap, step.unsqueeze(0), value=-1.0)
        z = precondition(r)
        rz_new = (r * z).sum(0)
        if restart:
            p = z.clone()
        else:
            beta = torch.where(active, rz_new / rz_old.clamp_min(tiny), torch.zeros_like(rz_new))
            p = z + p * beta.unsqueeze(0)
        rz_old = rz_new
        # Without a preconditioner rᵀz is rᵀr already: no second reduction.
        r_norm = torch.sqrt(rz_new.sum()) if preconditioner is None else torch.linalg.norm(r)
        # rᵀz = 0 with P SPD means r = 0: that column has converged exactly.
        converged = not bool((rz_new > 0).any())
        yield CGState(iteration, x, r, float(r_norm) / b_norm, converged, step)
        if converged:
            return

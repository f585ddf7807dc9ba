"""Conjugate gradient as a generator, for several right-hand sides at once.

Each column of B is an independent system sharing the operator, so one blocked kernel pass
serves all outputs (multiclass one-hot targets). The recursive residual drifts in float32:
``refresh_every`` recomputes r = b − A x exactly at that period (as the FALKON library does).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class CGState:
    iteration: int
    x: torch.Tensor          # current iterate (m×k)
    r: torch.Tensor          # current residual b − A x (m×k)
    rel_residual: float      # ‖r‖_F / ‖b‖_F


def conjugate_gradient(matvec, b: torch.Tensor, *, x0: torch.Tensor | None = None, refresh_every: int = 0):
    """Yield a :class:`CGState` after every CG iteration on A x = b (A symmetric positive definite).

    Textbook CG (Hestenes–Stiefel; FALKON Alg. 1 ``conjgrad``), column-wise step sizes. Stops by
    itself only when every column's residual is exactly zero; the caller decides when to stop.
    """
    x = torch.zeros_like(b) if x0 is None else x0.clone()
    r = b - matvec(x) if x0 is not None else b.clone()
    p = r.clone()
    rs_old = (r * r).sum(0)
    b_norm = float(torch.linalg.norm(b)) or 1.0
    tiny = torch.finfo(b.dtype).tiny
    iteration = 0
    while True:
        iteration += 1
        Ap = matvec(p)
        pAp = (p * Ap).sum(0)
        active = rs_old > 0
        step = torch.where(active, rs_old / pAp.clamp_min(tiny), torch.zeros_like(rs_old))
        x.addcmul_(p, step.unsqueeze(0))
        if refresh_every and iteration % refresh_every == 0:
            r = b - matvec(x)
        else:
            r.addcmul_(Ap, step.unsqueeze(0), value=-1.0)
        rs_new = (r * r).sum(0)
        beta = torch.where(active, rs_new / rs_old.clamp_min(tiny), torch.zeros_like(rs_new))
        p = r + p * beta.unsqueeze(0)
        rs_old = rs_new
        yield CGState(iteration, x, r, float(torch.sqrt(rs_new.sum())) / b_norm)
        if not bool((rs_new > 0).any()):
            return

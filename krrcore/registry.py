"""Solver registry: the single list the app, the docs and the benchmarks read.

Each entry holds the estimator class and how a front end should present it: ``knobs`` lists the
constructor parameters the solver takes beyond kernel/penalty, so a front end shows only the
controls that apply; ``defaults`` configures a variant of a class (FALKON-BLESS is ``Falkon`` with
``centers="bless"``).
"""

from __future__ import annotations

from dataclasses import dataclass

from .solvers import CG, ASkotch, ExactKRR, Falkon, NystromCG, NystromGD, NystromKRR, NystromPCG, SketchySAGA, Skotch
from .tuning import FalkonCV


@dataclass(frozen=True)
class SolverInfo:
    key: str
    label: str
    estimator: type  # the estimator class
    problem: str  # "nystrom" (M centres) or "full" (all n points)
    iterative: bool
    knobs: tuple[str, ...]
    description: str
    reference: str
    defaults: tuple[tuple[str, object], ...] = ()  # constructor defaults the app should use

    def make(self, **params):
        """Instantiate with registry defaults overridden by ``params``."""
        return self.estimator(**{**dict(self.defaults), **params})


SOLVERS: dict[str, SolverInfo] = {
    s.key: s
    for s in [
        SolverInfo(
            "falkon",
            "FALKON",
            Falkon,
            "nystrom",
            True,
            ("M", "maxiter", "dtype", "seed"),
            "Nyström KRR by conjugate gradient with the preconditioner B = T⁻¹A⁻¹/√n.",
            "Rudi, Carratino, Rosasco 2017, Alg. 1",
        ),
        SolverInfo(
            "falkon_bless",
            "FALKON-BLESS",
            Falkon,
            "nystrom",
            True,
            ("M", "maxiter", "dtype", "seed"),
            "FALKON on the BLESS dictionary (M leverage-score-sampled centres, weighted by D); "
            "its cost does not grow with n.",
            "Rudi, Calandriello, Carratino, Rosasco 2018; FALKON Alg. 2",
            defaults=(("centers", "bless"),),
        ),
        SolverInfo(
            "nystrom_cg",
            "Nyström CG (no preconditioner)",
            NystromCG,
            "nystrom",
            True,
            ("M", "maxiter", "dtype", "seed"),
            "Conjugate gradient on the Nyström system H α = K_nMᵀ y without preconditioning.",
            "FALKON paper, Eq. 8 and Fig. 1 baseline",
        ),
        SolverInfo(
            "nystrom_gd",
            "Nyström GD",
            NystromGD,
            "nystrom",
            True,
            ("M", "maxiter", "dtype", "seed"),
            "Plain gradient descent on the Nyström objective with step 1/L.",
            "FALKON paper, Fig. 1 baseline",
        ),
        SolverInfo(
            "nystrom_direct",
            "Nyström (direct)",
            NystromKRR,
            "nystrom",
            False,
            ("M", "dtype", "seed"),
            "Solves the Nyström system directly in O(nM² + M³).",
            "FALKON paper, Eq. 8",
        ),
        SolverInfo(
            "askotch",
            "ASkotch",
            ASkotch,
            "full",
            True,
            ("blocks", "rank", "maxiter", "dtype", "seed"),
            "Accelerated Nyström-preconditioned block coordinate descent on (K + λnI) w = y over a "
            "fixed partition into B blocks (μ estimated at set-up; K is stored for it when it fits).",
            "Rathore, Frangella, Udell 2024, Alg. 1",
            defaults=(("variant", "alg1"),),
        ),
        SolverInfo(
            "askotch_fresh",
            "ASkotch (fresh blocks)",
            ASkotch,
            "full",
            True,
            ("blocks", "rank", "maxiter", "dtype", "seed"),
            "The authors' later ASkotch: a fresh random block each iteration, μ = λ, ν = n/|b|. "
            "Where the Nyström preconditioner pays off most (docs/measurements.md); the library's "
            "default ASkotch, which never stores K.",
            "Rathore, Frangella, Udell 2024, later variant (see krrcore.solvers.askotch)",
            defaults=(("variant", "fresh_blocks"),),
        ),
        SolverInfo(
            "skotch",
            "Skotch",
            Skotch,
            "full",
            True,
            ("blocks", "rank", "maxiter", "dtype", "seed"),
            "ASkotch without acceleration.",
            "Rathore, Frangella, Udell 2024, Alg. 4",
        ),
        SolverInfo(
            "nystrom_pcg",
            "NyströmPCG",
            NystromPCG,
            "full",
            True,
            ("rank", "maxiter", "dtype", "seed"),
            "CG on (K + λnI) w = y with a rank-r randomized Nyström preconditioner.",
            "Frangella, Tropp, Udell 2023; ASkotch paper baseline",
        ),
        SolverInfo(
            "cg",
            "CG (full system)",
            CG,
            "full",
            True,
            ("maxiter", "dtype"),
            "Plain conjugate gradient on (K + λnI) w = y: the baseline NyströmPCG improves on.",
            "Hestenes & Stiefel 1952; ASkotch paper baseline",
        ),
        SolverInfo(
            "sketchysaga",
            "SketchySAGA",
            SketchySAGA,
            "nystrom",
            True,
            ("M", "maxiter", "dtype", "seed"),
            "Preconditioned SAGA on the inducing-points problem; no M×M factorisation.",
            "Rathore, Frangella, Udell 2024, Alg. 5",
        ),
        SolverInfo(
            "exact",
            "Exact KRR",
            ExactKRR,
            "full",
            False,
            ("dtype",),
            "Cholesky of K + λnI; O(n³) time and O(n²) memory, for n up to about 20,000 here.",
            "Textbook KRR",
        ),
    ]
}


#: Estimators that choose their own hyperparameters: runnable like a solver (a front end runs them
#: by key, on the workers, with the same record stream), but not solvers of a given problem, so not
#: in :data:`SOLVERS` (the solver menus, the benchmarks' solver lists).
TUNERS: dict[str, SolverInfo] = {
    s.key: s
    for s in [
        SolverInfo(
            "falkon_cv",
            "FALKON, σ and λ tuned",
            FalkonCV,
            "nystrom",
            True,
            ("M", "maxiter", "dtype", "seed", "objective", "ard", "max_steps", "penalty_search"),
            "σ (one, or one per feature) and λ by the exact gradient of a tuning objective, then FALKON's "
            "Nyström model refitted at the best point.",
            "Meanti, Carratino, De Vito, Rosasco 2022",
        ),
    ]
}


def get_solver(key: str) -> SolverInfo:
    """The entry of ``key`` in :data:`SOLVERS` or :data:`TUNERS`."""
    info = SOLVERS.get(key) or TUNERS.get(key)
    if info is None:
        raise ValueError(f"solver must be one of {sorted(SOLVERS)}, got {key!r}")
    return info

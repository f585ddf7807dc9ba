"""Explanations for the Conditioning, Leverage scores and Dataset pages, with the papers' equations.

The general notes (λ, M, d_eff, condition number, FALKON, ASkotch) live in
:data:`krr_app.explain.TEXT` and are reused from there; this module adds only what these three
pages need beyond them.
"""
from __future__ import annotations

TEXT = {
    "systems": r"""
**The three systems.** Exact KRR solves $(K + \lambda n I)c = y$ ($n\times n$). Nyström KRR solves
FALKON's Eq. 8, $H\alpha = K_{nM}^\top y$ with $H = K_{nM}^\top K_{nM} + \lambda n K_{MM}$ ($M\times M$;
shown as $\tilde H = H/n$, same κ). FALKON runs CG on $W = B^\top H B$ with
$B = \tfrac{1}{\sqrt n}T^{-1}A^{-1}$, $T = \mathrm{chol}(K_{MM})$, $A = \mathrm{chol}\big(\tfrac1M TT^\top + \lambda I\big)$
(Eq. 13). CG needs about $\sqrt{\kappa}\,\log(1/\varepsilon)$ iterations, so a $\kappa(W)$ of order 1
(FALKON Lemma/Thm. 1–2, once $M \gtrsim d_{\mathrm{eff}}$) is why FALKON converges in a handful of
iterations while plain CG on $H$ crawls.
""",
    "askotch_blocks": r"""
**ASkotch's blocks.** ASkotch splits $[n]$ at random into $B$ blocks. For a block $b$ it builds a
rank-$r$ randomized Nyström approximation $P_b$ of $K_{bb}$ (ASkotch Alg. 2) and a damping
$\rho = \lambda n + \hat\Lambda_r$ ("damped", Sec. 3.2), and steps with the preconditioned block gradient.
The learning rate comes from the preconditioned smoothness constant
$L_{P_b} = \lambda_1\big((P_b+\rho I)^{-1/2}(K_{bb}+\lambda n I)(P_b+\rho I)^{-1/2}\big)$ (Eq. 11), estimated by
10 steps of randomized powering (`get_L`, Alg. 3) — compared here with the exact value. The
unpreconditioned constant is $L_b = \lambda_1(K_{bb} + \lambda n I)$.

**Why a well-conditioned block is not the whole story.** Accelerated block descent needs about
$\sum_b \sqrt{L_{P_b}}/\sqrt{\mu_P}$ iterations per factor $e$ (Theorem 5.1), where $\mu_P$ is the strong
convexity of the *whole* system in the blocks' preconditioned norm. The blocks' top eigenvectors are
restrictions of the same smooth functions, so vectors built from them can cancel in $K$: then
$\mu_P \approx \lambda_{\min}(K+\lambda nI)/\lambda_1(K_{bb})$, and what the preconditioner gains in $L_{P_b}$ it
loses in $\mu_P$. With a *fixed* partition the two factors above are then close, and so are the
iteration counts to a tight residual; preconditioning still speeds the first iterations, about 2× to
a residual of 0.1 (`benchmarks/bench_askotch_ablation.py`). It pays off all the way with one block,
and with the authors' later variant, which draws a fresh random block every iteration
("ASkotch (fresh blocks)" in Explore: 6–22× fewer iterations to 1e-6 there).
""",
    "estimates": r"""
**Exact or estimated.** Small systems are diagonalised exactly (`eigh`). Larger ones get 60 Lanczos
steps: $\lambda_{\max}$ converges fast from below, $\lambda_{\min}$ slowly from above, so an estimated κ is a
**lower bound** (drawn with open markers). Every number on this page is computed on the seeded
subsample of training points stated above the results.
""",
    "leverage": r"""
**Ridge leverage scores** $\ell(i,\lambda) = \big(K(K+\lambda nI)^{-1}\big)_{ii}$ (BLESS Eq. 1) measure how
much point $i$ matters to the fit at scale λ. Their sum is the effective dimension
$d_{\mathrm{eff}}(\lambda) = \sum_i \ell(i,\lambda) = \operatorname{Tr} K(K+\lambda nI)^{-1}$, and
$d_\infty(\lambda) = n\max_i \ell(i,\lambda)$. Uniform sampling needs about $d_\infty$ centres, leverage-score
sampling about $d_{\mathrm{eff}} \le d_\infty$ — a large gap means uniform sampling wastes centres.
""",
    "bless": r"""
**BLESS** (Alg. 1) never forms $K$: it walks down a path $\lambda_0 > \lambda_1 > \dots > \lambda_H = \lambda$
($\lambda_h = \lambda_{h-1}/q$). At each level it scores a few uniform candidates with the previous
dictionary $J_{h-1}$ by Eq. 3,
$\tilde\ell_J(i,\lambda) = (\lambda n)^{-1}\big(K_{ii} - K_{J,i}^\top (K_{JJ} + \lambda n A)^{-1} K_{J,i}\big)$,
and samples $J_h$ (about $q_2\, d_{\mathrm{eff}}(\lambda_h)$ points) ∝ those scores. BLESS-R (Alg. 2) samples
without replacement. The plot of the path shows the estimate $d_h$ tracking the exact $d_{\mathrm{eff}}(\lambda_h)$.
""",
    "r_acc": r"""
**R-ACC** $= \tilde\ell(i,\lambda)/\ell(i,\lambda)$, the accuracy measure of the BLESS paper (Sect. 4, Fig. 1:
mean and 5th/95th percentiles). A $t$-accurate method satisfies
$\tfrac{1}{1+t}\ell(i,\lambda) \le \tilde\ell(i,\lambda) \le (1+t)\ell(i,\lambda)$ for all $i$ (Eq. 2); the shaded band
in the scatter is the empirical 5–95% range of R-ACC.
""",
    "centres": r"""
**Where the centres fall.** FALKON-BLESS draws $M$ centres with replacement ∝ the approximate scores
(FALKON Alg. 2, `selectNystromCenters`) and reweights them with $D_{jj} = 1/\sqrt{n p_j c_j}$ (marker size).
Uniform centres follow the density of the data; leverage-score centres spread out to cover sparse
regions, where single points have high leverage. $\kappa(W)$ below each map is FALKON's preconditioned
condition number (at the sidebar's λ) with those centres.
""",
    "suggestions": r"""
**How the suggestions are made.** σ: the median pairwise distance of the z-scored training points
(median heuristic). λ: $1/\sqrt n$, under which FALKON reaches the optimal rate with $M = O(\sqrt n\log n)$
uniform centres (FALKON Thm. 3), unless the dataset catalogue has a tuned value. M: at least $\sqrt n$,
and at least $d_{\mathrm{eff}}(\lambda)\log n$, what leverage-score sampling needs (FALKON Thm. 4, BLESS).
These are starting points: tune λ and σ on validation error.
""",
}

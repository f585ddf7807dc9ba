"""Short explanations shown beside the controls and on each page, with the papers' equations.

Written for a student: what the knob does to the model and to the solver, in two or three lines,
with the equation it comes from. ``HELP`` holds the one-line tooltips; ``TEXT`` the longer notes.
Lessons are files in ``lessons/`` (:mod:`krr_app.teaching.lessons`).
"""

from __future__ import annotations

HELP = {
    "dataset": "The data the model learns from. Synthetic sets have knobs (n, noise, seed); "
    "features are standardised on the training split.",
    "n": "Number of points (train + test). KRR's cost grows with n: exact KRR as n³, FALKON as n·M.",
    "noise": "Noise added by the generator (label flips or Gaussian noise). More noise needs a larger λ.",
    "seed": "Random seed of the data (sampling and the train/test split).",
    "csv": "A table with a header row: CSV (comma, semicolon, tab or bar separated; UTF-8, UTF-16 or Latin-1) "
    "or Parquet. Text, categories, dates and gaps are fine: the Dataset page says what each column becomes.",
    "task": "auto: a target with 2 values is binary, a few whole numbers or labels multiclass, numbers regression. "
    "Pick another task to override it.",
    "csv_n": "Rows of the table used (train + test), a seeded random subsample when fewer than all.",
    "kernel": "The similarity k(x, x') between two points. Gaussian: exp(−‖x − x'‖² / 2σ²).",
    "sigma": "Kernel bandwidth σ: how far a point's influence reaches. Small σ → wiggly fits, large σ → smooth fits.",
    "median": "Set σ to the median distance between training points: a robust first guess.",
    "lambda": "Regularisation λ of (K + λnI)c = y, on a log scale. Large λ → smoother model, faster "
    "solvers; tiny λ → fits the noise and the system becomes ill-conditioned.",
    "M": "Nyström centres: the model is a sum of M kernel bumps at sampled points. M ≈ √n is "
    "often enough (FALKON, Thm. 3).",
    "solver": "The algorithm that solves the linear system. All solve the same problem; they differ in "
    "speed, memory and how they converge.",
    "maxiter": "Iterations of an iterative solver. FALKON needs about log(1/ε) of them.",
    "loss": "Squared: regress on the ±1 (or one-hot) labels, one linear solve. Logistic: kernel logistic "
    "regression, which gives class probabilities; FALKON solves it by Newton's method along a decreasing λ, "
    "each Newton step a few preconditioned CG iterations, so the chart draws one point per Newton step. It "
    "runs at λ/4, which regularises as the squared loss's λ does near f = 0.",
    "dtype": "float64 is safe; float32 is faster and halves memory but can stall at tiny λ.",
    "solver_seed": "Seed for sampling the centres (and any randomness in the solver).",
    "budget": "Memory the kernel products may use at once (MB); kernel matrices are built in blocks "
    "of this size, never whole.",
    "x_axis": "Plot against iterations (how fast per step) or solver seconds (how fast in time).",
    "eval_train": "Also compute the training error after every iteration (one more pass over the data; "
    "not counted in solver time). The gap between the two curves is overfitting.",
    "uncertainty": "Also set up the Gaussian-process posterior whose mean is the fit (exact KRR: the exact one; "
    "Nyström solvers: the DTC posterior of the same centres) and draw where the model is unsure: a 90% band "
    "around a 1-D fit, a map of the predictive standard deviation over 2-D data. The noise level is estimated "
    "from the training residuals.",
    "auto_run": "Start a run by itself whenever a setting changes (for small problems).",
    "step": "One iteration at a time: the first press starts a run that pauses after its first iteration; "
    "each press then computes one more (ASkotch: one block step) and redraws the convergence chart and "
    "the fit. Run lets a paused run go on to its end.",
    "tune_objective": "What the tuner minimises. GCV needs no held-out rows; the hold-out error keeps a fifth of "
    "the training rows aside; the complexity-regularised objective adds the model's effective "
    "dimension and the centres' error to its data fit.",
    "tune_ard": "One σ per feature (automatic relevance determination): a feature the target does not depend on "
    "gets a huge σ, so the kernel ignores it — and its bar in the relevance chart drops to zero.",
    "tune_steps": "The most evaluations of the objective (each solves the Nyström problem once at a new σ, with the "
    "best λ for that σ); the search usually stops earlier, when the objective stops improving.",
}

TEXT = {
    "krr": r"""
**Kernel ridge regression** fits $f(x) = \sum_{i=1}^n c_i\,k(x, x_i)$ by solving
$(K_{nn} + \lambda n I)\,c = y$ — an $n \times n$ system: $O(n^3)$ time and $O(n^2)$ memory if solved
exactly. The solvers here trade that for iterations and approximations.
""",
    "sigma": r"""
**σ (bandwidth).** Gaussian kernel $k(x,x') = \exp(-\|x-x'\|^2 / 2\sigma^2)$: two points closer than
about σ count as similar. Too small → every point is an island (overfit); too large → everything looks
alike (underfit). The *median heuristic* sets σ to the median pairwise distance.
""",
    "lambda": r"""
**λ (regularisation).** KRR minimises $\frac1n\sum_i (f(x_i)-y_i)^2 + \lambda\|f\|_{\mathcal H}^2$,
so $c = (K + \lambda n I)^{-1} y$. Larger λ shrinks $f$ (smoother, more bias) and improves the
condition number $\kappa = (\lambda_{\max}(K) + \lambda n)/(\lambda_{\min}(K) + \lambda n)$ that
governs how many iterations a solver needs.
""",
    "M": r"""
**M (Nyström centres).** $\tilde f(x) = \sum_{j=1}^M \alpha_j\,k(x, \tilde x_j)$ with
$M$ centres $\tilde x_j$ sampled from the data; $\alpha$ solves $H\alpha = K_{nM}^\top y$ with
$H = K_{nM}^\top K_{nM} + \lambda n K_{MM}$ (FALKON paper, Eq. 8). Cost $O(nM)$ per iteration and
$O(M^2)$ memory; $M \approx \sqrt n$ keeps the statistical accuracy of exact KRR (FALKON, Thm. 3).
""",
    "falkon": r"""
**FALKON** preconditions Eq. 8 with $BB^\top = \big(\tfrac nM K_{MM}^2 + \lambda n K_{MM}\big)^{-1}$
(Eq. 10), built from two $M\times M$ Cholesky factors ($B = \tfrac1{\sqrt n}T^{-1}A^{-1}$), then runs
conjugate gradient on $B^\top H B\,\beta = B^\top K_{nM}^\top y$. The preconditioned system is
well conditioned, so $t \approx \log(1/\varepsilon)$ iterations suffice (Alg. 1).
""",
    "askotch": r"""
**ASkotch** solves the full system $(K + \lambda n I)w = y$ by accelerated block coordinate descent:
each step samples a block of $n/B$ coordinates, preconditions that block with a rank-$r$ randomized
Nyström approximation, and takes a step of Nesterov-accelerated descent (ASkotch paper, Alg. 1).
Memory $O(nr/B)$ per step, no $M\times M$ factorisation.
""",
    "d_eff": r"""
**Effective dimension** $d_{\mathrm{eff}}(\lambda) = \operatorname{Tr}\!\big(K (K + \lambda n I)^{-1}\big)$:
how many directions of the data the model can actually learn at this λ. It sets how many Nyström
centres (or how large a preconditioner rank) are needed: $M \gtrsim d_{\mathrm{eff}}\log n$ with
leverage-score sampling (FALKON, Thm. 4; BLESS).
""",
    "condition": r"""
**Condition number** $\kappa(A) = \lambda_{\max}(A)/\lambda_{\min}(A)$. Conjugate gradient needs
about $\sqrt{\kappa}\,\log(1/\varepsilon)$ iterations; gradient descent about $\kappa\log(1/\varepsilon)$.
Preconditioning replaces $A$ by $B^\top A B$ with a much smaller $\kappa$.
""",
    "residual": r"""
**Residual**: each solver's own convergence measure (for CG on Eq. 8, the relative norm of the
preconditioned residual). It shows how far the solver is from solving its system; the test error
shows whether that matters for prediction — the two often stop improving at different times.
""",
    "compare": r"""
Runs of this session execute one after another (so their timings do not disturb each other) on the
same cached data. Overlaying residuals against **iterations** shows how much each step buys; against
**seconds** it shows what each step costs (ASkotch's papers compare solvers this way).
""",
    # -- the Conditioning, Leverage scores and Dataset pages
    "systems": r"""
**The three systems.** Exact KRR solves $(K + \lambda n I)c = y$ ($n\times n$). Nyström KRR solves
FALKON's Eq. 8, $H\alpha = K_{nM}^\top y$ with $H = K_{nM}^\top K_{nM} + \lambda n K_{MM}$ ($M\times M$;
shown as $\tilde H = H/n$, same κ). FALKON runs CG on $W = B^\top H B$ with
$B = \tfrac{1}{\sqrt n}T^{-1}A^{-1}$, $T = \mathrm{chol}(K_{MM})$,
$A = \mathrm{chol}\big(\tfrac1M TT^\top + \lambda I\big)$
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
("ASkotch (fresh blocks)" in Explore: 5.9–22× fewer iterations to 1e-6 there).
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
and samples $J_h$ (about $q_2\, d_{\mathrm{eff}}(\lambda_h)$ points) ∝ those scores. Where the candidates far
outnumber $J_{h-1}$, each is first bounded from above with a few of its points, and Eq. 3 is finished only
for the candidates a draw proposes; a proposal is kept with probability score/bound, so the draws are the
same as if every candidate had been scored. BLESS-R (Alg. 2) samples without replacement. The plot of the
path shows the estimate $d_h$ tracking the exact $d_{\mathrm{eff}}(\lambda_h)$.
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
    "tune_objective": r"""
**Tuning by gradient** (Meanti, Carratino, De Vito, Rosasco, AISTATS 2022). The Nyström model
$\alpha = (K_{nM}^\top K_{nM} + \lambda n K_{MM})^{-1} K_{nM}^\top y$ is a smooth function of σ and
λ, and so is a score of it: its derivative with respect to σ is computed exactly (autograd through
the solution, in two passes over the data) and a quasi-Newton method (L-BFGS) follows it where many
σ move (one per feature); a single σ is found by a line search (parabolic steps). For each σ the best λ is
found exactly, from the eigenvalues $\mu_i$ of the Nyström features' Gram matrix.

**Chosen and checked on held-out rows.** Whatever the objective, the candidates it and the others
propose (and the start) compete on training rows the models did not fit — five folds on tables
below 5,000 rows, one held-out fifth above — and the lowest validated error wins; the objective's
own choice is kept when it is within one standard error. The headline's validated RMSE ± its
standard error is that check.

* **GCV** $= \frac1n\|(I - \hat H)y\|^2 / (1 - \mathrm{Tr}\,\hat H / n)^2$: the leave-one-out error
  with every point's leverage replaced by the average, from the training rows alone
  ($\hat H$ maps $y$ to the fitted values; $\mathrm{Tr}\,\hat H$ is the effective dimension).
* **Hold-out**: the test error of the model trained on four fifths of the training rows, on the fifth.
* **Complexity-regularised**: $\mathrm{Tr}\,\hat H + y^\top(I - \hat H)y\,(1 + \mathrm{Tr}(K - \tilde K)/\lambda n^2)$:
  variance plus data fit, inflated by the error the centres leave.
""",
    "tune_ard": r"""
**One σ per feature (ARD).** $k(x,x') = \exp(-\sum_j (x_j - x'_j)^2 / 2\sigma_j^2)$: the relevance
$1/\sigma_j$ says how much the model moves with feature $j$. The tuner first finds the best single σ,
then lets each $\sigma_j$ move, then switches off each feature whose σ grew, one at a time, and keeps it
off when the objective rises by less than one standard error (it cannot tell the two apart):
irrelevant features end with relevance zero, and the model no longer fits noise through them.
""",
}

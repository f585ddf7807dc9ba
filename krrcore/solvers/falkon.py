"""FALKON and the Nyström baselines of its Figure 1, all on the same blocked kernel operator.

The Nyström problem (FALKON paper Eq. 8): find α ∈ R^M with
    (K_nMᵀK_nM + λn K_MM) α = K_nMᵀ y,
which we scale by 1/n:  H̃ α = b̃ with H̃ = K_nMᵀK_nM/n + λK_MM, b̃ = K_nMᵀy/n.

* :class:`Falkon` — CG on W β = Pᵀ b̃ with W = Pᵀ H̃ P, P = D T⁻¹A⁻¹ (Alg. 1/2; Def. 4), α = P β.
* :class:`NystromCG` — CG on H̃ α = b̃ without preconditioning.
* :class:`NystromGD` — gradient descent α ← α − (1/L)(H̃ α − b̃), L = ‖H̃‖₂ by power iteration.

Each iteration costs one fused pass K_nMᵀ(K_nM v) over the data (``KernelOperator.fused``).

With ``sample_weight`` (weights W, mean 1) every solver here solves the weighted Nyström system
(K_nMᵀ W K_nM + λn K_MM) α = K_nMᵀ W y: the fused pass applies W to each block, and FALKON's
preconditioner factors A from T W_M Tᵀ/M + λI, W_M the weights of the rows chosen as centres
(:class:`~krrcore.preconditioner.FalkonPreconditioner`'s ``row_weights``).
"""

from __future__ import annotations

import math
import warnings

import torch
from sklearn.exceptions import ConvergenceWarning

from ..centers import BlessCenters, center_count, select_centers
from ..cg import conjugate_gradient
from ..memory import CostModel, MemoryBudgetError
from ..ops import operator_bytes
from ..preconditioner import FalkonPreconditioner, PrecisionWarning, buffer_dtype
from ..rows import rows_of
from .base import NystromCenters, Step
from .loops import IterativeKRR
from .params import NON_NEGATIVE, NONE, Integer, Options, default, param
from .uncertainty import PosteriorVariance, float64_blocks, hold_nystrom_posterior, kmm_factor_solvers, nystrom_factor


#: Name of the memory part holding cached row blocks of K_nM (sized by the estimate, used by the fit).
KERNEL_CACHE = "cached K_nM blocks"
#: float32 Falkon's ``refine="auto"``: at most this many refinement rounds (benchmarks/bench_falkon_float32.py).
REFINE_ROUNDS = 2
#: A refinement round's CG stops when its residual has fallen by this factor (or at ``maxiter``).
REFINE_INNER_TOL = 1e-1
#: Without ``tol``, a round runs only when the true residual exceeds the CG residual of the model
#: kept by more than this factor: float32 rounding then cost more than a tenth of what CG left.
REFINE_GAP = 1.1
#: A FALKON fit that ends with its relative residual above this says so (:class:`ResidualWarning`):
#: on a 300k-row table with heavy-tailed features (σ = 3, λ = 1e-7, M = 2,000) uniform centres
#: ended at 0.11 after 20 iterations with a test RMSE worse than a linear model's, BLESS centres
#: at 4e-4 with a better one than the direct Nyström solve.
RESIDUAL_HIGH = 1e-2


class ResidualWarning(UserWarning):
    """A FALKON fit ended with its residual still high; the message says what to try."""


class _NystromIterative(PosteriorVariance, NystromCenters, IterativeKRR):
    """Shared set-up of the Nyström-problem solvers: centres, blocked operator, b̃ = K_nMᵀy/n.

    ``uncertainty=True``: the DTC/SGPR posterior of the same centres (:mod:`krrcore.solvers.uncertainty`),
    set up after the last record by one more pass over K_nM's blocks (O(nM²)), then O(M³); 2M² flops per
    test point. Falkon whitens with its preconditioner's factor T (TᵀT = D K_MM D + jI) in float64.
    """

    penalty: float = default(1e-6)
    maxiter: int = default(20)

    def _setup_operator(self, X, Y):
        self.penalty_ = self._penalty()
        self.n_ = X.shape[0]
        cs = select_centers(self.centers, X, self.M, self.seed_, kernel=self._kernel())
        self.center_set_ = cs
        self.centers_ = cs.centers
        self.center_indices_ = cs.indices
        self.center_weights_ = cs.weights
        planned = self._planned_parts(X, Y, cs.M)
        rows = rows_of(X)
        self.operator_ = rows.operator(
            self._kernel(),
            X,
            cs.centers,
            memory_budget=self.memory_budget,
            n_rhs=Y.shape[1],
            accumulate_dtype=self._VECTOR_DTYPE,
            cache_bytes=planned.get(KERNEL_CACHE),
        )
        if self._weights is None:
            self._y_sq = rows_of(Y).sum_of_squares(Y) / self.n_
            return self.operator_.rmatvec(Y) / self.n_  # b̃
        self._y_sq = float((self._weights * Y.double() ** 2).sum()) / self.n_
        return self.operator_.rmatvec(Y, weights=self._weights) / self.n_  # b̃ = K_nMᵀ W y / n

    def _fused(self, v, w=None, *, dtype=None):
        """K_nMᵀ W (K_nM v + w) with the fit's sample weights (W = I without them)."""
        if self._weights is None:
            return self.operator_.fused(v, w, dtype=dtype)
        return self.operator_.fused(v, w, dtype=dtype, weights=self._weights)

    def _center_row_weights(self):
        """The sample weights of the rows chosen as centres (None: unweighted, or centres given as
        an array, which are no rows of X: then A is factored unweighted, still a valid P)."""
        if self._weights is None or self.center_indices_ is None:
            return None
        return self._weights[:, 0][self.center_indices_]

    def _planned_parts(self, X, Y, M: int) -> dict:
        """The estimate's parts (name → bytes) for the M centres the selector chose: a BLESS dictionary's
        size is known only once it exists (M, or fewer where BLESS's λ path ends first), so the K_nM
        cache is sized again from the storage budget with the real M (fewer centres leave room for
        more cached rows, more take it)."""
        estimate = self.memory_estimate_
        if isinstance(X, torch.Tensor) and M != self._center_count(X.shape[0]):
            self._selected_M = M
            try:
                estimate = self.memory_estimate(X.shape[0], X.shape[1], Y.shape[1])
            finally:
                del self._selected_M
        return {part.name: part.bytes for part in estimate.parts}

    _sharded_kind = "nystrom"
    #: dtype of the CG vectors and of K_nMᵀ(·) sums (None: the data dtype).
    _VECTOR_DTYPE = None
    #: Name of the M×M matrix the solver holds, its itemsize (None: the data dtype's) and the
    #: number of fused kernel passes its set-up makes beyond b̃ (NystromGD's power iteration).
    _SYSTEM_MATRIX, _SYSTEM_ITEMSIZE, _SETUP_PASSES = "K_MM", None, 0
    #: Whether the set-up counts, below float64, the directions the data dtype cannot resolve (Falkon).
    _CHECKS_RESOLUTION = False

    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """Centres, one M×M matrix, the kernel block buffer, O(M) CG vectors; a fused pass over K_nM
        per iteration (FALKON Alg. 1) and the M×M set-up (K_MM, FALKON's two Cholesky factors).

        What is left of the storage budget holds the first row blocks of K_nM (:data:`KERNEL_CACHE`),
        computed by the first pass and read by every later one: a cached row costs one read of its
        M entries per iteration (both mat-vecs of a cache-sized block) instead of a kernel evaluation."""
        M, s = self._center_count(n), model.itemsize
        system_itemsize = self._system_itemsize(model, M)
        self._hold_model(model, n, k)
        self._hold_rows(model, n, n, k)
        rounds = self._refine_rounds()
        if self._uses_bless():
            model.setup += model.entry_seconds(n * M, torch.float64)
        # FalkonPreconditioner.unresolved_ (at most a Cholesky and two LDLᵀ) runs only when
        # λ < eps·‖K_MM‖_∞/M ≤ eps·κ², with κ² = 1 for the Gaussian, Laplacian and Matérn kernels.
        if self._CHECKS_RESOLUTION and s != 8 and self._penalty() < torch.finfo(model.dtype).eps:
            model.setup += model.flop_seconds(M**3, torch.float64)
        model.setup += (
            model.entry_seconds(M * M, torch.float64)
            + model.flop_seconds(M**3, torch.float64)
            + (1 + self._SETUP_PASSES) * model.entry_seconds(n * M)
        )
        M_fit = model.largest_fitting(M * M * system_itemsize, system_itemsize)
        cached_rows = min(n, max(model.limit_bytes - model.stored_bytes, 0) // (M * s))
        model.hold(KERNEL_CACHE, cached_rows * M * s)
        kernel_pass = model.entry_seconds((n - cached_rows) * M) + model.stream_seconds(cached_rows * M * s)
        model.iteration += kernel_pass + model.stream_seconds(4 * M * M * system_itemsize)
        # Refinement: rounds passes over the same kernel values in float64 arithmetic, and the check
        # of the true residual: in a maxiter run the last CG pass, made in float64 (Falkon._steps),
        # else a pass of its own.
        if rounds:
            promoted = kernel_pass + model.stream_seconds(n * M * 8)
            model.setup += rounds * promoted + (promoted - kernel_pass if self.tol is None else promoted)
        return (
            f"lower M to at most {M_fit:,} (the {M:,}×{M:,} matrix grows as M²), or use SketchySAGA, "
            f"which holds no M×M matrix"
        )

    def _estimate_posterior(self, model: CostModel, n: int, k: int) -> None:
        hold_nystrom_posterior(model, n, self._center_count(n))

    def _posterior_factor(self, X, Y):
        pc = getattr(self, "preconditioner_", None)
        # Below float64 the preconditioner's jitter is float32's ridge (default_jitter), far above K_MM's
        # own round-off: the posterior then whitens with a float64 Cholesky of K_MM, the Nyström
        # problem's prior, which the refined float32 solve approximates.
        if pc is None or X.dtype != torch.float64:
            solve_Ft, solve_F = kmm_factor_solvers(self._kernel(), self.centers_)
        else:  # F = T D⁻¹: FᵀF = K_MM + jD⁻², the prior of the model Falkon solved
            d = 1.0 if pc.weights is None else pc.weights.unsqueeze(1)

            def solve_Ft(B):
                return pc.solve_T_t(B * d)

            def solve_F(B):
                return pc.solve_T(B) * d

        blocks = float64_blocks(self._kernel(), X, self.centers_, self.operator_, self.memory_budget)
        return nystrom_factor(blocks, solve_Ft, solve_F, self.penalty_ * self.n_, self.centers_.shape[0])

    def _system_itemsize(self, model: CostModel, M: int) -> int:
        """Bytes per entry of the M×M matrix the fit will hold."""
        return self._SYSTEM_ITEMSIZE or model.itemsize

    def _system_name(self, model: CostModel, M: int) -> str:
        return self._SYSTEM_MATRIX

    def _hold_model(self, model: CostModel, n: int, k: int) -> None:
        """The M×M matrix, the centres and O(M) CG vectors (on the client of a sharded fit)."""
        M, d, s = self._center_count(n), model.d, model.itemsize
        model.hold(f"{self._system_name(model, M)} ({M:,}×{M:,})", M * M * self._system_itemsize(model, M))
        model.hold("centres and CG vectors", M * d * (s + 8) + 10 * M * k * 8)

    def _hold_rows(self, model: CostModel, rows: int, n: int, k: int) -> None:
        """Over ``rows`` rows: the kernel block buffer (for Falkon's refinement a float64 one of the
        same rows beside it), and for BLESS centres its scoring blocks and a float64 copy of the rows."""
        M, d, s = self._center_count(n), model.d, model.itemsize
        block_buffer = operator_bytes(
            rows,
            M,
            itemsize=s,
            budget_bytes=model.scratch_bytes,
            d=d,
            n_rhs=k,
            scratch_blocks=model.scratch_blocks,
            device=model.device,
        )
        model.hold("kernel block buffer", block_buffer, "scratch")
        if self._refine_rounds():  # blocks promoted to float64 one at a time
            model.hold("float64 refinement block buffer", block_buffer * 8 // s, "scratch")
        if self._uses_bless():
            model.hold("BLESS scoring blocks", model.scratch_bytes, "scratch")
            if s != 8:
                model.hold("float64 copy of X (BLESS)", rows * d * 8)

    def _uses_bless(self) -> bool:
        """Whether the centres come from a BLESS dictionary (``centers="bless"``/``"bless_r"`` or its selector)."""
        centers = self.centers
        return (isinstance(centers, str) and centers.startswith("bless")) or isinstance(centers, BlessCenters)

    def _center_count(self, n: int) -> int:
        if getattr(self, "_selected_M", None):  # during set-up, once the centres exist
            return self._selected_M
        return center_count(self.centers, self.M, n)  # a BLESS dictionary too (it stops at M points)

    def _refine_rounds(self) -> int:
        """Rounds of float64 refinement after the solve (:class:`Falkon` only)."""
        return 0

    def _H(self, alpha: torch.Tensor) -> torch.Tensor:
        """H̃ α = K_nMᵀ W K_nM α / n + λ K_MM α."""
        return self._fused(alpha) / self.n_ + self.penalty_ * (self._K_MM @ alpha)

    def _objective(self, alpha: torch.Tensor, b: torch.Tensor, r: torch.Tensor) -> float:
        """(1/n)‖K_nM α − y‖² + λ αᵀK_MM α, from quantities CG already has: αᵀH̃α − 2αᵀb̃ + ‖y‖²/n
        with H̃α = b̃ − r (no extra kernel pass)."""
        return float(-(alpha.double() * (b + r).double()).sum()) + self._y_sq


class Falkon(_NystromIterative):
    """FALKON (Rudi, Carratino, Rosasco 2017): preconditioned CG for Nyström KRR.

    Parameters
    ----------
    kernel : krrcore.kernels.Kernel
    penalty : float
        λ of (K + λnI).
    M : int
        Number of Nyström centres (ignored when ``centers`` is an array).
    centers : "uniform" | "bless" | "bless_r" | CenterSelector | array (M×d)
        How centres are chosen; weighted selectors supply FALKON's D matrix (Alg. 2).
    maxiter, tol : CG iterations; stop when the relative CG residual ‖Pᵀ(b̃ − H̃α)‖/‖Pᵀb̃‖ ≤ tol.
    dtype : "float64" | "float32"
        Data, kernel blocks and the fitted model (``centers_``, ``coef_``; ``predict`` answers in
        this dtype). K_MM, the preconditioner, the CG vectors (O(M) each) and the sums K_nMᵀ(·) over
        the blocks are always float64: the kernel pass dominates the cost, and float32 CG
        recurrences drift in long runs. float32 solves are refined in float64 (``refine``);
        ``tests/core/test_falkon_float32.py`` checks float32's test error against float64's.
    memory_budget : bytes for the blocked kernel product (default: krrcore's scratch budget,
        :mod:`krrcore.memory`).
    jitter : added to diag(D K_MM D) (FALKON's εM); default
        :func:`krrcore.preconditioner.default_jitter`: 1e-13·M in float64; in float32 ρ/λ, which
        makes the solved system's ridge ρ = c·eps(float32)·κ⁴ independent of λ (c smaller when the
        solve is refined). Raised automatically if the Cholesky fails (``jitter_``).
    refresh_every : restart CG from the current iterate (exact residual, fresh direction) every k
        iterations; "auto" (default): never — with float64 vectors the recursive residual holds.
    refine : "auto" | int
        Rounds of mixed-precision iterative refinement after a float32 solve ("auto": up to
        :data:`REFINE_ROUNDS` for float32 data, none for float64; 0 turns it off). A round computes
        the true residual Pᵀ(b̃ − H̃α) of the system CG solves (Alg. 1, ``BHB``; λ K_MM with its
        jitter) in float64 arithmetic over the solve's own kernel values — one pass that promotes
        each block, cached or evaluated, to float64 as it is used — solves W δ = that residual
        with the same float32-block CG (at most ``maxiter`` iterations; until its residual falls by
        :data:`REFINE_INNER_TOL`, or in a ``tol`` run as far as reaching ``tol`` needs) and adds
        α += P δ in float64 (classical mixed-precision iterative refinement: each round divides
        the error by about the inner solve's accuracy). float32 blocks bound what CG alone can
        reach; refinement removes that bound, so the float32 jitter can be the smaller
        :data:`~krrcore.preconditioner.FLOAT32_RIDGE_REFINED`. Rounds stop once the true residual is
        down to what the run paid for (``tol``, else the CG residual of the model kept, so
        ``maxiter`` keeps its meaning: within :data:`REFINE_GAP` of it, no round runs; a run that
        ends at ``maxiter`` checks in its last CG pass, made in float64 arithmetic with α as a
        second column, others in one pass of their own) or when it stops falling (the best α is kept); with ``tol``,
        ``converged_`` says whether the true residual met it. Each round is a record (``residual_kind`` "float64
        refinement") whose residual is that true residual. A stop asked for (``stop_event``,
        ``callback``, ``timeout``) skips refinement. Refinement cannot restore what float32 kernel
        values do not hold: when λ is so small that the solution uses directions of K_MM below
        float32's rounding (``unresolved_directions_`` > 0), the fit warns (:class:`PrecisionWarning`,
        naming the smallest λ float32 resolves) and keeps float32.
    callback : f(record) -> bool, True stops; ``iter_fit(..., stop_event=)`` also stops.

    Fitted: ``centers_``, ``coef_`` (α, M×k), ``trace_``, ``stop_reason_``, ``n_iter_`` (CG
    iterations, the refinement's included), ``jitter_``, ``preconditioner_``, ``operator_`` (block
    size in ``operator_.block_rows``), ``unresolved_directions_`` (eigen-directions of K_MM the
    solution at this λ uses that the data dtype cannot resolve; 0 in float64), ``residual_advice_``
    (what to try when the fit ended with its residual above :data:`RESIDUAL_HIGH`, also warned as
    :class:`ResidualWarning`; "" otherwise).
    """

    DIVERGENCE_ADVICE = (
        "raise penalty (now {penalty!r})",
        "raise jitter (now {jitter_!r})",
        "use dtype='float64' (now {dtype!r})",
    )

    jitter: float | None = param(None, NONE | NON_NEGATIVE)
    refresh_every: int | str = param("auto", Options("auto") | Integer(0))
    refine: int | str = param("auto", Options("auto") | Integer(0))

    _SYSTEM_MATRIX, _SYSTEM_ITEMSIZE = "preconditioner (one float64 M×M buffer)", 8
    _VECTOR_DTYPE = torch.float64
    _CHECKS_RESOLUTION = True

    def _system_itemsize(self, model: CostModel, M: int) -> int:
        """8, or 4 where the preconditioner will keep a float32 buffer (a GPU, float32 data, and too
        little memory for float64: :func:`krrcore.preconditioner.buffer_dtype`)."""
        if model.device.type == "cpu" or model.itemsize != 4:
            return 8
        try:
            return torch.empty((), dtype=buffer_dtype(M, model.dtype, model.device)).element_size()
        except MemoryBudgetError:  # nothing fits: the estimate's own check refuses, with its numbers
            return 4

    def _system_name(self, model: CostModel, M: int) -> str:
        return f"preconditioner (one float{8 * self._system_itemsize(model, M)} M×M buffer)"

    def _hold_model(self, model: CostModel, n: int, k: int) -> None:
        """The base's parts, and below float64 on the CPU the float32 M×M scratch in which the
        preconditioner's A is factored during set-up (FalkonPreconditioner._factor_A_float32)."""
        super()._hold_model(model, n, k)
        if model.itemsize != 8 and model.device.type == "cpu":
            M = self._center_count(n)
            model.hold(f"float32 scratch for A ({M:,}×{M:,}, set-up)", M * M * 4, "scratch")

    def _refine_rounds(self) -> int:
        """Refinement rounds after the solve: ``refine``, or for "auto" REFINE_ROUNDS on float32 data."""
        if self.refine == "auto":
            return REFINE_ROUNDS if self._dtype() != torch.float64 else 0
        return self.refine

    def _setup(self, X, Y):
        self.__dict__.pop("_checked", None)  # a stopped fit's last-pass check (see _steps)
        b = self._setup_operator(X, Y)
        self.preconditioner_ = FalkonPreconditioner(
            self._kernel(),
            self.centers_,
            self.penalty_,
            weights=self.center_weights_,
            data_dtype=X.dtype,
            jitter=self.jitter,
            refined=self._refine_rounds() > 0,
            row_weights=self._center_row_weights(),
        )
        self.jitter_ = self.preconditioner_.jitter_
        self.unresolved_directions_ = self.preconditioner_.unresolved_
        if self.unresolved_directions_:
            self._warn_unresolved(X.dtype)
        self._b = b
        self._rhs = self.preconditioner_.apply_t(b)  # Pᵀ b̃, float64
        self.coef_ = torch.zeros(b.shape, dtype=X.dtype, device=X.device)

    def _warn_unresolved(self, dtype: torch.dtype) -> None:
        pc, lam = self.preconditioner_, self.penalty_
        name = str(dtype).replace("torch.", "")
        warnings.warn(
            f"{name} cannot resolve penalty={lam:g} with this kernel and these {pc.M:,} centres: "
            f"{self.unresolved_directions_} eigen-directions of K_MM that the solution at this penalty uses "
            f"(eigenvalues between penalty·M = {lam * pc.M:.3g} and {name}'s resolution eps·‖K_MM‖ = "
            f"{pc.resolution_floor_:.3g}) are below the rounding of {name} kernel values, so the {name} model "
            f"is more strongly regularised than the float64 one and its predictions may differ from float64's "
            f"by several percent; fitting in {name} anyway. Use dtype='float64' for this penalty, or a penalty of "
            f"at least {pc.resolution_floor_ / pc.M:.3g} in {name}.",
            PrecisionWarning,
            stacklevel=4,
        )

    def _residual_dtype(self, X) -> torch.dtype:
        """CG's vectors, hence its residual, are float64 whatever the data dtype."""
        return torch.float64

    def _W(self, beta: torch.Tensor, kernel_product=None) -> torch.Tensor:
        """W β = Pᵀ K_nMᵀK_nM P β / n + λ A⁻ᵀA⁻¹β (MATLAB Alg. 1 ``BHB``; Tᵀ T = D K_MM D + jI);
        ``kernel_product(v)``, K_nMᵀK_nM v / n by default, makes the pass (:meth:`_steps`' own)."""
        if kernel_product is None:
            kernel_product = lambda v: self._fused(v) / self.n_  # noqa: E731
        return self.preconditioner_.system_product(beta, kernel_product, self.penalty_)

    _compact_attributes = _NystromIterative._compact_attributes + ("residual_advice_",)

    def _finish(self, X, Y):
        """The float64 refinement (see ``refine``), then the residual check (:meth:`_check_residual`)."""
        yield from self._refine(X, Y)
        self._check_residual()

    def _check_residual(self) -> None:
        """``residual_advice_``: what to try when the fit ended with its relative residual above
        :data:`RESIDUAL_HIGH` (else ""), also given as a :class:`ResidualWarning`. Not after a stop
        asked for (the user ended it)."""
        residual = self.trace_[-1].residual
        self.residual_advice_ = ""
        if not residual > RESIDUAL_HIGH:
            return
        tries = ["more iterations (maxiter)", "a larger penalty λ", "more centres M"]
        if not (isinstance(self.centers, str) and self.centers.startswith("bless")):
            tries.insert(0, "BLESS centres (centers='bless'), which cover rare and outlying points")
        self.residual_advice_ = (
            f"Falkon's residual is still {residual:.2g} after {self.n_iter_} iterations (above {RESIDUAL_HIGH:g}): the "
            f"model is not yet the Nyström solution, and its predictions can be far worse than that solution's. "
            f"Try {', '.join(tries[:-1])} or {tries[-1]}."
        )
        warnings.warn(self.residual_advice_, ResidualWarning, stacklevel=4)

    def _refine(self, X, Y):
        """Mixed-precision iterative refinement of α (see ``refine``), one record per round.

        With α = Pβ, W β − Pᵀb̃ = Pᵀ(H̃_j α − b̃), H̃_j = K_nMᵀK_nM/n + λ(K_MM + j D⁻²), so the true
        residual is taken in α (the model the loop kept, a stalled run's best iterate included):
        one pass for Pᵀ K_nMᵀ(y − K_nM α)/n in float64 arithmetic over the kernel values CG uses (the
        cached blocks reused: classical mixed-precision refinement, the matrix stored in the working
        precision and the residual formed in a higher one), and λ Pᵀ(K_MM + j D⁻²)α = λ A⁻ᵀ T D⁻¹α
        (TᵀT = D K_MM D + jI) from the preconditioner's float64 factors."""
        rounds = self._refine_rounds()
        checked = self.__dict__.pop("_checked", None)
        if not rounds:
            return
        pc, n = self.preconditioner_, self.n_

        def true_residual(alpha):  # Pᵀ(b̃ − H̃_j α) in float64 over the solve's kernel values
            return self._true_residual(self._fused(-alpha, Y, dtype=torch.float64) / n, alpha)

        rhs_norm = float(torch.linalg.norm(self._rhs)) or 1.0
        if checked is not None and torch.equal(checked[0].to(X.dtype), self.coef_):
            alpha, r = checked  # the check made by the last CG pass (:meth:`_steps`)
        else:
            alpha = self.coef_.double()
            r = true_residual(alpha)
        start = best = float(torch.linalg.norm(r)) / rhs_norm
        # What the run paid for: tol, else the residual CG reported for the model kept. Refinement
        # restores what float32 blocks lost; it does not run on past that (maxiter keeps its meaning).
        claimed = min(rec.residual for rec in self.trace_)
        target = max(REFINE_GAP * claimed if self.tol is None else self.tol, self.residual_floor_)
        iteration, improved = self.n_iter_, 0
        for _ in range(rounds):
            if best <= target:
                break
            # Each round's CG asks for a tenth of the residual: at least that in a tol run, at most
            # that, and no further than the target, otherwise.
            inner_tol = (min if self.tol is not None else max)(REFINE_INNER_TOL, target / best)
            for state in conjugate_gradient(self._W, r):
                if state.iteration >= self.maxiter or state.converged or state.rel_residual <= inner_tol:
                    break
            iteration += state.iteration
            candidate = alpha + pc.apply(state.x)
            r_new = true_residual(candidate)
            residual = float(torch.linalg.norm(r_new)) / rhs_norm
            if not residual < best:  # no gain (or not finite): keep the best α
                break
            alpha, r, best, improved = candidate, r_new, residual, improved + 1
            self.coef_ = alpha.to(X.dtype)
            yield Step(
                residual=best,
                iteration=iteration,
                extras={"residual_kind": "float64 refinement", "refinement_round": improved},
            )
        self.n_iter_ = iteration
        self.stop_reason_ += f"; {improved} float64 refinement round(s): true residual {start:.3g} -> {best:.3g}"
        if self.tol is not None:  # tol is met, or not, by the true residual
            self.converged_ = best <= self.tol
            if not self.converged_:
                warnings.warn(
                    f"Falkon's true float64 residual {best:.3g} is above tol={self.tol:g} after "
                    f"{improved} refinement round(s); raise refine or maxiter",
                    ConvergenceWarning,
                    stacklevel=3,
                )

    def _true_residual(self, kernel_residual: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
        """Pᵀ(b̃ − H̃_j α) from ``kernel_residual`` = K_nMᵀ(y − K_nM α)/n (float64): Pᵀ of it, minus
        λ Pᵀ(K_MM + j D⁻²)α = λ A⁻ᵀ T D⁻¹α from the preconditioner's float64 factors."""
        pc = self.preconditioner_
        weights = 1.0 if pc.weights is None else pc.weights.unsqueeze(1)
        return pc.apply_t(kernel_residual) - self.penalty_ * pc.solve_A_t(pc.times_T(alpha / weights))

    def _steps(self, X, Y):
        """CG on W β = Pᵀb̃ (Alg. 1), α = Pβ kept up to date from the pass's own P p (α moves by
        a_k P p_k with β; no triangular solves for it). In a run that ends at ``maxiter`` and is
        refined, the last iteration's pass is made in float64 arithmetic with −α as a second column
        against [0, y]: it gives W p_k and K_nMᵀ(y − K_nM α_{k−1}), so the true residual at
        α_{k−1}, and by linearity the one at α_k = α_{k−1} + a_k P p_k, r_k = r_{k−1} − a_k W p_k,
        which the refinement starts from instead of a pass of its own."""
        refresh = 0 if self.refresh_every == "auto" else self.refresh_every
        fold = (
            self._refine_rounds() > 0
            and self.tol is None
            and not refresh
            and isinstance(Y, torch.Tensor)
            and self.maxiter >= 1
        )
        pc, n, k = self.preconditioner_, self.n_, self._rhs.shape[1]
        done, alpha, seen = 0, torch.zeros_like(self._rhs), {}

        def kernel_product(v):  # v = P p, kept
            seen["P_p"] = v
            if not (fold and done + 1 == self.maxiter):
                return self._fused(v) / n
            w = torch.zeros(n, 2 * k, dtype=torch.float64, device=v.device)
            w[:, k:] = Y
            both = self._fused(torch.cat([v, -alpha], 1), w, dtype=torch.float64) / n
            seen["kernel_residual"] = both[:, k:]
            return both[:, :k]

        def matvec(beta):
            seen["W_p"] = self._W(beta, kernel_product)
            return seen["W_p"]

        for state in conjugate_gradient(matvec, self._rhs, refresh_every=refresh):
            step = state.step.unsqueeze(0)
            checked = "kernel_residual" in seen
            if checked:
                residual = self._true_residual(seen.pop("kernel_residual"), alpha) - seen["W_p"] * step
            # A restart's extra product is P x, not P p: then α = P x by the solves.
            alpha = pc.apply(state.x) if refresh else alpha + seen["P_p"] * step
            done = state.iteration
            self.coef_ = alpha.to(X.dtype)
            if checked:
                self._checked = (alpha, residual)
            # With α = Pβ: αᵀH̃α − 2αᵀb̃ = βᵀWβ − 2βᵀPᵀb̃ and Wβ = Pᵀb̃ − r.
            objective = float(-(state.x.double() * (self._rhs + state.r).double()).sum()) + self._y_sq
            yield Step(residual=state.rel_residual, objective=objective, extras={"residual_kind": "preconditioned CG"})


class NystromCG(_NystromIterative):
    """Unpreconditioned CG on H̃ α = b̃ (FALKON paper Fig. 1 baseline); same stream as Falkon."""

    def _setup(self, X, Y):
        self._b = self._setup_operator(X, Y)
        self._K_MM = self._kernel()(self.centers_, self.centers_)
        self.coef_ = torch.zeros_like(self._b)

    def _steps(self, X, Y):
        for state in conjugate_gradient(self._H, self._b):
            self.coef_ = state.x
            yield Step(
                residual=state.rel_residual,
                objective=self._objective(state.x, self._b, state.r),
                extras={"residual_kind": "Nyström CG"},
            )


class NystromGD(_NystromIterative):
    """Gradient descent on the Nyström objective, step 1/L with L = λ_max(H̃) (FALKON Fig. 1)."""

    _SETUP_PASSES = 30  # power_iteration's default iterations

    def _setup(self, X, Y):
        self._b = self._setup_operator(X, Y)
        self._K_MM = self._kernel()(self.centers_, self.centers_)
        self.lipschitz_ = power_iteration(
            self._H, self.centers_.shape[0], dtype=X.dtype, device=X.device, seed=self.seed_
        )
        self.coef_ = torch.zeros_like(self._b)

    def _steps(self, X, Y):
        b_norm = float(torch.linalg.norm(self._b)) or 1.0
        step = 1.0 / self.lipschitz_
        alpha, r = self.coef_.clone(), self._b.clone()  # r = b̃ − H̃α = −gradient
        while True:
            Hr = self._H(r)  # the one kernel pass per iteration
            alpha.add_(r, alpha=step)
            r.sub_(Hr, alpha=step)  # b̃ − H̃(α + s r), by linearity
            self.coef_ = alpha
            yield Step(
                residual=float(torch.linalg.norm(r)) / b_norm,
                objective=self._objective(alpha, self._b, r),
                extras={"residual_kind": "Nyström GD"},
            )


def power_iteration(matvec, dim: int, *, dtype, device, iters: int = 30, seed: int = 0) -> float:
    """Largest eigenvalue of a symmetric PSD operator by power iteration (Rayleigh quotient)."""
    g = torch.Generator().manual_seed(int(seed))
    v = torch.randn(dim, 1, generator=g, dtype=torch.float64, device="cpu").to(dtype=dtype, device=device)
    v /= torch.linalg.norm(v)
    estimate = 0.0
    for _ in range(iters):
        w = matvec(v)
        estimate = float((v * w).sum())
        norm = float(torch.linalg.norm(w))
        if norm == 0 or not math.isfinite(norm):
            break
        v = w / norm
    return estimate * 1.01  # small margin: the Rayleigh quotient underestimates λ_max

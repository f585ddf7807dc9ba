"""Conjugate gradient on the full KRR system (K + λnI) w = y, with or without a Nyström preconditioner.

Also home of the pieces every full-KRR iterative solver here shares (ASkotch and Skotch import
them): :class:`FullKernelSystem`, the system matrix with K stored or computed on the fly, and
:class:`DeferredEvaluation`, which makes the O(n²d) float64 residual evaluation count as
evaluation time rather than solver time.

Penalty convention: krrcore's ``penalty`` λ is per sample, so the ASkotch paper's λ (its Eq. 3,
(K + λI) w = y) is ``penalty * n`` here.
"""
from __future__ import annotations


import torch

from .._validation import check_int
from ..cg import CGState, conjugate_gradient
from ..device import available_memory_bytes, default_memory_budget
from ..kernels import Kernel
from ..nystrom import NystromPreconditioner, randomized_nystrom, resolve_damping
from ..ops import KernelOperator, block_rows_for_budget
from .base import IterativeKRR, Step

KERNEL_STORAGE = ("auto", "stored", "on_the_fly")


def dense_kernel(kernel: Kernel, A: torch.Tensor, B: torch.Tensor, *, memory_budget: int | None = None) -> torch.Tensor:
    """K(A, B) as one dense matrix, filled in row blocks so kernel scratch stays within the budget."""
    out = torch.empty(A.shape[0], B.shape[0], dtype=A.dtype, device=A.device)
    budget = memory_budget if memory_budget is not None else default_memory_budget(A.device)
    rows = block_rows_for_budget(A.shape[0], B.shape[0], itemsize=A.element_size(), budget_bytes=budget,
                                 scratch_blocks=kernel.scratch_blocks)
    PA, PB = kernel.prepare(A), kernel.prepare(B)
    for start in range(0, A.shape[0], rows):
        stop = min(start + rows, A.shape[0])
        kernel.block(PA.rows(start, stop), PB, out=out[start:stop])
    return out


def resolve_kernel_storage(kernel_storage: str, n: int, itemsize: int, memory_budget: int | None,
                           device) -> str:
    """"stored" or "on_the_fly": "auto" stores K when its n² entries fit the memory budget
    (``memory_budget`` if given, else half the free memory, as ExactKRR does)."""
    if kernel_storage not in KERNEL_STORAGE:
        raise ValueError(f"kernel_storage must be one of {KERNEL_STORAGE}, got {kernel_storage!r}")
    need = n * n * itemsize
    limit = memory_budget if memory_budget is not None else available_memory_bytes(device) // 2
    if kernel_storage == "stored" and need > limit:
        raise ValueError(
            f"kernel_storage='stored' needs {need / 2**30:.2f} GiB for the {n}×{n} kernel matrix but the "
            f"memory budget allows {limit / 2**30:.2f} GiB: use kernel_storage='on_the_fly' or 'auto'")
    if kernel_storage == "auto":
        return "stored" if need <= limit else "on_the_fly"
    return kernel_storage


class FullKernelSystem:
    """A = K + λnI on the training points (ASkotch paper Eq. 3 with its λ = λn).

    ``storage="stored"`` keeps K (n×n); ``"on_the_fly"`` recomputes kernel blocks at each product
    within ``memory_budget`` bytes of scratch. Products:

    * :meth:`matvec` — (K + λnI) W (CG);
    * :meth:`rows_matvec` — K[b, :] W for an index set b, one block row K_bn at a time in row
      chunks that reuse one buffer (the block gradient of Alg. 1/4, O(n|b|) flops);
    * :meth:`principal_block` — matrix-free access to K_bb and Tr(K_bb) (Nyström of a block);
    * :meth:`evaluate` — relative residual ‖A w − y‖/‖y‖ and dual objective
      d(w) = ½wᵀAw − yᵀw (Lemma 3.1), always in float64.
    """

    def __init__(self, kernel: Kernel, X: torch.Tensor, lam_n: float, *, storage: str = "on_the_fly",
                 memory_budget: int | None = None):
        self.kernel = kernel
        self.X = X
        self.n = X.shape[0]
        self.lam_n = float(lam_n)
        self.memory_budget = memory_budget if memory_budget is not None else default_memory_budget(X.device)
        self.storage = storage
        self.K = dense_kernel(kernel, X, X, memory_budget=self.memory_budget) if storage == "stored" else None
        self._prepared = kernel.prepare(X) if self.K is None else None
        self._buffer = None
        self._X64 = None

    # -- products in the solver's dtype ----------------------------------------------------
    def kernel_matvec(self, W: torch.Tensor) -> torch.Tensor:
        """K W for W of shape (n, k)."""
        if self.K is not None:
            return self.K @ W
        return KernelOperator(self.kernel, self.X, self.X, memory_budget=self.memory_budget,
                              n_rhs=W.shape[1]).matvec(W)

    def matvec(self, W: torch.Tensor) -> torch.Tensor:
        """(K + λnI) W for W of shape (n, k)."""
        return self.kernel_matvec(W).add_(W, alpha=self.lam_n)

    def _row_buffer(self, rows: int) -> torch.Tensor:
        cap = block_rows_for_budget(rows, self.n, itemsize=self.X.element_size(), budget_bytes=self.memory_budget,
                                    scratch_blocks=self.kernel.scratch_blocks)
        if self._buffer is None or self._buffer.shape[0] < cap:
            self._buffer = torch.empty(cap, self.n, dtype=self.X.dtype, device=self.X.device)
        return self._buffer

    def rows_matvec(self, idx: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """K[idx, :] W (|idx|×k): the block row K_bn times W, never more than one chunk of it held."""
        out = torch.empty(idx.numel(), W.shape[1], dtype=W.dtype, device=W.device)
        if self.K is not None:
            return torch.mm(self.K.index_select(0, idx), W, out=out)
        buffer = self._row_buffer(idx.numel())
        step = buffer.shape[0]
        for start in range(0, idx.numel(), step):
            stop = min(start + step, idx.numel())
            block = self.kernel.block(self.kernel.prepare(self.X[idx[start:stop]]), self._prepared,
                                      out=buffer[: stop - start])
            torch.mm(block, W, out=out[start:stop])
        return out

    def principal_block(self, idx: torch.Tensor):
        """(apply, trace): apply(V) = K_bb V for the principal block on ``idx``, and Tr(K_bb).

        K_bb is held densely when it fits the memory budget, else applied in blocks on the fly.
        """
        Xb = self.X[idx]
        trace = float(self.kernel.diag(Xb).sum())
        b = idx.numel()
        if self.K is not None:
            Kbb = self.K[idx][:, idx]
        elif b * b * self.X.element_size() * (1 + self.kernel.scratch_blocks) <= self.memory_budget:
            Kbb = self.kernel(Xb, Xb)
        else:
            op = KernelOperator(self.kernel, Xb, Xb, memory_budget=self.memory_budget)
            return op.matvec, trace
        return (lambda V: Kbb @ V), trace

    # -- float64 evaluation ----------------------------------------------------------------
    def evaluate(self, W: torch.Tensor, Y64: torch.Tensor) -> tuple[float, float]:
        """(‖(K+λnI)W − Y‖_F / ‖Y‖_F, ½⟨W, (K+λnI)W⟩ − ⟨Y, W⟩) computed in float64.

        Float32 residuals mislead (field notes: 1.8e-3 in float32 vs 9.4e-4 in float64 for the
        same PCG iterate), so the kernel is recomputed in float64 unless a float64 K is stored.
        """
        W64 = W.to(torch.float64)
        if self.K is not None and self.K.dtype == torch.float64:
            AW = self.K @ W64
        else:
            if self._X64 is None:
                self._X64 = self.X.to(torch.float64)
            AW = KernelOperator(self.kernel, self._X64, self._X64, memory_budget=self.memory_budget,
                                n_rhs=W.shape[1]).matvec(W64)
        AW.add_(W64, alpha=self.lam_n)
        residual = float(torch.linalg.norm(AW - Y64) / torch.linalg.norm(Y64))
        objective = float(0.5 * (W64 * AW).sum() - (Y64 * W64).sum())
        return residual, objective


class _Deferred:
    """A float computed on first conversion (see :class:`DeferredEvaluation`)."""

    def __init__(self, owner: "DeferredEvaluation", index: int):
        self._owner, self._index = owner, index

    def __float__(self) -> float:
        return self._owner.values()[self._index]


class DeferredEvaluation:
    """Residual and objective of a :class:`Step`, computed only when the record is built.

    ``IterativeKRR.iter_fit`` pauses the solver timer before it converts ``step.residual`` and
    ``step.objective`` to float, and times that conversion as ``eval_seconds``. Handing it these
    lazy values instead of numbers puts the O(n²d) float64 residual evaluation in
    ``eval_seconds``, so ``seconds`` counts solver work only, as ASkotch's plots do.
    ``evaluate`` must read the iterate at the time of the call (the generator is suspended then).
    """

    def __init__(self, evaluate):
        self._evaluate = evaluate
        self._values = None

    def values(self) -> tuple[float, float]:
        if self._values is None:
            self._values = tuple(float(v) for v in self._evaluate())
        return self._values

    def step(self, iteration: int | None = None, extras: dict | None = None) -> Step:
        return Step(residual=_Deferred(self, 0), objective=_Deferred(self, 1), iteration=iteration,
                    extras=extras or {})


def resolve_eval_every(eval_every, default: int) -> int:
    return default if eval_every is None else check_int(eval_every, "eval_every")


RESIDUAL_MODES = ("float64", "estimate")


def check_residual_mode(residual) -> str:
    """``residual``: "float64" (exact, O(n²d) per record, timed as evaluation) or "estimate" (free)."""
    if residual not in RESIDUAL_MODES:
        raise ValueError(f"residual must be one of {RESIDUAL_MODES}, got {residual!r}")
    return residual


class _FullSystemCG(IterativeKRR):
    """Shared (preconditioned) conjugate gradient on (K + λnI) W = Y, one column per output.

    Each iteration is one product with K + λnI: O(n²) with K stored, O(n²d) on the fly.
    ``coef_`` is W; a record every ``eval_every`` iterations reports the float64 relative residual
    (``residual="float64"``, evaluation time) or CG's recursive one (``"estimate"``, which drifts
    from the truth in float32).
    """

    def _preconditioner(self, system: FullKernelSystem, generator: torch.Generator):
        return None

    def _setup(self, X, Y):
        lam = self._penalty()
        n = X.shape[0]
        self.kernel_storage_ = resolve_kernel_storage(self.kernel_storage, n, X.element_size(),
                                                      self.memory_budget, X.device)
        self.eval_every_ = resolve_eval_every(self.eval_every, 1)
        check_residual_mode(self.residual)
        generator = torch.Generator().manual_seed(int(self.seed))
        self._system = FullKernelSystem(self._kernel(), X, lam * n, storage=self.kernel_storage_,
                                        memory_budget=self.memory_budget)
        self._precond = self._preconditioner(self._system, generator)
        self._Y64 = Y.to(torch.float64)
        self.centers_ = X
        self.coef_ = torch.zeros_like(Y)

    def _steps(self, X, Y):
        precond = self._precond.solve if self._precond is not None else None
        for state in conjugate_gradient(self._system.matvec, Y, preconditioner=precond):
            self.coef_ = state.x                  # one tensor, updated in place by CG
            if state.converged or self._report_due(state.iteration):
                yield self._record(state, Y)

    def _report_due(self, iteration: int) -> bool:
        return iteration % self.eval_every_ == 0 or iteration == self.maxiter

    def _record(self, state: CGState, Y) -> Step:
        W = state.x
        if self.residual == "float64":
            return DeferredEvaluation(lambda: self._system.evaluate(W, self._Y64)).step(iteration=state.iteration)
        # CG's recursive residual r = y − A w in the solve dtype; d(w) = ½wᵀ(y − r) − yᵀw.
        objective = float(-0.5 * (W * (Y + state.r)).sum())
        return Step(residual=state.rel_residual, objective=objective, iteration=state.iteration,
                    extras={"residual_kind": "CG recursive residual"})

    def _initial_step(self, X, Y) -> Step:
        return Step(residual=1.0, objective=0.0)


class NystromPCG(_FullSystemCG):
    """CG on (K + λnI) w = y with a rank-r randomized Nyström preconditioner (Frangella, Tropp,
    Udell 2023; the ASkotch paper's NyströmPCG baseline, Sec. 6).

    The preconditioner is (K̂ + ρI)⁻¹ with K̂ from Alg. 2 of the ASkotch paper on K itself and
    ρ = λn + Λ̂[r−1] by default (``damping="damped"``; ``"regularization"`` gives ρ = λn), applied by
    the Cholesky-stabilised Woodbury form (B.2.1). Set-up costs one sketch KΩ (O(n²r)).

    Parameters
    ----------
    kernel, penalty : the kernel and λ of (K + λnI) (per sample; the paper's λ is ``penalty * n``).
    rank : r, Nyström sketch size (default 100, the paper's most consistent choice, C.8).
    maxiter : CG iterations. tol : stop when the float64 relative residual is <= tol.
    kernel_storage : "auto" (store K if its n² entries fit the memory budget), "stored", or
        "on_the_fly" (K recomputed blockwise at every product; O(n²d) per iteration, O(n·budget) memory).
        The choice made is ``kernel_storage_``.
    memory_budget : bytes for K (when stored) and for kernel block scratch; default: half the free
        memory for the storage decision and krrcore's default block budget for scratch.
    eval_every : report the residual every this many iterations (default 1).
    residual : "float64" (default): the true relative residual recomputed in float64 (an O(n²d) kernel
        pass on the fly unless a float64 K is stored; timed as evaluation); "estimate": CG's own
        recursive residual in the solve dtype (free, drifts in float32).
    """

    def __init__(self, kernel=None, penalty=1e-3, *, rank=100, damping="damped", maxiter=100, tol=None,
                 kernel_storage="auto", memory_budget=None, eval_every=None, residual="float64", seed=0,
                 dtype="float64", device=None, callback=None, timeout=None, eval_train=False, metric="auto",
                 stall_patience=50):
        self.kernel = kernel
        self.penalty = penalty
        self.rank = rank
        self.damping = damping
        self.maxiter = maxiter
        self.tol = tol
        self.kernel_storage = kernel_storage
        self.memory_budget = memory_budget
        self.eval_every = eval_every
        self.residual = residual
        self.seed = seed
        self.dtype = dtype
        self.device = device
        self.callback = callback
        self.timeout = timeout
        self.eval_train = eval_train
        self.metric = metric
        self.stall_patience = stall_patience

    def _preconditioner(self, system, generator):
        rank = check_int(self.rank, "rank")
        if rank > system.n:
            raise ValueError(f"rank must be <= n ({system.n} training points), got {rank}")
        X = system.X
        trace = float(self._kernel().diag(X).sum())
        approx = randomized_nystrom(system.kernel_matvec, system.n, rank, trace, generator=generator, dtype=X.dtype,
                                    device=X.device)
        self.nystrom_eigvals_ = approx.eigvals
        self.rho_ = resolve_damping(self.damping, approx, system.lam_n)
        return NystromPreconditioner(approx, self.rho_)


class CG(_FullSystemCG):
    """Plain conjugate gradient on (K + λnI) w = y (no preconditioner); same parameters as
    :class:`NystromPCG` without ``rank``/``damping``."""

    def __init__(self, kernel=None, penalty=1e-3, *, maxiter=100, tol=None, kernel_storage="auto",
                 memory_budget=None, eval_every=None, residual="float64", seed=0, dtype="float64", device=None,
                 callback=None, timeout=None, eval_train=False, metric="auto", stall_patience=50):
        self.kernel = kernel
        self.penalty = penalty
        self.maxiter = maxiter
        self.tol = tol
        self.kernel_storage = kernel_storage
        self.memory_budget = memory_budget
        self.eval_every = eval_every
        self.residual = residual
        self.seed = seed
        self.dtype = dtype
        self.device = device
        self.callback = callback
        self.timeout = timeout
        self.eval_train = eval_train
        self.metric = metric
        self.stall_patience = stall_patience

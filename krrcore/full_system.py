"""The full KRR system A = K + λnI on the training points, shared by the full-KRR solvers.

:class:`FullKernelSystem` (K stored or computed on the fly, block rows K_bn, principal blocks K_bb
and the float64 residual/objective) serves NystromPCG and CG (:mod:`krrcore.solvers.pcg`) and
ASkotch/Skotch (:mod:`krrcore.solvers.askotch`); :data:`RESIDUAL_MODES` are their common
``residual`` option's values.

Penalty convention: krrcore's ``penalty`` λ is per sample, so the ASkotch paper's λ (its Eq. 3,
(K + λI) w = y) is ``penalty * n`` here.
"""

from __future__ import annotations

import torch

from .memory import check_fits, fits, gib, scratch_budget
from .kernels import Kernel
from .linalg import residual_and_objective
from .memory import CostModel
from .ops import KernelOperator, dense_kernel, operator_bytes

KERNEL_STORAGE = ("auto", "stored", "on_the_fly")


def resolve_kernel_storage(kernel_storage: str, n: int, itemsize: int, memory_budget: int | None, device) -> str:
    """ "stored" or "on_the_fly": "auto" stores K when its n² entries fit the storage budget
    (:func:`krrcore.memory.storage_budget`: ``memory_budget`` if given, else krrcore's default)."""
    if kernel_storage not in KERNEL_STORAGE:
        raise ValueError(f"kernel_storage must be one of {KERNEL_STORAGE}, got {kernel_storage!r}")
    need = n * n * itemsize
    if kernel_storage == "stored":
        check_fits(
            need,
            "kernel_storage='stored'",
            f"the {n}×{n} kernel matrix does not fit; use kernel_storage='on_the_fly' or 'auto'",
            memory_budget,
            device,
        )
    if kernel_storage == "auto":
        return "stored" if fits(need, memory_budget, device) else "on_the_fly"
    return kernel_storage


def storage_advice(n: int, itemsize: int, memory_budget: int | None = None, device=None) -> str:
    """One sentence for a user choosing a full-KRR solver: does the n×n kernel matrix fit? (Why it
    matters, measured: docs/measurements.md.)"""
    storage = resolve_kernel_storage("auto", n, itemsize, memory_budget, device)
    size = gib(n * n * itemsize)
    if storage == "stored":
        return (
            f"K ({n:,}×{n:,}, {size}) fits in memory: NyströmPCG stores it and is usually far "
            f"faster than ASkotch here; ASkotch pays off when K cannot be stored."
        )
    return (
        f"K ({n:,}×{n:,}, {size}) does not fit the memory allowed: NyströmPCG recomputes it every "
        f"iteration (one full kernel pass each), so ASkotch, which touches one block row per step, is the fair choice."
    )


def evaluation_blocks(model: CostModel, n: int, M: int, k: int, budget: int) -> None:
    """Parts of a float64 evaluation over n rows against M columns: X in float64 (unless it is
    already) and its kernel blocks."""
    if model.itemsize != 8:
        model.hold("float64 copy of X (evaluation)", n * model.d * 8)
    model.hold(
        "float64 evaluation blocks",
        operator_bytes(n, M, itemsize=8, budget_bytes=budget, d=model.d, n_rhs=k, scratch_blocks=model.scratch_blocks),
        "scratch",
    )


def make_full_system(
    kernel: Kernel, X: torch.Tensor, lam_n: float, *, kernel_storage: str = "auto", memory_budget: int | None = None
) -> "FullKernelSystem":
    """The system K + λnI on X, a :class:`FullKernelSystem` with ``kernel_storage`` resolved here;
    ``storage`` says what was chosen (rows kept on a Dask cluster get theirs through
    :mod:`krrcore.rows`)."""
    storage = resolve_kernel_storage(kernel_storage, X.shape[0], X.element_size(), memory_budget, X.device)
    return FullKernelSystem(kernel, X, lam_n, storage=storage, memory_budget=memory_budget)


class FullKernelSystem:
    """A = K + λnI on the training points (ASkotch paper Eq. 3 with its λ = λn).

    ``storage="stored"`` keeps K (n×n); ``"on_the_fly"`` recomputes kernel blocks at each product
    within the scratch budget. ``memory_budget`` is the user's (None for krrcore's defaults,
    :mod:`krrcore.memory`): the storage decisions read it as given, ``scratch_bytes`` is what
    kernel blocks may use. Products:

    * :meth:`matvec` — (K + λnI) W (CG);
    * :meth:`rows_matvec` — K[b, :] W for an index set b: the block row K_bn in row chunks of one
      reused buffer (``KernelOperator.matvec(rows=b)``), the block gradient of Alg. 1/4, O(n|b|d);
    * :meth:`principal_block` — matrix-free access to K_bb and Tr(K_bb) (Nyström of a block);
    * :meth:`evaluate` — relative residual ‖A w − y‖/‖y‖ and dual objective
      d(w) = ½wᵀAw − yᵀw (Lemma 3.1), always in float64.

    :meth:`weigh` turns it into the weighted system W^½ K W^½ + λnI (``sample_weight``: the
    symmetric form of (W K + λnI) c = W y, with c = W^½ c̃) for :meth:`kernel_matvec`,
    :meth:`matvec`, :meth:`kernel_trace` and :meth:`evaluate`; the block products of ASkotch stay
    unweighted (ASkotch refuses sample weights).
    """

    #: √w (n×1) of the weighted system, or None.
    row_scale = None

    def weigh(self, weights: torch.Tensor) -> None:
        """Make this the weighted system W^½ K W^½ + λnI (``weights`` n×1, mean 1)."""
        self.row_scale = weights.sqrt().to(device=self.X.device)

    def __init__(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        lam_n: float,
        *,
        storage: str = "on_the_fly",
        memory_budget: int | None = None,
    ):
        self.kernel = kernel
        self.X = X
        self.n = X.shape[0]
        self.lam_n = float(lam_n)
        self.memory_budget = memory_budget
        self.scratch_bytes = scratch_budget(memory_budget, X.device)
        self.storage = storage
        self.K = dense_kernel(kernel, X, X, memory_budget=self.scratch_bytes) if storage == "stored" else None
        # Block rows K_bn on the fly; its buffer is only as tall as the largest block asked for.
        self._rows = KernelOperator(kernel, X, X, memory_budget=self.scratch_bytes) if self.K is None else None
        self._X64 = None

    @staticmethod
    def estimate(model: CostModel, n: int, k: int, *, storage: str, float64_eval: bool) -> tuple[float, float]:
        """Add the system's parts to ``model``; return (seconds of one product K W, of one float64
        evaluation). Stored K: n² entries, a product streams them; on the fly: a kernel pass each."""
        s, d, scratch, budget = model.itemsize, model.d, model.scratch_blocks, model.scratch_bytes
        if storage == "stored":
            model.hold(f"kernel matrix K ({n:,}×{n:,})", n * n * s)
            product = model.stream_seconds(n * n * s) + model.flop_seconds(2 * n * n * k)
            model.setup += model.entry_seconds(n * n)
        else:
            model.hold(
                "kernel block buffer",
                operator_bytes(n, n, itemsize=s, budget_bytes=budget, d=d, n_rhs=k, scratch_blocks=scratch),
                "scratch",
            )
            product = model.entry_seconds(n * n)
        evaluation = 0.0
        if float64_eval:
            if storage == "stored" and s == 8:
                evaluation = product
            else:
                evaluation_blocks(model, n, n, k, budget)
                evaluation = model.entry_seconds(n * n, torch.float64)
        return product, evaluation

    # -- products in the solver's dtype ----------------------------------------------------
    def kernel_trace(self) -> float:
        """Tr K = Σ K(x_i, x_i) (weighted: Σ wᵢ K(x_i, x_i))."""
        diag = self.kernel.diag(self.X)
        if self.row_scale is not None:
            diag = diag * self.row_scale[:, 0].to(diag.dtype) ** 2
        return float(diag.sum())

    def kernel_matvec(self, W: torch.Tensor) -> torch.Tensor:
        """K W for W of shape (n, k) (weighted: W^½ K W^½ W)."""
        scale = None if self.row_scale is None else self.row_scale.to(W.dtype)
        if scale is not None:
            W = W * scale
        if self.K is not None:
            out = self.K @ W
        else:
            out = KernelOperator(
                self.kernel, self.X, self.X, memory_budget=self.scratch_bytes, n_rhs=W.shape[1]
            ).matvec(W)
        return out if scale is None else out.mul_(scale)

    def matvec(self, W: torch.Tensor) -> torch.Tensor:
        """(K + λnI) W for W of shape (n, k)."""
        return self.kernel_matvec(W).add_(W, alpha=self.lam_n)

    def rows_matvec(self, idx: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """K[idx, :] W (|idx|×k): the block row K_bn times W, never more than one chunk of it held."""
        if self.K is not None:
            return self.K.index_select(0, idx) @ W
        return self._rows.matvec(W, rows=idx)

    def principal_block(self, idx: torch.Tensor):
        """(apply, trace): apply(V) = K_bb V for the principal block on ``idx``, and Tr(K_bb).

        K_bb is held densely when it fits the memory budget, else applied in blocks on the fly.
        """
        Xb = self.X[idx]
        trace = float(self.kernel.diag(Xb).sum())
        b = idx.numel()
        if self.K is not None:
            Kbb = self.K[idx][:, idx]
        elif b * b * self.X.element_size() * (1 + self.kernel.scratch_blocks) <= self.scratch_bytes:
            Kbb = self.kernel(Xb, Xb)
        else:
            op = KernelOperator(self.kernel, Xb, Xb, memory_budget=self.scratch_bytes)
            return op.matvec, trace
        return (lambda V: Kbb @ V), trace

    # -- float64 evaluation ----------------------------------------------------------------
    def evaluate(self, W: torch.Tensor, Y64: torch.Tensor) -> tuple[float, float]:
        """(‖(K+λnI)W − Y‖_F / ‖Y‖_F, ½⟨W, (K+λnI)W⟩ − ⟨Y, W⟩) computed in float64.

        Float32 residuals mislead (field notes: 1.8e-3 in float32 vs 9.4e-4 in float64 for the
        same PCG iterate), so the kernel is recomputed in float64 unless a float64 K is stored.
        """
        W64 = W.to(torch.float64)
        scale = None if self.row_scale is None else self.row_scale.to(torch.float64)
        V64 = W64 if scale is None else W64 * scale
        if self.K is not None and self.K.dtype == torch.float64:
            AW = self.K @ V64
        else:
            if self._X64 is None:
                self._X64 = self.X.to(torch.float64)
            AW = KernelOperator(
                self.kernel, self._X64, self._X64, memory_budget=self.scratch_bytes, n_rhs=W.shape[1]
            ).matvec(V64)
        if scale is not None:
            AW.mul_(scale)
        return residual_and_objective(AW.add_(W64, alpha=self.lam_n), W64, Y64)


#: ``residual``: "float64" (exact, O(n²d) per record, timed as evaluation) or "estimate" (free).
RESIDUAL_MODES = ("float64", "estimate")

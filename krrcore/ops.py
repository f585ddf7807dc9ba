"""Blocked kernel products under a memory budget; K_nM is never held whole.

:class:`KernelOperator` owns the data X (n×d), the centres C (M×d), a kernel and one reusable
block buffer of ``block_rows × M`` entries. Each product walks X in row blocks, computes each
kernel block once into the buffer and accumulates:

* ``matvec(v)``      = K_nM v                 (n×k); ``matvec(v, rows=b)`` = K_bM v, rows b only
* ``rmatvec(u)``     = K_nMᵀ u                (M×k)
* ``fused(v, w)``    = K_nMᵀ (K_nM v + w)     (M×k) — FALKON's per-iteration product (Alg. 1)
* ``gram()``         = K_nMᵀ K_nM             (M×M) — for the direct Nyström solve and diagnostics

``rmatvec``, ``fused`` and ``gram`` take an optional ``weights`` (n×1, or n×k: one column per
right-hand side), the diagonal of W in K_nMᵀ W u, K_nMᵀ W (K_nM v + w) and K_nMᵀ W K_nM: weighted
KRR (``sample_weight``) and each Newton step of the logistic loss (its Hessian weights), applied to
each block as it passes, never as a copy of the product.
* ``blocks(rows=b)`` — the row blocks themselves, for a caller whose per-block arithmetic is its
  own (SketchySAGA's gradient-table update needs K_BM w and K_BMᵀ(·) from one block).

:func:`dense_kernel` materialises K(A, B) in row blocks when the whole matrix is wanted. Solvers
build their operator through :mod:`krrcore.rows`, which gives rows kept on a Dask cluster an
operator with the same products.
"""

from __future__ import annotations

import torch

from . import fused as _fused
from ._validation import as_tensor, check_int
from .memory import scratch_budget
from .kernels import Kernel, Prepared

#: Part of the budget left to BLAS packing buffers and allocator slack: 10%, at least 4 MiB
#: (measured here: 2–4 MiB per pass beyond our own buffers), never more than half the budget.
WORKSPACE_RESERVE_FRACTION = 0.10
WORKSPACE_RESERVE_MIN = 4 << 20
#: Largest row block on a GPU: every element-wise pass streams device memory whatever the size,
#: so taller blocks only save kernel launches.
MAX_BLOCK_ROWS = 16384
#: CPU: a kernel block of about this many bytes stays in the last-level cache from its distance
#: GEMM through exp to both mat-vecs of a fused product, which then read it from cache, not from
#: memory (``python -m benchmarks.bench_kernel_ops --rows``).
CPU_BLOCK_BYTES = 4 << 20
#: Fewest rows of a cache-sized CPU block (below it the per-block Python overhead shows).
MIN_BLOCK_ROWS = 64


def preferred_block_rows(M: int, itemsize: int, device=None) -> int:
    """The row-block size a device runs best at when memory allows: on a CPU a cache-sized block
    (:data:`CPU_BLOCK_BYTES`), on a GPU :data:`MAX_BLOCK_ROWS`."""
    if device is not None and torch.device(device).type != "cpu":
        return MAX_BLOCK_ROWS
    return min(MAX_BLOCK_ROWS, max(MIN_BLOCK_ROWS, CPU_BLOCK_BYTES // (max(M, 1) * itemsize)))


def block_rows_for_budget(
    n: int,
    M: int,
    *,
    itemsize: int,
    budget_bytes: int,
    d: int = 0,
    n_rhs: int = 1,
    scratch_blocks: int = 0,
    min_rows: int = 1,
    max_rows: int = MAX_BLOCK_ROWS,
) -> int:
    """Largest row-block size whose working set fits ``budget_bytes``, at most ``max_rows`` (the
    kernel products pass :func:`preferred_block_rows`).

    Per block row the product holds one kernel row (M entries), ``scratch_blocks`` more if the
    kernel allocates scratch (L1 distances), the row's prepared features and their square (2d + 1) and an
    n_rhs-wide intermediate (K v + w). Raises ``ValueError`` if not even ``min_rows`` rows fit.
    """
    per_row = itemsize * ((1 + scratch_blocks) * M + 2 * d + 1 + 2 * n_rhs)
    reserve = min(budget_bytes / 2, max(WORKSPACE_RESERVE_FRACTION * budget_bytes, WORKSPACE_RESERVE_MIN))
    rows = int((budget_bytes - reserve) // per_row)
    if rows < min_rows:
        raise ValueError(
            f"memory_budget of {budget_bytes / 2**20:.1f} MiB is too small for one kernel row "
            f"against M={M} centres ({per_row / 2**20:.3f} MiB per row): raise memory_budget or lower M"
        )
    return max(min_rows, min(rows, n, max_rows))


def prepare_checked(kernel: Kernel, X: torch.Tensor, what: str = "X") -> Prepared:
    """``kernel.prepare(X)``, refusing rows whose squared norms overflow (values near 1e154 in
    float64, 1e19 in float32, after the kernel's scaling): the kernel would turn them into NaN."""
    prepared = kernel.prepare(X)
    norms = prepared.sq_norms
    if norms is not None and not bool(torch.isfinite(norms).all()):
        _refuse_overflow(kernel, X, what)
    return prepared


def _refuse_overflow(kernel: Kernel, X: torch.Tensor, what: str):
    largest = float(X.abs().max())
    raise ValueError(
        f"{what} has values up to {largest:.3g}: their squared distances overflow "
        f"{str(X.dtype).removeprefix('torch.')} in the {type(kernel).__name__}; standardise the "
        f"features (or use a larger sigma)"
    )


def check_rows(kernel: Kernel, X: torch.Tensor, what: str = "X", chunk: int = 1 << 16) -> None:
    """:func:`prepare_checked`'s refusal for all of X in one O(n·d) pass with a single device
    synchronisation, so that blocked products prepare their blocks unchecked (on a GPU a check per
    block would stall the queue once per block)."""
    bad = torch.zeros((), dtype=torch.bool, device=X.device)
    for start in range(0, X.shape[0], chunk):
        norms = kernel.prepare(X[start : start + chunk]).sq_norms
        if norms is None:
            return
        bad |= ~torch.isfinite(norms).all()
    if bool(bad):
        _refuse_overflow(kernel, X, what)


def operator_bytes(
    n: int,
    M: int,
    *,
    itemsize: int,
    budget_bytes: int,
    d: int = 0,
    n_rhs: int = 1,
    scratch_blocks: int = 0,
    device=None,
) -> int:
    """Peak extra bytes of one blocked product over n rows against M columns (its block buffer
    and per-block intermediates), as :class:`KernelOperator` will size it: for estimates made
    before anything is allocated."""
    rows = block_rows_for_budget(
        n,
        M,
        itemsize=itemsize,
        budget_bytes=budget_bytes,
        d=d,
        n_rhs=n_rhs,
        scratch_blocks=scratch_blocks,
        max_rows=preferred_block_rows(M, itemsize, device),
    )
    return rows * itemsize * ((1 + scratch_blocks) * M + 2 * d + 1 + 2 * n_rhs)


class KernelOperator:
    """Blocked products with K_nM = kernel(X, C) under ``memory_budget`` bytes of extra memory.

    The budget bounds the block buffer and the per-block intermediates (prepared features, K v);
    it excludes X, C and the outputs, which the caller owns. ``block_rows`` may be given to override the solved size.
    On CUDA with triton, ``matvec``, ``rmatvec`` and ``fused`` run :mod:`krrcore.fused`'s products
    for the kernels it covers (``fused=False``: the blocked ones everywhere).

    ``cache_bytes``: the first row blocks of K_nM that fit in this many bytes are kept when a
    whole-matrix walk first computes them, and every later walk reads them instead of evaluating
    the kernel again (FALKON's CG touches all of K_nM every iteration: a cached block then costs
    memory traffic, not distances and exponentials). ``cached_rows`` says how many rows are held.
    """

    def __init__(
        self,
        kernel: Kernel,
        X: torch.Tensor,
        C: torch.Tensor,
        *,
        memory_budget: int | None = None,
        block_rows: int | None = None,
        n_rhs: int = 1,
        accumulate_dtype: torch.dtype | None = None,
        cache_bytes: int = 0,
        fused: bool = True,
    ):
        if X.shape[1] != C.shape[1]:
            raise ValueError(f"X and centres have mismatched shapes: {X.shape[1]} vs {C.shape[1]} features")
        self.kernel = kernel
        self.n, self.M = X.shape[0], C.shape[0]
        self.dtype, self.device = X.dtype, X.device
        if C.dtype != self.dtype or C.device != X.device:
            C = C.to(dtype=self.dtype, device=X.device)
        itemsize = C.element_size()
        # K_nMᵀ(·) sums n terms: float32 blocks may accumulate across blocks in float64 (FALKON float32).
        self.accumulate_dtype = accumulate_dtype or self.dtype
        self.memory_budget = scratch_budget(memory_budget, X.device)
        if block_rows is None:
            block_rows = block_rows_for_budget(
                self.n,
                self.M,
                itemsize=itemsize,
                budget_bytes=self.memory_budget,
                d=X.shape[1],
                n_rhs=n_rhs,
                scratch_blocks=kernel.scratch_blocks,
                max_rows=preferred_block_rows(self.M, itemsize, X.device),
            )
        self.block_rows = min(check_int(block_rows, "block_rows"), self.n)
        # X is prepared block by block (O(block·d) extra), the centres once; X's rows are checked once.
        check_rows(kernel, X)
        self._X = X
        self._C = prepare_checked(kernel, C, "the centres")
        #: Bytes of the block buffer at its largest (the dominant term of the budget), for reports.
        self.buffer_bytes = self.block_rows * self.M * itemsize
        # Allocated on first use and only as tall as the rows walked need: a product over a few
        # rows (an ASkotch block, a SAGA batch) holds |rows| × M, not block_rows × M.
        self._buffer = None
        self._promoted = None  # blocks promoted to a product dtype (fused(dtype=))
        self._cache: list[torch.Tensor] = []
        self._cache_room = max(int(cache_bytes), 0)
        self.cached_rows = 0  # rows of K_nM held in the cache
        # On CUDA with triton the whole-matrix products run fused (krrcore.fused: K tiles stay on
        # chip, a pass is bound by arithmetic, not memory), and no rows of K_nM are kept;
        # ``fused=False`` keeps the blocked walk (the reference, and the benchmarks' blocked pass).
        self._fused = _fused.for_operator(kernel, X, C) if fused else None
        if self._fused is not None:
            self._cache_room = 0

    def cached_matrix(self) -> torch.Tensor | None:
        """K_nM as one tensor when the cache holds every row (a copy where it holds several
        blocks), else None."""
        if self.cached_rows < self.n or not self._cache:
            return None
        return self._cache[0] if len(self._cache) == 1 else torch.cat(self._cache)

    def _block_buffer(self, rows: int) -> torch.Tensor:
        rows = min(rows, self.block_rows)
        if self._buffer is None or self._buffer.shape[0] < rows:
            self._buffer = torch.empty(rows, self.M, dtype=self.dtype, device=self.device)
        return self._buffer

    def blocks(self, rows: torch.Tensor | None = None):
        """Yield (start, stop, K_block) over the rows of X, or over X[rows] for an index tensor ``rows``.

        K_block (at most ``block_rows`` × M) is a view of the shared buffer: it is overwritten at the
        next step, so use it before advancing. ``start:stop`` index the walked rows (``rows`` if given).
        """
        count = self.n if rows is None else rows.numel()
        start = 0
        if rows is None:  # the cached prefix of K_nM first
            for K in self._cache:
                yield start, start + K.shape[0], K
                start += K.shape[0]
        if start == count:  # every row cached: no buffer needed
            return
        buffer = self._block_buffer(count - start)
        row_bytes = self.M * buffer.element_size()
        while start < count:
            stop = min(start + buffer.shape[0], count)
            X = self._X[start:stop] if rows is None else self._X[rows[start:stop]]
            keep = min(stop - start, self._cache_room // row_bytes) if rows is None and start == self.cached_rows else 0
            if keep == stop - start:  # a block to keep is evaluated into its own storage
                out = torch.empty(keep, self.M, dtype=self.dtype, device=self.device)
            else:
                out = buffer[: stop - start]
            K = self.kernel.block(self.kernel.prepare(X), self._C, out=out)
            if keep > 0:
                self._cache.append(K if keep == stop - start else K[:keep].clone())
                self._cache_room -= keep * row_bytes
                self.cached_rows += keep
            yield start, stop, K
            start = stop
        if rows is None and self.cached_rows == self.n:
            self._buffer = None  # the cache holds K whole: later walks read it alone

    def _as_rhs(self, v: torch.Tensor, rows: int, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        v = v.to(dtype=dtype or self.dtype, device=self.device)
        v = v[:, None] if v.ndim == 1 else v
        if v.shape[0] != rows:
            raise ValueError(f"{name} has {v.shape[0]} rows, expected {rows}")
        return v

    def matvec(self, v: torch.Tensor, *, rows: torch.Tensor | None = None) -> torch.Tensor:
        """K_nM v for v of shape (M,) or (M, k); with an index tensor ``rows``, K_nM[rows] v only
        (the block row K_bn of ASkotch's block gradient, O(|rows|·M·d) flops)."""
        if self._fused is not None:
            return self._fused.matvec(self._X if rows is None else self._X[rows], v)
        squeeze = v.ndim == 1
        v = self._as_rhs(v, self.M, "v")
        out = torch.empty(self.n if rows is None else rows.numel(), v.shape[1], dtype=self.dtype, device=self.device)
        for start, stop, K in self.blocks(rows):
            torch.mm(K, v, out=out[start:stop])
        return out[:, 0] if squeeze else out

    def rmatvec(self, u: torch.Tensor, *, weights: torch.Tensor | None = None) -> torch.Tensor:
        """K_nMᵀ u for u of shape (n,) or (n, k); with ``weights`` (module docstring) K_nMᵀ W u."""
        if self._fused is not None:
            if weights is not None:
                u = u * (weights.reshape(-1) if u.ndim == 1 else weights.reshape(-1, 1)).to(u.dtype)
            return self._fused.rmatvec(self._X, u, self.accumulate_dtype)
        squeeze = u.ndim == 1
        u = self._as_rhs(u, self.n, "u")
        if weights is not None:
            u = u * self._as_rhs(weights, self.n, "weights")
        out = torch.zeros(self.M, u.shape[1], dtype=self.accumulate_dtype, device=self.device)
        for start, stop, K in self.blocks():
            self._accumulate(out, K, u[start:stop])
        return out[:, 0] if squeeze else out

    def _accumulate(self, out: torch.Tensor, K: torch.Tensor, u: torch.Tensor) -> None:
        """out += Kᵀu, in place when the dtypes agree, else through one small M×k product."""
        if out.dtype == K.dtype:
            out.addmm_(K.T, u)
        else:
            out.add_(K.T @ u)

    def _promote(self, K: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """K's values in ``dtype``, in a reused buffer of K's size (a block is promoted, never K_nM).
        torch's converting copy, on torch's threads: FALKON's float32 refinement product over
        50,000 × 2,000 cached float32 blocks took 0.044 s with it against 0.070 s with numpy's
        single-threaded copy, and 0.098 s against 0.69 s with one core busy
        (``python -m benchmarks.bench_kernel_ops --promoted``)."""
        if self._promoted is None or self._promoted.dtype != dtype or self._promoted.shape[0] < K.shape[0]:
            self._promoted = torch.empty(self.block_rows, self.M, dtype=dtype, device=self.device)
        return self._promoted[: K.shape[0]].copy_(K)

    def fused(
        self,
        v: torch.Tensor | None,
        w: torch.Tensor | None = None,
        *,
        dtype: torch.dtype | None = None,
        weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """K_nMᵀ (K_nM v + w), each kernel block computed once (FALKON Alg. 1, KnM_times_vector);
        with ``weights`` K_nMᵀ W (K_nM v + w), W = diag(weights) applied to each block's K v + w.

        ``v`` (M×k) or ``w`` (n×k) may be None, meaning zero. ``dtype``: the products' dtype when it
        is not the blocks' (float64 over float32 blocks: the residual of FALKON's refinement). Each
        block, cached or just evaluated, is promoted as it is used, so the product is exact
        arithmetic on the same kernel values the lower-precision products use, and no kernel entry
        is evaluated again.
        """
        if v is None and w is None:
            raise ValueError("fused needs v or w")
        if self._fused is not None and dtype in (None, self.dtype):
            return self._fused.pair(self._X, v, w, self.accumulate_dtype, weights=weights)
        ref = v if v is not None else w
        squeeze = ref.ndim == 1
        work = dtype or self.dtype
        v = None if v is None else self._as_rhs(v, self.M, "v", work)
        w = None if w is None else self._as_rhs(w, self.n, "w", work)
        k = (v if v is not None else w).shape[1]
        # Transposed (k×M) right-hand sides: MKL ran K v and Kᵀt with k = 2 columns 3-4x slower than
        # one column, and vᵀKᵀ, tᵀK as fast as one (a 262 × 2,000 float64 block on 2 threads).
        vT = None if v is None else v.T.contiguous()
        weightsT = None if weights is None else self._as_rhs(weights, self.n, "weights", work).T
        outT = torch.zeros(k, self.M, dtype=torch.promote_types(self.accumulate_dtype, work), device=self.device)
        for start, stop, K in self.blocks():
            if K.dtype != work:
                K = self._promote(K, work)
            if vT is None:
                tmpT = w[start:stop].T
            elif w is None:
                tmpT = vT @ K.T
            else:
                tmpT = torch.addmm(w[start:stop].T, vT, K.T)
            if weightsT is not None:
                tmpT = tmpT * weightsT[:, start:stop]
            if outT.dtype == K.dtype:
                outT.addmm_(tmpT, K)
            else:
                outT.add_(tmpT @ K)
        return outT[0] if squeeze else outT.T.contiguous()

    def gram(self, u: torch.Tensor | None = None, *, weights: torch.Tensor | None = None):
        """K_nMᵀ K_nM (M×M), accumulated block by block; with ``u`` (n×k) also K_nMᵀ u from the
        same kernel blocks, returned as a pair — the direct Nyström solve needs both, and the
        kernel evaluation, not the products, dominates a pass. With ``weights`` (n×1) K_nMᵀ W K_nM
        and K_nMᵀ W u (one weighted copy of a block at a time)."""
        out = torch.zeros(self.M, self.M, dtype=self.dtype, device=self.device)
        rhs = None if u is None else self._as_rhs(u, self.n, "u")
        omega = None if weights is None else self._as_rhs(weights, self.n, "weights")
        if omega is not None and omega.shape[1] != 1:
            raise ValueError(f"gram takes one weight column, got {omega.shape[1]}")
        if omega is not None and rhs is not None:
            rhs = rhs * omega
        proj = None if rhs is None else torch.zeros(self.M, rhs.shape[1], dtype=self.dtype, device=self.device)
        for start, stop, K in self.blocks():
            out.addmm_(K.T, K if omega is None else K * omega[start:stop])
            if proj is not None:
                proj.addmm_(K.T, rhs[start:stop])
        return out if proj is None else (out, proj)


def dense_kernel(kernel: Kernel, A: torch.Tensor, B: torch.Tensor, *, memory_budget: int | None = None) -> torch.Tensor:
    """K(A, B) as one dense matrix, filled in row blocks so kernel scratch stays within the budget."""
    out = torch.empty(A.shape[0], B.shape[0], dtype=A.dtype, device=A.device)
    budget = scratch_budget(memory_budget, A.device)
    rows = block_rows_for_budget(
        A.shape[0],
        B.shape[0],
        itemsize=A.element_size(),
        budget_bytes=budget,
        scratch_blocks=kernel.scratch_blocks,
        max_rows=preferred_block_rows(B.shape[0], A.element_size(), A.device),
    )
    PA, PB = prepare_checked(kernel, A), prepare_checked(kernel, B)
    for start in range(0, A.shape[0], rows):
        stop = min(start + rows, A.shape[0])
        kernel.block(PA.rows(start, stop), PB, out=out[start:stop])
    return out


def kernel_matvec(kernel: Kernel, X, C, v, *, memory_budget: int | None = None) -> torch.Tensor:
    """K(X, C) v without holding K(X, C): a one-off :meth:`KernelOperator.matvec`."""
    X = as_tensor(X, "X")
    C = as_tensor(C, "C", dtype=X.dtype, device=X.device)
    return KernelOperator(kernel, X, C, memory_budget=memory_budget).matvec(torch.as_tensor(v))

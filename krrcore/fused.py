"""Fused kernel products on a GPU with Triton: K_nM v, K_nMᵀ u and K_nMᵀ(K_nM v + w) computed tile
by tile in on-chip memory, never writing a block of K_nM to the card's memory.

The blocked products of :mod:`krrcore.ops` evaluate each row block of K_nM into a buffer in device
memory and read it back for each mat-vec: on a GPU a pass is then bound by memory traffic, not by
arithmetic. Here each Triton program evaluates a BLOCK_N × BLOCK_M tile of K (the distance GEMM over
d in BLOCK_D chunks, then the kernel's element-wise function) in registers and multiplies it into
its accumulator at once — the way the public FALKON library's KeOps products work (Meanti et al.,
"Kernel methods through the roof", NeurIPS 2020, Sec. 3).

* ``matvec``  = K_nM v (+ w): one program per row tile, walking the centres.
* ``rmatvec`` = K_nMᵀ u: one program per (centre tile, split of the rows), each summing its split's
  row tiles; the splits' partial sums (S × M × k, small) are added afterwards in the accumulation
  dtype. No atomics: the sum is deterministic, and float32 data can accumulate in float64 as the
  blocked float32 FALKON does.
* ``pair``    = K_nMᵀ(K_nM v + w), FALKON's per-iteration product (Alg. 1): two launches, the first
  writing t = K_nM v + w (n × k, as large as a mat-vec's output), the second K_nMᵀ t. t needs every
  centre of a row before Kᵀt can start, so one pass must either hold a whole row tile of K on chip
  (BLOCK_N × M: 1.3 MB at M = 5,000, beyond a GPU's shared memory) or evaluate each tile twice; a
  single launch evaluating twice and adding Kᵀt with atomics costs the same arithmetic, so the two
  launches keep the deterministic, contention-free column sum instead. Either way K is evaluated
  twice per pair: arithmetic is what a GPU has plenty of, memory traffic is what the blocked path
  lacked.

Covered: the Gaussian, the Laplacian (p = 2 and p = 1) and the Matérn (ν = 1/2, 3/2, 5/2) kernels, σ
scalar or per feature, float32 and float64. float32 GEMMs run in IEEE float32 (``input_precision
= "ieee"``), not TF32, whose 10-bit mantissa would wreck the expanded-form distances. Rows are
shifted by the centres' mean before scaling (distances do not change; the expanded form
‖a‖² + ‖b‖² − 2aᵀb then cancels less).

Triton is optional: without it (or off CUDA) :func:`for_operator` returns None and the blocked
path runs. With ``TRITON_INTERPRET=1`` set before triton is first imported, the same kernels run
on CPU tensors through Triton's interpreter (slowly): that is how the tests check them without a
card (tests/core/test_fused_kernels.py).
"""

from __future__ import annotations

import os

import torch

from .kernels import GaussianKernel, Kernel, LaplacianKernel, MaternKernel

try:  # optional: torch's CUDA wheels ship triton; the CPU wheel does not
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised where triton is absent
    triton = None

#: Kernel codes the Triton programs branch on (a compile-time constant each).
GAUSSIAN, LAPLACE_L2, LAPLACE_L1, MATERN12, MATERN32, MATERN52 = range(6)


def interpreted() -> bool:
    """Whether Triton runs kernels through its CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def available(device) -> bool:
    """Whether fused products can run on ``device``: triton importable and a CUDA device, or any
    device under Triton's interpreter."""
    if triton is None:
        return False
    return torch.device(device).type == "cuda" or interpreted()


def kernel_code(kernel: Kernel) -> int | None:
    """The Triton program's code for ``kernel``, or None for a kernel the fused path does not cover."""
    if type(kernel) is GaussianKernel:
        return GAUSSIAN
    if type(kernel) is LaplacianKernel:
        return LAPLACE_L2 if kernel.p == 2 else LAPLACE_L1
    if type(kernel) is MaternKernel:
        return {0.5: MATERN12, 1.5: MATERN32, 2.5: MATERN52}[kernel.nu]
    return None


if triton is not None:

    @triton.jit
    def _scaled_chunk(X, idx, ok, stride, offs, d_ok, shift_chunk, inv_chunk):
        """Rows ``idx`` of X at feature columns ``offs``, centred and scaled ((x − shift)·inv): the one
        load both tile forms (GEMM and L1) share. Masked entries load as 0 (a feature past ``d`` has
        inv = 0, so it adds nothing; rows past the end are masked out of the tile by its caller)."""
        rows = tl.load(X + idx[:, None] * stride + offs[None, :], mask=ok[:, None] & d_ok[None, :], other=0.0)
        return (rows - shift_chunk[None, :]) * inv_chunk[None, :]

    @triton.jit
    def _tile(
        A,
        a_idx,
        n_a,
        stride_a,
        B,
        b_idx,
        n_b,
        stride_b,
        shift,
        inv,
        d,
        floor,
        KIND: tl.constexpr,
        BLOCK_A: tl.constexpr,
        BLOCK_B: tl.constexpr,
        BLOCK_D: tl.constexpr,
    ):
        """K(A[a_idx], B[b_idx]) as a BLOCK_A × BLOCK_B tile, zero outside the rows; the features
        are (x − shift)·inv, i.e. centred and divided by σ as :meth:`Kernel.prepare` scales them."""
        a_ok = a_idx < n_a
        b_ok = b_idx < n_b
        if KIND == 2:  # LAPLACE_L1: no GEMM form, |a − b| summed over feature chunks
            acc = tl.zeros((BLOCK_A, BLOCK_B), dtype=A.dtype.element_ty)
            for k0 in range(0, d, BLOCK_D):
                offs = k0 + tl.arange(0, BLOCK_D)
                d_ok = offs < d
                s = tl.load(inv + offs, mask=d_ok, other=0.0)
                m = tl.load(shift + offs, mask=d_ok, other=0.0)
                a = _scaled_chunk(A, a_idx, a_ok, stride_a, offs, d_ok, m, s)
                b = _scaled_chunk(B, b_idx, b_ok, stride_b, offs, d_ok, m, s)
                acc += tl.sum(tl.abs(a[:, None, :] - b[None, :, :]), axis=2)
            K = tl.exp(-acc)
        else:
            dot = tl.zeros((BLOCK_A, BLOCK_B), dtype=A.dtype.element_ty)
            an = tl.zeros((BLOCK_A,), dtype=A.dtype.element_ty)
            bn = tl.zeros((BLOCK_B,), dtype=A.dtype.element_ty)
            for k0 in range(0, d, BLOCK_D):
                offs = k0 + tl.arange(0, BLOCK_D)
                d_ok = offs < d
                s = tl.load(inv + offs, mask=d_ok, other=0.0)
                m = tl.load(shift + offs, mask=d_ok, other=0.0)
                a = _scaled_chunk(A, a_idx, a_ok, stride_a, offs, d_ok, m, s)
                b = _scaled_chunk(B, b_idx, b_ok, stride_b, offs, d_ok, m, s)
                dot += tl.dot(a, tl.trans(b), input_precision="ieee")
                an += tl.sum(a * a, axis=1)
                bn += tl.sum(b * b, axis=1)
            sq = tl.maximum(an[:, None] + bn[None, :] - 2.0 * dot, 0.0)
            if KIND == 0:
                K = tl.exp(-0.5 * sq)
            else:
                # Squared distances within round-off of 0 are 0 (as krrcore.kernels.dist_into).
                r = tl.sqrt(tl.where(sq > floor, sq, 0.0))
                if KIND == 4:
                    r = r * 1.7320508075688772
                    K = tl.exp(-r) * (1.0 + r)
                elif KIND == 5:
                    r = r * 2.23606797749979
                    K = tl.exp(-r) * (1.0 + r + r * r / 3.0)
                else:
                    K = tl.exp(-r)
        return tl.where(a_ok[:, None] & b_ok[None, :], K, 0.0)

    @triton.jit
    def _rows_kernel(
        X,
        C,
        V,
        W,
        OUT,
        shift,
        inv,
        n,
        M,
        d,
        k,
        floor,
        stride_x,
        stride_c,
        stride_v,
        stride_w,
        stride_o,
        KIND: tl.constexpr,
        HAS_W: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_D: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        """OUT[rows] = K(X[rows], C) V (+ W[rows]) for one tile of rows."""
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        k_ok = ks < k
        acc = tl.zeros((BLOCK_N, BLOCK_K), dtype=X.dtype.element_ty)
        for m0 in range(0, M, BLOCK_M):
            cols = m0 + tl.arange(0, BLOCK_M)
            K = _tile(X, rows, n, stride_x, C, cols, M, stride_c, shift, inv, d, floor, KIND, BLOCK_N, BLOCK_M, BLOCK_D)
            v = tl.load(V + cols[:, None] * stride_v + ks[None, :], mask=(cols < M)[:, None] & k_ok[None, :], other=0.0)
            acc += tl.dot(K, v, input_precision="ieee")
        mask = (rows < n)[:, None] & k_ok[None, :]
        if HAS_W:
            acc += tl.load(W + rows[:, None] * stride_w + ks[None, :], mask=mask, other=0.0)
        tl.store(OUT + rows[:, None] * stride_o + ks[None, :], acc, mask=mask)

    @triton.jit
    def _cols_kernel(
        X,
        C,
        U,
        PART,
        shift,
        inv,
        n,
        M,
        d,
        k,
        floor,
        rows_per_split,
        stride_x,
        stride_c,
        stride_u,
        KIND: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_D: tl.constexpr,
        BLOCK_K: tl.constexpr,
    ):
        """PART[s, cols] = Σ over split s's rows of K(X[rows], C[cols])ᵀ U[rows]."""
        cols = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        split = tl.program_id(1)
        ks = tl.arange(0, BLOCK_K)
        k_ok = ks < k
        acc = tl.zeros((BLOCK_M, BLOCK_K), dtype=PART.dtype.element_ty)
        start = split * rows_per_split
        stop = tl.minimum(start + rows_per_split, n)
        for r0 in range(start, stop, BLOCK_N):
            rows = r0 + tl.arange(0, BLOCK_N)
            Kt = _tile(
                C, cols, M, stride_c, X, rows, stop, stride_x, shift, inv, d, floor, KIND, BLOCK_M, BLOCK_N, BLOCK_D
            )
            u = tl.load(
                U + rows[:, None] * stride_u + ks[None, :], mask=(rows < stop)[:, None] & k_ok[None, :], other=0.0
            )
            acc += tl.dot(Kt, u, input_precision="ieee").to(PART.dtype.element_ty)
        tl.store(PART + split * M * k + cols[:, None] * k + ks[None, :], acc, mask=(cols < M)[:, None] & k_ok[None, :])


def _blocks(dtype: torch.dtype, code: int) -> tuple[int, int, int]:
    """(BLOCK_N, BLOCK_M, BLOCK_D): 64 × 64 tiles of float32 (32 × 32 of float64, whose registers
    are twice as wide); the L1 kernel's 3-D difference tile takes 4 features at a time. Not yet
    tuned on a card (``python -m benchmarks --case gpu`` times them)."""
    if interpreted():  # the interpreter's cost is per program and operation: fewer, larger tiles
        return 64, 64, (4 if code == LAPLACE_L1 else 16)
    wide = dtype == torch.float64
    n_m = 32 if wide or code == LAPLACE_L1 else 64
    return n_m, n_m, (4 if code == LAPLACE_L1 else 16 if wide else 32)


class FusedKernel:
    """Fused products against the centres ``C`` for the rows of any X on the same device.

    ``max_sq_norm``: the largest ‖(x − shift)/σ‖² over the rows the products will see, for the
    Euclidean kernels' round-off floor (:func:`krrcore.kernels.dist_into`).
    """

    def __init__(self, kernel: Kernel, C: torch.Tensor, *, rows: torch.Tensor | None = None):
        code = kernel_code(kernel)
        if code is None:
            raise ValueError(f"the fused product does not cover the {type(kernel).__name__}")
        if triton is None:
            raise ValueError("the fused product needs triton (pip install triton)")
        self.code = code
        self.C = C.contiguous()
        self.dtype, self.device = C.dtype, C.device
        d = C.shape[1]
        sigma = kernel.sigma
        inv = torch.full((d,), 1.0 / sigma, dtype=torch.float64) if isinstance(sigma, float) else 1.0 / sigma
        if inv.numel() != d:
            raise ValueError(f"sigma has {inv.numel()} per-feature lengths but the centres have {d} features")
        self.inv = inv.to(dtype=self.dtype, device=self.device)
        self.shift = C.double().mean(0).to(self.dtype) if C.shape[0] else torch.zeros(d, dtype=self.dtype)
        self.shift = self.shift.to(self.device)
        self._max_c = self._max_sq_norm(self.C)
        self._max_x = self._max_sq_norm(rows) if rows is not None else self._max_c
        self.block_n, self.block_m, self.block_d = _blocks(self.dtype, code)

    def _max_sq_norm(self, X: torch.Tensor, chunk: int = 1 << 16) -> float:
        best = 0.0
        for start in range(0, X.shape[0], chunk):
            Z = (X[start : start + chunk] - self.shift) * self.inv
            best = max(best, float((Z * Z).sum(1).max()))
        return best

    def _floor(self) -> float:
        return 8 * torch.finfo(self.dtype).eps * (self._max_x + self._max_c)

    def _rhs(self, v: torch.Tensor, rows: int, name: str) -> torch.Tensor:
        v = v.to(dtype=self.dtype, device=self.device)
        v = v[:, None] if v.ndim == 1 else v
        if v.shape[0] != rows:
            raise ValueError(f"{name} has {v.shape[0]} rows, expected {rows}")
        return v.contiguous()

    def _check(self, X: torch.Tensor) -> torch.Tensor:
        if X.shape[1] != self.C.shape[1]:
            raise ValueError(f"X and centres have mismatched shapes: {X.shape[1]} vs {self.C.shape[1]} features")
        return X.to(dtype=self.dtype, device=self.device).contiguous()

    @staticmethod
    def _width(k: int) -> int:
        return max(16, triton.next_power_of_2(k))  # tl.dot needs every dimension ≥ 16

    def matvec(self, X: torch.Tensor, v: torch.Tensor, w: torch.Tensor | None = None) -> torch.Tensor:
        """K(X, C) v (+ w) for v of shape (M,) or (M, k) (and w of shape (n,) or (n, k))."""
        squeeze = v.ndim == 1
        X = self._check(X)
        n, M, d = X.shape[0], self.C.shape[0], X.shape[1]
        v = self._rhs(v, M, "v")
        k = v.shape[1]
        w = None if w is None else self._rhs(w, n, "w")
        out = torch.empty(n, k, dtype=self.dtype, device=self.device)
        if n and k:
            grid = (triton.cdiv(n, self.block_n),)
            _rows_kernel[grid](
                X,
                self.C,
                v,
                v if w is None else w,
                out,
                self.shift,
                self.inv,
                n,
                M,
                d,
                k,
                self._floor(),
                X.stride(0),
                self.C.stride(0),
                v.stride(0),
                0 if w is None else w.stride(0),
                out.stride(0),
                KIND=self.code,
                HAS_W=w is not None,
                BLOCK_N=self.block_n,
                BLOCK_M=self.block_m,
                BLOCK_D=self.block_d,
                BLOCK_K=self._width(k),
            )
        return out[:, 0] if squeeze else out

    def _splits(self, n: int, M: int) -> int:
        """Row splits of K_nMᵀ u: enough programs to fill the card (four per multiprocessor)."""
        row_tiles = triton.cdiv(max(n, 1), self.block_n)
        if self.device.type != "cuda":
            return min(row_tiles, 2)
        programs = 4 * torch.cuda.get_device_properties(self.device).multi_processor_count
        return max(1, min(row_tiles, programs // triton.cdiv(M, self.block_m)))

    def rmatvec(self, X: torch.Tensor, u: torch.Tensor, accumulate_dtype: torch.dtype | None = None) -> torch.Tensor:
        """K(X, C)ᵀ u for u of shape (n,) or (n, k), summed in ``accumulate_dtype`` (the data's by
        default; float64 for float32 data sums n terms without float32's round-off growth)."""
        squeeze = u.ndim == 1
        X = self._check(X)
        n, M, d = X.shape[0], self.C.shape[0], X.shape[1]
        u = self._rhs(u, n, "u")
        k = u.shape[1]
        acc = accumulate_dtype or self.dtype
        splits = self._splits(n, M)
        rows_per_split = triton.cdiv(triton.cdiv(max(n, 1), splits), self.block_n) * self.block_n
        part = torch.zeros(splits, M, k, dtype=acc, device=self.device)
        if n and M and k:
            grid = (triton.cdiv(M, self.block_m), splits)
            _cols_kernel[grid](
                X,
                self.C,
                u,
                part,
                self.shift,
                self.inv,
                n,
                M,
                d,
                k,
                self._floor(),
                rows_per_split,
                X.stride(0),
                self.C.stride(0),
                u.stride(0),
                KIND=self.code,
                BLOCK_N=self.block_n,
                BLOCK_M=self.block_m,
                BLOCK_D=self.block_d,
                BLOCK_K=self._width(k),
            )
        out = part.sum(0)
        return out[:, 0] if squeeze else out

    def pair(
        self,
        X: torch.Tensor,
        v: torch.Tensor | None,
        w: torch.Tensor | None = None,
        accumulate_dtype: torch.dtype | None = None,
        weights: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """K(X, C)ᵀ (K(X, C) v + w) (FALKON Alg. 1's product); ``v`` or ``w`` may be None (zero).
        With ``weights`` (n,) the rows of K v + w are weighted first: K(X, C)ᵀ W (K(X, C) v + w)."""
        if v is None and w is None:
            raise ValueError("fused needs v or w")
        row_weights = None if weights is None else weights.reshape(-1, 1).to(self.dtype)
        if v is None:
            if row_weights is not None:
                w = w * (row_weights[:, 0] if w.ndim == 1 else row_weights)
            return self.rmatvec(X, w, accumulate_dtype)
        squeeze = v.ndim == 1 and (w is None or w.ndim == 1)
        t = self.matvec(X, v if v.ndim == 2 else v[:, None], None if w is None else (w if w.ndim == 2 else w[:, None]))
        if row_weights is not None:
            t.mul_(row_weights)
        out = self.rmatvec(X, t, accumulate_dtype)
        return out[:, 0] if squeeze else out


def for_operator(kernel: Kernel, X: torch.Tensor, C: torch.Tensor) -> FusedKernel | None:
    """The fused products for :class:`krrcore.ops.KernelOperator` over X against C, or None where
    they do not apply (no triton, not CUDA, a kernel they do not cover, an empty operand)."""
    if not available(X.device) or kernel_code(kernel) is None or X.shape[0] == 0 or C.shape[0] == 0:
        return None
    if X.dtype not in (torch.float32, torch.float64):
        return None
    return FusedKernel(kernel, C.to(dtype=X.dtype, device=X.device), rows=X)


#: Floating-point operations of one uncached pass K_nMᵀ(K_nM v) with k right-hand sides as the fused
#: pair does it: the distance GEMM twice (2·n·M·d each) and the two mat-vecs (2·n·M·k each).
def pair_flops(n: int, M: int, d: int, k: int = 1) -> float:
    """FLOPs of :meth:`FusedKernel.pair` (element-wise work not counted: a few per entry)."""
    return 2 * (2.0 * n * M * d) + 2 * (2.0 * n * M * k)


__all__ = ["FusedKernel", "available", "for_operator", "interpreted", "kernel_code", "pair_flops"]

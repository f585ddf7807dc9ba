"""FALKON's preconditioner B = (1/√n) D T⁻¹ A⁻¹ (FALKON paper Eq. 13; Appendix A, Def. 3–4).

T = chol(D K_MM D + εM·I) and A = chol(T Tᵀ/M + λI) are upper-triangular. Both live in *one*
M×M float64 buffer, as in the FALKON library: Tᵀ in the lower triangle, A in the upper one,
their diagonals kept aside and swapped in before each triangular solve. B is never formed.

On the CPU the factorisations run in place through LAPACK (potrf, then lauum for T Tᵀ, a third
of a GEMM's flops), so set-up holds that single buffer; on a GPU the same steps run blocked and in
place with torch (:func:`krrcore.linalg.cholesky_lower_`, :func:`krrcore.linalg.lower_gram_`), with
one b × M panel besides the buffer: M = 100,000 is a 40 GB float32 buffer on one card. The buffer
is float64 where it fits; on a GPU with float32 data and too little memory it is float32, as in
the FALKON library's GPU path (Meanti et al. 2020) — the jitter of :func:`default_jitter` for
float32 data is sized for float32 kernel values already. Its size is checked against the device's
free memory before it is allocated (:func:`buffer_dtype`).
We factor T Tᵀ + λM·I = L Lᵀ and keep A = Lᵀ/√M implicitly (the √M is applied in the solves).
Before that, for float32 data, the same buffer serves to count the directions of K_MM that the
solution at λ uses and float32 kernel values cannot hold (Falkon then warns: PrecisionWarning).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch

from .linalg import FACTOR_BLOCK, cholesky_lower_, lower_gram_
from .memory import MemoryBudgetError, check_device_room

#: Base jitter ε of εM·I for float64 data (the FALKON library's default).
JITTER_EPS_FLOAT64 = 1e-13
#: Float32 data: the ridge ρ = FLOAT32_RIDGE·eps(float32)·κ⁴ the solved system gets (see
#: :func:`default_jitter`); chosen by the sweep in benchmarks/bench_falkon_float32.py.
FLOAT32_RIDGE = 1e-2
#: The same when Falkon refines the float32 solve in float64 (``Falkon(refine=...)``).
FLOAT32_RIDGE_REFINED = 1e-3


class PrecisionWarning(UserWarning):
    """The data dtype cannot resolve the problem as asked (float32 FALKON at a very small λ)."""


@contextlib.contextmanager
def _lapack():
    """scipy's LAPACK module, on one BLAS thread while in use (the in-place factorisations here)."""
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_limits

    # Two OpenBLAS threads factor faster on idle cores, but their busy-waiting makes them about ten
    # times slower than one thread as soon as another process wants the same cores.
    with threadpool_limits(limits=1, user_api="blas"):
        yield lapack


def default_jitter(data_dtype: torch.dtype, M: int, penalty: float, kappa2: float, refined: bool = False) -> float:
    """The jitter added to diag(D K_MM D) when none is given.

    float64: εM with ε = 1e-13 (the FALKON library's), invisible in the solution. float32: the
    kernel blocks carry relative noise ~eps(float32), which the preconditioned system amplifies in
    the near-null directions of K_MM. FALKON's λA⁻ᵀA⁻¹ term turns the jitter j into a ridge λj·I on
    the Nyström system (Alg. 1 ``BHB``), so j = ρ/λ gives the ridge ρ = FLOAT32_RIDGE·eps·κ⁴
    (κ² = max k(x, x), so ρ is on the scale of K_nMᵀK_nM/n's entries) whatever λ. The FALKON
    library's float32 jitter 1e-5·M is a ridge proportional to λ instead: too strong at λ = 1e-4
    (3–13% worse test error than float64 in benchmarks/bench_falkon_float32.py), too weak at 1e-8.

    ``refined``: the solve is followed by float64 iterative refinement of this same system, which
    removes the float32 noise from the answer; the ridge then only has to keep float32 CG
    convergent, so it is the smaller FLOAT32_RIDGE_REFINED (its bias is what remains).
    """
    if data_dtype == torch.float64:
        return JITTER_EPS_FLOAT64 * M
    ridge = FLOAT32_RIDGE_REFINED if refined else FLOAT32_RIDGE
    return ridge * torch.finfo(torch.float32).eps * kappa2 * kappa2 / penalty


_JITTER_STEP, _JITTER_TRIES = 100.0, 8


def _mirror_upper_to_lower(buf: torch.Tensor, chunk: int = 256) -> None:
    """buf's strict lower triangle ← its strict upper one transposed, in row chunks (no M×M temp).

    A CPU buffer is mirrored by numpy: torch's masked copy took 0.26 s of CPU at M = 2,000 on two
    threads, a tenth of a float32 fit's set-up there."""
    M = buf.shape[0]
    for r0 in range(0, M, chunk):
        r1 = min(r0 + chunk, M)
        if buf.device.type == "cpu":
            a = buf.numpy()
            below = np.tri(r1 - r0, r1, r0 - 1, dtype=bool)
            np.copyto(a[r0:r1, :r1], a[:r1, r0:r1].T, where=below)
            continue
        block = buf[r0:r1, :r1]
        mirrored = buf[:r1, r0:r1].T
        below = torch.ones(r1 - r0, r1, dtype=torch.bool, device=buf.device).tril_(r0 - 1)
        block.copy_(torch.where(below, mirrored, block))


def _scale_upper_columns(buf: torch.Tensor, scale: torch.Tensor, chunk: int = 256) -> None:
    """buf's upper triangle (diagonal included), column j × scale[j], in row chunks: the rows of
    L_T that the Fortran view's lower triangle holds, scaled in place before lauum."""
    M = buf.shape[0]
    for r0 in range(0, M, chunk):
        r1 = min(r0 + chunk, M)
        if buf.device.type == "cpu":  # numpy in place, as _mirror_upper_to_lower
            upper = ~np.tri(r1 - r0, M - r0, -1, dtype=bool)
            block = buf.numpy()[r0:r1, r0:]
            np.multiply(block, scale[r0:].numpy()[None, :], out=block, where=upper)
            continue
        block = buf[r0:r1, r0:]
        upper = torch.ones(r1 - r0, M - r0, dtype=torch.bool, device=buf.device).triu_()
        block.copy_(torch.where(upper, block * scale[r0:].unsqueeze(0), block))


def _largest_M(free: int, itemsize: int) -> int:
    """Largest M whose buffer and panels (M² + 3·M·b entries) fit ``free`` bytes, less 5%."""
    b = FACTOR_BLOCK
    return int(0.95 * (-3 * b + math.sqrt(9 * b * b + 4 * max(free, 0) / itemsize)) / 2)


def buffer_dtype(M: int, data_dtype: torch.dtype, device) -> torch.dtype:
    """The dtype of the preconditioner's one M×M buffer on ``device``, refused before allocating
    (:class:`~krrcore.memory.MemoryBudgetError`) when not even the narrowest allowed one fits the
    free memory with its factorisation panels: float64 first; float32 on a GPU for float32 data."""
    device = torch.device(device)
    options = [torch.float64] + ([torch.float32] if device.type != "cpu" and data_dtype == torch.float32 else [])
    for dtype in options:
        itemsize = torch.empty((), dtype=dtype).element_size()
        need = M * M * itemsize + 3 * M * min(M, FACTOR_BLOCK) * itemsize
        try:
            check_device_room(
                need,
                f"FALKON's preconditioner for M={M:,} centres (one {M:,}×{M:,} matrix in "
                f"{str(dtype).removeprefix('torch.')})",
                lambda free, s=itemsize: (
                    f"lower M to at most {_largest_M(free, s):,}"
                    + (
                        " (on a GPU with float32 data the matrix is float32, half the size)"
                        if device.type == "cpu"
                        else ""
                    )
                ),
                device,
            )
            return dtype
        except MemoryBudgetError:
            if dtype is options[-1]:
                raise
    raise AssertionError("unreachable")


class FalkonPreconditioner:
    """Apply P = D T⁻¹ A⁻¹ (= √n B) and Pᵀ; K_MM and T are computed in float64, and so is A for
    float64 data (for lower-precision data on the CPU A is factored in float32, then stored and
    applied in float64: :meth:`_factor_A_float32`).

    ``weights`` is diag(D) (None: D = I, uniform centres). ``row_weights`` (M,) are the data
    weights of the rows the centres are, for a weighted system K_nMᵀ W K_nM + λn K_MM (sample
    weights, or a Newton step's Hessian weights σ(f)(1 − σ(f)) for the logistic loss): with centres
    drawn from the rows, K_nMᵀ W K_nM ≈ (n/M) K_MM W_M K_MM, so A is factored from T W_M Tᵀ/M + λI
    instead of T Tᵀ/M + λI (Def. 3 with W_M; the public FALKON library's ``weight_vec``). Any
    positive W_M keeps P invertible, so the system solved is the same; W_M only makes P fit it.
    ``jitter_`` is the εM actually added
    (raised in steps of 100× if K_MM is numerically singular: duplicate centres, tiny σ); the
    default is :func:`default_jitter`'s (``refined``: the solve will be refined in float64).

    For data in a lower precision than float64, ``unresolved_`` counts the eigenvalues of D K_MM D
    that the solution at this λ uses but the data dtype's kernel values cannot resolve (in
    ``(λM, resolution_floor_)``, see :meth:`_count_unresolved`); 0 otherwise.
    """

    def __init__(
        self,
        kernel,
        centers: torch.Tensor,
        penalty: float,
        *,
        weights: torch.Tensor | None = None,
        data_dtype: torch.dtype = torch.float64,
        jitter: float | None = None,
        refined: bool = False,
        row_weights: torch.Tensor | None = None,
    ):
        C = centers.double()
        self.M = M = C.shape[0]
        self.penalty = penalty
        self.weights = None if weights is None else weights.to(dtype=torch.float64, device=C.device)
        self._row_scale = (
            None
            if row_weights is None
            else row_weights.reshape(-1).to(dtype=torch.float64, device=C.device).clamp_min(0).sqrt()
        )
        self._sqrt_M = math.sqrt(M)
        if jitter is None:
            kappa2 = float(kernel.diag(C).max())
            jitter = default_jitter(data_dtype, M, penalty, kappa2, refined)
        eps = float(jitter)
        packed_dtype = buffer_dtype(M, data_dtype, C.device)  # refused here, before allocating
        self._packed = torch.empty(M, M, dtype=packed_dtype, device=C.device)  # the one M×M buffer
        prepared = kernel.prepare(C if packed_dtype == torch.float64 else C.to(packed_dtype))

        def load_DKD(jitter_value: float) -> torch.Tensor:
            if self.__dict__.pop("_holds_DKD", False):  # left untouched by the count below
                self._packed.diagonal().add_(jitter_value)
                return self._packed
            kernel.block(prepared, prepared, out=self._packed)
            if self.weights is not None:
                self._packed.mul_(self.weights.unsqueeze(0)).mul_(self.weights.unsqueeze(1))
            self._packed.diagonal().add_(jitter_value)
            return self._packed

        self.unresolved_, self.resolution_floor_ = 0, 0.0
        if data_dtype != torch.float64:
            self.unresolved_, self.resolution_floor_ = self._count_unresolved(load_DKD, penalty, data_dtype)
        if C.device.type == "cpu":
            self.jitter_ = self._factor_in_place(load_DKD, eps, penalty, data_dtype)
        else:
            self.jitter_ = self._factor_blocked(load_DKD, eps, penalty, data_dtype)

    # -- set-up ------------------------------------------------------------------------------
    def _count_unresolved(self, load_DKD, penalty: float, data_dtype: torch.dtype) -> tuple[int, float]:
        """How many eigenvalues of D K_MM D lie in (λM, eps·‖D K_MM D‖_∞), and that upper end.

        FALKON's model of the Nyström system, BBᵀ ≈ ((D K_MM D)²/M + λ D K_MM D)⁻¹ (Def. 3), passes
        the directions with eigenvalue s ≳ λM into the solution and damps those below. Kernel
        values rounded to ``data_dtype`` carry nothing of the directions with s below eps·λ_max
        (‖·‖_∞ bounds λ_max), so the directions in between are ones the answer needs and that dtype
        cannot represent: its model is a differently regularised one. Counted by Sylvester's law
        of inertia on two LDLᵀ factorisations of D K_MM D − τI, in the one buffer; nothing to count
        when the interval is empty, or when one Cholesky shows every eigenvalue above it (the
        usual case on rough kernels: HIGGS-like data, d = 28)."""
        DKD = load_DKD(0.0)
        norm = max(float(DKD[r0 : r0 + 256].abs().sum(1).max()) for r0 in range(0, self.M, 256))
        floor, low = torch.finfo(data_dtype).eps * norm, penalty * self.M
        if floor <= low:
            self._holds_DKD = True  # the factorisation starts from this D K_MM D
            return 0, floor
        if self._positive_definite(load_DKD(-floor)):
            return 0, floor
        below = [self._eigenvalues_below(load_DKD, shift) for shift in (low, floor)]
        return below[1] - below[0], floor

    @staticmethod
    def _positive_definite(A: torch.Tensor) -> bool:
        """Whether A's Cholesky succeeds (in place on the CPU; A is overwritten)."""
        if A.device.type != "cpu":
            return int(torch.linalg.cholesky_ex(A).info) == 0
        with _lapack() as lapack:
            return lapack.dpotrf(A.numpy().T, lower=1, overwrite_a=1, clean=0)[1] == 0

    def _eigenvalues_below(self, load_DKD, shift: float) -> int:
        """Number of eigenvalues of D K_MM D below ``shift``: the negative ones of D K_MM D − shift·I,
        read from the block-diagonal factor of its Bunch–Kaufman LDLᵀ (LAPACK sytrf, in place)."""
        A = load_DKD(-shift)
        if A.device.type != "cpu":  # torch has no in-place LDLᵀ: a transient copy, as below
            return int((torch.linalg.eigvalsh(A) < 0).sum())
        with _lapack() as lapack:
            # The workspace query matters: scipy's default lwork runs the unblocked sytrf, 10× slower.
            lwork = int(lapack.dsytrf_lwork(self.M, lower=1)[0])
            ldu, ipiv, info = lapack.dsytrf(A.numpy().T, lower=1, overwrite_a=1, lwork=lwork)
        if info < 0:
            raise ValueError(f"LAPACK dsytrf rejected argument {-info}")
        negative, k = 0, 0
        while k < self.M:
            if ipiv[k] > 0:  # a 1×1 block of D
                negative += int(ldu[k, k] < 0)
                k += 1
            else:  # a 2×2 block: one negative eigenvalue if det < 0
                a, b, c = ldu[k, k], ldu[k + 1, k], ldu[k + 1, k + 1]
                det = a * c - b * b
                negative += 1 if det < 0 else (2 if det > 0 and a < 0 else 0)
                k += 2
        return negative

    def _factor_in_place(self, load_DKD, eps: float, penalty: float, data_dtype: torch.dtype) -> float:
        """LAPACK in place on the buffer's transpose view A (Fortran order): A's lower triangle
        gets L_T (T = L_Tᵀ), is mirrored to the upper one, then lauum turns the lower one into
        L_Tᵀ L_T = T Tᵀ, whose Cholesky (with λM on the diagonal) ends in the lower triangle.
        Below float64 data, A comes from float32 (:meth:`_factor_A_float32`)."""
        with _lapack() as lapack:
            return self._factor_lapack(lapack, load_DKD, eps, penalty, data_dtype != torch.float64)

    def _factor_A_float32(self, lapack, penalty: float) -> bool:
        """A from T Tᵀ + λM·I formed and factored in float32, in an M×M float32 scratch copy of the
        buffer, into the buffer's upper triangle; False (buffer untouched) if float32 cannot factor it.

        Exact: A enters only as the change of variables β ↦ A⁻¹β (FALKON Eq. 13: B = T⁻¹A⁻¹/√n), so
        any invertible A solves the same system, and Tᵀ T = D K_MM D + jI, which the system and the
        refinement's residual use, stays float64. A float32 A is a slightly worse preconditioner for
        float32 kernel products that are float32-accurate anyway, and its lauum and Cholesky take
        half the float64 time (the preconditioner's set-up at M = 2,000: 0.11 s instead of 0.175 s)."""
        buf = self._packed
        scratch = buf.to(torch.float32)  # both triangles hold L_T after the mirror
        S = scratch.numpy().T  # Fortran view: its lower triangle is L_T
        _, info = lapack.slauum(S, lower=1, overwrite_c=1)
        if info:
            return False
        scratch.diagonal().add_(penalty * self.M)
        status = torch.empty((), dtype=torch.int32, device=scratch.device)  # not torch's default device
        torch.linalg.cholesky_ex(scratch.T, out=(scratch.T, status))  # L_A in S's lower triangle
        if int(status):
            return False
        for r0 in range(0, self.M, 256):  # buf upper ← L_Aᵀ (S lower = scratch upper)
            r1 = min(r0 + 256, self.M)
            upper = ~np.tri(r1 - r0, self.M - r0, -1, dtype=bool)
            np.copyto(buf.numpy()[r0:r1, r0:], scratch.numpy()[r0:r1, r0:], where=upper)
        return True

    def _factor_lapack(self, lapack, load_DKD, eps: float, penalty: float, float32_A: bool = False) -> float:
        current = eps
        status = None
        for _ in range(_JITTER_TRIES):
            # The first Cholesky through torch's LAPACK, in place on the Fortran-order view and on
            # torch's own threads (faster than one OpenBLAS thread, and no busy-waiting pool of
            # its own). It zeroes A's upper triangle, which the mirror below refills; the second
            # one must keep that triangle (L_T), hence scipy's potrf, which leaves it alone.
            A_t = load_DKD(current).T
            if status is None:  # on A's device, whatever torch's default device is
                status = torch.empty((), dtype=torch.int32, device=A_t.device)
            torch.linalg.cholesky_ex(A_t, out=(A_t, status))
            if int(status) == 0:
                break
            current = current * _JITTER_STEP if current > 0 else 1e-12
        else:
            raise ValueError(
                "D K_MM D is not positive definite even with large jitter "
                "(check for NaN inputs or an extremely small kernel bandwidth)"
            )
        buf = self._packed  # buf = Aᵀ: A's lower triangle is buf's upper one
        A = buf.numpy().T
        self.diag_T = buf.diagonal().clone()
        _mirror_upper_to_lower(buf)  # buf lower = L_T; lauum overwrites the upper copy
        if self._row_scale is not None:  # A's L_T rows × √w: lauum then gives T W_M Tᵀ
            _scale_upper_columns(buf, self._row_scale)
        if not (float32_A and self._factor_A_float32(lapack, penalty)):
            _, info = lapack.dlauum(A, lower=1, overwrite_c=1)  # A lower (= buf upper) ← T Tᵀ
            buf.diagonal().add_(penalty * self.M)
            _, info2 = lapack.dpotrf(A, lower=1, overwrite_a=1, clean=0)
            if info or info2:
                raise ValueError("T Tᵀ/M + λI is not positive definite: check that penalty > 0 and finite")
        self.diag_A = buf.diagonal().clone()  # buf upper = L_Aᵀ with L_A L_Aᵀ = T Tᵀ + λM I
        return current

    def _factor_blocked(self, load_DKD, eps: float, penalty: float, data_dtype: torch.dtype) -> float:
        """The same layout as :meth:`_factor_in_place`, blocked with torch ops in the buffer itself
        (GPU): L_T in the lower triangle (T = L_Tᵀ), mirrored to the upper one, whose lower-gram
        L_Tᵀ L_T = T Tᵀ (+ λM·I) is factored there into L_Aᵀ. ``data_dtype`` is unused: the buffer's
        dtype (:func:`buffer_dtype`) already says which precision the factors have."""
        current = eps
        for _ in range(_JITTER_TRIES):
            if cholesky_lower_(load_DKD(current)) == 0:
                break
            current = current * _JITTER_STEP if current > 0 else 1e-12
        else:
            raise ValueError(
                "D K_MM D is not positive definite even with large jitter "
                "(check for NaN inputs or an extremely small kernel bandwidth)"
            )
        buf = self._packed
        self.diag_T = buf.diagonal().clone()
        _mirror_upper_to_lower(buf.T)  # buf upper = L_Tᵀ: buf.T's lower triangle holds L_T
        if self._row_scale is not None:  # L_T's rows × √w: the gram below is then T W_M Tᵀ
            _scale_upper_columns(buf, self._row_scale)
        lower_gram_(buf.T)  # buf.T lower (= buf upper) ← L_Tᵀ L_T = T Tᵀ
        buf.diagonal().add_(penalty * self.M)
        if cholesky_lower_(buf.T):
            raise ValueError("T Tᵀ/M + λI is not positive definite: check that penalty > 0 and finite")
        self.diag_A = buf.diagonal().clone()  # buf upper = L_Aᵀ with L_A L_Aᵀ = T Tᵀ + λM I
        return current

    # -- application ---------------------------------------------------------------------------
    def _solve(self, rhs: torch.Tensor, which: str, transpose: bool) -> torch.Tensor:
        """T⁻¹, T⁻ᵀ (T upper = (buffer's lower)ᵀ) or A⁻¹, A⁻ᵀ (A = buffer's upper / √M)."""
        buf = self._packed
        buf.diagonal().copy_(self.diag_T if which == "T" else self.diag_A)
        rhs = rhs.to(buf.dtype)  # a float32 buffer (a GPU at large M) solves in float32
        if which == "T":
            out = (
                torch.linalg.solve_triangular(buf, rhs, upper=False)
                if transpose
                else torch.linalg.solve_triangular(buf.T, rhs, upper=True)
            )
            return out.double()
        out = (
            torch.linalg.solve_triangular(buf.T, rhs, upper=False)
            if transpose
            else torch.linalg.solve_triangular(buf, rhs, upper=True)
        )
        return out.mul_(self._sqrt_M).double()

    def apply(self, u: torch.Tensor) -> torch.Tensor:
        """P u = D T⁻¹ A⁻¹ u (MATLAB Alg. 2: ``T\\(A\\u)``, with D as in Def. 4)."""
        out = self._solve(self._solve(u.double(), "A", False), "T", False)
        if self.weights is not None:
            out.mul_(self.weights.unsqueeze(1))
        return out.to(u.dtype)

    def apply_t(self, v: torch.Tensor) -> torch.Tensor:
        """Pᵀ v = A⁻ᵀ T⁻ᵀ D v (MATLAB: ``A'\\(T'\\v)``)."""
        w = v.double()
        if self.weights is not None:
            w = w * self.weights.unsqueeze(1)
        return self._solve(self._solve(w, "T", True), "A", True).to(v.dtype)

    def system_product(self, beta: torch.Tensor, kernel_product, penalty: float) -> torch.Tensor:
        """W β = Pᵀ k(P β) + λ A⁻ᵀA⁻¹β with k(v) = K_nMᵀK_nM v/n, in four triangular solves, float64:
        A⁻¹β serves both P β = D T⁻¹(A⁻¹β) and the λ term (MATLAB Alg. 1 ``BHB``:
        ``A'\\(T'\\(KnM'*(KnM*(T\\(A\\u)))/n) + lambda*(A\\u))``, with D as in Alg. 2)."""
        u = self.solve_A(beta)
        v = self._solve(u, "T", False)
        if self.weights is not None:
            v.mul_(self.weights.unsqueeze(1))
        w = kernel_product(v).double()
        if self.weights is not None:
            w = w * self.weights.unsqueeze(1)
        return self._solve(self._solve(w, "T", True).add_(u, alpha=penalty), "A", True)

    def times_T(self, u: torch.Tensor, chunk: int = 256) -> torch.Tensor:
        """T u (T = L_Tᵀ, L_T in the buffer's lower triangle), float64, in row chunks of L_T so no
        M×M temporary is made: with it Pᵀ(K_MM + jD⁻²)α = A⁻ᵀ T D⁻¹α without K_MM (refinement)."""
        buf, u = self._packed, u.double()
        buf.diagonal().copy_(self.diag_T)
        out = torch.zeros_like(u)
        for r0 in range(0, self.M, chunk):
            r1 = min(r0 + chunk, self.M)
            rows = torch.tril(buf[r0:r1, :r1], diagonal=r0).double()  # L_T[r0:r1, :r1]
            out[:r1].addmm_(rows.T, u[r0:r1])
        return out

    def solve_T(self, u: torch.Tensor) -> torch.Tensor:
        """T⁻¹u, float64 (the posterior variance whitens with T: krrcore.solvers.uncertainty)."""
        return self._solve(u.double(), "T", False)

    def solve_T_t(self, u: torch.Tensor) -> torch.Tensor:
        """T⁻ᵀu, float64."""
        return self._solve(u.double(), "T", True)

    def solve_A(self, u: torch.Tensor) -> torch.Tensor:
        return self._solve(u.double(), "A", False)

    def solve_A_t(self, u: torch.Tensor) -> torch.Tensor:
        return self._solve(u.double(), "A", True)

    @property
    def buffer_bytes(self) -> int:
        return self._packed.numel() * self._packed.element_size()

"""FALKON's preconditioner B = (1/√n) D T⁻¹ A⁻¹ (FALKON paper Eq. 13; Appendix A, Def. 3–4).

T = chol(D K_MM D + εM·I) and A = chol(T Tᵀ/M + λI) are upper-triangular. Both live in *one*
M×M float64 buffer — T in the upper triangle, A transposed in the lower one, their diagonals kept
aside and swapped in before each triangular solve — so the solve holds a single M×M matrix, as
the FALKON library does. B is never formed.
"""
from __future__ import annotations

import torch

from .linalg import jitter_cholesky

#: Base jitter ε of εM·I per data dtype (the FALKON library's defaults).
JITTER_EPS = {torch.float32: 1e-5, torch.float64: 1e-13}


class FalkonPreconditioner:
    """Apply P = D T⁻¹ A⁻¹ (= √n B) and Pᵀ; K_MM, T and A are computed in float64.

    ``weights`` is diag(D) (None: D = I, uniform centres). ``jitter_`` is the εM actually added
    (raised in steps of 100× if K_MM is numerically singular: duplicate centres, tiny σ).
    """

    def __init__(self, kernel, centers: torch.Tensor, penalty: float, *, weights: torch.Tensor | None = None,
                 data_dtype: torch.dtype = torch.float64, jitter: float | None = None):
        C = centers.double()
        M = C.shape[0]
        self.M = M
        self.penalty = penalty
        self.weights = None if weights is None else weights.to(dtype=torch.float64, device=C.device)
        buf = kernel(C, C)                                   # the one M×M buffer: K_MM
        if self.weights is not None:
            buf.mul_(self.weights.unsqueeze(0)).mul_(self.weights.unsqueeze(1))
        eps = JITTER_EPS[data_dtype] * M if jitter is None else float(jitter)
        L_T, self.jitter_ = jitter_cholesky(buf, eps, name="D K_MM D")  # T = L_Tᵀ
        torch.mm(L_T.T, L_T, out=buf)                        # T Tᵀ into the K_MM buffer
        buf.div_(M).diagonal().add_(penalty)
        L_A, _ = jitter_cholesky(buf, 0.0, name="T Tᵀ/M + λI")   # A = L_Aᵀ
        # Pack: strict upper = T (= L_Tᵀ), strict lower = Aᵀ (= L_A); diagonals aside.
        buf.copy_(L_A)
        upper = torch.triu(L_T.T, diagonal=1)
        buf.tril_(-1).add_(upper)
        self.diag_T = L_T.diagonal().clone()
        self.diag_A = L_A.diagonal().clone()
        self._packed = buf
        del L_T, L_A

    def _solve(self, rhs: torch.Tensor, which: str, transpose: bool) -> torch.Tensor:
        """Triangular solve with T (upper) or A (upper, stored as Aᵀ lower), or their transposes."""
        self._packed.diagonal().copy_(self.diag_T if which == "T" else self.diag_A)
        if which == "T":   # T is the upper triangle
            mat, upper = (self._packed.T, False) if transpose else (self._packed, True)
        else:              # A is stored as its transpose in the lower triangle
            mat, upper = (self._packed, False) if transpose else (self._packed.T, True)
        return torch.linalg.solve_triangular(mat, rhs, upper=upper)

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

    def solve_A(self, u: torch.Tensor) -> torch.Tensor:
        return self._solve(u.double(), "A", False)

    def solve_A_t(self, u: torch.Tensor) -> torch.Tensor:
        return self._solve(u.double(), "A", True)

    @property
    def buffer_bytes(self) -> int:
        return self._packed.numel() * self._packed.element_size()

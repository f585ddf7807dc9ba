"""Small dense linear-algebra helpers shared by solvers and diagnostics."""

from __future__ import annotations

import torch

from ._validation import check_int


def jitter_cholesky(
    A: torch.Tensor, eps: float, *, max_tries: int = 8, factor: float = 100.0, name: str = "matrix"
) -> tuple[torch.Tensor, float]:
    """Lower Cholesky factor of A + eps·I, raising eps by ``factor`` until it succeeds.

    The jitter is added to A's diagonal in place and removed before returning, so the only new
    n×n allocation is the factor itself.

    Returns ``(L, eps_used)`` so callers can report the jitter actually needed (FALKON's
    εM·I on diag(K_MM), Alg. 1). Raises ``ValueError`` naming ``name`` if every try fails.
    """
    current, added = float(eps), 0.0
    diagonal = A.diagonal()
    try:
        for _ in range(max_tries):
            diagonal.add_(current - added)  # in place: no second n×n matrix
            added = current
            L, info = torch.linalg.cholesky_ex(A)
            if int(info) == 0 and bool(torch.isfinite(L).all()):
                return L, current
            current = current * factor if current > 0 else 1e-12
    finally:
        diagonal.sub_(added)  # A is left as it was given
    raise ValueError(
        f"{name} is not positive definite even with jitter {current / factor:.3g} on its diagonal "
        f"(check for NaN inputs or an extremely small kernel bandwidth)"
    )


def solve_lower(L: torch.Tensor, B: torch.Tensor, *, transpose: bool = False) -> torch.Tensor:
    """L⁻¹B (or L⁻ᵀB when ``transpose``) for lower-triangular L; B is a vector or matrix."""
    squeeze = B.ndim == 1
    B2 = B[:, None] if squeeze else B
    if transpose:
        X = torch.linalg.solve_triangular(L.T, B2, upper=True)
    else:
        X = torch.linalg.solve_triangular(L, B2, upper=False)
    return X[:, 0] if squeeze else X


def lanczos_ritz_values(
    matvec, dim: int, *, steps: int = 40, dtype=torch.float64, device=None, seed: int = 0
) -> torch.Tensor:
    """Ritz values of a symmetric operator after ``steps`` Lanczos steps with full reorthogonalisation.

    The extreme Ritz values converge first: λ_max from below quickly; λ_min from above more
    slowly when the spectrum has a long tail, so a Lanczos condition number is a lower bound.
    """
    steps = min(check_int(steps, "steps"), dim)
    g = torch.Generator().manual_seed(int(seed))
    q = torch.randn(dim, generator=g, dtype=torch.float64, device="cpu").to(dtype=dtype, device=device)
    q /= torch.linalg.norm(q)
    Q = torch.zeros(dim, steps, dtype=dtype, device=device)
    alphas, betas = [], []
    for j in range(steps):
        Q[:, j] = q
        w = matvec(q[:, None])[:, 0]
        alpha = float(q @ w)
        w = w - Q[:, : j + 1] @ (Q[:, : j + 1].T @ w)  # full reorthogonalisation (twice is enough)
        w = w - Q[:, : j + 1] @ (Q[:, : j + 1].T @ w)
        alphas.append(alpha)
        beta = float(torch.linalg.norm(w))
        if beta < 1e-12 * max(abs(alpha), 1.0) or j == steps - 1:
            break
        betas.append(beta)
        q = w / beta
    k = len(alphas)
    Tk = torch.diag(torch.tensor(alphas, dtype=torch.float64, device="cpu"))
    if k > 1:
        off = torch.tensor(betas[: k - 1], dtype=torch.float64, device="cpu")
        Tk += torch.diag(off, 1) + torch.diag(off, -1)
    return torch.linalg.eigvalsh(Tk)


def residual_and_objective(
    Ax: torch.Tensor, x: torch.Tensor, b: torch.Tensor, constant: float = 0.0
) -> tuple[float, float]:
    """(‖Ax − b‖_F/‖b‖_F, ½⟨x, Ax⟩ − ⟨b, x⟩ + constant) for the quadratic whose minimiser solves A x = b.

    The report of every solver that evaluates its system exactly: the full KRR dual d(w) of the
    ASkotch paper (Lemma 3.1, A = K + λnI, b = y) and the Nyström objective of the FALKON paper
    (Eq. 8, A = K_nMᵀK_nM + λnK_MM, b = K_nMᵀy, constant ½‖y‖²), from a product Ax the caller has.
    """
    b_norm = torch.linalg.norm(b)
    # b = 0 (all-zero targets): the solution is x = 0, and the residual is measured absolutely.
    residual = float(torch.linalg.norm(Ax - b) / b_norm) if float(b_norm) > 0 else float(torch.linalg.norm(Ax))
    objective = float(0.5 * (x * Ax).sum() - (b * x).sum()) + constant
    return residual, objective


#: Block size of the in-place factorisations below: large enough for GEMM-rate trailing updates,
#: small enough that the b × M panel copy stays a small fraction of the M × M buffer.
FACTOR_BLOCK = 2048


def cholesky_lower_(A: torch.Tensor, block: int = FACTOR_BLOCK) -> int:
    """Blocked right-looking Cholesky in place: A's lower triangle (diagonal included) becomes L with
    L Lᵀ = A (read from A's lower triangle); the strict upper triangle is never read or written, so
    it can hold another matrix (FALKON's preconditioner keeps T and A in one buffer).

    Per block column: the b × b diagonal block is factored (torch), the panel below it solved
    against it, and the trailing lower triangle updated block column by block column, so the only
    transient memory is one (M − k) × b panel. ``A`` may be a transposed view (its lower triangle is
    then the stored upper one). Returns 0 on success, else the 1-based block column that was not
    positive definite (A is then partly overwritten), like LAPACK potrf's ``info``."""
    M = A.shape[0]
    for k0 in range(0, M, block):
        k1 = min(k0 + block, M)
        diag = torch.tril(A[k0:k1, k0:k1])
        L, info = torch.linalg.cholesky_ex(diag + torch.tril(diag, -1).T)
        if int(info) or not bool(torch.isfinite(L).all()):
            return k0 + 1
        keep_upper = torch.triu(A[k0:k1, k0:k1], 1)
        A[k0:k1, k0:k1].copy_(L + keep_upper)
        if k1 == M:
            break
        # Panel: A[k1:, k0:k1] ← A[k1:, k0:k1] L⁻ᵀ.
        panel = torch.linalg.solve_triangular(L, A[k1:, k0:k1].T, upper=False).T.contiguous()
        A[k1:, k0:k1].copy_(panel)
        for j0 in range(k1, M, block):  # trailing lower triangle, one block column at a time
            j1 = min(j0 + block, M)
            update = panel[j0 - k1 :] @ panel[j0 - k1 : j1 - k1].T  # (M − j0) × (j1 − j0)
            top = A[j0:j1, j0:j1]
            top.sub_(torch.tril(update[: j1 - j0]))  # lower part of the diagonal block
            A[j1:, j0:j1].sub_(update[j1 - j0 :])
    return 0


def lower_gram_(A: torch.Tensor, block: int = FACTOR_BLOCK) -> None:
    """LAPACK lauum in place, blocked: A's lower triangle L becomes the lower triangle of LᵀL; the
    strict upper triangle is left alone. Block rows go top to bottom: block row I of LᵀL needs L's
    rows from I on only, so it is formed in a b × M temporary and written over row I."""
    M = A.shape[0]
    for i0 in range(0, M, block):
        i1 = min(i0 + block, M)
        panel = A[i0:, i0:i1].clone()  # L[I:, I], its top block lower-triangular
        panel[: i1 - i0].tril_()
        left = panel.T @ A[i0:, :i0] if i0 else None  # (LᵀL)[I, :I]: columns left of I are all below the diagonal
        diag = panel.T @ panel  # (LᵀL)[I, I]
        if left is not None:
            A[i0:i1, :i0].copy_(left)
        keep_upper = torch.triu(A[i0:i1, i0:i1], 1)
        A[i0:i1, i0:i1].copy_(torch.tril(diag) + keep_upper)

"""Kernel functions computing blocks K(X1, X2) and diagonals, written into reusable buffers.

Distance-based kernels work on *prepared* features (inputs scaled by 1/σ, with cached squared
norms), so a blocked product prepares the centres once and each data block once, and every
block then costs one GEMM plus in-place element-wise work: squared distances use the expanded
form ‖a‖² + ‖b‖² − 2aᵀb, clamped at zero against cancellation.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
import torch

from ._validation import as_tensor, check_int, check_positive

#: log₂(e): exp(x) = 2^(x·log₂e). The kernels fold it into a scale they apply anyway and call exp2,
#: 2–3× faster than exp on this CPU (torch 2.13; one thread, 10⁸ float32 entries in cache: 28 ms
#: against 87 ms; float64 86 against 173 ms) for one more rounding of the argument.
LOG2E = 1.0 / math.log(2.0)


@dataclass
class Prepared:
    """Features ready for :meth:`Kernel.block`: scaled inputs and (if used) their squared norms."""

    features: torch.Tensor
    sq_norms: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.features.shape[0]

    def rows(self, start: int, stop: int) -> "Prepared":
        return Prepared(self.features[start:stop], None if self.sq_norms is None else self.sq_norms[start:stop])


class Kernel:
    """Base class. Subclasses implement :meth:`prepare`, :meth:`block` and :meth:`diag`.

    ``kernel(X1, X2)`` returns the dense block; blocked products call ``prepare`` once per
    operand and ``block(P1, P2, out=buffer)`` per block.
    """

    #: Extra scratch of the size of one block that :meth:`block` allocates (L1 distances do).
    scratch_blocks: int = 0
    #: k(x, x) is the same for every x (stationary kernels): callers holding checked rows need not
    #: evaluate ``diag`` row by row.
    constant_diag: bool = False
    #: k(x + t, x' + t) = k(x, x') for every shift t: the kernel can be evaluated on data moved to
    #: an origin near it (:meth:`centered_at`), which keeps distances exact under a large offset.
    translation_invariant: bool = False
    name: str = "kernel"

    def prepare(self, X: torch.Tensor) -> Prepared:
        return Prepared(X)

    def block(self, P1: Prepared, P2: Prepared, out: torch.Tensor | None = None) -> torch.Tensor:
        raise NotImplementedError

    def diag(self, X) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, X1, X2=None) -> torch.Tensor:
        X1 = as_tensor(X1, "X1")
        X2 = X1 if X2 is None else as_tensor(X2, "X2", dtype=X1.dtype, device=X1.device)
        if X1.shape[1] != X2.shape[1]:
            raise ValueError(f"X1 and X2 have mismatched shapes: {X1.shape[1]} vs {X2.shape[1]} features")
        return self.block(self.prepare(X1), self.prepare(X2))

    def params(self) -> dict:
        """Plain parameters (for caching keys, reproduce-in-Python snippets and repr)."""
        return {}

    def get_params(self, deep: bool = True) -> dict:
        """The constructor's parameters, as scikit-learn reads them: ``set_params(kernel__sigma=2)``
        on an estimator reaches the kernel through these two methods."""
        return dict(self.params())

    def set_params(self, **params) -> "Kernel":
        """A kernel is rebuilt from its parameters (its constructor checks them), in place."""
        unknown = sorted(set(params) - set(self.params()))
        if unknown:
            raise ValueError(
                f"{type(self).__name__} has no parameter(s) {unknown}; its parameters are {sorted(self.params())}"
            )
        rebuilt = type(self)(**{**self.params(), **params})
        origin = getattr(self, "origin", None)
        vars(self).clear()
        vars(self).update(vars(rebuilt))
        if origin is not None:
            self.origin = origin
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other) -> bool:
        return type(self) is type(other) and self.params() == other.params()

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self.params())))


def _sigma_param(sigma):
    """Validate σ: a positive scalar or a 1-D array of positive per-feature lengths (ARD)."""
    if isinstance(sigma, (int, float)) and not isinstance(sigma, bool):
        return check_positive(sigma, "sigma")
    try:
        t = torch.as_tensor(sigma, dtype=torch.float64) if not isinstance(sigma, torch.Tensor) else sigma.double()
    except (TypeError, ValueError):
        raise ValueError(
            f"sigma must be a positive number or a 1-D array of per-feature lengths, got {sigma!r}"
        ) from None
    if t.ndim == 0:
        return check_positive(float(t), "sigma")
    if t.ndim != 1 or t.numel() == 0:
        raise ValueError(
            f"sigma must be a positive number or a 1-D array of per-feature lengths, got shape {tuple(t.shape)}"
        )
    if not bool(torch.isfinite(t).all()) or bool((t <= 0).any()):
        raise ValueError("sigma must be > 0 and finite in every feature")
    return t.cpu()


def sq_dist_into(P1: Prepared, P2: Prepared, out: torch.Tensor | None, scale: float = 1.0) -> torch.Tensor:
    """``scale``·‖a − b‖² = scale·(‖a‖² + ‖b‖² − 2aᵀb) written into ``out``, clamped at 0 on the
    distance's side. Folding the scale into the GEMM saves one pass over the block."""
    shape = (len(P1), len(P2))
    if out is None:
        out = torch.empty(shape, dtype=P1.features.dtype, device=P1.features.device)
    torch.addmm(P2.sq_norms.unsqueeze(0) * scale, P1.features, P2.features.T, alpha=-2.0 * scale, out=out)
    out.add_(P1.sq_norms.unsqueeze(1) * scale)
    return out.clamp_min_(0.0) if scale > 0 else out.clamp_max_(0.0)


def dist_into(P1: Prepared, P2: Prepared, out: torch.Tensor | None) -> torch.Tensor:
    """Euclidean distances from the expanded form, with squared distances below its round-off
    (8·eps·(max‖a‖² + max‖b‖²)) set to 0 first: otherwise sqrt turns the ~eps residue of equal
    points into ~√eps (1e-3 in float32) and k(x, x) falls visibly below 1."""
    sq = sq_dist_into(P1, P2, out)
    eps = torch.finfo(sq.dtype).eps
    floor = 8 * eps * (float(P1.sq_norms.max()) + float(P2.sq_norms.max()))
    return torch.nn.functional.threshold_(sq, floor, 0.0).sqrt_()


class _ScaledDistanceKernel(Kernel):
    """Kernels k(x, x') = f(‖(x − x')/σ‖): σ scalar or per feature (ARD).

    ``origin`` (None, or a point of d coordinates, :meth:`centered_at`): both operands are measured
    from it. The expanded distance ‖a‖² + ‖b‖² − 2aᵀb cancels catastrophically when the points lie
    far from 0 against their spread (X + 1e8 in float64 keeps none of its digits); measured from
    a point near the data, it is exact again, and the kernel's values are unchanged."""

    constant_diag = True
    translation_invariant = True
    origin: torch.Tensor | None = None

    def __init__(self, sigma=1.0):
        self.sigma = _sigma_param(sigma)

    def centered_at(self, origin: torch.Tensor) -> "_ScaledDistanceKernel":
        """A copy that evaluates k on X − origin (the same function: k is translation invariant)."""
        twin = copy.copy(self)
        twin.origin = origin.detach().double().cpu()
        return twin

    def _scale(self, X: torch.Tensor) -> torch.Tensor:
        if self.origin is not None:
            if self.origin.numel() != X.shape[1]:
                raise ValueError(
                    f"the kernel's origin has {self.origin.numel()} coordinates but X has {X.shape[1]} features"
                )
            X = X - self.origin.to(dtype=X.dtype, device=X.device)
        if isinstance(self.sigma, float):
            return X / self.sigma
        if self.sigma.numel() != X.shape[1]:
            raise ValueError(f"sigma has {self.sigma.numel()} per-feature lengths but X has {X.shape[1]} features")
        return X / self.sigma.to(dtype=X.dtype, device=X.device)

    def prepare(self, X: torch.Tensor) -> Prepared:
        Z = self._scale(X)
        return Prepared(Z, (Z * Z).sum(1))

    def diag(self, X) -> torch.Tensor:
        X = as_tensor(X, "X")
        return torch.ones(X.shape[0], dtype=X.dtype, device=X.device)

    def params(self) -> dict:
        s = self.sigma
        return {"sigma": s if isinstance(s, float) else s.tolist()}


class GaussianKernel(_ScaledDistanceKernel):
    """Gaussian (RBF) kernel exp(−‖x − x'‖² / (2σ²)), σ scalar or one per feature (ARD)."""

    name = "gaussian"

    def block(self, P1, P2, out=None):
        return sq_dist_into(P1, P2, out, scale=-0.5 * LOG2E).exp2_()


class LaplacianKernel(_ScaledDistanceKernel):
    """Laplacian kernel exp(−‖x − x'‖_p / σ), p = 2 (Euclidean) or p = 1 (ASkotch's QM9 kernel)."""

    name = "laplacian"

    def __init__(self, sigma=1.0, p: int = 2):
        super().__init__(sigma)
        if p not in (1, 2):
            raise ValueError(f"p must be 1 or 2 for the Laplacian kernel, got {p!r}")
        self.p = p
        self.scratch_blocks = 1 if p == 1 else 0

    def prepare(self, X):
        return super().prepare(X) if self.p == 2 else Prepared(self._scale(X))

    def block(self, P1, P2, out=None):
        if self.p == 2:
            return dist_into(P1, P2, out).mul_(-LOG2E).exp2_()
        # No GEMM form exists for L1 distances: cdist allocates one block of scratch.
        dist = torch.cdist(P1.features, P2.features, p=1.0)
        if out is None:
            return dist.mul_(-LOG2E).exp2_()
        return torch.exp2(dist.mul_(-LOG2E), out=out)

    def params(self):
        return {**super().params(), "p": self.p}


class MaternKernel(_ScaledDistanceKernel):
    """Matérn kernel with ν ∈ {1/2, 3/2, 5/2} on r = ‖x − x'‖/σ (Rasmussen & Williams Eq. 4.17)."""

    name = "matern"

    def __init__(self, sigma=1.0, nu: float = 1.5):
        super().__init__(sigma)
        if nu not in (0.5, 1.5, 2.5):
            raise ValueError(f"nu must be one of 0.5, 1.5, 2.5, got {nu!r}")
        self.nu = float(nu)

    def block(self, P1, P2, out=None):
        r = dist_into(P1, P2, out)
        if self.nu == 0.5:
            return r.mul_(-LOG2E).exp2_()
        c = math.sqrt(3.0) if self.nu == 1.5 else math.sqrt(5.0)
        r.mul_(c)  # r ← c·r
        poly = 1.0 + r if self.nu == 1.5 else 1.0 + r + r * r / 3.0
        return r.mul_(-LOG2E).exp2_().mul_(poly)

    def params(self):
        return {**super().params(), "nu": self.nu}


class LinearKernel(Kernel):
    """Linear kernel xᵀx'."""

    name = "linear"

    def block(self, P1, P2, out=None):
        return torch.mm(P1.features, P2.features.T, out=out)

    def diag(self, X):
        X = as_tensor(X, "X")
        return (X * X).sum(1)


class PolynomialKernel(Kernel):
    """Polynomial kernel (γ xᵀx' + c)^degree."""

    name = "polynomial"

    def __init__(self, degree: int = 2, gamma: float = 1.0, coef0: float = 1.0):
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
        self.degree = degree
        self.gamma = check_positive(gamma, "gamma")
        self.coef0 = check_positive(coef0, "coef0", allow_zero=True)

    def block(self, P1, P2, out=None):
        K = torch.mm(P1.features, P2.features.T, out=out)
        return K.mul_(self.gamma).add_(self.coef0).pow_(self.degree)

    def diag(self, X):
        X = as_tensor(X, "X")
        return ((X * X).sum(1) * self.gamma + self.coef0) ** self.degree

    def params(self):
        return {"degree": self.degree, "gamma": self.gamma, "coef0": self.coef0}


#: Registry of kernels by name, with the constructor parameters the app exposes.
KERNELS: dict[str, type[Kernel]] = {
    "gaussian": GaussianKernel,
    "laplacian": LaplacianKernel,
    "matern": MaternKernel,
    "linear": LinearKernel,
    "polynomial": PolynomialKernel,
}


def make_kernel(name: str, **params) -> Kernel:
    """Build a kernel from its registry name and plain parameters."""
    try:
        cls = KERNELS[name]
    except KeyError:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {name!r}") from None
    return cls(**params)


def median_heuristic(X, *, max_points: int = 2000, p: int = 2, seed: int = 0) -> float:
    """Median pairwise ``p``-distance of (a subsample of at most ``max_points`` rows of) X.

    A common starting σ for distance kernels; it ignores duplicate points (zero distances).
    """
    max_points = check_int(max_points, "max_points", minimum=2)
    seed = check_int(seed, "seed", minimum=0)
    if isinstance(p, bool) or p not in (1, 2):
        raise ValueError(f"p must be 1 or 2 (the L1 or Euclidean distance), got {p!r}")
    X = as_tensor(X, "X")
    if X.shape[0] < 2:
        raise ValueError("X needs at least 2 rows for the median heuristic")
    if X.shape[0] > max_points:
        g = torch.Generator().manual_seed(seed)
        X = X[torch.randperm(X.shape[0], generator=g, device="cpu")[:max_points].to(X.device)]
    X64 = X.double()
    # Scaled by the largest entry first, so the distances of values near float64's range stay finite.
    peak = float(X64.abs().max())
    if peak == 0.0:
        raise ValueError("X has no two distinct rows: the median heuristic is undefined")
    D = torch.cdist(X64 / peak, X64 / peak, p=float(p)) * peak
    iu = torch.triu_indices(X.shape[0], X.shape[0], offset=1, device=X.device)
    d = D[iu[0], iu[1]]
    d = d[d > 0]
    if d.numel() == 0:
        raise ValueError("X has no two distinct rows: the median heuristic is undefined")
    median = float(np.median(d.cpu().numpy()))  # torch.quantile's value, by selection instead of a sort
    if not math.isfinite(median):
        raise ValueError(
            f"the median distance of X is {median}: X's values ({peak:.3g} at most) put the "
            f"distances beyond float64's range; rescale X"
        )
    return median  # the usual median (mean of the middle two)

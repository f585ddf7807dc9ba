"""Logistic FALKON: kernel logistic regression on M Nyström centres by Newton's method along a
decreasing penalty path, each Newton step a weighted FALKON solve (Marteau-Ferey, Bach, Rudi,
"Globally convergent Newton methods for ill-conditioned generalized self-concordant losses",
NeurIPS 2019; the public FALKON library's ``LogisticFalkon``).

The problem, for labels tᵢ ∈ {−1, +1}, sample weights ωᵢ (mean 1; all 1 without ``sample_weight``)
and f = K_·M α:

    L_λ(α) = (1/n) Σ ωᵢ log(1 + exp(−tᵢ f(xᵢ))) + (λ/2) αᵀ K_MM α.

Its gradient is g = K_nMᵀ z / n + λ K_MM α with zᵢ = −ωᵢ tᵢ σ(−tᵢ fᵢ), its Hessian
K_nMᵀ H K_nM / n + λ K_MM with H = diag(ωᵢ σ(fᵢ)(1 − σ(fᵢ))): the weighted Nyström system of
:mod:`krrcore.solvers.falkon` with the Hessian weights as its weights. A Newton step solves
H δ = −g by a few iterations of FALKON's preconditioned CG (Alg. 1, W β = Pᵀ(−g), δ = P β) with the
preconditioner rebuilt from the Hessian weights at the centres (A from T H_M Tᵀ/M + λI, see
:class:`~krrcore.preconditioner.FalkonPreconditioner`'s ``row_weights``). Marteau-Ferey et al.
start at a large λ, where Newton's method converges from α = 0, and divide λ by a constant factor at
each step, so that every iterate stays in the region of fast convergence of the next problem
(their Alg. 1–2); a few more steps at the final λ finish the fit.

The squared loss's λ of (K + λnI) enters the Newton system the same way: with the ½ in
(λ/2)‖f‖², it is exactly (K_nMᵀ H K_nM + λn K_MM) δ = ..., FALKON's system with weights H. But the
same λ is not the same regularisation: near f = 0, where the path starts, log(1 + e^{−tf}) =
log 2 − tf/2 + f²/8 + O(f³), so L_λ is a quarter of the squared-loss objective
(1/2n)‖2t − f‖² + (4λ/2)‖f‖² — FALKON's problem at 4λ (targets 2t, the same signs). The logistic
model at λ is regularised as the squared loss at 4λ at least (further from 0 its curvature
σ(1 − σ) is below 1/4, so more): :func:`matching_penalty` gives the λ that matches a squared-loss
λ, λ/4, for comparing the two losses on one λ.

With ``fit_intercept`` (the default, as scikit-learn's ``LogisticRegression``) f = K_·M α + b with
an unpenalised b per class, started at the log-odds of the class's weighted frequency. The Newton
step is joint in (α, b): b is eliminated by its Schur complement, so CG solves
(K_nMᵀ H K_nM/n − c cᵀ/s + λK_MM) δα = −g_α + c g_b/s with c = K_nMᵀ h/n, s = Σ hᵢ/n (h = diag H),
a rank-one change of the weighted FALKON system (one more pass per step, for c; the preconditioner
stays FALKON's), and δb = −(g_b + cᵀδα)/s. Without b, a Gaussian-kernel model pays λ‖f‖² for the
offset of unbalanced classes.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from ..memory import CostModel
from ..ops import KernelOperator, operator_bytes
from ..preconditioner import FalkonPreconditioner
from ..cg import conjugate_gradient
from .classifiers import KRRClassifierMixin
from .falkon import Falkon
from .params import COUNT, Checked, Options, ParameterError, default, param
from .records import Step

#: The automatic path: it starts at this λ (for a kernel with K(x, x) = 1, such as the Gaussian,
#: the logistic loss's Hessian weights are at most 1/4, so λ = 1e-2 is a strongly regularised
#: problem that Newton's method solves from zero in a step or two) ...
PATH_START = 1e-2
#: ... and divides λ by this factor per Newton step (the FALKON library's docstring: 10²–10³).
PATH_FACTOR = 100.0
#: CG iterations of a Newton step on the path ("auto": the FALKON library's example, 3–4 on the way
#: down), and at most at the final λ, where "auto" stops CG at the relative residual min(0.1, r)
#: for a Newton step from relative gradient r (Dembo, Eisenstat, Steihaug 1982: an inexact Newton
#: step solved to a relative residual O(‖∇L‖) keeps Newton's quadratic convergence; a fixed 8 left
#: CG at a relative residual of 0.1–0.3 with given centres, and Newton linear at that rate).
PATH_CG, FINAL_CG = 4, 30


#: The squared loss's curvature over the logistic loss's at f = 0 (1 against 1/4; module docstring).
CURVATURE_RATIO = 4.0


def matching_penalty(squared_penalty: float) -> float:
    """The logistic λ regularising as the squared loss's ``squared_penalty`` does near f = 0: λ/4
    (module docstring: L_λ is a quarter of FALKON's objective at 4λ to second order in f)."""
    return squared_penalty / CURVATURE_RATIO


def _check_penalty_path(path) -> None:
    if isinstance(path, str):
        if path != "auto":
            raise ValueError(f"penalty_path must be 'auto' or a sequence of penalties, got {path!r}")
        return
    try:
        values = list(path)
    except TypeError:
        raise ValueError(f"penalty_path must be 'auto' or a sequence of penalties, got {path!r}") from None
    bad = [
        v for v in values if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v <= 0
    ]
    if bad:
        raise ValueError(f"penalty_path must hold finite numbers > 0, got {bad[0]!r}")


PENALTY_PATHS = Checked(_check_penalty_path, "'auto' or a sequence of penalties > 0")


class LogisticFalkon(KRRClassifierMixin, Falkon):
    """Kernel logistic regression on Nyström centres: Newton's method along a decreasing λ path,
    each step a weighted FALKON solve (module docstring; Marteau-Ferey, Bach, Rudi 2019).

    Its own estimator, not ``FalkonClassifier(loss="logistic")``: every parameter of
    :class:`FalkonClassifier` means one linear solve, and here ``maxiter``, ``tol`` and the records
    mean Newton steps on a different objective, so one class per loss keeps each parameter's
    meaning single.

    Multiclass is one-vs-rest: k classes are k binary logistic problems (the one-hot columns as ±1
    labels), solved together — one kernel pass per CG iteration serves every class, each with its
    own Hessian weights (the weighted product takes one weight column per class) and one
    preconditioner built from their mean. Softmax couples the k outputs of each sample in its
    Hessian (a k×k block per row), so its Newton step is one kM × kM system that FALKON's
    preconditioner does not factor. ``predict_proba``: σ(f) for two classes; the k one-vs-rest
    probabilities σ(f_c), normalised to sum to 1, otherwise.

    Parameters (beyond :class:`~krrcore.solvers.falkon.Falkon`'s kernel, M, centers, dtype, device,
    memory_budget, jitter, seed)
    ----------
    penalty : float
        The final λ of (1/n) Σ ωᵢ ℓ(tᵢ fᵢ) + (λ/2)‖f‖² (:func:`matching_penalty` of a squared-loss λ
        regularises as that λ does).
    penalty_path : "auto" | sequence of float
        The λ of the Newton steps before the final λ. "auto": penalty·PATH_FACTOR^j, ...,
        penalty·PATH_FACTOR, starting at the first at or above :data:`PATH_START` (none when
        ``penalty`` >= PATH_START).
    fit_intercept : bool
        An unpenalised offset b per class (module docstring; ``intercept_``).
    final_steps : int
        Newton steps at the final λ after the path (fewer when ``tol`` is reached).
    cg_iterations : "auto" | int
        CG iterations per Newton step: "auto" :data:`PATH_CG` on the path, at the final λ until the
        relative CG residual min(0.1, r) (r: the relative gradient before the step) or :data:`FINAL_CG`.
    maxiter : int
        At most this many Newton steps in all. tol : stop when the relative gradient
        ‖∇L_λ(α)‖/‖∇L_λ(0)‖ at the final λ is at most ``tol`` (the records' residual).
    refine : 0 or "auto" (no float64 refinement: each Newton step computes its gradient from the
        data again, which corrects the rounding of the step before — refinement would repeat it).

    Records: one per Newton step (iteration 0: α = 0), whose residual is the relative gradient at
    the final λ and objective L_λ at the final λ; ``extras``: ``newton_step``, ``penalty`` (that
    step's λ), ``cg_iterations`` and ``cg_residual`` (the step's CG, relative). ``n_iter_`` counts
    Newton steps, ``cg_iterations_`` the CG iterations of all of them. Memory and time are estimated
    before anything is allocated, as for every fit (a Newton step: an M×M factorisation, its CG
    passes and two passes for the gradient).
    """

    penalty_path: object = param("auto", PENALTY_PATHS)
    final_steps: int = param(5, COUNT)
    cg_iterations: int | str = param("auto", Options("auto") | COUNT)
    refine: int | str = default(0)

    #: Its outputs are logits: their distance to the encoded labels says nothing of the fit (the
    #: Newton gradient is its convergence check), so the squared-loss zero-model check is not for it.
    _squared_loss = False

    DIVERGENCE_ADVICE = (
        "raise penalty (now {penalty!r})",
        "use a longer penalty_path (now {penalty_path!r})",
        "use dtype='float64' (now {dtype!r})",
    )

    # -- the schedule ------------------------------------------------------------------------
    def schedule(self) -> list[tuple[float, int]]:
        """(λ, CG iterations) of each Newton step: the path, then ``final_steps`` at ``penalty``."""
        lam = self._penalty()
        if self.penalty_path == "auto":
            count = max(0, math.ceil(math.log(PATH_START / lam) / math.log(PATH_FACTOR) - 1e-9))
            path = [lam * PATH_FACTOR**j for j in range(count, 0, -1)]
        else:
            path = [float(v) for v in self.penalty_path]
            below = [v for v in path if v < lam]
            if below:
                raise ParameterError(f"penalty_path must not go below penalty={lam:g}, got {below[0]:g}")
        on_path = PATH_CG if self.cg_iterations == "auto" else self.cg_iterations
        final = FINAL_CG if self.cg_iterations == "auto" else self.cg_iterations
        return [(v, on_path) for v in path] + [(lam, final)] * self.final_steps

    def _progress_total(self) -> int:
        return min(self.maxiter, len(self.schedule()))

    def _refine_rounds(self) -> int:
        return 0

    # -- resources ---------------------------------------------------------------------------
    def _estimate_resources(self, model: CostModel, n: int, k: int) -> str:
        """Falkon's parts (one M×M buffer, the block buffer, the K_nM cache); beyond them the
        outputs f, the Hessian weights, the gradient terms and the ±1 labels (4 × n×k) and the
        blocks of K_MM α. An iteration is a Newton step: the preconditioner's M×M set-up, its CG
        passes and the two passes (f = K_nM α, K_nMᵀ z) of the gradient."""
        M, s = self._center_count(n), model.itemsize
        model.hold("outputs, Hessian weights, gradient terms, labels (4 × n×k)", 4 * n * k * s)
        model.hold(
            "K_MM α blocks",
            operator_bytes(
                M,
                M,
                itemsize=8,
                budget_bytes=model.scratch_bytes,
                d=model.d,
                n_rhs=k,
                scratch_blocks=model.scratch_blocks,
            ),
            "scratch",
        )
        before = model.iteration
        suggestion = super()._estimate_resources(model, n, k)
        per_pass = model.iteration - before
        cg = max(it for _, it in self.schedule())
        model.iteration = (
            before
            + (cg + 2) * per_pass
            + model.entry_seconds(M * M, torch.float64)
            + model.flop_seconds(M**3, torch.float64)
        )
        return suggestion

    # -- the fit -----------------------------------------------------------------------------
    def _setup(self, X, Y):
        if self.refine not in (0, "auto"):
            raise ParameterError(
                f"LogisticFalkon takes refine=0 or 'auto' (no refinement: every Newton step "
                f"recomputes its gradient from the data), got {self.refine!r}"
            )
        self._schedule = self.schedule()
        # ±1 labels per column: the binary encoding already, one-hot columns as one-vs-rest labels.
        self._t = Y if Y.shape[1] == 1 else 2 * Y - 1
        b = self._setup_operator(X, self._t)  # b̃ = K_nMᵀ ω t / n = −2 ∇L(0) without intercept
        self._omega = 1.0 if self._weights is None else self._weights.to(X.dtype)
        k = self._t.shape[1]
        self.intercept_ = torch.zeros(k, dtype=torch.float64, device=X.device)
        if self.fit_intercept:  # the log-odds of each class's weighted frequency
            positive = ((self._t > 0) * self._omega).sum(0).double() / (torch.ones_like(self._t) * self._omega).sum(0)
            positive = positive.clamp(0.5 / self.n_, 1 - 0.5 / self.n_)  # a class of weight 0 stays finite
            self.intercept_ = torch.log(positive / (1 - positive))
        self._f = self.intercept_.to(X.dtype).expand_as(self._t).clone()
        self._kernel_grad = -0.5 * b if not self.fit_intercept else self._kernel_part(self._gradient_terms())
        self._grad0 = float(torch.linalg.norm(self._kernel_grad)) or 1.0
        self._alpha = torch.zeros(b.shape, dtype=torch.float64, device=X.device)
        self._center_products = KernelOperator(
            self._kernel(),
            self.centers_.double(),
            self.centers_.double(),
            memory_budget=self.memory_budget,
            n_rhs=b.shape[1],
        )
        self._center_outputs = self.intercept_.expand(self.centers_.shape[0], k).clone()
        self.penalty_ = self._penalty()
        self.coef_ = torch.zeros(b.shape, dtype=X.dtype, device=X.device)
        self.cg_iterations_ = 0
        self.jitter_ = None
        self.unresolved_directions_ = 0
        self.residual_advice_ = ""

    def _initial_step(self, X, Y) -> Step:
        loss = float((self._omega * torch.nn.functional.softplus(-self._t * self._f)).sum()) / self.n_
        return Step(
            residual=1.0, objective=loss, extras={"residual_kind": "logistic gradient (relative)", "newton_step": 0}
        )

    def _gradient_terms(self) -> torch.Tensor:
        """zᵢ/ωᵢ = −tᵢ σ(−tᵢ fᵢ) at the current outputs (n×k): ∂ℓ/∂f."""
        return -self._t * torch.sigmoid(-self._t * self._f)

    def _kernel_part(self, z: torch.Tensor) -> torch.Tensor:
        """K_nMᵀ W z / n, the data term of the gradient in α."""
        if self._weights is None:
            return self.operator_.rmatvec(z) / self.n_
        return self.operator_.rmatvec(z, weights=self._weights) / self.n_

    def _kernel_part_weighted(self, h: torch.Tensor) -> torch.Tensor:
        """c = K_nMᵀ h / n (M×k), h the Hessian weights: the coupling of α and b."""
        return self.operator_.rmatvec(h) / self.n_

    def _intercept_gradient(self) -> torch.Tensor:
        """g_b = Σ ωᵢ ∂ℓᵢ/∂f / n (k,)."""
        return (self._omega * self._gradient_terms()).sum(0).double() / self.n_

    def _hessian_weights(self) -> torch.Tensor:
        """ωᵢ σ(fᵢ)(1 − σ(fᵢ)) (n×k): the Newton system's weights."""
        p = torch.sigmoid(self._f)
        return self._omega * p * (1 - p)

    def _center_weights(self) -> torch.Tensor:
        """The Hessian weights at the centres, σ(f(c))(1 − σ(f(c))) from the model's outputs there
        (K_MM α + b, kept by :meth:`_gradient`), averaged over classes (one preconditioner for all),
        times the sample weight of the row a centre is. As the public FALKON library's logistic
        preconditioner: the outputs at the centres, not the mean weight, so that P fits the Newton
        system when the fit grows confident (σ(1 − σ) → 0 on well-classified rows, ≈ 1/4 near the
        boundary) — whether the centres were drawn from the rows or given."""
        p = torch.sigmoid(self._center_outputs)
        h = (p * (1 - p)).mean(1)
        if self._weights is not None and self.center_indices_ is not None:
            h = h * self._weights.double().reshape(-1)[self.center_indices_]
        return h

    def _steps(self, X, Y):
        n, op, final = self.n_, self.operator_, self._penalty()
        refresh = 0 if self.refresh_every == "auto" else self.refresh_every
        residual = 1.0  # the relative gradient before the step (the initial record's)
        for step, (lam, iterations) in enumerate(self._schedule, 1):
            forcing = min(0.1, residual) if self.cg_iterations == "auto" and lam == final else 0.0
            h = self._hessian_weights()
            self.penalty_ = lam
            self.preconditioner_ = pc = FalkonPreconditioner(
                self._kernel(),
                self.centers_,
                lam,
                weights=self.center_weights_,
                data_dtype=X.dtype,
                jitter=self.jitter,
                row_weights=self._center_weights(),
            )
            self.jitter_ = pc.jitter_
            self.unresolved_directions_ = pc.unresolved_
            # Pᵀ(−g) at this λ: −Pᵀ K_nMᵀ z/n − λ Pᵀ(K_MM + jD⁻²)α (Falkon._true_residual); with an
            # intercept, b eliminated (module docstring): the data term gains c g_b/s.
            data_term = -self._kernel_grad
            if self.fit_intercept:
                c = self._kernel_part_weighted(h)
                scale = h.sum(0).double() / n
                g_b = self._intercept_gradient()
                data_term = data_term + c * (g_b / scale)
            rhs = self._true_residual(data_term, self._alpha)

            def kernel_product(v, h=h):
                out = op.fused(v, weights=h) / n
                if self.fit_intercept:
                    out = out - c * ((c * v).sum(0) / scale)
                return out

            def matvec(beta, pc=pc, lam=lam):
                return pc.system_product(beta, kernel_product, lam)

            state = None
            for state in conjugate_gradient(matvec, rhs, refresh_every=refresh):
                forced = state.iteration > 0 and state.rel_residual <= forcing  # the inexact Newton stop
                if state.iteration >= iterations or state.converged or forced:
                    break
            self.cg_iterations_ += state.iteration
            delta = pc.apply(state.x)
            self._alpha = self._alpha + delta
            if self.fit_intercept:
                self.intercept_ = self.intercept_ - (g_b + (c * delta).sum(0)) / scale
            self.coef_ = self._alpha.to(X.dtype)
            residual, objective = self._gradient(final)
            self.penalty_ = final
            yield Step(
                residual=residual,
                objective=objective,
                extras={
                    "residual_kind": "logistic gradient (relative)",
                    "newton_step": step,
                    "penalty": lam,
                    "cg_iterations": state.iteration,
                    "cg_residual": state.rel_residual,
                },
            )

    def _gradient(self, lam: float) -> tuple[float, float]:
        """The new outputs f = K_nM α + b (the intercept moved by its Newton step first), the kernel
        part of the gradient K_nMᵀ W z / n (both kept for the next step), and
        (‖∇L_λ‖/‖∇L_λ(0)‖, L_λ) at ``lam``, the intercept's gradient included: two passes over K_nM."""
        kernel_f = self.operator_.matvec(self._alpha).to(self._t.dtype)
        self._f = kernel_f + self.intercept_.to(kernel_f.dtype)
        self._kernel_grad = self._kernel_part(self._gradient_terms())
        K_alpha = self._center_products.matvec(self._alpha)
        self._center_outputs = K_alpha + self.intercept_
        gradient = self._kernel_grad.double() + lam * K_alpha
        if self.fit_intercept:
            gradient = torch.cat([gradient, self._intercept_gradient().unsqueeze(0)])
        loss = float((self._omega * torch.nn.functional.softplus(-self._t * self._f)).sum()) / self.n_
        objective = loss + 0.5 * lam * float((self._alpha * K_alpha).sum())
        return float(torch.linalg.norm(gradient)) / self._grad0, objective

    def _finish(self, X, Y):
        """Nothing after the Newton steps; the operator and the outputs are let go."""
        for name in ("_f", "_t", "_kernel_grad", "_center_products", "_center_outputs", "_omega"):
            self.__dict__.pop(name, None)
        return iter(())

    # -- probabilities -----------------------------------------------------------------------
    def predict_proba(self, X):
        """Class probabilities (n, k) in the order of ``classes_``: [1 − σ(f), σ(f)] for two classes,
        the one-vs-rest σ(f_c) normalised to sum to 1 for more. A numpy array (a tensor for tensor input)."""
        scores = self._outputs(X)
        p = torch.sigmoid(scores)
        proba = torch.cat([1 - p, p], 1) if len(self.classes_) == 2 else p / p.sum(1, keepdim=True)
        return proba if isinstance(X, torch.Tensor) else proba.detach().cpu().numpy()

    def predict_log_proba(self, X):
        """log of :meth:`predict_proba`."""
        proba = self.predict_proba(X)
        return torch.log(proba) if isinstance(proba, torch.Tensor) else np.log(proba)


class EncodedLogisticFalkon(LogisticFalkon):
    """:class:`LogisticFalkon` on targets encoded for least squares (:func:`krrcore.datasets.core.encode_targets`:
    ±1 for two classes, one-hot columns for more), with the logits f = K_·M α + b as its predictions
    in the same layout — what a front end that runs every solver on a data set's encoded targets
    (the app's runs, :data:`krrcore.registry.SOLVERS`' regressors) needs: the sign or the arg-max of
    ``predict`` is the class, as for a squared-loss fit, and ``predict_proba`` gives the probabilities."""

    @staticmethod
    def _decoded(y, name: str):
        """The class of each row of encoded targets: a ±1 vector as is, a one-hot row's column."""
        if y is None:
            return None
        Y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        if Y.ndim == 2 and Y.shape[1] > 1:
            if not np.all((Y == 0) | (Y == 1)) or not np.all(Y.sum(1) == 1):
                raise ValueError(f"{name} of {Y.shape[1]} columns must be one-hot rows (one 1, the rest 0)")
            return Y.argmax(1)
        return Y.reshape(-1)

    def iter_fit(self, X, y, X_val=None, y_val=None, *, sample_weight=None, stop_event=None):
        """:meth:`LogisticFalkon.iter_fit` on the classes the encoded ``y`` and ``y_val`` hold;
        one-hot targets need a training row of every column's class (the logits keep their layout)."""
        labels = self._decoded(y, "y")
        Y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        if Y.ndim == 2 and Y.shape[1] > 1 and len(np.unique(labels)) != Y.shape[1]:
            absent = sorted(set(range(Y.shape[1])) - set(np.unique(labels).tolist()))
            raise ValueError(
                f"the logistic loss needs training rows of every class; the one-hot columns {absent} have none"
            )
        yield from super().iter_fit(
            X, labels, X_val, self._decoded(y_val, "y_val"), sample_weight=sample_weight, stop_event=stop_event
        )

    def predict(self, X):
        """The logits (:meth:`decision_function`): (n,) for ±1 targets, (n, k) for one-hot ones."""
        return self.decision_function(X)

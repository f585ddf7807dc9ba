"""The two fit loops every solver runs in: :class:`IterativeKRR` (the solver's ``_setup`` and
``_steps`` hooks; the loop times, evaluates, records, stops, and detects NaN or a stalled residual)
and :class:`DirectKRR` (one ``_solve``, one record). Both build records with one
:class:`~krrcore.solvers.records.Recorder`, so every solver's stream is evaluated alike."""

from __future__ import annotations

import threading
import warnings
from typing import ClassVar
import torch
from sklearn.exceptions import ConvergenceWarning
from ..linalg import residual_and_objective
from ..stream import SolverDivergedError, Stopper, Timer
from .params import (
    BOOLEAN,
    CALLBACKS,
    COUNT,
    METRIC_NAMES,
    TIMEOUTS,
    TOLERANCE,
    Integer,
    param,
)
from .base import KRRBase, Seeded
from .checks import (
    check_model_not_zero,
)
from .records import Step

__all__ = ["IterativeKRR", "DirectKRR"]


class IterativeKRR(Seeded):
    """Base of iterative solvers: one loop, one stream.

    Subclasses implement ``_setup(X, Y)`` (fitted attributes, preconditioner; sets ``centers_``
    and a zero ``coef_``) and ``_steps(X, Y)``, a generator that updates ``coef_`` and yields a
    :class:`Step` per reported iteration. Their runtime knobs, declared here once: ``maxiter``,
    ``tol`` (stop when the residual is at most it), ``callback`` (f(record) -> True stops),
    ``timeout`` (seconds of solver time), ``eval_train`` (the training metric in every record),
    ``metric`` (of the records' train/validation values; "auto": by the targets) and
    ``stall_patience`` (iterations without improvement before a stall ends the run).
    """

    maxiter: int = param(100, Integer(0))
    tol: float | None = param(None, TOLERANCE)
    callback: object = param(None, CALLBACKS)
    timeout: float | None = param(None, TIMEOUTS)
    eval_train: bool = param(False, BOOLEAN)
    metric: str = param("auto", METRIC_NAMES)
    stall_patience: int = param(50, COUNT)

    #: Read by the loop; the solvers that offer them declare them as parameters: ``eval_every``
    #: (a record every so many iterations; None: the solver's own default) and ``residual``
    #: ("float64": the reported residual is recomputed in float64).
    eval_every = None
    residual = None

    def _progress_total(self) -> int:
        return self.maxiter

    def _records(self, X, y, X_val, y_val, *, stop_event: threading.Event | None):
        """Generator of :class:`IterationRecord` (:meth:`iter_fit`); after it ends the estimator is fitted.

        Iteration 0 is the state after set-up (its ``seconds`` include the set-up time).
        Ends on: ``maxiter``; residual ≤ ``tol``; a residual below the working-precision floor
        ``residual_floor_`` (10·eps of the dtype the residual is evaluated in, see
        :meth:`_residual_dtype`: beyond it further iterations only move round-off); ``stop_event``
        set; ``callback(record)`` returning True; ``timeout``; a stalled residual.
        ``stop_reason_`` says which; a stalled run keeps its best iterate (smallest residual);
        ``converged_`` is True when the run reached ``tol`` or working
        precision. When ``tol`` is set and the run ends on ``maxiter`` or a stall short of it, a
        ``ConvergenceWarning`` says so (a stop asked for — ``stop_event``, ``callback``,
        ``timeout`` — does not warn). A diverging run (:meth:`krrcore.stream.Stopper.divergence`: a
        NaN or infinite residual, or one grown by orders of magnitude over its best) raises
        :class:`SolverDivergedError` naming the settings to change, leaving the best iterate in
        ``coef_`` and the records so far in ``trace_``. After the loop, unless a
        stop was asked for, :meth:`_finish` may add records (FALKON's float64 refinement).
        """
        X, Y, recorder = self._start_fit(
            X,
            y,
            X_val,
            y_val,
            stop_event=stop_event,
            timeout=self.timeout,
            metric=self.metric,
            eval_train=self.eval_train,
        )
        maxiter, tol, patience = self.maxiter, self.tol, self.stall_patience
        self.converged_ = False
        stopper = Stopper(stop_event, self.callback, self.timeout)
        timer = Timer()
        self._setup(X, Y)
        floor_dtype = self._residual_dtype(X)
        self.residual_floor_ = 10 * torch.finfo(floor_dtype).eps

        zero_targets = isinstance(Y, torch.Tensor) and not bool(Y.any())
        rec = recorder.record(0, Step(residual=0.0) if zero_targets else self._initial_step(X, Y), timer)
        stopper.divergence(rec)
        self.trace_.append(rec)
        yield rec
        if zero_targets:  # y = 0: the zero model, the starting point, is the exact solution
            self.n_iter_, self.converged_ = 0, True
            self.stop_reason_ = "converged: y is all zero, and the zero model solves the system exactly"
            return
        if maxiter == 0:
            self.stop_reason_ = "maxiter=0: no iterations run"
            return
        best, since_best, best_iteration = rec.residual, 0, 0
        best_coef = self.coef_.clone()
        timer.resume()
        iteration = 0
        for step in self._steps(X, Y):
            iteration = step.iteration if step.iteration is not None else iteration + 1
            rec = recorder.record(iteration, step, timer)
            diverged = stopper.divergence(rec, self.residual_floor_, bool(torch.isfinite(self.coef_).all()))
            if diverged:
                self.coef_ = best_coef
                self.stop_reason_ = (
                    f"{diverged}; kept the best iterate (iteration {best_iteration}, residual "
                    f"{best:.3g}). {self._divergence_advice()}"
                )
                raise SolverDivergedError(f"{type(self).__name__} {self.stop_reason_}")
            self.trace_.append(rec)
            yield rec
            if rec.residual < best * (1 - 1e-6):
                best, since_best, best_iteration, best_coef = rec.residual, 0, iteration, self.coef_.clone()
            else:
                since_best += 1
            short_of_tol = False
            if tol is not None and rec.residual <= tol:
                self.stop_reason_ = f"converged: residual {rec.residual:.3g} <= tol {tol:g}"
                self.converged_ = True
            elif rec.residual < self.residual_floor_:
                self.stop_reason_ = (
                    f"converged to working precision: residual {rec.residual:.3g} is below "
                    f"10·eps of {str(floor_dtype).removeprefix('torch.')} "
                    f"({self.residual_floor_:.2g}); more iterations would only move round-off"
                )
                self.converged_ = True
            elif iteration >= maxiter:
                self.stop_reason_ = f"reached maxiter={maxiter}"
                short_of_tol = tol is not None
            elif stopper.should_stop(rec):
                self.stop_reason_ = stopper.reason
            elif since_best >= patience:
                # Round-off can carry the iterate away from its best (float32 drift): keep the best.
                self.coef_ = best_coef
                self.stop_reason_ = (
                    f"stalled: the residual has not improved for {patience} iterations; "
                    f"the model is the best iterate, from iteration {best_iteration} "
                    f"(residual {best:.3g})"
                )
                short_of_tol = tol is not None
                if best_iteration == 0:  # no step ever helped: the model is the starting point (zero)
                    warnings.warn(
                        f"{type(self).__name__} never improved on its starting point (the zero model) "
                        f"in {iteration} iterations. {self._divergence_advice()}",
                        ConvergenceWarning,
                        stacklevel=2,
                    )
            if short_of_tol:
                warnings.warn(
                    f"{type(self).__name__} did not reach tol={tol:g}: {self.stop_reason_} with "
                    f"residual {rec.residual:.3g}; raise maxiter or tol",
                    ConvergenceWarning,
                    stacklevel=2,
                )
            if self.stop_reason_:
                break
            timer.resume()
        else:
            self.stop_reason_ = self.stop_reason_ or "solver finished"
        self.n_iter_ = iteration
        if stopper.reason:  # a stop asked for ends the fit here
            return
        timer.resume()
        for step in self._finish(X, Y):
            rec = recorder.record(step.iteration, step, timer)
            self.trace_.append(rec)
            yield rec
            timer.resume()
        if self.converged_:
            check_model_not_zero(self, X, Y)

    #: What to change when this solver's iterates diverge, each with its value now (``{name}``:
    #: a parameter or fitted attribute): the advice of :class:`SolverDivergedError`.
    DIVERGENCE_ADVICE: ClassVar[tuple[str, ...]] = (
        "raise penalty (now {penalty!r})",
        "use dtype='float64' (now {dtype!r})",
    )

    def _divergence_advice(self) -> str:
        """'Lower lr_scale (now 4) or raise batch_size (now 1).': the settings that cure a divergence."""
        parts = []
        for template in self.DIVERGENCE_ADVICE:
            try:
                parts.append(template.format(**vars(self)))
            except (KeyError, AttributeError):  # a subclass without that setting
                continue
        if not parts:
            return "Change the solver's settings."
        text = ", ".join(parts[:-1]) + (" or " if len(parts) > 1 else "") + parts[-1]
        return text[0].upper() + text[1:] + "."

    def _set_eval_every(self, default: int) -> None:
        """``eval_every_``: the ``eval_every`` parameter, or the solver's ``default`` when it is None."""
        self.eval_every_ = default if self.eval_every is None else self.eval_every

    def _report_due(self, iteration: int) -> bool:
        """Whether ``iteration`` gets a record: every ``eval_every_`` iterations and at ``maxiter``."""
        return iteration % self.eval_every_ == 0 or iteration == self.maxiter

    def _residual_dtype(self, X) -> torch.dtype:
        """The dtype the reported residual is computed in, which sets the working-precision floor:
        float64 for the solvers whose ``residual`` option is "float64" (ASkotch, Skotch, NystromPCG,
        CG: recomputed in float64 even for float32 solves), else the solve's dtype (FALKON's CG
        residual, the "estimate" modes). A solver evaluating otherwise overrides this."""
        return torch.float64 if self.residual == "float64" else X.dtype

    def _finish(self, X, Y):
        """Steps after the loop has stopped, each with its ``iteration`` (FALKON's float64 refinement
        of a float32 solve); not run when a stop was asked for. None by default."""
        return iter(())

    def _initial_step(self, X, Y) -> Step:
        """Residual of the starting point (coef_ = 0): 1.0 for relative residuals."""
        return Step(residual=1.0)

    def _setup(self, X, Y) -> None:
        raise NotImplementedError

    def _steps(self, X, Y):
        raise NotImplementedError


class DirectKRR(KRRBase):
    """Base of direct solvers: one factorisation, one record.

    Subclasses implement ``_solve(X, Y) -> Step``: set ``centers_`` and ``coef_`` and return a
    :class:`Step` whose residual is the relative residual of the linear system just solved, as a
    lazy value (so its cost is evaluation time). :meth:`iter_fit` gives the same stream as an
    iterative solver's, with a single record: the app, the tests and the benchmarks need no
    special case for direct solvers.
    """

    def _records(self, X, y, X_val, y_val, *, stop_event: threading.Event | None):
        """Generator of exactly one :class:`IterationRecord` (iteration 1): ``seconds`` is the solve
        time, ``residual`` the solved system's relative residual, ``val_metric`` filled when
        validation data is given. ``stop_event`` is accepted for a uniform signature; a direct
        solve cannot be interrupted. Sets ``trace_``, ``stop_reason_``, ``n_iter_`` = 1 and
        ``converged_`` = True.
        """
        X, Y, recorder = self._start_fit(X, y, X_val, y_val, stop_event=stop_event)
        timer = Timer()
        step = self._solve(X, Y)
        rec = recorder.record(1, step, timer)
        del step  # it may hold the system matrix for its residual
        self.trace_.append(rec)
        self.n_iter_ = 1
        self.converged_ = True
        self.stop_reason_ = "direct solve finished"
        check_model_not_zero(self, X, Y)
        yield rec

    def _solve(self, X, Y) -> Step:
        raise NotImplementedError

    def _solved_system_step(
        self, A: torch.Tensor, b: torch.Tensor, constant: float = 0.0, *, coef: torch.Tensor | None = None
    ) -> Step:
        """The step after solving A coef_ = b (or A ``coef`` = b, when the system solved is in other
        variables than ``coef_``: ExactKRR's weighted form): residual and objective of those
        coefficients in float64 against A as given (without the jitter the factorisation may have
        added), one product with A, evaluated lazily."""

        def evaluate():
            c = (self.coef_ if coef is None else coef).double()
            return residual_and_objective(A @ c, c, b, constant)

        return Step.deferred(evaluate, extras={"residual_kind": "direct solve (float64, system without jitter)"})

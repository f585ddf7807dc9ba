"""FalkonCV's stages (:data:`krrcore.tuning.estimator.STAGES`): one M's search — the start, a scan of
σ with the best λ at each, the single σ (Brent's line search of the profiled objective, or
L-BFGS-B), one σ per feature and its pruning — and the final fit on all rows at the chosen point."""

from __future__ import annotations

import math
import warnings

import torch

from ..kernels import GaussianKernel
from ..solvers.base import Step
from ..solvers.falkon import Falkon
from .objectives import PenaltyProfile, gaussian_block, row_stats, sigma_value
from .search import LOG_SIGMA_RANGE, Point, Search, StopSearch
from .choice import typical_sigma

#: The scan that starts the search: σ × 2^s for these s, each with its best λ (L-BFGS-B then starts
#: from the best; the objective can have several valleys in σ, and a descent finds the nearest).
SCAN = (-2.0, -1.0, 1.0, 2.0)
#: With ``M="auto"``, the scan at each larger M around the σ the last M chose (log2 shifts), and the
#: most probes of the single σ's line at the first M (half as many at the next ones).
SCAN_NEXT, LINE_PROBES = (-0.5, 0.5), 8
SCAN_FELL_SHORT = (
    "this M's scan of σ did not lower the validated error of the M kept by M_tolerance: no line in σ at this M"
)
OVERRULED_AT_SCAN = (
    "the objective's own line in σ skipped: the held-out rows overruled its best point of the scan by more "
    "than one standard error"
)


class StagedSearch:
    """FalkonCV's search and final-fit methods (a mixin: they read its parameters and write
    ``sigma_``, ``penalty_``, ``kernel_``, ``centers_``, ``coef_`` and ``trace_``)."""

    def _search(self, search: Search, start: Point, stage, report, messages, stopper, first: bool) -> bool:
        """One M's search from ``start``: the start, a scan of σ (λ best at each), the single σ
        (golden-section search of the profiled objective, or L-BFGS-B where λ or the centres move by
        gradient, or on the CG route), then ARD and its pruning. True when a budget ended it."""
        self._scalar_best = None
        try:
            stage["code"] = 0 if first else 1
            start = search.value_at(start)
            search.best = start
            report(start, 1.0)
            stage["code"] = 1
            base = start.log_sigma.mean() if start.log_sigma.ndim else start.log_sigma
            Z = start.centers
            scanned = [
                search.probe(Point(base + shift * math.log(2.0), start.log_penalty, Z))
                for shift in ((0.0, *SCAN) if first else SCAN_NEXT)
            ]
            # The best σ at an end of the scan: the scan goes on outwards (up to LOG_SIGMA_RANGE).
            while True:
                ends = sorted(scanned, key=lambda p: float(p.log_sigma))
                i = min(range(len(ends)), key=lambda j: ends[j].value)
                if 0 < i < len(ends) - 1:
                    break
                step = math.log(2.0) * (1 if i else -1)
                t = ends[i].log_sigma + step
                if abs(float(t - base)) > LOG_SIGMA_RANGE:
                    break
                scanned.append(search.probe(Point(t, start.log_penalty, Z)))
            if not first and self._scan_falls_short(search):
                messages.append(SCAN_FELL_SHORT)
                self._scalar_best = search.best
                return bool(stopper.reason)
            first_stage = max(2, int(self.max_steps) // 3) if self.ard else None
            line = search.profile and search.cg_maxiter is None and not (self.tune_centers and not self.ard)
            stage["code"] = 2
            if line:
                probes, low, high = (
                    LINE_PROBES if first else LINE_PROBES // 2,
                    float(base) - LOG_SIGMA_RANGE,
                    float(base) + LOG_SIGMA_RANGE,
                )
                # The held-out rows already overrule the objective's best scan point: its own line
                # would refine a candidate that loses, so only their line runs.
                overruled = self._held_out_line_points(search)
                if overruled:
                    messages.append(OVERRULED_AT_SCAN)
                else:
                    messages.append(search.line(scanned, probes, low, high))
                    overruled = self._held_out_line_points(search)
                if overruled:  # the held-out rows prefer other values: their own optimum in σ, too
                    messages.append(search.line(overruled, probes, low, high, held_out=True))
            else:
                messages.append(
                    search.run(search.best, tune_centers=self.tune_centers and not self.ard, steps=first_stage)
                )
            self._scalar_best = search.best
            if self.ard and not messages[-1].startswith("reached max_steps") and not stopper.reason:
                stage["code"] = 3
                best = search.best
                ard = (
                    best.log_sigma.expand(search.problem.X.shape[1]).clone()
                    if best.log_sigma.ndim == 0
                    else best.log_sigma
                )
                messages.append(search.run(Point(ard, best.log_penalty, best.centers), tune_centers=self.tune_centers))
                if not stopper.reason and search.best.log_sigma.ndim == 1:
                    self._prune(search, self._scalar_best, messages)
        except StopSearch as stop:
            messages.append(str(stop))
            return True
        return bool(stopper.reason) or messages[-1].startswith("reached max_steps")

    def _scan_falls_short(self, search: Search) -> bool:
        """``M="auto"`` at a larger M: whether no σ of its scan, each at the held-out rows' best λ,
        beats the validated error of the M kept (``_kept_validated``, the search's units) by
        ``M_tolerance``; the line in σ then costs its probes for a level the rule rejects (the
        next M's σ moves little from the last's, and the scan brackets it)."""
        kept = getattr(self, "_kept_validated", None)
        if kept is None or self.ard or search.checker is None:
            return False
        held = [offers["holdout"][1] for _, _, offers, _ in self._seen if "holdout" in offers]
        return bool(held) and min(held) >= kept * (1.0 - self.M_tolerance)

    def _final_fit(self, X, Y, X64, Y64, best: Point, scale: float, recorder, timer, stage, emit) -> None:
        """The model on all rows at the best point: this estimator's ``centers_`` and ``coef_``
        (X64, Y64: the float64 rows the search already made, which the direct solution reads)."""
        sigma = sigma_value(best.log_sigma)
        self.sigma_ = sigma if isinstance(sigma, float) else sigma.numpy()
        self.penalty_ = math.exp(best.log_penalty)
        self.kernel_ = GaussianKernel(sigma)
        self.objective_value_ = best.value * (scale**2 if self.objective != "compreg" else 1.0)
        all_rows = self._tune_rows(X.shape[0]) >= X.shape[0]
        self.final_solver_ = self.solver if self.solver != "auto" else ("direct" if all_rows else "falkon")
        timer.resume()
        self.estimator_ = None
        if self.final_solver_ == "direct":
            residual, iterations = self._direct_solution(X64, Y64, best, sigma)
        else:
            centers = {"uniform": "uniform", "bless": "bless"}.get(
                self.centers_choice_, self._in_data_units(best.centers.double()).numpy()
            )
            final = Falkon(
                self.kernel_,
                self.penalty_,
                int(best.centers.shape[0]),
                maxiter=self.maxiter,
                centers=centers,
                seed=self.seed_,
                dtype=self.dtype,
                device=self.device,
                memory_budget=self.memory_budget,
            )
            # Y is the search's, less intercept_: the final model is fitted to y itself and finds
            # the same offset (fit_intercept), so estimator_ predicts y on its own.
            target = Y + self.intercept_.to(Y)
            final.set_params(fit_intercept=self.fit_intercept)
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="M=.* centres requested")  # said once, by the search
                final.fit(X, target[:, 0] if self._y_was_1d else target)
            self.estimator_ = final.compact()
            self.centers_, self.coef_, self.intercept_ = final.centers_, final.coef_, final.intercept_
            residual, iterations = final.trace_[-1].residual, final.n_iter_
        stage["code"] = 5
        extras = {
            "sigma": typical_sigma(best.log_sigma),
            "penalty": self.penalty_,
            "stage": 5,
            "objective": self.objective_value_,
            "residual_kind": f"final fit ({'direct Nyström solve' if self.final_solver_ == 'direct' else 'FALKON'})",
            "final_iterations": iterations,
        }
        extras["log10_sigma"], extras["log10_penalty"] = math.log10(extras["sigma"]), math.log10(self.penalty_)
        rec = recorder.record(
            len(self.trace_), Step(residual=residual, objective=self.objective_value_, extras=extras), timer
        )
        self.trace_.append(rec)
        emit(("record", rec))

    def _direct_solution(self, X64, Y64, best: Point, sigma) -> tuple[float, int]:
        """The Nyström solution on all rows by the search's own closed form (:class:`PenaltyProfile`:
        K_MM's Cholesky factor, then the eigenvalues of the features' Gram matrix), which stays
        accurate at small λ where a Cholesky factor of K_nMᵀK_nM + λnK_MM does not (its solution
        moved with the BLAS threads by 20% in test error at λ = 6e-8 on concrete, M = 400). Returns
        the relative residual of (K_nMᵀK_nM + λnK_MM)α = K_nMᵀY and 1 (one solve)."""
        Z = best.centers.double()
        stats = row_stats(X64, Y64, Z, sigma, self.memory_budget)
        Kmm = gaussian_block(Z, Z, best.log_sigma)
        alpha = PenaltyProfile("gcv", stats, Kmm).alpha(self.penalty_)
        H_alpha = stats.G @ alpha + self.penalty_ * stats.n * (Kmm @ alpha)
        self.centers_, self.coef_ = self._in_data_units(Z), alpha.to(self._dtype())
        return float(torch.linalg.norm(H_alpha - stats.R) / torch.linalg.norm(stats.R)), 1

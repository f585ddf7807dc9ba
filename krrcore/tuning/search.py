"""The tuning loop: Brent's search on one log σ, L-BFGS-B on many (and log λ, and the centres).

A single σ with λ profiled is a one-variable problem: :meth:`Search.line` brackets it from the
scan and narrows the bracket by parabolic steps (golden sections where they fail), one pass over
the rows per probe and no gradient (:meth:`Search.probe`); where the held-out rows overrule the
objective it searches their error instead (:meth:`Search.probe_checked`). L-BFGS-B serves one σ
per feature, moving centres, λ moved by gradient and the CG route.

Each evaluation computes the objective and its exact gradient (:func:`krrcore.tuning.objectives.evaluate`).
With ``penalty_search="profile"`` (the default) λ is not a variable of the descent: at every σ the
objective is minimised over λ exactly through its closed form (:class:`~krrcore.tuning.objectives.PenaltyProfile`),
so the descent moves σ alone along the valley of the (σ, λ) map, and the gradient it follows is the
profiled objective's (at the best λ, ∂L/∂λ = 0: the partial gradient in σ is the total one).
``"gradient"`` moves log λ with log σ instead.

Stopping rule: L-BFGS-B's own — the objective's relative decrease per step below ``tol``, or its
projected gradient below ``tol`` — or no improvement of the best objective by more than ``tol``
(relative) in :data:`PATIENCE` evaluations (near the optimum the profiled objective varies at the
level of its round-off, where a line search only wastes evaluations), or ``max_steps``
evaluations, ``timeout`` seconds of tuning, ``stop_event``, ``callback``. The point kept is the
best evaluated, whatever stopped the search.
"""

from __future__ import annotations

import math
import queue
import threading
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.optimize import minimize

from ..device import release_openmp_threads
from ..memory import storage_budget

from .implicit import evaluate_cg
from .objectives import PenaltyProfile, Problem, evaluate, gaussian_block, row_stats, sigma_value

#: Evaluations without a relative improvement of the best objective above ``tol`` that end a stage.
PATIENCE = 3
#: log σ may move this far (in e-folds) either way from its start: a factor of about 150.
LOG_SIGMA_RANGE = 5.0
#: The line in σ stops when its bracket reaches this relative distance either side of the best σ
#: (×1.1 in all): the validated error is flat to well within its standard error there.
LINE_TOLERANCE = 0.05
#: ... and the held-out error's line when a step lowers its best by less than this (relative): its
#: standard error is a few per cent of it, and a flat valley would otherwise be crept along (the
#: objective's own line, which one σ per feature starts from, goes on to the bracket).
LINE_VALUE_TOLERANCE = 0.002

#: The smallest λ the tuner tries, by the fitted model's dtype, and the largest. Below about 1e-7
#: float64 Nyström solutions stop being numbers of the problem: on diamonds (σ = 4.5, M = 500) and
#: concrete (σ = 3.1, M = 400) the closed form, a Cholesky solve and 300 FALKON iterations agree to
#: 2% in test error from λ = 1e-7 up, and disagree by 15% to 4× below — while GCV, computed from
#: the same rounded numbers, keeps falling. float32 kernel values resolve no finer than about 1e-6
#: (krrcore.preconditioner's resolution floor).
PENALTY_BOUNDS = {torch.float64: (1e-7, 10.0), torch.float32: (1e-6, 10.0)}


class StopSearch(Exception):
    """Raised inside an evaluation to end the search (budget, stop asked for)."""


@dataclass
class Point:
    """A point of the search: log σ (0-d or one per feature), log λ, the centres, and what was
    measured there."""

    log_sigma: torch.Tensor
    log_penalty: float
    centers: torch.Tensor
    value: float = math.inf
    alpha: torch.Tensor | None = None
    extras: dict = field(default_factory=dict)
    residual: torch.Tensor | None = None  # validation residuals (the CG route)


class Search:
    """One tuning run's search state, shared by its stages (scalar σ, then ARD).

    ``report(point, residual)`` is the caller's hook: it turns an evaluated point into a record,
    and may raise :class:`StopSearch`.
    """

    def __init__(
        self,
        objective: str,
        problem: Problem,
        *,
        penalty_bounds: tuple[float, float],
        profile: bool,
        max_steps: int,
        tol: float,
        report,
        cg_maxiter: int | None = None,
        checker=None,
    ):
        self.objective, self.problem = objective, problem
        # cg_maxiter: the hold-out objective by FALKON's CG (krrcore.tuning.implicit), no closed form in λ.
        self.cg_maxiter = cg_maxiter
        self.checker = checker  # krrcore.tuning.validation.Checker, or None (the hold-out objective's rows)
        if cg_maxiter is not None and (objective != "holdout" or profile):
            raise ValueError("the CG route tunes the hold-out objective with λ moved by gradient")
        self.penalty_bounds = penalty_bounds
        self.profile = profile
        self.max_steps, self.tol = max_steps, tol
        self.report = report
        self.steps = 0
        self.best: Point | None = None
        self.scale = None  # |objective| at the first evaluation: scipy sees L / scale
        self.first_gradient = None
        self.since_improvement = 0
        self.patience, self.stage_start, self.stage_end = PATIENCE, 0, max_steps
        self._stats_key, self._stats = None, None

    # -- the objective -----------------------------------------------------------------------
    def stats(self, log_sigma: torch.Tensor, Z: torch.Tensor):
        """(train sums, validation sums, :class:`PenaltyProfile`) at σ and the centres, kept for
        the next call at the same point."""
        key = (log_sigma.detach().numpy().tobytes(), Z.detach().numpy().tobytes())
        if key != self._stats_key:
            p = self.problem
            sigma = sigma_value(log_sigma)
            # The kernel blocks are kept for the gradient's pass, within half the storage budget.
            room = storage_budget(p.memory_budget, p.X.device) // 2
            n_val = 0 if p.X_val is None else p.X_val.shape[0]
            share = room * p.X.shape[0] // (p.X.shape[0] + n_val)
            train = row_stats(p.X, p.Y, Z, sigma, p.memory_budget, cache_bytes=share)
            val = (
                row_stats(p.X_val, p.Y_val, Z, sigma, p.memory_budget, cache_bytes=room - share, gram=False)
                if self.objective == "holdout"
                else None
            )
            profile = PenaltyProfile(self.objective, train, kmm(Point(log_sigma, 0.0, Z)), val)
            self._stats_key, self._stats = key, (train, val, profile)
        return self._stats

    def value_at(self, point: Point) -> Point:
        """The objective and α at ``point``, from the closed form in λ (robust at small λ, where the
        Cholesky route's α is large and its residual a cancellation), or by FALKON (the CG route)."""
        if self.cg_maxiter is not None:
            result = evaluate_cg(
                self.problem, point.centers, point.log_sigma, point.log_penalty, maxiter=self.cg_maxiter, grad=False
            )
            point.value, point.alpha, point.residual = result.value, result.alpha, result.residual
            return point
        profile = self.stats(point.log_sigma, point.centers)[2]
        lam = math.exp(point.log_penalty)
        point.value, point.alpha = float(profile.values([lam])[0]), profile.alpha(lam)
        return point

    def row_errors(self, point: Point) -> torch.Tensor | None:
        """The per-row errors the objective at ``point`` averages (for a standard error): squared
        validation residuals (holdout), squared training residuals / (1 − Tr Ĥ/n)² (gcv); None
        for compreg."""
        if self.cg_maxiter is not None:
            return point.residual.pow(2).mean(1)
        train, _, profile = self.stats(point.log_sigma, point.centers)
        lam = math.exp(point.log_penalty)
        if self.objective == "holdout":
            return profile.val_residual(lam).pow(2).mean(1)
        if self.objective == "gcv":
            residual = train.op.matvec(profile.alpha(lam)) - train.Y
            tr_hat = float((profile.mu / (profile.mu + lam * train.n)).sum())
            return residual.pow(2).mean(1) / (1.0 - tr_hat / train.n) ** 2
        return None

    def checked(self, point: Point, penalty: float | None = None) -> torch.Tensor | None:
        """Squared errors on the held-out rows (one per row, averaged over the outputs) of the
        model at ``point``'s σ and centres, at λ = ``penalty`` (default the point's own), fitted
        without them: by the :class:`~krrcore.tuning.validation.Checker` (k folds, or one part),
        or the hold-out objective's own validation rows; None without either."""
        lam = math.exp(point.log_penalty) if penalty is None else penalty
        if self.checker is not None:
            return self.checker.errors(point.log_sigma, point.centers, lam, self._total(point))
        if self.cg_maxiter is not None:
            return point.residual.pow(2).mean(1) if penalty is None and point.residual is not None else None
        if self.objective == "holdout":
            return self.stats(point.log_sigma, point.centers)[2].val_residual(lam).pow(2).mean(1)
        return None

    def _total(self, point: Point):
        """The search's sums at the point, when its rows are the checker's (GCV, compreg): the
        checker then needs passes over its held-out rows only."""
        if self.checker is None or self.cg_maxiter is not None or self.problem.X is not self.checker.X:
            return None
        return self.stats(point.log_sigma, point.centers)[0]

    def proposals(self, point: Point) -> dict:
        """{objective: (λ, its value, the held-out rows' squared errors there)}: every closed-form
        objective's best λ at the point's σ and centres (one eigenproblem serves GCV and compreg;
        "holdout": the held-out rows' best λ), while the point's sums are at hand."""
        if self.cg_maxiter is not None:
            return {}
        profile = self.stats(point.log_sigma, point.centers)[2]
        out = {}
        names = ("gcv", "compreg") if self.objective != "holdout" else ()
        for name in names:
            lam, value = profile.best(*self.penalty_bounds, objective=name)
            out[name] = (lam, value, self.checked(point, lam))
        if self.checker is not None:
            lam, value = self.checker.best(point.log_sigma, point.centers, *self.penalty_bounds, self._total(point))
            out["holdout"] = (lam, value, self.checked(point, lam))
        elif self.objective == "holdout":
            lam, value = profile.best(*self.penalty_bounds)
            out["holdout"] = (lam, value, self.checked(point, lam))
        return {k: v for k, v in out.items() if v[2] is not None}

    def probe_checked(self, point: Point) -> Point:
        """A probe at the held-out rows' best λ (the hold-out optimum's line): counted, reported
        (the held-out rows' candidates, :meth:`proposals`), never :attr:`best`;
        ``point.extras["held_out"]`` carries the held-out error there."""
        lam, held_out = self.checker.best(point.log_sigma, point.centers, *self.penalty_bounds, self._total(point))
        point.log_penalty = math.log(lam)
        self.value_at(point)
        point.extras = {**point.extras, "held_out": held_out}
        self.steps += 1  # not a candidate for the objective's own choice: its λ is the held-out rows'
        self.report(point, math.nan)
        if self.steps >= self.max_steps:
            raise StopSearch(f"reached max_steps={self.max_steps} evaluations")
        return point

    def line(self, points: list[Point], probes: int, low: float, high: float, held_out: bool = False) -> str:
        """Brent's search in the scalar log σ of the profiled objective (``held_out``: of the
        held-out error at its best λ, :meth:`probe_checked`): from the best of ``points`` (already
        probed, scalar σ; their values are reused) and its neighbours, a step to the vertex of the
        parabola through the best point and its two neighbours, or a golden section of the larger
        side where the vertex falls outside or too near the bracket's ends, or a step of the
        tolerance to the far side where the vertex is the best point but its neighbours are more
        than ×1.2 away; until the bracket, or the vertex of a parabola through neighbours within
        ×1.2, is within ±:data:`LINE_TOLERANCE` of the best σ, or (``held_out``) a step that finds a
        lower value lowers it by less than :data:`LINE_VALUE_TOLERANCE`, or after ``probes``
        evaluations, within [low, high]. A one-variable problem whose λ is exact at every σ needs no
        gradient: each probe is one pass over the rows, where a gradient step costs two; a smooth
        valley takes a parabolic step or two where golden sections take about seven."""
        score = (lambda p: p.extras["held_out"]) if held_out else (lambda p: p.value)  # noqa: E731
        Z = points[0].centers
        start_penalty = min(points, key=score).log_penalty
        value = {float(p.log_sigma): score(p) for p in points}

        def f(t: float) -> float:
            if t not in value:
                point = Point(torch.tensor(t, dtype=torch.float64), start_penalty, Z)
                value[t] = score(self.probe_checked(point) if held_out else self.probe(point))
            return value[t]

        tol, golden, flat = math.log1p(LINE_TOLERANCE), (3.0 - math.sqrt(5.0)) / 2.0, False
        near = math.log(1.2)  # neighbours within ×1.2 make the parabola a local model
        for _ in range(max(int(probes), 1)):
            known = sorted(value)
            j = min(range(len(known)), key=lambda i: value[known[i]])
            x = known[j]
            a = known[j - 1] if j > 0 else max(x - math.log(2.0), low)
            b = known[j + 1] if j + 1 < len(known) else min(x + math.log(2.0), high)
            if b - a <= 2.0 * tol or (a == x and b == x):
                break
            u = None
            if a in value and b in value:  # the parabola's vertex through (a, x, b)
                fa, fx, fb = value[a], value[x], value[b]
                p, q = (x - a) ** 2 * (fx - fb) - (x - b) ** 2 * (fx - fa), (x - a) * (fx - fb) - (x - b) * (fx - fa)
                if q != 0.0:
                    u = x - 0.5 * p / q
            if u is not None and a < u < b and abs(u - x) <= tol / 2:
                if max(x - a, b - x) <= near:
                    break  # a parabola through near neighbours puts the minimum at the best σ probed
                u = x + tol if b - x > x - a else x - tol  # a near neighbour on the far side
            if u is None or not (a + tol / 2 <= u <= b - tol / 2):
                u = x + golden * (b - x) if b - x > x - a else x - golden * (x - a)
            before = value[x]
            if before - LINE_VALUE_TOLERANCE * abs(before) <= f(u) < before and held_out:
                flat = True  # a step that gains less than the tolerance: the valley's floor
                break
        t = min(value, key=value.get)
        known = sorted(value)
        j = known.index(t)
        width = (known[j + 1] if j + 1 < len(known) else t) - (known[j - 1] if j > 0 else t)
        what = "the held-out error's" if held_out else "the objective's"
        floor = f", where a step lowered it by less than {LINE_VALUE_TOLERANCE:.1%}" if flat else ""
        where = f"to a bracket of ×{math.exp(width):.3g} around σ = {math.exp(t):.4g}{floor}"
        return f"converged: {what} search in σ {where}"

    def best_sigma(self) -> float:
        return float(torch.exp(self.best.log_sigma.double().mean()))

    def profiled_penalty(self, log_sigma: torch.Tensor, Z: torch.Tensor) -> float:
        """log λ minimising the objective at σ and the centres (:class:`PenaltyProfile`)."""
        lam, _ = self.stats(log_sigma, Z)[2].best(*self.penalty_bounds)
        return math.log(lam)

    def evaluate(self, point: Point, centers_grad: bool):
        """Objective and gradient at ``point`` (its log λ profiled first when ``profile``)."""
        if self.cg_maxiter is not None:
            result = evaluate_cg(
                self.problem,
                point.centers,
                point.log_sigma,
                point.log_penalty,
                maxiter=self.cg_maxiter,
                centers_grad=centers_grad,
            )
            point.value, point.alpha, point.residual = result.value, result.alpha, result.residual
            return result
        if self.profile:
            point.log_penalty = self.profiled_penalty(point.log_sigma, point.centers)
        train, val, profile = self.stats(point.log_sigma, point.centers)
        result = evaluate(
            self.objective,
            self.problem,
            point.centers,
            point.log_sigma,
            point.log_penalty,
            centers_grad=centers_grad,
            train=train,
            val=val,
            profile=profile,
        )
        point.value, point.alpha = result.value, result.alpha
        return result

    def probe(self, point: Point) -> Point:
        """One evaluation without a gradient (λ profiled, when there is a closed form): counted, kept
        if best, reported."""
        if self.cg_maxiter is None:
            point.log_penalty = self.profiled_penalty(point.log_sigma, point.centers)
        self.value_at(point)
        self.steps += 1
        if self.best is None or point.value < self.best.value:
            self.best = point
        self.report(point, math.nan)
        if self.steps >= self.max_steps:
            raise StopSearch(f"reached max_steps={self.max_steps} evaluations")
        return point

    def record(self, point: Point, grad: np.ndarray, at_bound: np.ndarray) -> None:
        """Count the evaluation, keep the best point, and report it with its relative projected gradient."""
        self.steps += 1
        projected = np.where(at_bound, 0.0, grad)
        norm = float(np.linalg.norm(projected))
        if self.first_gradient is None:
            self.first_gradient = norm or 1.0
        if self.best is None or point.value < self.best.value:
            if self.best is None or point.value < self.best.value - self.tol * abs(self.best.value):
                self.since_improvement = 0
            else:
                self.since_improvement += 1
            self.best = point
        else:
            self.since_improvement += 1
        self.report(point, norm / self.first_gradient)
        if self.steps >= self.max_steps:
            raise StopSearch(f"reached max_steps={self.max_steps} evaluations")
        if self.steps >= self.stage_end:
            raise StopSearch(f"used this stage's {self.steps - self.stage_start} evaluations")
        if self.since_improvement >= self.patience:
            raise StopSearch(
                f"converged: the best objective improved by less than tol={self.tol:g} (relative) in "
                f"the last {self.patience} evaluations"
            )

    # -- one stage of L-BFGS-B -----------------------------------------------------------------
    def run(self, start: Point, *, tune_centers: bool, steps: int | None = None) -> str:
        """Minimise from ``start`` over log σ (+ log λ unless profiled, + the centres if asked) for
        at most ``steps`` evaluations (default: what is left of ``max_steps``); return L-BFGS-B's
        stop message (or the :class:`StopSearch` reason). A stage stalls after :data:`PATIENCE`
        evaluations without improvement, plus one per variable beyond the first: with one σ per
        feature, an irrelevant feature's σ grows over many small improvements."""
        self.since_improvement = 0
        self.stage_end = self.steps + (steps or self.max_steps)
        ls0 = start.log_sigma.detach().double()
        shape, n_sigma = ls0.shape, ls0.numel()
        lo_s, hi_s = float(ls0.min()) - LOG_SIGMA_RANGE, float(ls0.max()) + LOG_SIGMA_RANGE
        bounds = [(lo_s, hi_s)] * n_sigma
        x0 = [ls0.reshape(-1).numpy()]
        if not self.profile:
            bounds.append(tuple(math.log(b) for b in self.penalty_bounds))
            x0.append(np.array([min(max(start.log_penalty, bounds[-1][0]), bounds[-1][1])]))
        Z0 = start.centers.detach()
        if tune_centers:
            bounds += [(None, None)] * Z0.numel()
            x0.append(Z0.reshape(-1).numpy())
        x0 = np.concatenate(x0)
        self.patience = PATIENCE + len(x0) - 1
        self.stage_start = self.steps
        lows = np.array([b[0] if b[0] is not None else -np.inf for b in bounds])
        highs = np.array([b[1] if b[1] is not None else np.inf for b in bounds])
        x0 = np.clip(x0, lows, highs)

        def unpack(x):
            ls = torch.tensor(x[:n_sigma], dtype=torch.float64).reshape(shape)
            i = n_sigma
            lp = start.log_penalty
            if not self.profile:
                lp, i = float(x[i]), i + 1
            Z = torch.tensor(x[i:], dtype=torch.float64).reshape(Z0.shape) if tune_centers else Z0
            return Point(ls, lp, Z)

        def fun(x):
            point = unpack(x)
            result = self.evaluate(point, tune_centers)
            grad = [result.grad_log_sigma.reshape(-1).numpy()]
            if not self.profile:
                grad.append(np.array([result.grad_log_penalty]))
            if tune_centers:
                grad.append(result.grad_centers.reshape(-1).numpy())
            grad = np.concatenate(grad)
            if not np.isfinite(point.value) or not np.all(np.isfinite(grad)):
                raise StopSearch(f"the objective or its gradient is not finite at σ = {sigma_value(point.log_sigma)}")
            at_bound = ((x <= lows + 1e-12) & (grad > 0)) | ((x >= highs - 1e-12) & (grad < 0))
            self.record(point, grad, at_bound)
            if self.scale is None:
                self.scale = abs(point.value) or 1.0
            return point.value / self.scale, grad / self.scale

        try:
            out = minimize(
                fun,
                x0,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxfun": self.stage_end - self.steps, "ftol": self.tol, "gtol": self.tol, "maxls": 20},
            )
        except StopSearch as stop:
            return str(stop)
        return f"{'converged' if out.success else 'L-BFGS-B stopped'}: {lbfgs_words(out.message)}"


def kmm(point: Point) -> torch.Tensor:
    """K_MM at the point's σ and centres (float64, no gradient)."""
    with torch.no_grad():
        return gaussian_block(point.centers, point.centers, point.log_sigma)


#: scipy's L-BFGS-B messages (both spellings scipy has used), as a user reads them.
LBFGS_WORDS = (
    (("relative reduction of f", "rel_reduction_of_f"), "the objective's relative decrease per step fell below tol"),
    (("projected gradient", "projected_gradient"), "the projected gradient fell below tol"),
    (("abnormal", "lnsrch"), "the line search found no lower objective along the gradient (its noise level)"),
    (("exceeds limit", "total no. of"), "it used the evaluations it was given"),
)


def lbfgs_words(message) -> str:
    """An L-BFGS-B stop message in words (:data:`LBFGS_WORDS`); an unknown one as scipy wrote it."""
    text = str(message).lower()
    for keys, words in LBFGS_WORDS:
        if any(key in text for key in keys):
            return words
    return str(message)


_DONE = object()


def run_in_thread(work):
    """Yield what ``work(emit)`` emits, while ``work`` runs on a thread of its own (an optimiser that
    calls back, turned into a generator). As with a generator, ``emit`` returns only when the
    caller asks for the next item, so nothing is computed ahead of the reader (Stop then acts at
    once) and the reader's time is not the work's. An exception in ``work`` is re-raised here;
    closing the generator early makes the next ``emit`` raise :class:`StopSearch`, and waits.

    Whichever thread waits first frees its idle OpenMP threads (:func:`~krrcore.device.release_openmp_threads`):
    otherwise the two threads' pools oversubscribe the cores and the work runs several times slower."""
    items: queue.Queue = queue.Queue(maxsize=1)
    resume = threading.Semaphore(0)
    closed = threading.Event()

    def emit(item):
        release_openmp_threads()
        items.put(item)
        resume.acquire()
        if closed.is_set():
            raise StopSearch("the caller stopped reading the records")

    def run():
        try:
            work(emit)
            items.put(_DONE)
        except BaseException as exc:  # noqa: BLE001 — handed to the caller's thread
            items.put(exc)

    thread = threading.Thread(target=run, daemon=True, name="krr-tune")
    release_openmp_threads()
    thread.start()
    try:
        while True:
            item = items.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
            release_openmp_threads()
            resume.release()
    finally:
        closed.set()
        resume.release()
        while thread.is_alive():  # let the work end (it may emit once more before it sees closed)
            try:
                items.get(timeout=0.05)
            except queue.Empty:
                pass
            resume.release()
        thread.join()

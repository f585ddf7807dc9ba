"""How FalkonCV chooses its answer: on rows it did not fit.

The search proposes candidates — the start, each objective's optimum (GCV, complexity-regularised,
hold-out) at every σ it evaluated, uniform or BLESS centres, features switched off — and they
compete on held-out rows (one part or k folds, :mod:`krrcore.tuning.validation`). The rules are
Breiman's one-standard-error rule and the paired standard error of two candidates' per-row errors:
the answer is never worse on the held-out rows than the start, and a choice that overrules the
search's own objective by more than its noise is said (:class:`TuningDisagreement`).
"""

from __future__ import annotations

import math

import torch

from ..centers import select_centers
from ..kernels import GaussianKernel
from ..numbers import readable
from .objectives import nystrom_leftover, sigma_value
from .search import LOG_SIGMA_RANGE, PENALTY_BOUNDS, Point, Search, StopSearch

#: Objectives' choices whose held-out errors differ by more than this many standard errors of the
#: rows' differences disagree (:class:`TuningDisagreement`).
DISAGREE = 2.0
#: How the candidates of FalkonCV._choose are named in sentences.
NAMES = {
    "gcv choice": "GCV",
    "compreg choice": "the complexity-regularised objective",
    "holdout choice": "the hold-out optimum",
    "start": "the start",
}
#: λ within this factor of the search's bounds is "on the bound" (:class:`TuningBoundWarning`).
BOUND_FACTOR = 1.05


class TuningDisagreement(UserWarning):
    """The tuning objectives' choices differ on the held-out rows by more than their noise: the
    message says which each chose and which one ``tune`` returns."""


class TuningBoundWarning(UserWarning):
    """The tuned σ or λ ended on the search's bound: the message says what to do."""


def stderr_of_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """Standard error of the mean of a − b (paired per-row errors on the same held-out rows)."""
    difference = a - b
    return float(difference.std()) / math.sqrt(difference.numel()) if difference.numel() > 1 else 0.0


#: BLESS centres replace uniform ones when they lower the objective by more than one standard error
#: of the per-row differences (both are averages over the same rows), or, for compreg (no average of
#: rows), by more than this fraction.
CENTERS_MARGIN = 0.01

#: ARD's pruning (FalkonCV._prune): a switched-off feature's σ is multiplied by this (its kernel
#: factor is then 1 to double precision even where α is large); at most MAX_PRUNED features are
#: tried; objectives without held-out rows keep a feature off when they rise by at most PRUNE_TOL.
OFF_FACTOR, MAX_PRUNED, PRUNE_TOL = 1e12, 64, 1e-3


def typical_sigma(log_sigma) -> float:
    """One σ for the records, the path and the pictures: σ itself, or with one per feature their
    geometric mean over the features in use — a feature switched off (σ_j at least √OFF_FACTOR
    times the smallest σ) would carry the mean off by a factor up to OFF_FACTOR^(1/d)."""
    log_sigma = torch.as_tensor(log_sigma, dtype=torch.float64)
    if log_sigma.ndim == 0:
        return float(torch.exp(log_sigma))
    on = log_sigma < log_sigma.min() + math.log(OFF_FACTOR) / 2
    return float(torch.exp(log_sigma[on].mean()))


class HeldOutChoice:
    """FalkonCV's choosing methods (a mixin: they read the search's records ``_seen`` and write the
    fitted attributes ``candidates_``, ``disagreement_``, ``validation_error_``,
    ``centers_comparison_`` and ``bound_note_``)."""

    def _held_out_line_points(self, search: Search) -> list[Point]:
        """The scalar-σ points seen so far with the held-out error at their best λ, when the
        hold-out optimum among them beats the search's own choice by more than one standard error
        (else []: the search's answer stands, and the line would cost probes for nothing)."""
        if search.checker is None:
            return []
        points, best_held, own = [], None, None
        for point, checked, offers, _ in self._seen:
            if point.log_sigma.ndim or "holdout" not in offers:
                continue
            point.extras = {**point.extras, "held_out": offers["holdout"][1]}
            points.append(point)
            if best_held is None or offers["holdout"][1] < best_held[0]:
                best_held = (offers["holdout"][1], offers["holdout"][2])
            if point is search.best:
                own = checked
        if own is None or best_held is None:
            return []
        gap = float(own.mean()) - best_held[0]
        return points if gap > stderr_of_difference(own, best_held[1]) else []

    def _choose(self, search: Search, messages: list) -> tuple[Point, torch.Tensor | None]:
        """The answer of one M's search, chosen and checked on the held-out rows.

        Candidates: the start; the search's own best (its objective's choice); at every σ the
        search evaluated, each closed-form objective's best λ (GCV, compreg) and the held-out rows'
        best λ (the hold-out optimum: over the scan it is the best cell of a coarse (σ, λ) map,
        with λ exact). The lowest held-out error wins, unless the search's own choice is within one
        standard error of the rows' differences from it and no worse than the start (Breiman's
        one-standard-error rule: the objective that scored every fitted row is steadier than the
        held-out rows on small tables). So the answer is never worse on the held-out rows than the
        start. Where the search's own objective is overruled by more than :data:`DISAGREE` standard
        errors, the objectives disagree beyond the noise: said in ``disagreement_`` and by
        :class:`TuningDisagreement`."""
        if not self._seen or self._seen[0][1] is None:
            self.candidates_, self.disagreement_ = [], ""
            return search.best, None
        start = self._seen[0]
        own = next((s for s in self._seen if s[0] is search.best), None)
        if own is not None and own[1] is None:  # an ARD step: checked now that it is the search's answer
            own = (own[0], search.checked(own[0]), own[2], own[3])
        candidates = {"start": (start[0], start[1])}
        if own is not None:
            candidates[f"{self.objective} choice"] = (own[0], own[1])
        for name in ("gcv", "compreg", "holdout"):
            if name == self.objective and own is not None:
                continue
            offers = [(s[2][name][1], s) for s in self._seen if name in s[2]]
            if not offers:
                continue
            _, s = min(offers, key=lambda o: o[0])
            lam = s[2][name][0]
            point = Point(s[0].log_sigma, math.log(lam), s[0].centers, alpha=None)
            candidates[f"{name} choice"] = (point, s[2][name][2])
        means = {k: float(e.mean()) for k, (_, e) in candidates.items()}
        winner = min(means, key=means.get)
        label = f"{self.objective} choice" if f"{self.objective} choice" in candidates else winner
        own_errors = candidates[label][1]
        spread = stderr_of_difference(own_errors, candidates[winner][1])
        if label != winner and (means[label] - means[winner] > spread or means[label] > means["start"]):
            label = winner
        self.candidates_ = [
            {
                "name": k,
                "sigma": typical_sigma(p.log_sigma),
                "penalty": math.exp(p.log_penalty),
                "validated": means[k] * self._scale**2,
                "chosen": k == label,
            }
            for k, (p, _) in candidates.items()
        ]
        chosen, errors = candidates[label]
        if chosen.alpha is None:
            search.value_at(chosen)  # α at the chosen λ (same σ and centres: the stats are recomputed once)
        own_label = f"{self.objective} choice"
        self.disagreement_ = ""
        if own_label in candidates and label != own_label:
            gap = means[own_label] - means[label]
            noise = stderr_of_difference(candidates[own_label][1], errors)
            if gap > DISAGREE * noise:
                s2 = self._scale**2
                own_point = candidates[own_label][0]
                self.disagreement_ = (
                    f"{NAMES[own_label]} chose σ = {typical_sigma(own_point.log_sigma):.3g}, "
                    f"λ = {math.exp(own_point.log_penalty):.2g} (validated error {means[own_label] * s2:.3g}), "
                    f"but {NAMES[label]} at σ = {typical_sigma(chosen.log_sigma):.3g}, "
                    f"λ = {math.exp(chosen.log_penalty):.2g} "
                    f"has {means[label] * s2:.3g} ± {float(errors.std()) / math.sqrt(len(errors)) * s2:.2g} on the "
                    f"{len(errors):,} held-out rows, lower by {gap / noise:.0f} standard errors: tune returns "
                    f"the latter."
                )
        folds = len(search.checker.blocks) if search.checker is not None else 1
        messages.append(
            f"chosen on {len(errors):,} held-out rows ({f'{folds} folds' if folds > 1 else 'one part'}): "
            f"{NAMES[label]}'s σ and λ (validated error {means[label] * self._scale**2:.4g}, "
            f"{len(candidates)} candidates)"
        )
        return chosen, errors

    def _validated(self, best: Point, errors, scale: float, bounds, ls0) -> None:
        """The checked error of the answer and its standard error (units of y's mean square), and
        the warnings: objectives in disagreement, σ or λ on the search's bound."""
        s2 = scale**2
        if errors is None:
            self.validation_error_ = self.validation_stderr_ = math.nan
        else:
            self.validation_error_ = float(errors.mean()) * s2
            self.validation_stderr_ = float(errors.std()) / math.sqrt(len(errors)) * s2 if len(errors) > 1 else math.nan
        if getattr(self, "disagreement_", ""):
            self._notes.append((TuningDisagreement, self.disagreement_))
        lam = math.exp(best.log_penalty)
        self.bound_note_ = ""
        if lam <= bounds[0] * BOUND_FACTOR:
            low64, low32 = (readable(PENALTY_BOUNDS[dtype][0]) for dtype in (torch.float64, torch.float32))
            self.bound_note_ = (
                f"λ = {readable(lam, 2)} is the search's lower bound for {str(self._dtype()).replace('torch.', '')} "
                f"(float64 allows {low64}, float32 {low32}): "
                f"the data ask for less regularisation than the bound gives; try a larger M (more centres resolve "
                f"finer detail), or dtype='float64' if the model is float32. Below the bound the search's closed "
                f"form is not trusted, but FALKON's solve is: Falkon(kernel, penalty) at a smaller λ, checked on "
                f"held-out rows, can still do better (docs/measurements.md, the λ floor)."
            )
        elif lam >= bounds[1] / BOUND_FACTOR:
            self.bound_note_ = (
                f"λ = {readable(lam, 2)} is the search's upper bound: at this σ the targets look like noise to "
                f"the model; check the target column, or start from another σ."
            )
        log_s = best.log_sigma.double()
        base = float(ls0.mean())
        if float((log_s - base).abs().max()) >= LOG_SIGMA_RANGE - 1e-6 and log_s.ndim == 0:
            self.bound_note_ += (" " if self.bound_note_ else "") + (
                f"σ = {readable(typical_sigma(log_s), 3)} is at the edge of the search's range (a factor "
                f"{readable(math.exp(LOG_SIGMA_RANGE), 3)} from the start): start from a σ further out "
                f"(kernel=GaussianKernel(σ)), or rescale the features."
            )
        if self.bound_note_:
            self._notes.append((TuningBoundWarning, self.bound_note_))

    def _prune(self, search: Search, scalar: Point, messages: list) -> None:
        """Occam's razor for ARD. The objective barely moves with the σ of a feature it does not
        need once that σ is large (the gradient vanishes as (Δx/σ)²), so the search leaves such σ_j
        wherever they stalled — and at a small λ a large σ_j still lets a feature act linearly. So
        each feature whose σ grew past the single-σ optimum (the largest first, at most
        :data:`MAX_PRUNED` of them) is switched off in turn — σ_j × :data:`OFF_FACTOR`, where it
        cannot act at all — and stays off when the objective rises by at most one standard error
        of the per-row errors it averages (Breiman's one-standard-error rule: validation rows for
        the hold-out objective, GCV's rescaled training residuals; :data:`PRUNE_TOL` relative for
        compreg, which is no average of rows)."""
        best = search.best
        order = [
            int(j)
            for j in torch.argsort(best.log_sigma, descending=True)
            if float(best.log_sigma[j]) > float(scalar.log_sigma)
        ][:MAX_PRUNED]
        off = []
        for j in order:
            errors = search.row_errors(best)
            allowed = (
                best.value * (1 + PRUNE_TOL)
                if errors is None
                else best.value + float(errors.std()) / math.sqrt(len(errors))
            )
            log_sigma = best.log_sigma.clone()
            log_sigma[j] += math.log(OFF_FACTOR)
            point = Point(
                log_sigma, search.profiled_penalty(log_sigma, best.centers), best.centers, extras={"pruned_feature": j}
            )
            search.value_at(point)
            search.report(point, math.nan)
            if point.value <= allowed:
                best = search.best = point
                off.append(j)
        if off:
            rule = f"{PRUNE_TOL:.1%}" if self.objective == "compreg" else "one standard error of its per-row errors"
            messages.append(
                f"switched off feature(s) {off} (σ × {OFF_FACTOR:g}): without them the objective rose by "
                f"less than {rule}"
            )

    def _compare_centers(self, search: Search, best: Point, errors, stage, report, messages):
        """BLESS centres at the tuned σ against the uniform ones, where the uniform ones leave a
        Nyström error above λ (``centers="auto"``), at the same M (fewer where BLESS's selection
        returns fewer; the message says so), on the held-out rows (each at the
        λ the same rule gives it: the held-out rows' best for BLESS). BLESS's are kept where they
        lower the held-out error by more than noise: one standard error of the rows' differences
        (without held-out rows, the objective's per-row errors; compreg: :data:`CENTERS_MARGIN`).
        Returns (the point, its held-out errors)."""
        sigma = sigma_value(best.log_sigma)
        leftover = nystrom_leftover(search.problem.X, best.centers, sigma, seed=self.seed_)  # Tr(K − K̃)/n
        lam = math.exp(best.log_penalty)
        if leftover <= lam:
            return best, errors
        stage["code"] = 4
        Z = select_centers("bless", self._X64, best.centers.shape[0], self.seed_, kernel=GaussianKernel(sigma)).centers
        offers = search.proposals(Point(best.log_sigma, 0.0, Z)) if errors is not None else {}
        if search.cg_maxiter is not None:
            log_lam = best.log_penalty
        elif "holdout" in offers:
            log_lam = math.log(offers["holdout"][0])
        else:
            log_lam = search.profiled_penalty(best.log_sigma, Z)
        candidate = search.value_at(Point(best.log_sigma, log_lam, Z, extras={"centres_bless": 1}))
        bless_errors = search.checked(candidate)
        if errors is not None and bless_errors is not None:
            uniform_value, bless_value = float(errors.mean()), float(bless_errors.mean())
            margin = stderr_of_difference(bless_errors, errors)
            rule = f"one standard error of the held-out rows' differences, {margin:.3g}"
            what = "held-out error"
        else:
            uniform_value, bless_value = best.value, candidate.value
            uniform_rows, bless_rows = search.row_errors(best), search.row_errors(candidate)
            if uniform_rows is None or bless_rows is None:
                margin, rule = best.value * CENTERS_MARGIN, f"{CENTERS_MARGIN:.0%}"
            else:
                margin = stderr_of_difference(bless_rows, uniform_rows)
                rule = f"one standard error of the rows' differences, {margin:.3g}"
            what = "objective"
        self.centers_comparison_ = {
            "uniform": uniform_value,
            "bless": bless_value,
            "nystrom_error": leftover,
            "penalty": lam,
            "margin": margin,
            "measured": what,
        }
        try:
            report(candidate, math.nan)
        except StopSearch as stop:
            messages.append(str(stop))
        asked, chosen = int(best.centers.shape[0]), int(Z.shape[0])
        fewer = f" ({chosen:,} of the {asked:,} asked: BLESS's selection returned no more)" if chosen < asked else ""
        if bless_value < uniform_value - margin:
            self.centers_choice_ = "bless"
            messages.append(
                f"BLESS centres kept{fewer}: {what} {bless_value:.4g} against {uniform_value:.4g} with uniform "
                f"ones (lower by more than {rule}), whose Nyström error Tr(K − K̃)/n = {leftover:.3g} "
                f"exceeds λ = {lam:.3g}"
            )
            return candidate, bless_errors
        messages.append(
            f"uniform centres kept: BLESS ones{fewer} gave {what} {bless_value:.4g} against {uniform_value:.4g}, "
            f"not lower by more than {rule}"
        )
        return best, errors

"""What a run's status says, in words and in look intervals: the one place both the live
channel (:mod:`krr_app.jobs.live_api`) and the pages (:mod:`krr_app.parts.views`) take them from.

A run is a :class:`krr_app.jobs.runs.Run`; these functions only read it and ask the started executor
(:func:`krr_app.jobs.executor.started_executor`) how busy the workers are.
"""

from __future__ import annotations

import math

from krr_app import units
from krr_app.jobs.executor import started_executor
from krr_app.settings import BUSY_POLL_SECONDS, POLL_SECONDS, QUEUED_POLL_MAX_SECONDS, QUEUED_POLL_SECONDS
from krrcore.numbers import readable


def progress_text(run) -> str:
    """The one line under a run's live chart: its place in the queue, its set-up, or its last
    iteration, residual, test metric and seconds."""
    records = run.records
    if run.status == "queued":
        return f"{run.label}: {queue_text(run)}"
    if not records:
        return f"{run.label}: setting up (centres, preconditioner)…"
    last = records[-1]
    if "stage" in last.extras and "penalty" in last.extras:  # a tuning run (krrcore.tuning): its step
        return tuning_text(run, last)
    parts = [f"iteration {last.iteration}"]
    if run.config.maxiter:
        parts[0] += f" / {run.config.maxiter}"
    if run.paused:
        parts[0] = "paused after " + parts[0] + " (Step: one more, Run: on to the end)"
    if math.isfinite(last.residual):
        parts.append(f"residual {readable(last.residual, 3)}")
    parts += _test_part(run, last)
    parts.append(f"{readable(last.seconds, 3)} s")
    return " · ".join(parts)


def _test_part(run, last) -> list[str]:
    """``test RMSE (salary) 22,670``: the record's test metric in the units the charts use."""
    if not math.isfinite(last.val_metric):
        return []
    data = getattr(run, "data", None)
    value = units.shown_value(data, last.metric, last.val_metric)
    return [f"test {units.metric_label(data, last.metric)} {readable(value)}"]


def tuning_text(run, last) -> str:
    """A tuning run's line: its step (of at most ``max_steps``), stage, σ, λ, objective, test metric."""
    from krrcore.tuning import STAGES

    steps = dict(run.config.solver_params).get("max_steps")
    parts = [
        f"step {last.iteration}" + (f" of at most {steps}" if steps else ""),
        STAGES.get(int(last.extras["stage"]), ""),
        f"σ {readable(last.extras['sigma'], 3)}",
        f"λ {readable(last.extras['penalty'], 2)}",
    ]
    if math.isfinite(last.objective):
        parts.append(f"objective {readable(last.objective)}")
    parts += _test_part(run, last)
    parts.append(f"{readable(last.seconds, 3)} s")
    return f"{run.label}: " + " · ".join(parts)


def queue_text(run) -> str:
    """Where a queued run stands: behind this tab's earlier run, or its place in the server's queue."""
    if run.waiting_in_session:
        return "waiting for this tab's earlier run to finish (a tab's runs go one after another)…"
    executor = started_executor()
    if executor is None:
        return "waiting for the workers to start (the first run after the server started)…"
    position, seconds = executor.queue_position(run)
    if position <= executor.workers - executor.computing():  # a free worker takes it now
        return "starting on a worker…"
    eta = "" if seconds is None else f", about {seconds:.0f} s"
    return (
        f"queued — number {position} in line for {executor.workers} worker{'s' if executor.workers != 1 else ''}{eta}…"
    )


def look_intervals(runs) -> tuple[float, float]:
    """(seconds between the live chart's looks while ``runs`` wait for a worker, while one
    computes), asked of the executor at every look (:mod:`krr_app.jobs.live_api`).

    One user, or a queued run a free worker takes at once: POLL_SECONDS for both. While other runs
    wait for a worker (a classroom), a computing page looks every BUSY_POLL_SECONDS, a waiting one
    every quarter of its estimated wait, between QUEUED_POLL_SECONDS and QUEUED_POLL_MAX_SECONDS
    (its first look after its run started is that late at most; the run itself does not wait)."""
    executor = started_executor()
    queued = [r for r in runs if r.status == "queued"]
    if executor is None:
        return QUEUED_POLL_SECONDS, POLL_SECONDS
    if executor.waiting() + executor.computing() <= executor.workers:
        at_once = not any(r.waiting_in_session for r in queued)
        return (POLL_SECONDS if at_once else QUEUED_POLL_SECONDS), POLL_SECONDS
    waits = [executor.queue_position(r)[1] for r in queued]
    known = [w for w in waits if w is not None]
    waiting = min(max(min(known) / 4, QUEUED_POLL_SECONDS), QUEUED_POLL_MAX_SECONDS) if known else QUEUED_POLL_SECONDS
    return waiting, BUSY_POLL_SECONDS

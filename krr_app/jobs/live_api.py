"""The live view's records endpoint, served next to the pages by the same Starlette server.

``GET /krr-api/runs/{run_id}?since=k&frame_since=j`` answers, as JSON:

* ``status``, ``active``, ``paused`` (a stepped run waiting for Step or Run), ``text`` (the line
  the page shows for the run) and ``next_ms`` (when to ask again);
* ``records``: the run's records from the k-th on, each with the fields of :data:`RECORD_FIELDS`
  (a regression's test metric as the RMSE in the target's units, :mod:`krr_app.units`), its
  ``metric`` name and its numeric ``extras`` (finite numbers only: a solver's own per-iteration
  values, e.g. a tuning run's σ and λ); ``count``: how many records the client then holds;
* ``frame``, when ``frame_since`` is given and the run's latest picture of the model is of a later
  iteration than ``j`` (``-1``: none yet): ``{"iteration", "kind": "fit", "values", "size"}``,
  ``values`` being what the fit figure plots on its grid (:func:`krr_app.charts.fit.fit_display`) as
  base64 float32, little-endian. The picture is computed on the worker
  (:class:`krr_app.jobs.surface.LiveSurface`); only the latest is kept and sent.

The live chart (:mod:`krr_app.parts.live_chart`) asks for it instead of rerunning a fragment of the page
for every look, which redrew the whole page in the browser (docs/measurements.md, "The app against
the library", has the seconds). Only runs this server started are known (:func:`publish`), by their random id;
the answer holds no data, only the per-iteration numbers and the picture the page shows anyway.
"""

from __future__ import annotations

import base64
import math
import weakref

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

PREFIX = "/krr-api/runs/"
#: What a record carries to the browser (the chart's series and the progress line).
RECORD_FIELDS = ("iteration", "seconds", "residual", "val_metric", "train_metric")

_runs: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def publish(run) -> None:
    """Make ``run`` answerable by id (kept only while the session keeps the run)."""
    _runs[run.id] = run


def run_of(run_id: str):
    """The published run ``run_id`` (None when no session keeps it)."""
    return _runs.get(run_id)


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None  # JSON has no NaN


def _extras(extras: dict) -> dict[str, float]:
    """A record's numeric extras (text ones, e.g. the kind of residual, stay out)."""
    return {
        k: float(v)
        for k, v in extras.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


def record_state(record, data=None) -> dict:
    """One record for the browser; with the run's ``data``, its test metric in the units the page's
    charts show (:mod:`krr_app.units`: a regression's RMSE in the target's units)."""
    from krr_app import units

    state = {
        **{f: _number(getattr(record, f)) for f in RECORD_FIELDS},
        "metric": units.shown_metric(data, record.metric),
        "extras": _extras(record.extras),
    }
    for field in ("val_metric", "train_metric"):
        state[field] = _number(units.shown_value(data, record.metric, getattr(record, field)))
    return state


def frame_state(run, since: int = -1) -> dict | None:
    """The run's latest picture of the model if it is of an iteration after ``since`` (else None)."""
    frame, data = run.frame, run.data
    if frame is None or frame.iteration <= since or data is None or data.d not in (1, 2):
        return None
    from krr_app.charts.fit import fit_display  # plotly: not imported with the server's routes

    values = fit_display(data, frame.values).astype("<f4")
    return {
        "iteration": frame.iteration,
        "kind": "fit",
        "size": int(values.size),
        "values": base64.b64encode(values.tobytes()).decode("ascii"),
    }


def run_state(run, since: int = 0, frame_since: int | None = None) -> dict:
    """The run's status, progress line and records ``since`` on, its latest picture when newer
    than ``frame_since`` (not asked: None), and when to ask again (ms)."""
    from krr_app.jobs import run_status  # here, not at import: the server starts before torch and plotly load

    records = run.records[max(0, since) :]
    waiting, computing = run_status.look_intervals([run])
    state = {
        "id": run.id,
        "status": run.status,
        "active": run.active,
        "paused": run.paused,
        "text": run_status.progress_text(run),
        "records": [record_state(r, run.data) for r in records],
        "count": max(0, since) + len(records),
        "next_ms": round(1000 * (waiting if run.status == "queued" else computing)),
    }
    if frame_since is not None:
        state["frame"] = frame_state(run, frame_since)
    return state


def _whole(request: Request, name: str, default: int | None) -> int | None:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, got {text!r}") from None


async def _run_endpoint(request: Request) -> JSONResponse:
    run = _runs.get(request.path_params["run_id"])
    if run is None:
        return JSONResponse({"error": "no such run on this server (it ended with its session)"}, status_code=404)
    try:
        since, frame_since = _whole(request, "since", 0), _whole(request, "frame_since", None)
    except ValueError as exc:
        return JSONResponse({"error": str(exc)}, status_code=400)
    return JSONResponse(run_state(run, since, frame_since), headers={"Cache-Control": "no-store"})


ROUTES = [Route(PREFIX + "{run_id}", _run_endpoint, methods=["GET"])]

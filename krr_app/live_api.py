"""The live view's records endpoint, served next to the pages by the same Starlette server.

``GET /krr-api/runs/{run_id}?since=k`` answers the run's status, the line the page shows for it
and its records from the k-th on, as JSON. The live chart (:mod:`krr_app.live_chart`) asks for it
instead of rerunning a fragment of the page for every look, which redrew the whole page in the
browser (docs/measurements.md, "The app against the library", has the seconds). Only runs this server started are
known (:func:`publish`), by their random id;
the answer holds no data, only the per-iteration numbers the page already shows.
"""
from __future__ import annotations

import math
import weakref
from contextlib import asynccontextmanager

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


def _number(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None      # JSON has no NaN


def run_state(run, since: int = 0) -> dict:
    """The run's status, progress line and records ``since`` on, and when to ask again (ms)."""
    from . import run_status    # here, not at import: the server starts before torch and plotly load

    records = run.records[max(0, since):]
    waiting, computing = run_status.look_intervals([run])
    return {"id": run.id, "status": run.status, "active": run.active, "text": run_status.progress_text(run),
            "records": [{**{f: _number(getattr(r, f)) for f in RECORD_FIELDS}, "metric": r.metric} for r in records],
            "count": max(0, since) + len(records),
            "next_ms": round(1000 * (waiting if run.status == "queued" else computing))}


async def _run_endpoint(request: Request) -> JSONResponse:
    run = _runs.get(request.path_params["run_id"])
    if run is None:
        return JSONResponse({"error": "no such run on this server (it ended with its session)"}, status_code=404)
    try:
        since = int(request.query_params.get("since", "0"))
    except ValueError:
        return JSONResponse({"error": f"since must be a whole number, got {request.query_params['since']!r}"},
                            status_code=400)
    return JSONResponse(run_state(run, since), headers={"Cache-Control": "no-store"})


ROUTES = [Route(PREFIX + "{run_id}", _run_endpoint, methods=["GET"])]


@asynccontextmanager
async def lifespan(_app):
    """The server's life: on shutdown the embedded Dask cluster is closed here. uvicorn re-raises
    the SIGTERM it caught once it has shut down, so the interpreter's exit handlers never run and a
    cluster left to them outlives the server."""
    yield
    from .executor import close_executor

    close_executor()

"""Every limit and environment variable of the app, in one place (docs/serving.md's table lists them).

Each setting is read once, when the server imports this module. A bad value stops the server
with a message naming the variable, the value and what it expects, instead of being replaced.
"""

from __future__ import annotations

import os
from pathlib import Path

from .cli import app_dir


def _env_float(name: str, default: float, minimum: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number (default {default})") from None
    if not value >= minimum:
        raise ValueError(f"{name}={value} must be at least {minimum} (default {default})")
    return value


def _env_int(name: str, default: int, minimum: int = 1) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a whole number (default {default})") from None
    if value < minimum:
        raise ValueError(f"{name}={value} must be at least {minimum} (default {default})")
    return value


#: The largest data set a user may load (training + test rows). Env: KRR_APP_MAX_N.
APP_MAX_N = _env_int("KRR_APP_MAX_N", 200_000)
#: Rows of an uploaded table a run may use (train + test): all of a 10⁶-row file. Runs on it take
#: minutes, so a table starts at APP_MAX_N rows and the user raises it. Env: KRR_TABLE_MAX_N.
TABLE_MAX_N = _env_int("KRR_TABLE_MAX_N", 1_000_000)
#: The most Nyström centres (FALKON keeps a few M×M float64 matrices). Env: KRR_APP_MAX_M.
APP_MAX_M = _env_int("KRR_APP_MAX_M", 10_000)
#: Exact KRR factorises an n×n matrix: above this many training points the app offers it no more
#: (two 8·n² byte matrices and an O(n³) Cholesky stop being "instant feedback" on 2 cores).
EXACT_KRR_MAX_N = 8_000
#: Runs a session keeps (finished ones are dropped oldest first, with a note; active ones never).
MAX_RUNS_PER_SESSION = _env_int("KRR_MAX_RUNS_PER_SESSION", 24)
#: Seconds a closed tab's runs wait for a reload of its link (``?run=``) before they are stopped:
#: a reload is a new session, and reconnects to them. Env: KRR_RELOAD_GRACE_SECONDS.
RELOAD_GRACE_SECONDS = _env_float("KRR_RELOAD_GRACE_SECONDS", 10.0, 0.0)

#: Where runs execute: a Dask scheduler address (``tcp://host:8786``); empty starts the embedded
#: local cluster. Env: KRR_DASK_SCHEDULER (read by :func:`krrcore.distributed.connect` too).
DASK_SCHEDULER = os.environ.get("KRR_DASK_SCHEDULER", "").strip() or None
#: Torch threads of each embedded worker (env KRR_WORKER_THREADS) and how many workers (env
#: KRR_DASK_WORKERS; default: cores ÷ threads, so the workers never oversubscribe the cores).
WORKER_THREADS = _env_int("KRR_WORKER_THREADS", 1)
DASK_WORKERS = _env_int("KRR_DASK_WORKERS", 0, minimum=0) or None
#: Seconds the server's graceful shutdown (Ctrl-C, SIGTERM, SIGHUP) may take before it ends its
#: processes and itself at once (krr_app.jobs.lifecycle): uvicorn, Streamlit and the cluster's close
#: take about a second when all is well.
SHUTDOWN_SECONDS = 4.0
#: Runs one session has on the cluster at once; its further runs wait their turn in the session
#: (Compare's batch runs one after another, so its timings are comparable). Env: KRR_SESSION_MAX_ACTIVE.
SESSION_MAX_ACTIVE = _env_int("KRR_SESSION_MAX_ACTIVE", 1)
#: Seconds between two looks of a page at its computing run (the live chart's refresh). A look is a
#: small JSON request (krr_app.jobs.live_api) that the chart appends to its SVG panels, not a rerun of
#: the page, so that a browser on the workers' cores takes little from the run it watches
#: (docs/measurements.md, "The app against the library"). Env: KRR_POLL_SECONDS.
POLL_SECONDS = _env_float("KRR_POLL_SECONDS", 0.5, minimum=0.1)
#: Seconds between two looks of a page whose run waits behind others for a worker (its queue
#: position): a waiting page has little new to show, and a classroom of waiting tabs looking often
#: takes CPU from the workers. Env: KRR_QUEUED_POLL_SECONDS.
QUEUED_POLL_SECONDS = _env_float("KRR_QUEUED_POLL_SECONDS", 3.0, minimum=0.1)
#: ... and at most this many seconds for a page far back in line, which looks every quarter of its
#: estimated wait: the browsers' CPU then shrinks as the line grows (docs/measurements.md, "A
#: classroom on one machine", has 30 tabs at fixed and at growing intervals).
#: Env: KRR_QUEUED_POLL_MAX_SECONDS.
QUEUED_POLL_MAX_SECONDS = _env_float("KRR_QUEUED_POLL_MAX_SECONDS", 10.0, minimum=0.1)
#: Seconds between two looks of a page at its computing run while other runs wait for a worker:
#: its live chart yields to the queue. Env: KRR_BUSY_POLL_SECONDS.
BUSY_POLL_SECONDS = _env_float("KRR_BUSY_POLL_SECONDS", 1.0, minimum=0.1)

# -- the diagnostic pages (Conditioning, Leverage scores, Dataset): sizes bounded so a click never
# starts minutes of work; krrcore.diagnostics takes them as parameters.
#: Training points the diagnostic pages look at (a seeded random subsample above this).
DIAGNOSTICS_MAX_ROWS = 4000
#: Dense eigenvalues of K (n×n) up to this n; Lanczos (or a Nyström estimate for d_eff) above.
DENSE_SPECTRUM_MAX_N = 1500
#: Dense eigenvalues of the M×M Nyström systems up to this M; Lanczos above.
DENSE_SPECTRUM_MAX_M = 800
#: Dense eigenvalues of an ASkotch block's systems up to this block size; Lanczos above.
DENSE_SPECTRUM_MAX_BLOCK = 1200
#: Lanczos steps for every estimate on these pages.
LANCZOS_STEPS = 60
#: Training points the κ-against-λ and κ-against-M sweeps use (each grid point solves a new system).
SWEEP_MAX_ROWS = 1500
#: Centres of the κ-against-λ sweep at most (a dense M×M eigh per system and grid λ).
SWEEP_MAX_M = 400
#: Centres of the Nyström estimate of K's spectrum for d_eff above DENSE_SPECTRUM_MAX_N points.
DEFF_NYSTROM_M = 1000
#: Exact leverage scores (one n×n eigh) up to this many points.
EXACT_LEVERAGE_MAX_N = 2000
#: Entries each cached diagnostic keeps (all sessions together).
DIAGNOSTICS_CACHE_ENTRIES = 32
#: The Tune page: the most evaluations a user may ask of one tuning run, and the training points its
#: map of the objective over (σ, λ) is computed on (a seeded subsample above; one blocked pass and one
#: M×M eigenproblem per σ of the map).
TUNE_MAX_STEPS = 200
TUNE_MAP_MAX_ROWS = 4000
#: Seconds between two looks of a diagnostic page at its results still computing on the workers
#: (each that arrives reruns the page once to draw it).
STREAM_POLL_SECONDS = 0.3
#: Seconds such a page waits, in its first run, for the computations of its first picture (most
#: are in within it: drawn in that run, not by a rerun a look later).
FIRST_PICTURE_WAIT_SECONDS = 0.6
#: Explore runs a problem by itself on every change ("Run on every change", on by default) when it
#: is small: at most this many points n (train + test) and, for Nyström solvers, centres M.
AUTO_RUN_MAX_N = 5_000
AUTO_RUN_MAX_M = 1_000
#: Seconds Explore waits for a small run it just started before drawing the page, so a run that
#: finishes in time appears complete instead of as a progress bar first.
AUTO_RUN_WAIT_SECONDS = 0.5
#: Seconds after a page first shows the data's picture before it sends its plotly charts (Explore's
#: empty convergence axes, the Dataset page's charts; :func:`krr_app.parts.views.after_first_picture`):
#: the picture is painted first, then a new visitor's browser fetches and evaluates plotly.js
#: while the student looks at the data.
EMPTY_CHART_DELAY_SECONDS = 1.0
#: The folder of lesson files (``<name>.md``, see krr_app.teaching.lessons): a teacher may point the server at
#: their own. Env: KRR_LESSONS_DIR.
LESSONS_DIR = Path(os.environ.get("KRR_LESSONS_DIR") or app_dir() / "lessons")

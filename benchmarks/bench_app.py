"""The app against the library on the same fit: in-app solver seconds (a Dask worker) against
``krrcore`` run directly, and the time from Run to the first chart and to the result.

For each problem the app is driven in headless chromium (``streamlit run app.py`` on 127.0.0.1):
open the shared link in a new browser context (with "Run on every change" off, so the click starts
the page's first run), press Run, time the first convergence chart and the result line, read the
solver seconds the page reports; then press Run again in that open tab, with its charts and result
on screen (a returning user), and read the new run's seconds. After each app run the same fit runs through
``krr_app.jobs.worker.run_fit`` (what the reproduce snippet does) in a warm process with the workers'
torch thread count, as a worker is warm: app and library runs alternate, so a change in the shared
machine's load reaches both. Each figure is the median of ``--repeats`` runs; read the ratios.
"live fit / wall time" is what drawing the fit while the solver ran cost the worker (its pictures of
the current iterate on the plotting grid, outside the solver's time), as a share of the run's wall
time on the worker, read from the page under the finished fit.

Where the browser runs is a column: sharing every core with the workers (as when a visitor runs the
app on their own 2-core machine), or confined by ``taskset`` to the last core (a visitor's browser
on their own machine cannot take the workers' cores; the web server still shares them).

    python -m benchmarks.bench_app [--quick] [--repeats 3]   (or: python -m benchmarks --case app)
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from benchmarks.common import find_chromium, print_table, quick_parser

# auto_run=false: a small problem would otherwise run by itself when the page opens, and Run would
# time a repeat whose chart is already drawn.
#: The classroom problem, on which the live fit's cost is stated (benchmarks.targets).
CLASSROOM = "Two moons, n = 40,000, M = 1,000, t = 20"
PROBLEMS = {
    "default Two moons (n = 2,000, M = 200, t = 20)": "dataset=moons&solver=falkon&maxiter=20&auto_run=false",
    CLASSROOM: "dataset=moons&solver=falkon&n=40000&M=1000&maxiter=20&auto_run=false",
}
QUICK = {"Two moons, n = 2,000, M = 100, t = 5": "dataset=moons&solver=falkon&n=2000&M=100&maxiter=5&auto_run=false"}
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RESULT = re.compile(r"finished — .*?: (\d+) iterations, ([\d.]+) s solver time")
#: The live fit's cost, as the page states it under a finished run's fit (krr_app.parts.fit_views.pictures_text).
PICTURES = re.compile(
    r"Drawn while the solver ran: ([\d,]+) pictures, ([\d.,e+-]+) s on the worker \(([\d.]+)% of "
    r"the run's ([\d.,e+-]+) s;"
)


def library_fit(query: str) -> float:
    """The page's configuration ``query`` through krrcore alone: its solver seconds."""
    from krr_app.jobs.config import DataSpec, make_config
    from krrcore.datasets import DATASETS
    from krr_app.jobs.worker import run_fit

    params = dict(item.split("=") for item in query.split("&"))
    params.pop("auto_run", None)
    name = params["dataset"]
    info = DATASETS[name]
    spec = DataSpec(name, n=int(params.get("n", info.default_n)), knobs=info.defaults)
    run_config = make_config(
        spec,
        kernel="gaussian",
        kernel_params={"sigma": info.suggested_sigma},
        penalty=info.suggested_penalty,
        solver=params["solver"],
        M=int(params["M"]) if "M" in params else None,
        maxiter=int(params["maxiter"]),
    )
    outcome = run_fit(run_config.fit_spec("bench"))
    if outcome.status != "done":
        raise RuntimeError(f"the krrcore fit of {query} ended {outcome.status}: {outcome.message}")
    return outcome.timings["solver_seconds"]


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


@contextmanager
def warm_library(threads: int, queries):
    """A child process with ``threads`` torch threads that has fitted each of ``queries`` once (data
    built, allocator and kernels warm, as on a worker); yields ``seconds(query)``."""
    from benchmarks import bench_app  # by module name: the child imports it (also when run as __main__)

    with ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=bench_app._set_threads, initargs=(threads,)
    ) as pool:
        for query in queries:
            pool.submit(bench_app.library_fit, query).result()
        yield lambda query: pool.submit(bench_app.library_fit, query).result()


def browser_placements(confine: bool) -> dict[str, str | None]:
    """Label → chromium executable: on every core, and (``confine``, with ``taskset`` and 2+ cores)
    confined to the last."""
    chromium, _ = find_chromium()
    cores = os.cpu_count() or 1
    placements = {f"shares the {cores} cores": chromium}
    if confine and shutil.which("taskset") and cores > 1:
        wrapper = Path(tempfile.mkdtemp()) / "chromium-last-core"
        wrapper.write_text(f'#!/bin/sh\nexec taskset -c {cores - 1} {chromium} "$@"\n')
        wrapper.chmod(0o755)
        placements[f"on core {cores - 1} only"] = str(wrapper)
    return placements


def start_workers(url: str, browser) -> None:
    """The server's first visit starts its workers: wait for them once, like a second user."""
    warm = browser.new_page()
    warm.goto(url)
    warm.get_by_role("button", name="Run", exact=True).wait_for(timeout=180_000)
    time.sleep(10)
    warm.close()


# Records each change of Streamlit's script-run state (the page's ``stApp`` attribute), so a press of
# Run in an open tab can wait for the rerun it starts, also when that rerun's text equals the last.
WATCH_SCRIPT_STATE = """() => {
    const app = document.querySelector('[data-testid="stApp"]');
    window.__krrScriptStates = [];
    new MutationObserver(() => window.__krrScriptStates.push(app.getAttribute('data-test-script-state')))
        .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""
RERUN_DONE = """() => window.__krrScriptStates.includes('running')
    && document.querySelector('[data-testid="stApp"]').getAttribute('data-test-script-state') === 'notRunning'"""


def run_button(page):
    return page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Run", exact=True)


def pictures_share(page) -> float:
    """The share of the run's wall time its live fit took on the worker, as the page states it
    (NaN when the page states none: not 1-D or 2-D data)."""
    caption = page.get_by_text(PICTURES)
    if not caption.count():
        return math.nan
    return float(PICTURES.search(caption.first.inner_text()).group(3)) / 100


def first_run(page, url: str, query: str) -> tuple[float, float, float]:
    """A new visitor's first Run: (solver seconds, Run → first chart marker, Run → result)."""
    page.goto(f"{url}/?{query}")
    button = run_button(page)
    button.wait_for()
    time.sleep(1.0)
    clicked = time.perf_counter()
    button.click()
    # The convergence chart's first marker, in the live chart or (a run that ended within the
    # click's page run) in plotly's: its empty panels are drawn before any run.
    page.locator(".krr-live-point").or_(
        page.locator(".js-plotly-plot", has_text="Residual (solver").locator(".scatterlayer .points path")
    ).first.wait_for(state="attached")
    first_chart = time.perf_counter() - clicked
    result = page.get_by_text(RESULT).first
    result.wait_for()
    to_result = time.perf_counter() - clicked
    return float(RESULT.search(result.inner_text()).group(2)), first_chart, to_result


def run_again(page) -> float:
    """Run pressed again in the same open tab (its charts and result on screen): solver seconds.
    The result line is read after the rerun the click starts, so it is the new run's."""
    page.evaluate(WATCH_SCRIPT_STATE)
    run_button(page).click()
    page.wait_for_function(RERUN_DONE)
    result = page.get_by_text(RESULT).first
    result.wait_for()
    return float(RESULT.search(result.inner_text()).group(2))


def app_fits(url: str, browser, queries: dict[str, str], repeats: int, library) -> dict[str, dict]:
    """Per problem, ``repeats`` samples, each alternating app and library: a new browser context's
    first Run (in-app solver seconds, Run → first chart, Run → result), the same fit through
    ``library``, then Run pressed again in that tab and the fit through ``library`` once more."""
    out = {}
    for label, query in queries.items():
        first, again, library_seconds, first_chart, to_result, pictures = [], [], [], [], [], []
        for _ in range(repeats):
            page = browser.new_context(viewport={"width": 1200, "height": 1400}).new_page()
            page.set_default_timeout(300_000)
            seconds, chart_s, result_s = first_run(page, url, query)
            first.append(seconds)
            first_chart.append(chart_s)
            to_result.append(result_s)
            pictures.append(pictures_share(page))
            library_seconds.append(library(query))
            time.sleep(1.0)
            again.append(run_again(page))
            pictures.append(pictures_share(page))
            library_seconds.append(library(query))
            page.context.close()
        out[label] = {
            "first_run": statistics.median(first),
            "run_again": statistics.median(again),
            "library_seconds": statistics.median(library_seconds),
            "first_chart": statistics.median(first_chart),
            "to_result": statistics.median(to_result),
            "pictures": statistics.median(pictures),
        }
    return out


def measure(quick: bool, repeats: int) -> list[dict]:
    """One row per problem and browser placement: median in-app solver seconds, the same fit through
    krrcore with the workers' thread count (warm, alternating with the app's runs) and with every
    core, Run → first chart, Run → result."""
    from playwright.sync_api import sync_playwright

    from krr_app import settings
    from krr_app.jobs.server import running_app

    queries = QUICK if quick else PROBLEMS
    placements = browser_placements(confine=not quick)  # quick: the suite's smoke run, one is enough
    rows = []
    with (
        warm_library(settings.WORKER_THREADS, queries.values()) as same_threads,
        running_app(Path(tempfile.mkdtemp()) / "server.log") as (url, _),
        sync_playwright() as playwright,
    ):
        for i, (placement, executable) in enumerate(placements.items()):
            browser = playwright.chromium.launch(executable_path=executable, args=FLAGS)
            if i == 0:
                start_workers(url, browser)
            in_app = app_fits(url, browser, queries, repeats, same_threads)
            browser.close()
            for label, app in in_app.items():
                rows.append(
                    {
                        "problem": label,
                        "browser": placement,
                        "app solver s (first Run)": app["first_run"],
                        "app solver s (Run again)": app["run_again"],
                        "krrcore s (same threads)": app["library_seconds"],
                        "worker threads": settings.WORKER_THREADS,
                        "first Run / krrcore": app["first_run"] / app["library_seconds"],
                        "Run again / krrcore": app["run_again"] / app["library_seconds"],
                        "Run → first chart s": app["first_chart"],
                        "Run → result s": app["to_result"],
                        "live fit / wall time": app["pictures"],
                    }
                )
    with warm_library(os.cpu_count() or 1, queries.values()) as all_cores:
        every_core = {
            label: statistics.median(all_cores(query) for _ in range(repeats)) for label, query in queries.items()
        }
    for row in rows:
        row["krrcore s (all cores)"] = every_core[row["problem"]]
    return rows


def main() -> None:
    parser = quick_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = measure(args.quick, 1 if args.quick else args.repeats)
    print_table(rows, "In-app solver seconds against krrcore on the same fit (medians)")


if __name__ == "__main__":
    main()

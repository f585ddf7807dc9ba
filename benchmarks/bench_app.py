"""The app against the library on the same fit: in-app solver seconds (a Dask worker) against
``krrcore`` run directly, and the time from Run to the first chart and to the result.

For each problem the app is driven in headless chromium (``streamlit run app.py`` on 127.0.0.1):
open the shared link (with "Run on every change" off, so the click starts the page's first run),
press Run, time the first convergence chart and the result line, read the solver seconds the page
reports. After each app run the same fit runs through ``krrcore.remote.run_fit`` (what the
reproduce snippet does) in a fresh process with the workers' torch thread count: app and library
runs alternate, so a change in the shared machine's load reaches both. Once more with every core
at the end. Each figure is the median of ``--repeats`` runs; read the ratios.

    python -m benchmarks.bench_app [--quick] [--repeats 3]   (or: python -m benchmarks --case app)
"""
from __future__ import annotations

import re
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.common import call_isolated, print_table, quick_parser

# auto_run=false: a small problem would otherwise run by itself when the page opens, and Run would
# time a repeat whose chart is already drawn.
PROBLEMS = {
    "default Two moons (n = 2,000, M = 200, t = 20)": "dataset=moons&solver=falkon&maxiter=20&auto_run=false",
    "Two moons, n = 40,000, M = 1,000, t = 20": "dataset=moons&solver=falkon&n=40000&M=1000&maxiter=20&auto_run=false",
}
QUICK = {"Two moons, n = 2,000, M = 100, t = 5": "dataset=moons&solver=falkon&n=2000&M=100&maxiter=5&auto_run=false"}
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
RESULT = re.compile(r"finished — .*?: (\d+) iterations, ([\d.]+) s solver time")


def library_fit(config: dict) -> dict:
    """Child: the page's configuration through krrcore alone, with ``threads`` torch threads."""
    import torch

    from krr_app.config import DataSpec, make_config
    from krrcore.datasets import DATASETS
    from krrcore.remote import run_fit

    torch.set_num_threads(config["threads"])
    query = dict(item.split("=") for item in config["query"].split("&"))
    query.pop("auto_run", None)
    name = query["dataset"]
    info = DATASETS[name]
    spec = DataSpec(name, n=int(query.get("n", info.default_n)), knobs=info.defaults)
    run_config = make_config(spec, kernel="gaussian", kernel_params={"sigma": info.suggested_sigma},
                             penalty=info.suggested_penalty, solver=query["solver"],
                             M=int(query["M"]) if "M" in query else None, maxiter=int(query["maxiter"]))
    outcome = run_fit(run_config.fit_spec("bench"))
    return {"solver_seconds": outcome.timings["solver_seconds"], "status": outcome.status}


def _library_seconds(query: str, threads: int) -> float:
    """Solver seconds of :func:`library_fit` in a fresh process; its error, if it failed."""
    from benchmarks import bench_app     # by module name: the child imports it (also when run as __main__)

    result = call_isolated(bench_app.library_fit, {"query": query, "threads": threads})
    if "error" in result:
        raise RuntimeError(f"the krrcore fit of {query} failed: {result['error']}")
    return result["solver_seconds"]


def app_fits(queries: dict[str, str], repeats: int, threads: int) -> dict[str, dict]:
    """Per problem, ``repeats`` alternating samples: an app run (in-app solver seconds, Run → first
    chart, Run → result), then the same fit through krrcore with ``threads`` torch threads."""
    from playwright.sync_api import sync_playwright

    from krr_app.server import running_app

    out = {}
    log = Path(tempfile.mkdtemp()) / "server.log"
    with running_app(log) as (url, _), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=FLAGS)
        warm = browser.new_page()
        warm.goto(url)           # the first visit starts the workers; wait for them like a second user
        warm.get_by_role("button", name="Run", exact=True).wait_for(timeout=180_000)
        time.sleep(10)
        for label, query in queries.items():
            samples = []
            for _ in range(repeats):
                page = browser.new_context(viewport={"width": 1200, "height": 1400}).new_page()
                page.set_default_timeout(300_000)
                page.goto(f"{url}/?{query}")
                button = page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Run", exact=True)
                button.wait_for()
                time.sleep(1.0)
                clicked = time.perf_counter()
                button.click()
                # The convergence chart's data: its empty axes are drawn before any run.
                page.locator(".js-plotly-plot", has_text="Residual (solver").locator(
                    ".scatterlayer .trace").first.wait_for(state="attached")
                first_chart = time.perf_counter() - clicked
                result = page.get_by_text(RESULT).first
                result.wait_for()
                to_result = time.perf_counter() - clicked
                seconds = float(RESULT.search(result.inner_text()).group(2))
                page.context.close()
                library = _library_seconds(query, threads)
                samples.append((seconds, library, first_chart, to_result))
            out[label] = {k: statistics.median(s[i] for s in samples)
                          for i, k in enumerate(("solver_seconds", "library_seconds", "first_chart", "to_result"))}
        browser.close()
    return out


def measure(quick: bool, repeats: int) -> list[dict]:
    """One row per problem: median in-app solver seconds, the same fit through krrcore with the
    workers' thread count (alternating with the app's runs) and with every core, Run → first chart,
    Run → result."""
    import os

    from krr_app import settings

    queries = QUICK if quick else PROBLEMS
    in_app = app_fits(queries, repeats, settings.WORKER_THREADS)
    rows = []
    for label, query in queries.items():
        app = in_app[label]
        all_cores = statistics.median(_library_seconds(query, os.cpu_count() or 1) for _ in range(repeats))
        same = app["library_seconds"]
        rows.append({"problem": label, "app solver s": app["solver_seconds"], "krrcore s (same threads)": same,
                     "worker threads": settings.WORKER_THREADS, "app / krrcore": app["solver_seconds"] / same,
                     "krrcore s (all cores)": all_cores,
                     "Run → first chart s": app["first_chart"], "Run → result s": app["to_result"]})
    return rows


def main() -> None:
    parser = quick_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = measure(args.quick, 1 if args.quick else args.repeats)
    print_table(rows, "In-app solver seconds against krrcore on the same fit (medians)")


if __name__ == "__main__":
    main()

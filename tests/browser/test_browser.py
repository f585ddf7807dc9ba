"""The app in a real browser: `streamlit run app.py` on 127.0.0.1, driven by Debian's chromium.

One scenario, as a student would use it: pick a dataset and a solver, set n, press Run, watch the
convergence chart grow, stop the run, run again to the end, look at the fit; start a long run in a
second tab and close it (its run must end); open Compare and run two solvers there. Screenshots go
to pytest's tmp dir, and to ``$KRR_SAVE_SCREENSHOTS`` (e.g. ``docs/``) when set:
``docs/screenshot-explore.png`` in the README comes from here.

Playwright drives the system chromium (``apt-get install chromium``); ``playwright install`` is
never run. Without chromium the test is skipped, unless ``KRR_REQUIRE_BROWSER=1`` (set by
``.ci/run``), where a missing browser is a failure. Deselect with ``-m "not browser"``.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from benchmarks.bench_app import WATCH_SCRIPT_STATE
from krr_app.settings import RELOAD_GRACE_SECONDS

pytestmark = pytest.mark.browser

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1400, "height": 1700}
#: A problem big enough that a run lasts several polls of the page, small enough for CI.
# The long runs use Nyström GD: it keeps improving for minutes, while FALKON reaches working
# precision (and stops by itself) within a couple of dozen iterations on this problem.
N_POINTS, MAXITER_LONG, MAXITER = 5000, 100_000, 10


def _require(condition: bool, reason: str) -> None:
    if condition:
        return
    if os.environ.get("KRR_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason} (KRR_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


def _wait_idle(page, timeout: float = 60.0) -> None:
    """Until the app has shown no "running" indicator for half a second."""
    deadline, quiet_since = time.time() + timeout, None
    status = page.get_by_test_id("stStatusWidget")
    while time.time() < deadline:
        if status.count() and status.first.is_visible():
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.time()
        elif time.time() - quiet_since > 0.5:
            return
        time.sleep(0.1)
    raise AssertionError("the app did not become idle")


def _choose(page, widget_label: str, option: str) -> None:
    page.get_by_test_id("stSelectbox").filter(has_text=widget_label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    _wait_idle(page)


def _set_number(page, label: str, value) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    _wait_idle(page)


def _live(page) -> tuple[int, int]:
    """(the iteration the live chart's progress line shows, or -1; the markers it has drawn)."""
    line = page.locator(".krr-live-text")
    match = re.search(r"iteration (\d+)", line.first.inner_text()) if line.count() else None
    return (int(match.group(1)) if match else -1), page.locator(".krr-live-point").count()


def _chart_points(page) -> int:
    """Points drawn in the first trace of Explore's convergence chart (the residual curve). Read from
    plotly.js's decoded ``_fullData``: plotly.py sends numpy columns base64-encoded, and ``data``'s
    ``x`` can still be that encoding ({dtype, bdata}, no ``length``) right after a redraw."""
    return page.evaluate(
        "() => { const p = document.querySelector('.st-key-explore_convergence .js-plotly-plot');"
        " const traces = p && (p._fullData || p.data);"
        " const x = traces && traces.length ? traces[0].x : null;"
        " return x && x.length !== undefined ? x.length : 0; }"
    )


def _save(page, name: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=True)
    target = os.environ.get("KRR_SAVE_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / name)
    return path


@contextmanager
def chromium():
    """A headless Debian chromium driven by Playwright (skipped, or failed under
    KRR_REQUIRE_BROWSER=1, when either is missing); closed on exit."""
    executable = shutil.which("chromium")
    _require(executable is not None, "Debian's chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _require(False, "playwright is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def test_explore_run_stop_and_compare_in_chromium(server, tmp_path):
    url, log_path = server
    with chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        try:
            page.set_default_timeout(60_000)
            page.goto(f"{url}/?M=300")
            main = page.get_by_test_id("stMainBlockContainer")  # not the header's own Stop button
            run_button = main.get_by_role("button", name="Run", exact=True)
            run_button.wait_for(timeout=120_000)  # the first page load imports torch on the server
            _wait_idle(page)

            # Pick a dataset and a solver, set n: as a student would.
            _choose(page, "Dataset", "Noisy sine (1-D)")
            _choose(page, "Solver", "Nyström GD")
            _set_number(page, "n (points, train + test)", N_POINTS)
            _set_number(page, "Max iterations t", MAXITER_LONG)
            assert "dataset=" in page.url and f"n={N_POINTS}" in page.url, page.url

            # Run: the progress line and the convergence chart grow while it runs, from the live
            # chart's own looks at the server: the page does not run its script again meanwhile.
            run_button.click()
            page.get_by_text(re.compile(r"iteration \d+ / ")).first.wait_for()
            _wait_idle(page)  # the click's page run is over (the run may have started on a change)
            page.evaluate(WATCH_SCRIPT_STATE)
            first = second = _live(page)
            deadline = time.time() + 30
            while time.time() < deadline:  # the reading that shows growth is the one asserted:
                second = _live(page)  # a later one can fall mid-redraw
                if second[0] > first[0] and second[1] > first[1]:
                    break
                time.sleep(0.2)
            assert second[0] > first[0] and second[1] > first[1], (first, second)
            script_runs = page.evaluate("window.__krrScriptStates.filter(s => s === 'running').length")
            assert script_runs == 0, "a look reran the page"
            _save(page, "screenshot-explore-running.png", tmp_path)

            # Stop ends the run (within a second: tests/app/test_app.py measures it); the page says so
            # at the live chart's next look, which reruns the page once.
            main.get_by_role("button", name="Stop", exact=True).click()
            page.get_by_text("stopped by the user").first.wait_for(timeout=10_000)

            # A FALKON run to the end: metrics, and the fitted curve over the data.
            _choose(page, "Solver", "FALKON")
            _set_number(page, "Max iterations t", MAXITER)
            run_button.click()
            page.get_by_text(re.compile(r"finished — ")).first.wait_for()
            _wait_idle(page)
            page.get_by_text("Test RMSE").first.wait_for()
            page.get_by_text("Fitted function").first.wait_for()
            page.locator(".js-plotly-plot").nth(1).wait_for()  # the convergence chart and the fitted curve
            assert page.locator(".js-plotly-plot").count() == 2
            _save(page, "screenshot-explore.png", tmp_path)

            # Closing a tab ends its run: a second tab (a new session, opened from a link that names
            # its options by key) starts an endless run and is closed; the server's count of
            # runs computing on the workers must drop back to 0.
            other = browser.new_page(viewport=VIEWPORT)
            other.goto(f"{url}/?dataset=sine1d&solver=nystrom_gd&n={N_POINTS}&M=300&maxiter={MAXITER_LONG}")
            # A run computing on this 2-core machine slows the new tab's first page run: a longer bound.
            other.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Run", exact=True).click(
                timeout=120_000
            )
            # Its run waits for a worker and then starts its session's problem: the same longer bound.
            other.get_by_text(re.compile(rf"iteration \d+ / {MAXITER_LONG}")).first.wait_for(timeout=120_000)
            other.close()

            # Compare (a reload: a fresh session on the same URL, so the same cached problem).
            page.get_by_role("link", name="Compare").click()
            page.get_by_role("heading", name="Compare").wait_for()
            assert f"n={N_POINTS}" in page.url  # the shared sidebar's settings travel with the page
            deadline = time.time() + 20 + RELOAD_GRACE_SECONDS  # a closed tab's runs wait that long for a reload
            while "computing now: 0," not in page.get_by_text("This server's runs computing now").first.inner_text():
                assert time.time() < deadline, "the closed tab's run kept computing"
                time.sleep(1)
                page.reload()
            _wait_idle(page)
            page.get_by_role("button", name=re.compile(r"^Run \d+ configuration")).click()
            # While the batch runs, the live chart draws it; when the last run ends, the page draws
            # the runs with plotly and their table.
            page.locator(".krr-live-text").first.wait_for(state="detached", timeout=120_000)
            _wait_idle(page)
            page.get_by_test_id("stDataFrame").first.wait_for()
            page.locator(".js-plotly-plot").first.wait_for()  # the table can arrive a frame before the chart
            _save(page, "screenshot-compare.png", tmp_path)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"page: {page.url}\nscreenshot: {tmp_path / 'failure.png'}\nserver log:\n{log_path.read_text()}")
            raise


def test_a_reload_mid_run_reconnects_to_the_run_and_a_late_one_says_what_became_of_it(server, tmp_path):
    """Reloading the page is a new session: the link's ``?run=`` reconnects it to the run, which
    went on computing meanwhile (same id, more iterations). A tab closed for longer than the
    grace stops its run, and its link, opened later, says so in words."""
    url, log_path = server
    with chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(120_000)
        try:
            page.goto(f"{url}/?dataset=sine1d&solver=nystrom_gd&n={N_POINTS}&M=300&maxiter={MAXITER_LONG}")
            main = page.get_by_test_id("stMainBlockContainer")
            main.get_by_role("button", name="Run", exact=True).click()
            page.get_by_text(re.compile(rf"iteration \d+ / {MAXITER_LONG}")).first.wait_for()
            _wait_idle(page)
            run_id = re.search(r"[?&]run=(\w+)", page.url).group(1)
            before = _live(page)[0]
            page.reload()
            page.get_by_text(re.compile(rf"iteration \d+ / {MAXITER_LONG}")).first.wait_for()
            _wait_idle(page)
            assert f"run={run_id}" in page.url
            deadline = time.time() + 30
            while _live(page)[0] <= before:  # the same run, further on: it computed through the reload
                assert time.time() < deadline, (before, _live(page))
                time.sleep(0.2)
            main.get_by_role("button", name="Stop", exact=True).click()
            page.get_by_text("stopped by the user").first.wait_for(timeout=10_000)
            link = page.url
            page.close()
            time.sleep(RELOAD_GRACE_SECONDS + 3)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(link)
            note = page.get_by_text(f"The run this link names (run={run_id}) is not on this server any more")
            note.first.wait_for()
            assert "was kept" in note.first.inner_text() and "press Run" in note.first.inner_text()
            assert page.get_by_text("stopped by the user").count() == 0
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"page: {page.url}\nserver log:\n{log_path.read_text()[-5000:]}")
            raise

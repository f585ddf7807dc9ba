"""Teaching in a real browser: the first picture, a small run after a change, a checked link and a
lesson, and the convergence chart before and after Run, in chromium against ``streamlit run
app.py`` (helpers and the server from test_browser).

Measured and printed (``-s`` shows them; never asserted — the machine is shared), for each visit
on its own: the seconds from the page's load event to the first picture (the data's image, or a
chart) as Playwright sees it and as the page paints it, and from pressing Enter on a changed M to
that run drawn finished. The visits: the server's first (a cold server: it imports torch and
starts the Dask workers), then NEW_VISITORS new visitors to the warm server (each a fresh browser
context, as each student's browser opening the teacher's link: no cached scripts), then a
returning visitor's 2nd and 3rd visits in one browser context. Asserted: the pictures and the
finished runs appear, the link's message names the refused values, a lesson sets M step by step.
The first new visitor's picture is saved as ``first-picture.png`` in pytest's tmp dir;
``screenshot-lesson.png`` (docs/app.md) also goes to ``$KRR_SAVE_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import re
import statistics
import time

import pytest
from test_browser import VIEWPORT, _chart_points, _save, _wait_idle, chromium

expect = pytest.importorskip("playwright.sync_api").expect

pytestmark = pytest.mark.browser
#: The first picture: the data (an SVG image in Markdown) or a plotly chart, whichever the page shows first.
PICTURE = '[data-testid=stMarkdownContainer] img[alt^="The data"], .js-plotly-plot'


def _seconds_until(locator, start: float, timeout: float = 120.0) -> float:
    locator.first.wait_for(timeout=timeout * 1000)
    return time.perf_counter() - start


def _finished(page, label_part: str):
    """The status line of a finished run whose label holds ``label_part`` (e.g. "M=50")."""
    return page.get_by_test_id("stAlert").filter(has_text=re.compile(rf"{re.escape(label_part)}\b.* finished — "))


# Widget values are read with expect(...).to_have_value, which waits: after a rerun the number
# input can show its previous value for a moment before the server's value arrives.


#: Installed in the page before its scripts: notes, on the page's own clock, when the first frame
#: with the picture in it has been painted (inserted, its image decoded, then the next frame's
#: callback and the task after it: an upper bound, as that task can queue behind others), and the
#: browser's own paint time of the picture when it reports it as the page's largest paint so far
#: (largest-contentful-paint; not always: it is not reported for an element replaced since).
#: Playwright polls from the page's main thread, so it sees the picture late when a long script
#: (plotly.js) runs right after the picture was painted.
def paint_probe(picture: str) -> str:
    """The probe above for the first element matching the CSS selector ``picture``."""
    return f"""
window.__krrPicturePainted = null;
window.__krrPictureLCP = null;
new PerformanceObserver((entries) => {{
  for (const e of entries.getEntries())
    if (e.element && e.element.matches({picture!r})) window.__krrPictureLCP = e.renderTime || e.startTime;
}}).observe({{type: "largest-contentful-paint", buffered: true}});
new MutationObserver((_, observer) => {{
  const picture = document.querySelector({picture!r});
  if (!picture) return;
  observer.disconnect();
  const ready = picture.tagName === "IMG" ? picture.decode().catch(() => null) : Promise.resolve();
  ready.then(() => requestAnimationFrame(() => setTimeout(() => {{
    window.__krrPicturePainted = performance.now(); }}, 0)));
}}).observe(document, {{childList: true, subtree: true}});
"""


PAINT_PROBE = paint_probe(PICTURE)


#: New visitors measured on the warm server (fresh browser contexts; median and worst printed).
NEW_VISITORS = 3


def _open(page, url: str, *, run: bool = False) -> dict[str, float]:
    """Load ``url``: seconds from the page's load event (when ``goto`` returns: Streamlit's scripts
    are in) to the first picture seen by Playwright and to its first frame painted
    (:data:`PAINT_PROBE`), from the navigation's start (the link opened) to that frame, and with
    ``run`` from the load event to the page's first run drawn finished."""
    start = time.perf_counter()
    page.goto(url)
    loaded = time.perf_counter()
    seen = _seconds_until(page.locator(PICTURE), start)
    page.wait_for_function("window.__krrPicturePainted !== null")
    painted, lcp, load_event = page.evaluate(
        "[window.__krrPicturePainted / 1000, window.__krrPictureLCP && window.__krrPictureLCP / 1000, "
        "performance.getEntriesByType('navigation')[0].loadEventEnd / 1000]"
    )
    measured = {
        "picture seen after load": seen - (loaded - start),
        "picture painted after load": painted - load_event,
        "picture painted after the link was opened": painted,
    }
    if lcp is not None:
        measured["picture painted after load (browser's paint timing)"] = lcp - load_event
    if run:
        measured["first run drawn finished after load"] = _seconds_until(
            page.get_by_test_id("stAlert").filter(has_text=" finished — "), loaded
        )
    return measured


def test_first_picture_small_run_after_a_change_a_checked_link_and_a_lesson(server, tmp_path, record_property):
    url, log_path = server
    visits: dict[str, dict[str, float]] = {}
    timings = {}
    with chromium() as browser:

        def fresh_page():
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(60_000)
            page.add_init_script(PAINT_PROBE)
            return page

        page = fresh_page()
        try:
            # A cold server: this first visit imports torch and starts the Dask workers.
            visits["cold server"] = _open(page, url, run=True)
            page.context.close()
            # New visitors to the warm server, as a class opening the teacher's link: each browser
            # context is new (no cached scripts, no compiled-code cache) and the link the same.
            for k in range(NEW_VISITORS):
                page = fresh_page()
                visits[f"new visitor {k + 1}"] = _open(page, url, run=True)
                if k == 0:  # the data's picture itself (a look at it: is it the right thing?)
                    picture = page.get_by_role("img", name=re.compile(r"^The data: n = \d"))
                    picture.screenshot(path=str(tmp_path / "first-picture.png"))
                    assert picture.count() == 1 and picture.bounding_box()["width"] > 300
                page.context.close()
            # A returning visitor: the 2nd and 3rd visits in one browser context (its scripts
            # cached; Chromium caches compiled scripts from about the third load on), other data.
            page = fresh_page()
            _open(page, url, run=True)
            _wait_idle(page)
            visits["returning visitor, 2nd visit"] = _open(page, f"{url}/?seed=1", run=True)
            _wait_idle(page)
            assert page.get_by_text("Decision surface").count() == 1  # the fit over the data
            visits["returning visitor, 3rd visit"] = _open(page, f"{url}/?seed=2", run=True)
            _wait_idle(page)

            # A change: M = 50, Enter; the new run is drawn finished, without pressing Run.
            box = page.get_by_label("M (Nyström centres)", exact=True)
            box.fill("50")
            start = time.perf_counter()
            box.press("Enter")
            timings["small run after a change"] = _seconds_until(_finished(page, "M=50"), start)
            _wait_idle(page)
            assert "M=50" in page.url

            # A link with bad values: one message naming them, the values used in the widgets.
            page.goto(f"{url}/?M=-5&dataset=nope&n=10000000000&auto_run=false")
            message = page.get_by_test_id("stAlert").filter(has_text="refused or adjusted")
            message.first.wait_for()
            text = message.first.inner_text()
            for part in (
                "M=-5",
                "dataset=nope",
                "n=10000000000",
                "using the default, 100",
                "using the largest allowed, 200,000",
            ):
                assert part in text, text
            expect(page.get_by_label("M (Nyström centres)", exact=True)).to_have_value("100")
            assert "n=200000" in page.url and "M=" not in page.url

            # A lesson: its link sets the experiment; Next applies step 2 (M = 20) and runs it.
            page.goto(f"{url}/?lesson=nystrom-centres")
            page.get_by_text("Lesson: How many Nyström centres?").first.wait_for()
            _finished(page, "M=5").first.wait_for()
            _wait_idle(page)
            expect(page.get_by_label("M (Nyström centres)", exact=True)).to_have_value("5")
            page.get_by_role("button", name="Next").click()
            _finished(page, "M=20").first.wait_for()
            _wait_idle(page)
            expect(page.get_by_label("M (Nyström centres)", exact=True)).to_have_value("20")
            assert "step=2" in page.url and page.get_by_text("Fitted function").count() == 1
            _save(page, "screenshot-lesson.png", tmp_path)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"page: {page.url}\nscreenshot: {tmp_path / 'failure.png'}\nserver log:\n{log_path.read_text()}")
            raise
    lines = []
    for visit, measured in visits.items():
        for name, seconds in measured.items():
            record_property(f"{visit}: {name}", round(seconds, 3))
        lines.append(f"{visit}: " + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in measured.items()))
    new = sorted(m["picture painted after load"] for v, m in visits.items() if v.startswith("new visitor"))
    lines.append(
        f"new visitors, warm server: picture painted after load, median {statistics.median(new):.2f} s, "
        f"worst {new[-1]:.2f} s"
    )
    for name, seconds in timings.items():
        record_property(name, round(seconds, 3))
        lines.append(f"{name} {seconds:.2f} s")
    print(
        f"\nmeasured in chromium (a new visitor's first picture: {tmp_path / 'first-picture.png'}):\n  "
        + "\n  ".join(lines)
    )


#: Explore's convergence chart (the residual panel's title is in it), and its data: a marker (a run
#: of up to 60 records draws them; the chart's empty traces before any run have none).
CONVERGENCE = ".js-plotly-plot"
CONVERGENCE_TEXT = "Residual (solver"
CONVERGENCE_DATA = ".scatterlayer .points path"
#: Installed in the page: notes, on the page's own clock, the last click and when the convergence
#: chart's data and a finished run's status line are first painted after it (inserted, then the
#: next frame's callback and the task after it, as in PAINT_PROBE: plotly.js inserts a chart's
#: traces in the middle of a long task, and Playwright's own waits poll, ever more slowly).
RUN_PROBE = f"""
window.__krrRun = {{clicked: null, chart: null, result: null}};
document.addEventListener("click", () => {{
  window.__krrRun = {{clicked: performance.now(), chart: null, result: null}}; }}, true);
const painted = (name) => {{
  const run = window.__krrRun;
  run[name] = false;
  requestAnimationFrame(() => setTimeout(() => {{ run[name] = performance.now(); }}, 0));
}};
new MutationObserver(() => {{
  const run = window.__krrRun;
  if (run.clicked === null) return;
  const chart = [...document.querySelectorAll({CONVERGENCE!r})]
    .find(p => p.textContent.includes({CONVERGENCE_TEXT!r}));
  if (run.chart === null && chart && chart.querySelector({CONVERGENCE_DATA!r})) painted("chart");
  const main = document.querySelector("[data-testid=stMain]");
  if (run.result === null && main && main.textContent.includes(" finished — ")) painted("result");
}}).observe(document, {{childList: true, subtree: true, characterData: true}});
"""


def test_the_convergence_chart_waits_drawn_before_run_and_fills_in_after_it(server, record_property):
    """New visitors with a link that waits for Run (as a large problem does): the convergence
    chart's empty axes are drawn before Run (so plotly.js is loaded while the student looks at the
    data), after the data's picture; Run fills the same chart with the run's records.

    Printed for each visitor: the picture painted and the empty axes drawn after the load event,
    when the browser started fetching plotly.js, Run -> the chart's data and the result painted
    (run alone, this test's first visitor meets a cold server: it starts the workers)."""
    url, _ = server
    rows = []
    with chromium() as browser:
        for _ in range(NEW_VISITORS):
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(60_000)
            page.add_init_script(PAINT_PROBE)
            page.add_init_script(RUN_PROBE)
            page.goto(f"{url}/?auto_run=false")
            chart = page.locator(CONVERGENCE, has_text=CONVERGENCE_TEXT)
            chart.locator(".xtitle").first.wait_for(state="attached")  # its axes are drawn
            page.wait_for_function("window.__krrPicturePainted !== null")
            assert page.get_by_text("Nothing has run with these settings yet").count() == 1
            assert chart.count() == 1 and _chart_points(page) == 0 and not chart.locator(CONVERGENCE_DATA).count()
            assert chart.locator(".xtitle").first.text_content() == "iteration t"
            load, picture, plotly = page.evaluate(
                "[performance.getEntriesByType('navigation')[0].loadEventEnd, window.__krrPicturePainted, "
                "performance.getEntriesByType('resource').filter(e => /PlotlyChart/.test(e.name))[0].startTime]"
            )
            axes = page.evaluate("performance.now()")
            button = page.get_by_test_id("stMainBlockContainer").get_by_role("button", name="Run", exact=True)
            button.click()
            chart.locator(CONVERGENCE_DATA).first.wait_for(state="attached")
            result = page.get_by_test_id("stAlert").filter(has_text=" finished — ").first
            result.wait_for()
            page.wait_for_function("window.__krrRun.chart && window.__krrRun.result")
            clicked, to_chart, to_result = page.evaluate(
                "[window.__krrRun.clicked, window.__krrRun.chart, window.__krrRun.result]"
            )
            iterations = int(re.search(r"(\d+) iterations?,", result.inner_text()).group(1))
            # One residual point per record of the run (its start, iteration 0, to the last), in
            # the chart that waited for it.
            assert chart.count() == 1 and _chart_points(page) == iterations + 1 > 1
            rows.append(
                {
                    "picture painted after load": (picture - load) / 1000,
                    "plotly.js requested after the picture": (plotly - picture) / 1000,
                    "empty axes drawn after load (at most)": (axes - load) / 1000,
                    "Run -> chart's data painted": (to_chart - clicked) / 1000,
                    "Run -> result painted": (to_result - clicked) / 1000,
                }
            )
            page.context.close()
    lines = []
    for name in rows[0]:
        values = [row[name] for row in rows]
        record_property(f"convergence chart: {name}", [round(v, 3) for v in values])
        lines.append(
            f"{name}: " + ", ".join(f"{v:.2f}" for v in values) + f" s (median {statistics.median(values):.2f})"
        )
    print("\nnew visitors, a link that waits for Run:\n  " + "\n  ".join(lines))


#: For every plotly chart on the page: its key, its legend's entries and the boxes (viewport px) of
#: its legend, its x-axis titles and x tick labels, and its thick black contour lines (a decision boundary).
CHART_BOXES = """() => [...document.querySelectorAll('.js-plotly-plot')].map(p => {
  const boxes = (sel) => [...p.querySelectorAll(sel)].map(e => e.getBoundingClientRect())
      .filter(r => r.height > 0).map(r => ({top: r.top, bottom: r.bottom, left: r.left, right: r.right}));
  const holder = p.closest('[class*="st-key-"]');
  return {key: holder ? [...holder.classList].find(c => c.startsWith('st-key-')).slice(7) : null,
          entries: [...p.querySelectorAll('.legend .traces')].map(t => t.textContent),
          legend: boxes('.legend .bg'), titles: boxes('[class^="g-x"][class$="title"]'),
          ticks: boxes('.xtick text, .x2tick text'),
          boundary: [...p.querySelectorAll('.contourlines path')].filter(
              e => e.style.stroke === 'rgb(0, 0, 0)' && parseFloat(e.style.strokeWidth) >= 3).length}; })"""


def _overlap(a, b) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def test_legends_leave_the_x_axis_titles_clear(server, tmp_path):
    """Explore after a finished run, in a 1000 px window (the fit's column is then ~260 px wide and its
    legend wraps): no legend covers an x-axis title or tick label, and the decision surface shows
    its boundary line, named in the legend. (charts.LEGEND_BELOW; at y = -0.15 in plot
    coordinates the decision surface's legend covered its x-axis title here by ~15 px.)"""
    url, log_path = server
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1000, "height": 1600}).new_page()
        page.set_default_timeout(120_000)
        try:
            for dataset, entry in (("moons", "decision boundary f(x) = 0"), ("sine1d", "fitted f(x)")):
                page.goto(f"{url}/?dataset={dataset}&solver=falkon&maxiter=20")  # small: runs by itself
                # The fit's figure is drawn while the run computes (the live chart redraws it); the
                # convergence chart is a plotly figure once the run has finished.
                page.get_by_test_id("stAlert").filter(has_text=" finished — ").first.wait_for()
                page.locator(".st-key-explore_convergence .js-plotly-plot .legend").wait_for()
                page.locator(".st-key-explore_fit .js-plotly-plot .legend").wait_for()
                _wait_idle(page)
                charts = {c["key"]: c for c in page.evaluate(CHART_BOXES)}
                assert {"explore_fit", "explore_convergence"} <= charts.keys(), charts.keys()
                for key, chart in charts.items():
                    assert chart["legend"] and chart["titles"], (dataset, key)
                    clash = [
                        (legend, other)
                        for legend in chart["legend"]
                        for other in chart["titles"] + chart["ticks"]
                        if _overlap(legend, other)
                    ]
                    assert not clash, (dataset, key, clash)
                fit = charts["explore_fit"]
                assert entry in fit["entries"] and fit["legend"][0]["top"] > max(t["bottom"] for t in fit["titles"])
                if dataset == "moons":
                    assert fit["boundary"] > 0  # the black line at f(x) = 0 is drawn
                page.locator(".st-key-explore_fit").screenshot(path=str(tmp_path / f"fit-{dataset}.png"))
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"page: {page.url}\nscreenshot: {tmp_path / 'failure.png'}\nserver log:\n{log_path.read_text()}")
            raise

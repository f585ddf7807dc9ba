"""Explore's "Show uncertainty" in chromium against ``streamlit run app.py`` (the server and helpers
of test_browser): the 90% band around a 1-D FALKON fit, and the map of the predictive standard
deviation over 2-D data, drawn by plotly.js from what the worker computed.

``screenshot-uncertainty-band.png`` and ``screenshot-uncertainty-map.png`` go to
``$KRR_SAVE_SCREENSHOTS`` when set (docs/): ``KRR_SAVE_SCREENSHOTS=docs python -m pytest
tests/browser/test_browser_uncertainty.py``.
"""

from __future__ import annotations

import time

import pytest
from test_browser import VIEWPORT, _save, _wait_idle, chromium

from krr_app.charts import uncertainty as unc_charts

pytestmark = pytest.mark.browser

#: The band's picture: few centres, so that it visibly widens between and beyond them.
BAND = "dataset=sine1d&n=500&M=12&sigma=0.3&log10_penalty=-4&maxiter=20&solver=falkon&auto_run=false&uncertainty=true"
MAP = "dataset=moons&n=1000&M=25&log10_penalty=-4&solver=nystrom_direct&auto_run=false&uncertainty=true"
#: What plotly.js drew in a figure: each trace's name, its number of points and its fill.
DRAWN = """(selector) => {
  const plot = document.querySelector(selector);
  if (!plot || !plot._fullData) return null;
  return plot._fullData.map(t => ({
    name: t.name, fill: t.fill || null,
    points: t.z ? Array.from(t.z).reduce((s, row) => s + (row ? row.length : 0), 0) : (t.y ? t.y.length : 0),
  }));
}"""


def _run_and_wait(page, url: str, query: str, selector: str, wanted: str) -> list[dict]:
    page.goto(f"{url}/?{query}")
    main = page.get_by_test_id("stMainBlockContainer")
    main.get_by_role("button", name="Run", exact=True).wait_for()
    _wait_idle(page)
    main.get_by_role("button", name="Run", exact=True).click()
    deadline = time.time() + 240
    while time.time() < deadline:
        drawn = page.evaluate(DRAWN, selector)
        if drawn and any(t["name"] == wanted for t in drawn):
            _wait_idle(page)
            return page.evaluate(DRAWN, selector)
        time.sleep(0.25)
    raise AssertionError(f"no {wanted!r} trace in {selector} within 240 s: {page.evaluate(DRAWN, selector)}")


def _page(browser):
    page = browser.new_context(viewport=VIEWPORT).new_page()
    page.set_default_timeout(120_000)
    return page


def test_the_band_is_drawn_around_the_1d_fit(server, tmp_path):
    url, log_path = server
    with chromium() as browser:
        page = _page(browser)
        try:
            drawn = _run_and_wait(page, url, BAND, ".st-key-explore_fit_box .js-plotly-plot", unc_charts.BAND_UPPER)
            by_name = {t["name"]: t for t in drawn}
            assert by_name[unc_charts.BAND_UPPER]["fill"] == "tonexty"
            assert by_name[unc_charts.BAND_UPPER]["points"] == by_name[unc_charts.BAND_LOWER]["points"] == 400
            assert any(t["name"].startswith(unc_charts.CENTERS) and t["points"] == 12 for t in drawn)
            page.get_by_text("holds a new observation with probability 90%").wait_for()
            _save(page, "screenshot-uncertainty-band.png", tmp_path)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"server log:\n{log_path.read_text()[-5000:]}")
            raise


def test_the_uncertainty_map_is_drawn_over_2d_data(server, tmp_path):
    url, log_path = server
    with chromium() as browser:
        page = _page(browser)
        try:
            selector = ".st-key-explore_fit_uncertainty_box .js-plotly-plot"
            drawn = _run_and_wait(page, url, MAP, selector, unc_charts.STD_MAP)
            assert {t["name"]: t for t in drawn}[unc_charts.STD_MAP]["points"] == 80 * 80
            page.get_by_text("The map is the standard deviation of a new observation").wait_for()
            page.locator(selector).scroll_into_view_if_needed()
            _save(page, "screenshot-uncertainty-map.png", tmp_path)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"server log:\n{log_path.read_text()[-5000:]}")
            raise

"""The logistic loss in chromium against ``streamlit run app.py`` (the server and helpers of
test_browser): a logistic FALKON run on Two moons streams its Newton steps into the convergence
chart while it runs — one point per step on an axis named "Newton step" — and ends with the fit
drawn as every classifier's.

``screenshot-logistic-newton.png`` (the run mid-way, its Newton steps so far) goes to
``$KRR_SAVE_SCREENSHOTS`` when set (docs/): ``KRR_SAVE_SCREENSHOTS=docs python -m pytest
tests/browser/test_browser_logistic.py``.
"""

from __future__ import annotations

import re

import pytest
from test_browser import VIEWPORT, _save, _wait_idle, chromium

from krr_app.parts.live_chart import NEWTON_AXIS

pytestmark = pytest.mark.browser

#: Newton steps of about a second on 2 cores (each: its CG iterations and two passes for the
#: gradient), so several live looks see the run mid-way: with a worker keeping both cores busy, the
#: browser took seconds to draw the page after Run, and with M = 800 a loaded machine's first look
#: came after the run's end. λ = 10⁻⁶ puts the logistic problem at λ/4.
LOGISTIC_FIT = "dataset=moons&n=40000&M=1600&log10_penalty=-6&maxiter=20&solver=falkon&loss=logistic&auto_run=false"


#: Each animation frame, what the live chart in Explore's run slot shows: its points (inside its
#: component's shadow root) and its progress line; a new entry when either changes.
WATCH_LIVE = """() => {
  window.__krrLive = [];
  let last = '';
  function look() {
    let points = 0, text = '';
    const slot = document.querySelector('.st-key-explore_live_slot');
    for (const host of slot ? slot.querySelectorAll('*') : []) {
      if (!host.shadowRoot) continue;
      points += host.shadowRoot.querySelectorAll('.krr-live-point').length;
      const line = host.shadowRoot.querySelector('.krr-live-text');
      if (line && !text) text = line.textContent;
    }
    const key = points + '|' + text;
    if (key !== last) { window.__krrLive.push({points, text, ms: Math.round(performance.now())}); last = key; }
    window.__krrLiveLook = requestAnimationFrame(look);
  }
  look();
}"""


def test_a_logistic_run_streams_its_newton_steps(server, tmp_path):
    url, log_path = server
    with chromium() as browser:
        page = browser.new_context(viewport=VIEWPORT).new_page()
        page.set_default_timeout(180_000)
        try:
            page.goto(f"{url}/?{LOGISTIC_FIT}")
            main = page.get_by_test_id("stMainBlockContainer")
            main.get_by_role("button", name="Run", exact=True).wait_for()
            _wait_idle(page)
            page.evaluate(WATCH_LIVE)
            main.get_by_role("button", name="Run", exact=True).click()
            # Mid-run: Newton steps drawn as they arrive (a residual and a test-error point each),
            # recorded by the page itself at every frame: a loaded machine slows Playwright's polls,
            # not what the page draws.
            page.wait_for_function(  # the docs' picture: a few steps in (or the run's end, then the test fails)
                "() => window.__krrLive.filter(e => e.points > 0 && e.text && !/finished/.test(e.text)).length >= 3"
                " || /finished — /.test(document.querySelector('[data-testid=stMainBlockContainer]').innerText)",
                timeout=300_000,
            )
            assert page.get_by_text(NEWTON_AXIS).count() >= 1  # the live chart's axis
            _save(page, "screenshot-logistic-newton.png", tmp_path)
            page.get_by_text(re.compile(r"FALKON · logistic loss .* finished — ")).first.wait_for(timeout=300_000)
            looks = page.evaluate("cancelAnimationFrame(window.__krrLiveLook), window.__krrLive")
            mid_run = [
                (e["points"], e["text"]) for e in looks if e["points"] and e["text"] and "finished" not in e["text"]
            ]
            assert len({points for points, _ in mid_run}) >= 2, looks
            assert all(re.search(r"iteration \d+ / 20", text) for _, text in mid_run), mid_run
            # Finished: the chart keeps its Newton-step axis, the decision surface is drawn.
            page.get_by_text(NEWTON_AXIS).first.wait_for()
            steps = page.evaluate(
                "() => Math.max(...[...document.querySelectorAll('.js-plotly-plot')]"
                ".map(p => (p._fullData || []).filter(t => t.mode && t.mode.includes('markers'))"
                ".map(t => (t.x || []).length)).flat(), 0)"
            )
            assert steps >= 4, steps  # one point per Newton step, from the start to convergence
            page.wait_for_function(
                "() => [...document.querySelectorAll('.st-key-explore_fit_box .js-plotly-plot')]"
                ".some(p => p._fullData && p._fullData[0] && p._fullData[0].z)"
            )
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"), full_page=True)
            print(f"page: {page.url}\nlive looks: {page.evaluate('window.__krrLive || null')}")
            print(f"server log:\n{log_path.read_text()[-5000:]}")
            raise

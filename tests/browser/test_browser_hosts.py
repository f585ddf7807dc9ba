"""No request leaves the app's own host: every page of the app loaded in a real browser, with every
request it makes recorded by host. A classroom behind a firewall, or a school that allows no
third-party requests, sees the same app (its favicon is a file it serves, its fonts and icons are
Streamlit's bundled ones)."""

from __future__ import annotations

import urllib.parse

import pytest

from test_browser import VIEWPORT, _wait_idle, chromium

pytestmark = pytest.mark.browser

PAGES = ["", "compare", "conditioning", "leverage", "dataset", "tune"]


def test_no_page_requests_any_host_but_the_apps_own(server):
    hosts: dict[str, set[str]] = {}
    url, _ = server
    with chromium() as browser:
        own = urllib.parse.urlsplit(url).hostname
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(120_000)
        current = {"page": ""}

        def record(request):
            parts = urllib.parse.urlsplit(request.url)
            if parts.scheme in ("http", "https", "ws", "wss"):
                hosts.setdefault(current["page"], set()).add(parts.hostname)

        page.on("request", record)
        for name in PAGES:
            current["page"] = name or "explore"
            page.goto(f"{url}/{name}?auto_run=false", timeout=240_000)
            # The first load imports torch on the server: a heading in the main block says it is drawn.
            page.get_by_test_id("stMainBlockContainer").get_by_role("heading").first.wait_for(timeout=240_000)
            try:
                _wait_idle(page, timeout=30)
            except AssertionError:  # a page still drawing: its requests so far count
                pass
            page.wait_for_timeout(2000)  # late requests: the favicon, fonts, icons
        page.close()
    assert set(hosts) == {name or "explore" for name in PAGES}, hosts  # every page was recorded
    outside = {name: sorted(h - {own}) for name, h in hosts.items() if h - {own}}
    assert not outside, f"pages requested outside hosts: {outside}"

"""Links cannot inject into the page, checked in a real browser: a link value holding a Markdown
link and a link key holding a Markdown image (the phishing channel of a shared link), and a link
value quoted in Compare's error, are shown as their plain characters. No ``<a>`` or ``<img>``
pointing where they point is in the DOM, and nothing is fetched from there: the targets are a
recording HTTP server on 127.0.0.1, so a fetched image would show as a request. A bare URL and an
e-mail address (which GFM would make links by themselves) stay text too."""

from __future__ import annotations

import http.server
import threading
import urllib.parse

import pytest

from krr_app.text import JOINER
from test_browser import VIEWPORT, _save, _wait_idle, chromium

pytestmark = pytest.mark.browser


@pytest.fixture
def trap():
    """(host:port of an HTTP server on 127.0.0.1, the paths it was asked for)."""
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            asked.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}", asked
    server.shutdown()


def test_markdown_and_image_injections_are_shown_as_plain_text(server, tmp_path, trap):
    url, _ = server
    host, asked = trap
    link = f"[Click here to log in](http://{host}/login)"
    image = f"![px](http://{host}/pixel.png)"
    bare = "www.example.com or me@example.com"
    query = urllib.parse.urlencode([("M", f"1`{link}"), (image, "1"), ("n", bare), ("auto_run", "false")])
    with chromium() as browser:
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(120_000)
        page.goto(f"{url}/?{query}")
        warning = page.get_by_text("Some values in this link were refused or adjusted")
        warning.first.wait_for()
        _wait_idle(page)
        alert = page.get_by_test_id("stAlert").filter(has_text="Some values in this link").first
        text = alert.inner_text().replace(JOINER, "")  # the invisible joiners of krr_app.text
        assert f"“M=1`{link}”" in text and f"“{image}=1”" in text and f"“n={bare}”" in text, text
        assert page.locator(f"a[href*='{host}']").count() == 0
        assert alert.locator("a").count() == 0
        assert page.locator(f"img[src*='{host}']").count() == 0
        _save(page, "screenshot-link-injection.png", tmp_path)

        # A link value quoted in Compare's error (its sweep values).
        page.goto(
            f"{url}/compare?"
            + urllib.parse.urlencode([("cmp_mode", "sweep"), ("sweep_values", f"100, {link}"), ("auto_run", "false")])
        )
        error = page.get_by_text("is not a number").first
        error.wait_for()
        _wait_idle(page)
        assert f"'{link}' is not a number" in error.inner_text().replace(JOINER, "")
        assert page.locator(f"a[href*='{host}']").count() == 0
        _save(page, "screenshot-compare-injection.png", tmp_path)
        page.close()
    assert asked == [], f"the page fetched {asked} from the injected address"

"""Messages that can carry a user's string are shown as text (krr_app.text), channel by channel:
a link value quoted in Compare's error, a run's label and message (a krrcore message quoting an
input), the config's problems, a diagnostic page's reason, a lesson file's name. Each is given
Markdown that would otherwise be a clickable link, an outside image or a directive."""

from __future__ import annotations

import re

from streamlit.testing.v1 import AppTest

from krr_app.text import plain, shown_as

LINK = "[Click here to log in](http://attacker.invalid/login)"
IMAGE = "![px](http://attacker.invalid/pixel.png)"
DIRECTIVES = ":red[**urgent**] $x^2$ :material/warning:"
#: Unescaped Markdown that would make a link, an image or a directive.
ACTIVE = re.compile(r"(?<!\\)(\]\(|!\[|:red\[|:material/)")


def test_a_link_value_quoted_in_compares_error_is_text(app):
    at = app(auto_run="false", cmp_mode="sweep", sweep_values=f"100, {LINK}")
    at = at.switch_page("app_pages/compare.py").run()
    assert not at.exception
    error = next(e.value for e in at.error if "is not a number" in shown_as(e.value))
    assert f"'{LINK}' is not a number" in shown_as(error)
    assert not ACTIVE.search(error), error


def _views_script():
    """A page drawing the views' messages for a run whose label and message, a problem and a
    reason quote Markdown (as a krrcore error quoting an uploaded table's header would)."""
    from types import SimpleNamespace

    from krr_app.parts import views
    from tests_text_payload import IMAGE, LINK  # noqa: F401 (injected by the test below)

    run = SimpleNamespace(
        records=[],
        timings={},
        queue_seconds=None,
        status="error",
        estimator=None,
        label=f"FALKON {IMAGE}",
        message=f"column {LINK} is not numeric",
    )
    views.status_message(run)
    views.show_problems([f"blocks must be <= n, got {LINK}"])
    views.last_valid("x", f"Centres cannot be selected: {IMAGE}")
    views.dropped_runs_note(SimpleNamespace(dropped=[f"run {LINK}"], max_runs=24))


def test_run_labels_messages_problems_and_reasons_are_text(monkeypatch, tmp_path):
    (tmp_path / "tests_text_payload.py").write_text(f"LINK = {LINK!r}\nIMAGE = {IMAGE!r}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    at = AppTest.from_function(_views_script, default_timeout=60).run()
    assert not at.exception, [e.message for e in at.exception]
    errors = [e.value for e in at.error]
    shown = [shown_as(e) for e in errors]
    assert shown[0] == f"**FALKON {IMAGE}** failed: column {LINK} is not numeric"
    assert shown[1:] == [f"blocks must be <= n, got {LINK}", f"Centres cannot be selected: {IMAGE}"]
    assert plain(LINK, None) in errors[0] and plain(IMAGE, None) in errors[0]
    caption = at.caption[0].value
    assert f"dropped the oldest: run {LINK}." in shown_as(caption)
    for markdown in [*errors, caption]:
        assert not ACTIVE.search(markdown), markdown


def test_a_lesson_file_whose_name_is_markdown_is_named_as_text(app, tmp_path, monkeypatch):
    from krr_app.teaching import lessons
    from krr_app import settings

    lessons_dir = tmp_path / "lessons"
    lessons_dir.mkdir()
    name = "x](http:"  # a file name cannot hold '/': the part of a link it can hold
    (lessons_dir / f"{name}.md").write_text("not a lesson")
    monkeypatch.setattr(settings, "LESSONS_DIR", lessons_dir)
    at = app(auto_run="false")
    at.session_state[lessons.INDEX_KEY] = True  # the Lessons expander, where the catalogue is read, opened
    at = at.run()
    errors = [e.value for e in at.error if "cannot be used" in e.value]
    assert errors, [e.value for e in at.error]
    assert shown_as(errors[0]).startswith(f"Lesson “{name}” cannot be used: ")
    assert "](" not in errors[0].replace("\\]\\(", "")

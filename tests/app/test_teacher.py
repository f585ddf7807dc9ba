"""A teacher's link (krr_app.teaching.teacher): ``?hide=`` and ``?lock=`` name controls hidden or read-only,
``?present=1`` is the presenter view; every name is checked like any link value, and the view
stays with the session across pages. tests/browser/test_browser_live.py checks in chromium that a hidden
control is not seen."""

from __future__ import annotations

from krr_app.teaching import teacher
from krr_app.tiles import TILE_CSS
from krr_app.text import shown_as

QUIET = {"auto_run": "false"}


def _style(at) -> str:
    """The teacher's style on the page (every page also carries the tiles' own, krr_app.tiles, and
    Explore the height it keeps for the fit, krr_app.parts.fit_views.fit_slot)."""
    return "\n".join(
        h.proto.body for h in at.get("html") if TILE_CSS not in h.proto.body and "explore_fit_slot" not in h.proto.body
    )


def _notes(at) -> str:
    return "\n".join(shown_as(w.value) for w in at.warning if "refused or adjusted" in w.value)


def test_hidden_controls_keep_their_values_and_locked_ones_are_read_only(app):
    at = app(**QUIET, solver="nystrom_cg", hide="solver,kernel", lock="M", present="1")
    assert not at.exception and not _notes(at)
    # Hidden: drawn (the link's value is used) but styled away, with the controls that set them.
    assert at.selectbox(key="solver").value == "nystrom_cg" and at.selectbox(key="kernel").disabled
    assert ".st-key-kernel, .st-key-solver { display: none !important; }" in _style(at)
    assert at.number_input(key="M").disabled and not at.number_input(key="n").disabled
    assert teacher.PRESENT_CSS in _style(at)
    # The view travels with the session: another page keeps it, and the URL says it.
    at = at.switch_page("app_pages/compare.py").run()
    assert at.query_params["hide"] == "kernel,solver" and at.query_params["lock"] == "M"
    assert at.query_params["present"] == "1" and at.number_input(key="M").disabled
    at = at.switch_page("app_pages/conditioning.py").run()
    assert not at.exception and ".st-key-kernel" in _style(at)


def test_sigma_hidden_or_locked_takes_the_median_button_with_it(app):
    at = app(**QUIET, lock="sigma")
    assert at.number_input(key="sigma").disabled and at.button(key="median_sigma").disabled
    at = app(**QUIET, hide="sigma")
    assert ".st-key-median_sigma, .st-key-sigma { display: none" in _style(at)


def test_a_name_that_is_no_control_is_named_and_ignored(app):
    at = app(**QUIET, hide="solevr,M", lock="lambda", present="yes")
    notes = _notes(at)
    assert "“hide=solevr” names no control of this app — ignored (did you mean 'solver'?)." in notes
    assert "“lock=lambda” names no control of this app — ignored (did you mean 'log10_penalty'?)." in notes
    assert "“present=yes” is neither 1 nor 0 — the presenter view is off." in notes
    assert at.query_params["hide"] == "M" and "lock" not in at.query_params and "present" not in at.query_params
    assert not at.selectbox(key="solver").disabled and at.number_input(key="M").disabled
    assert teacher.PRESENT_CSS not in _style(at)


def test_an_old_control_name_locks_the_control_under_its_new_name(app):
    at = app(**QUIET, lock="log_lambda")
    assert "“lock=log_lambda” is now called 'log10_penalty' — read as that." in _notes(at)
    assert at.slider(key="log10_penalty").disabled and at.query_params["lock"] == "log10_penalty"


def test_a_plain_link_has_no_teacher_style(app):
    at = app(**QUIET)
    assert not _style(at) and "hide" not in at.query_params

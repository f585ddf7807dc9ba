"""Links carry an option's key (``?solver=nystrom_cg``), never its display label; a link written
with a label (``?solver=Nyström CG (no preconditioner)``) is still read, and the page says so."""

from __future__ import annotations

import pytest

from krr_app.text import shown_as

QUIET = {"auto_run": "false", "n": "200"}


def _url(at, key: str) -> list[str]:
    value = at.query_params.get(key)
    return [] if value is None else [value] if isinstance(value, str) else list(value)


def _notes(at) -> list[str]:
    return [shown_as(w.value) for w in at.warning if "refused or adjusted" in w.value]


def test_a_chosen_solver_is_written_in_the_link_as_its_key(app):
    at = app(**QUIET)
    at.selectbox(key="solver").set_value("nystrom_cg").run()
    assert _url(at, "solver") == ["nystrom_cg"]
    at = at.switch_page("app_pages/compare.py").run()
    at.multiselect(key="cmp_solvers").set_value(["falkon", "nystrom_direct"]).run()
    assert _url(at, "cmp_solvers") == ["falkon", "nystrom_direct"]
    at.radio(key="cmp_mode").set_value("sweep").run()
    assert _url(at, "cmp_mode") == ["sweep"]


def test_a_label_in_an_old_link_is_read_as_its_key_and_announced(app):
    at = app(**QUIET, solver="Nyström CG (no preconditioner)")
    assert not at.exception
    assert at.selectbox(key="solver").value == "nystrom_cg"
    assert _url(at, "solver") == ["nystrom_cg"]
    (note,) = _notes(at)
    assert "“solver=Nyström CG (no preconditioner)” is a label: links write the key, nystrom_cg — read as that." in note


def test_labels_among_several_choices_are_read_and_announced(app):
    at = app(**QUIET, cmp_solvers=["FALKON", "nystrom_cg"])
    at = at.switch_page("app_pages/compare.py").run()
    assert at.multiselect(key="cmp_solvers").value == ["falkon", "nystrom_cg"]
    assert _url(at, "cmp_solvers") == []  # the default pair: no parameter
    (note,) = _notes(at)
    assert "names FALKON by its label: links write the keys, falkon" in note


def test_the_leverage_sampler_is_written_as_its_key_and_its_old_label_still_read(app):
    at = app(**QUIET, lev_n="100").switch_page("app_pages/leverage.py").run()
    at.selectbox(key="lev_method").set_value("bless_r").run()
    assert not at.exception
    assert _url(at, "lev_method") == ["bless_r"]
    at = app(**QUIET, lev_n="100", lev_method="Recursive-RLS (Musco & Musco)")
    at = at.switch_page("app_pages/leverage.py").run()
    assert at.selectbox(key="lev_method").value == "recursive_rls"
    assert _url(at, "lev_method") == ["recursive_rls"]
    (note,) = _notes(at)
    assert "is a label: links write the key, recursive_rls — read as that" in note


PAGES = {
    "explore": None,
    "compare": "app_pages/compare.py",
    "conditioning": "app_pages/conditioning.py",
    "leverage": "app_pages/leverage.py",
    "dataset": "app_pages/dataset.py",
    "tune": "app_pages/tune.py",
}


def _choices(at):
    """Every single-choice widget of the page whose key is a URL parameter, with its options' labels."""
    from krr_app.teaching.links import known_parameters

    known = known_parameters()
    return [w for w in [*at.selectbox, *at.radio] if w.key in known]


@pytest.mark.parametrize("page", list(PAGES))
def test_no_choice_on_any_page_writes_its_label_in_the_link(app, page):
    """Each choice widget set to another option: the URL holds the option's key (its ``str``), never
    the label shown, whatever widget draws it."""
    at = app(**QUIET)
    if PAGES[page]:
        at = at.switch_page(PAGES[page]).run()
    keys = [w.key for w in _choices(at)]
    assert keys, "the page draws no choice bound to the link"
    checked = 0
    for key in keys:
        widget = next((w for w in _choices(at) if w.key == key), None)
        if widget is None or len(widget.options) < 2 or widget.disabled:
            continue
        other = 0 if widget.index else 1
        if hasattr(widget, "select_index"):
            at = widget.select_index(other).run()
        elif widget.format_func(widget.options[other]) == widget.options[other]:  # a radio of plain keys
            at = widget.set_value(widget.options[other]).run()
        else:  # a radio shown through labels: AppTest sets it by value only (cmp_mode: tested above)
            continue
        assert not at.exception, [e.message for e in at.exception]
        chosen = next(w for w in _choices(at) if w.key == key)
        value, label = chosen.value, chosen.options[chosen.index]
        # A choice shown by a label other than its key must write the key itself (AppTest does not see
        # what Streamlit's own binding writes, which is the label); one shown as its key may leave it to the binding.
        allowed = [[str(value)]] if label != str(value) else [[], [str(value)]]
        assert _url(at, key) in allowed, f"{key}: the link holds {_url(at, key)}, not the key {value}"
        checked += 1
    assert checked

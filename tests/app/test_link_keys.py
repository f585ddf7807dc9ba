"""Links carry an option's key (``?solver=nystrom_cg``), never its display label; a link written
with a label (``?solver=Nyström CG (no preconditioner)``) is still read, and the page says so."""

from __future__ import annotations

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

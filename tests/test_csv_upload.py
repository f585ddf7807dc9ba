"""Uploading a CSV in the app: the delimiter and a decimal comma are detected, the data's
suggested σ and λ are applied as for a built-in set, missing values are called missing (with what
the app does about them), and the upload limit is explained on the page."""
from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import wait_for_runs

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
    return "\n".join(str(e.value) for e in elements)


@pytest.mark.parametrize("delimiter, decimal, described", [
    (";", ",", "read as semicolon-separated, decimal comma"),
    ("\t", ",", "read as tab-separated, decimal comma"),
    (";", ".", "read as semicolon-separated"),
], ids=["semicolon-decimal-comma", "tab-decimal-comma", "semicolon"])
def test_a_semicolon_or_tab_csv_with_decimal_commas_is_read_and_runs(app, delimiter, decimal, described):
    table = _table()
    at = _upload(app, _csv(table, delimiter, decimal))
    assert at.selectbox(key="csv_target").options == ["a", "b", "target"]
    assert described in _texts(at.caption) and "2 features, task: regression" in _texts(at.caption)
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
    assert expected == pytest.approx(median_heuristic(from_csv(io.BytesIO(content), "target").X_train,
                                                      max_points=1000))
    assert at.number_input(key="sigma").value == pytest.approx(expected, rel=1e-3) and not math.isclose(expected, 1)
    assert at.slider(key="log_lambda").value == -4.0          # the CSV's suggested λ = 1e-4
    # A change by the user stays (the suggestion is applied once per file and target).
    at = at.number_input(key="sigma").set_value(0.7).run()
    assert at.number_input(key="sigma").value == 0.7


def test_missing_values_are_named_as_missing_with_what_is_done(app):
    at = _upload(app, b"x1,x2,y\n1,?,0.5\n2,,0.1\n3,4,0.2\n4,5,0.9\n5,1,1.0\n")
    text = _texts(at.error)
    assert "missing values in column(s) {'x2': 2}" in text and "non-numeric" not in text
    assert "the columns are numeric, but KRR needs a number in every cell" in text
    assert "from_csv(..., dropna=True)" in text and at.button(key="run").disabled


def test_the_upload_limit_is_explained_on_the_page(app):
    at = app(auto_run="false")
    at.selectbox(key="dataset").set_value("csv").run()
    text = _texts(at.info)
    assert "Files up to 50 MB are accepted: a larger one is refused by the browser" in text
    assert ".sample(200_000)" in text


def test_a_one_column_read_says_how_the_file_was_read(app):
    at = _upload(app, b"x y target\n1 2 3\n4 5 6\n7 8 9\n1 1 2\n")
    assert "only one column was found (read as comma-separated)" in _texts(at.error)

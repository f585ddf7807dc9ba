"""An uploaded table's weight column (role "weight", ``?role=w:weight``): passed to the fit as
``sample_weight``, so integer weights give the model of the table with each row repeated; refused
in words by the solvers that take no weights, and its bad values named by the library's rules."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from conftest import wait_for_runs

from krr_app.jobs.config import make_config, problems, uncertainty_refusal, weight_refusal
from krr_app.text import shown_as
from krrcore.datasets import from_csv
from krrcore.solvers import NystromKRR

QUERY = {"solver": "nystrom_direct", "M": 20, "auto_run": "false", "sigma": 1.0, "log10_penalty": -3}


def _frame(rows: int = 60, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=rows)
    return pd.DataFrame({"x": x, "w": rng.integers(1, 4, size=rows), "y": np.sin(x) + 0.1 * rng.normal(size=rows)})


def _csv(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def _upload(app, content: bytes, **query):
    at = app(**{**QUERY, **query})
    at.selectbox(key="dataset").set_value("csv").run()
    return at.file_uploader(key="csv_file").set_value(("weighted.csv", content, "text/csv")).run()


def _texts(elements) -> str:
    return "\n".join(shown_as(str(e.value)) for e in elements)


def test_the_weight_column_is_the_fits_sample_weight(app):
    frame = _frame()
    at = _upload(app, _csv(frame), role="w:weight", csv_target="y")
    assert not at.exception
    at = wait_for_runs(at.button(key="run").click().run())
    run = at.session_state["explore_run"]
    assert run.status == "done", run.message
    data = run.data
    assert data.weight_name == "w" and data.d == 1  # the weight is no feature
    # The app's model is the library's weighted fit of the same rows...
    model = run.config.fit_spec("check").build_estimator()
    assert isinstance(model, NystromKRR)
    model.fit(data.X_train, data.y_train, sample_weight=data.weight_train)
    np.testing.assert_allclose(run.estimator.predict(data.X_test), model.predict(data.X_test), rtol=1e-8, atol=1e-10)
    # ... which differs from the unweighted one (the weights were not dropped on the way).
    plain = run.config.fit_spec("check").build_estimator().fit(data.X_train, data.y_train)
    assert np.abs(plain.predict(data.X_test) - model.predict(data.X_test)).max() > 1e-6
    # The role is in the link, and the Dataset page says what the column is.
    assert at.query_params.get("role") in ("w:weight", ["w:weight"])
    at = at.switch_page("app_pages/dataset.py").run()
    assert "Sample weights of the fit (not a feature): w." in _texts(at.markdown)


def test_a_solver_that_takes_no_weights_is_refused_in_words(app):
    at = _upload(app, _csv(_frame()), role="w:weight", csv_target="y", solver="askotch")
    assert not at.exception
    assert "ASkotch does not take sample weights" in _texts(at.error)
    assert at.button(key="run").disabled is True


@pytest.mark.parametrize(
    "value, message",
    [
        (-2.0, r"weight column 'w' \((training|test) rows\): sample_weight has 1 negative weight\(s\)"),
        (np.nan, r"weight column 'w' has 1 row\(s\) without a finite number"),
    ],
    ids=["negative", "missing"],
)
def test_bad_weights_are_named_by_their_column(app, value, message):
    frame = _frame().astype({"w": float})
    frame.loc[:, "w"] = value  # every row: whichever split a row lands in, the check names it
    frame.loc[1:, "w"] = 1.0
    with pytest.raises(ValueError, match=message) as raised:
        from_csv(io.BytesIO(_csv(frame)), "y", roles={"w": "weight"}, seed=0)
    at = _upload(app, _csv(frame), role="w:weight", csv_target="y")
    assert not at.exception
    assert str(raised.value) in _texts(at.error)
    assert at.button(key="run").disabled is True


def test_weights_and_the_refusals_beside_them():
    from krr_app.jobs.config import DataSpec

    config = make_config(DataSpec("sine1d"), kernel="gaussian", kernel_params={}, penalty=1e-4, solver="skotch")
    assert weight_refusal("falkon") is None and weight_refusal("exact") is None
    assert "Skotch does not take sample weights" in problems(config, 100, weighted=True)[0]
    assert not problems(config, 100)
    tune = make_config(DataSpec("sine1d"), kernel="gaussian", kernel_params={}, penalty=1e-4, solver="falkon_cv")
    assert (
        "tuning objectives (and their gradients) are those of the unweighted loss"
        in problems(tune, 100, weighted=True)[0]
    )  # the Tune page refuses before Run, with the estimator's own reason
    assert "unweighted KRR" in uncertainty_refusal("falkon", "regression", weighted=True)
    with pytest.raises(ValueError, match="a table has one weight column"):
        from_csv(io.BytesIO(_csv(_frame().assign(v=1.0))), "y", roles={"w": "weight", "v": "weight"})

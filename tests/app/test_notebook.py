"""The notebook export: a valid nbformat 4 file whose code cells, run in order, reproduce the run's
predictions with krrcore alone."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest

from krr_app.jobs.config import DataSpec, make_config
from krr_app.jobs.runs import RunRegistry
from krr_app.teaching.snippet import notebook, notebook_json
from krr_app.text import shown_as
from krrcore.datasets import load


def _run_cells(nb: dict) -> dict:
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        for cell in nb["cells"]:
            if cell["cell_type"] == "code":
                exec("".join(cell["source"]), namespace)
    return namespace


@pytest.mark.parametrize("solver, params", [("falkon", {"M": 30, "maxiter": 4}), ("nystrom_direct", {"M": 30})])
def test_the_notebook_reproduces_the_run(solver, params):
    spec = DataSpec("sine1d", n=300, seed=2, knobs=(("noise", 0.2),))
    config = make_config(spec, kernel="gaussian", kernel_params={"sigma": 0.3}, penalty=1e-4, solver=solver, **params)
    run = RunRegistry().start(config, load("sine1d", n=300, seed=2, noise=0.2))
    assert run.wait(120) and run.status == "done", run.message
    nb = json.loads(notebook_json(config))
    assert nb["nbformat"] == 4 and nb["metadata"]["kernelspec"]["name"] == "python3"
    assert all({"cell_type", "id", "metadata", "source"} <= set(c) for c in nb["cells"])
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in nb["cells"] if c["cell_type"] == "code")
    assert len({c["id"] for c in nb["cells"]}) == len(nb["cells"])
    namespace = _run_cells(nb)
    # The run computed on a worker, the notebook here: torch's thread counts may differ (sums reordered).
    np.testing.assert_allclose(
        namespace["prediction"], run.data.to_original_units(run.estimator.predict(run.data.X_test)), rtol=1e-6
    )
    if solver == "falkon":  # the records the app drew, and the convergence figure over them
        assert [r.iteration for r in namespace["records"]] == [r.iteration for r in run.records]
        assert len(namespace["fig"].data) == 2
    headings = [c["source"][0].strip() for c in nb["cells"] if c["cell_type"] == "markdown"][1:]
    assert headings == ["## Data", "## Model", "## Fit", "## Test error"] + (["## Convergence"] * (solver == "falkon"))


def test_a_csv_run_names_the_file_to_put_beside_the_notebook():
    spec = DataSpec("csv", n=None, seed=0, csv_digest="0" * 64, csv_target="y", csv_filename="mine.csv")
    config = make_config(spec, kernel="gaussian", kernel_params={"sigma": 1.0}, penalty=1e-4, solver="exact")
    text = shown_as("".join("".join(c["source"]) for c in notebook(config)["cells"]))
    assert "put the file mine.csv next to this notebook" in text and "from_csv('mine.csv', target='y', seed=0)" in text


def test_a_table_run_is_reproduced_by_a_pipeline_of_its_preprocessing_and_the_model(tmp_path, monkeypatch):
    """The notebook of a run on an uploaded table (a column role and the missing-value rule chosen)
    reads the file with the same choices and predicts on its raw test rows through a scikit-learn
    Pipeline ending in the krrcore estimator (answering in the target's units): the same predictions
    as the app's run."""
    from sklearn.pipeline import Pipeline

    from krrcore.datasets import OriginalUnits, from_csv
    from krrcore.solvers.base import KRRBase

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "id": np.arange(1, 121),
            "size": rng.normal(size=120),
            "colour": rng.choice(["red", "blue"], 120),
            "day": pd.date_range("2020-01-01", periods=120).strftime("%Y-%m-%d"),
        }
    )
    frame.loc[::9, "size"] = np.nan
    frame["y"] = np.where(frame["colour"] == "red", 1.0, -1.0) + 0.1 * rng.normal(size=120)
    frame.to_csv(tmp_path / "shop.csv", index=False)
    monkeypatch.chdir(tmp_path)
    options = (("roles", (("id", "feature"),)), ("missing", "drop"))
    spec = DataSpec(
        "csv", n=None, seed=0, csv_digest="0" * 64, csv_target="y", csv_filename="shop.csv", csv_options=options
    )
    config = make_config(
        spec, kernel="gaussian", kernel_params={"sigma": 2.0}, penalty=1e-4, solver="falkon", M=20, maxiter=5
    )
    data = from_csv(tmp_path / "shop.csv", "y", **spec.csv_kwargs())
    run = RunRegistry().start(config, data)
    assert run.wait(120) and run.status == "done", run.message
    namespace = _run_cells(notebook(config))
    pipeline = namespace["pipeline"]
    last = pipeline.steps[-1][1]
    assert isinstance(pipeline, Pipeline) and isinstance(last, OriginalUnits) and isinstance(last.regressor, KRRBase)
    assert namespace["data"].n == data.n == 120 - 14 and "id" in namespace["data"].feature_names
    np.testing.assert_allclose(
        namespace["prediction"], run.data.to_original_units(run.estimator.predict(run.data.X_test)), rtol=1e-6
    )

"""The notebook export: a valid nbformat 4 file whose code cells, run in order, reproduce the run's
predictions with krrcore alone."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from krr_app.config import DataSpec, make_config
from krr_app.runs import RunRegistry
from krr_app.snippet import notebook, notebook_json
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
    np.testing.assert_allclose(namespace["prediction"], run.estimator.predict(run.data.X_test), rtol=1e-9)
    if solver == "falkon":      # the records the app drew, and the convergence figure over them
        assert [r.iteration for r in namespace["records"]] == [r.iteration for r in run.records]
        assert len(namespace["fig"].data) == 2
    headings = [c["source"][0].strip() for c in nb["cells"] if c["cell_type"] == "markdown"][1:]
    assert headings == ["## Data", "## Model", "## Fit", "## Test error"] + (["## Convergence"] * (solver == "falkon"))


def test_a_csv_run_names_the_file_to_put_beside_the_notebook():
    spec = DataSpec("csv", n=None, seed=0, csv_digest="0" * 64, csv_target="y", csv_filename="mine.csv")
    config = make_config(spec, kernel="gaussian", kernel_params={"sigma": 1.0}, penalty=1e-4, solver="exact")
    text = "".join("".join(c["source"]) for c in notebook(config)["cells"])
    assert "Put `mine.csv` next to this notebook" in text and "from_csv('mine.csv', target='y', seed=0)" in text

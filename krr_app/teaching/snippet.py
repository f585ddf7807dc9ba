"""A run as Python: the "reproduce in Python" snippet and the Jupyter notebook export.

Both are generated from the same :class:`~krr_app.jobs.config.RunConfig` that keys the run (the data's
``load``/``from_csv`` call, the kernel and the estimator's parameters; for a user's table, a
scikit-learn ``Pipeline`` of its preprocessing and the estimator), section by section
(:func:`sections`): the snippet joins the sections' code, the notebook gives each section a
Markdown heading and a code cell, plus a convergence plot. The notebook is plain JSON in the
nbformat 4 layout (no nbformat dependency), and runs with krrcore alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from krrcore.registry import SOLVERS

from krr_app.jobs.config import RunConfig, format_number
from krr_app.text import plain

NBFORMAT, NBFORMAT_MINOR = 4, 5


@dataclass(frozen=True)
class Section:
    title: str  # the notebook's Markdown heading
    text: str  # the notebook's Markdown under the heading
    code: str


def _kwargs(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def sections(config: RunConfig) -> list[Section]:
    """The run in four steps: data, model, fit, test error — each a piece of krrcore code. A user's
    table brings its preprocessing: the model is shown in ``data.pipeline(model)``, a scikit-learn
    ``Pipeline`` of the table's fitted ``ColumnTransformer`` and the krrcore estimator, which predicts
    on the table's raw rows in the target's own units."""
    table = config.data.is_csv
    loader = "from_csv" if table else "load"
    kernel_args = _kwargs(config.kernel_kwargs())
    kernel_call = f"make_kernel({config.kernel!r}{', ' + kernel_args if kernel_args else ''})"
    if table:
        data = Section(
            "Data",
            f"The same seeded train/test split and preprocessing as in the app: put the file "
            f"{plain(config.data.csv_filename or 'your_file.csv')} next to this notebook (the app never "
            "keeps an uploaded file). The preprocessing is one scikit-learn step fitted on the training "
            "rows; `data.notes` says what it does to each column.",
            f'from krrcore.datasets import {loader}\n\ndata = {config.data.load_call()}\nprint("\\n".join(data.notes))',
        )
    else:
        data = Section(
            "Data",
            "The same seeded train/test split as in the app (features z-scored on the training split).",
            f"from krrcore.datasets import {loader}\n\ndata = {config.data.load_call()}",
        )
    registry = "SOLVERS" if config.solver in SOLVERS else "TUNERS"  # a tuning run's estimator is in TUNERS
    if config.loss == "logistic":  # LogisticFalkon on the encoded labels, its logits as predictions
        model_code = (
            "from krrcore.kernels import make_kernel\nfrom krrcore.solvers.logistic import EncodedLogisticFalkon\n"
            "\n"
            f"kernel = {kernel_call}\n"
            f"model = EncodedLogisticFalkon(kernel=kernel, {_kwargs(config.estimator_kwargs())})"
        )
    else:
        model_code = (
            f"from krrcore.kernels import make_kernel\nfrom krrcore.registry import {registry}\n"
            "\n"
            f"kernel = {kernel_call}\n"
            f"model = {registry}[{config.solver!r}].make(kernel=kernel, {_kwargs(config.estimator_kwargs())})"
        )
    if table:
        model_code += (
            "\n# the table's preprocessing (fitted on the training rows), then the model, answering in the\n"
            "# target's own units (the model itself is fitted on the standardised data.y_train)\n"
            "pipeline = data.pipeline(model)"
        )
    described = (
        "Logistic FALKON (Marteau-Ferey, Bach, Rudi 2019: Newton's method along a λ path) at λ/4"
        if config.loss == "logistic"
        else f"{config.info.label} ({config.info.reference})"
    )
    model = Section(
        "Model",
        f"{described} with the app's settings"
        + (", after the table's preprocessing in one scikit-learn Pipeline." if table else "."),
        model_code,
    )
    # A table's weight column (role "weight") is the fit's sample_weight (krrcore.datasets.from_frame).
    weights = (
        ", sample_weight=data.weight_train" if "weight" in config.data.csv_kwargs().get("roles", {}).values() else ""
    )
    if config.info.iterative:
        fit = Section(
            "Fit",
            "One record per iteration, as the app's convergence chart draws them.",
            "records = []\n"
            f"for record in model.iter_fit(data.X_train, data.y_train, data.X_test, data.y_test{weights}):\n"
            "    records.append(record)\n"
            '    print(record.iteration, f"{record.seconds:.3f}s", record.residual, record.val_metric)\n'
            "print(model.stop_reason_)",
        )
    else:
        fit = Section("Fit", "A direct solve.", f"model.fit(data.X_train, data.y_train{weights})")
    predict = (
        "prediction = pipeline.predict(data.raw_test)   # the test rows as read, answered in the target's units\n"
        if table
        else "prediction = data.to_original_units(model.predict(data.X_test))   # back to the target's units\n"
    )
    test = Section(
        "Test error",
        "Predictions on the test split, in the target's own units.",
        "from krrcore.metrics import evaluate\n\n"
        + predict
        + "print(evaluate(data.task, data.y_test_original, prediction))",
    )
    return [data, model, fit, test]


def reproduce_snippet(config: RunConfig) -> str:
    """Python code that runs ``config`` with krrcore alone (no Streamlit), printing the same stream."""
    return "\n\n".join(section.code for section in sections(config)) + "\n"


_PLOT = """import plotly.graph_objects as go
from plotly.subplots import make_subplots

fig = make_subplots(rows=1, cols=2, subplot_titles=("Residual (solver's own measure)", "Test metric"))
iterations = [r.iteration for r in records]
fig.add_trace(go.Scatter(x=iterations, y=[r.residual for r in records], name="residual"), row=1, col=1)
fig.add_trace(go.Scatter(x=iterations, y=[r.val_metric for r in records], name="test"), row=1, col=2)
fig.update_yaxes(type="log")
fig.update_xaxes(title_text="iteration t")
fig"""


def _cell(kind: str, text: str, number: int) -> dict:
    cell = {"cell_type": kind, "id": f"cell-{number}", "metadata": {}, "source": text.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def notebook(config: RunConfig) -> dict:
    """An nbformat 4 notebook (a plain dict; ``json.dumps`` writes the .ipynb) reproducing ``config``."""
    settings = "\n".join(
        f"| {plain(k)} | {format_number(v) if isinstance(v, float) else plain(v)} |"
        for k, v in config.as_dict().items()
        if v is not None
    )
    intro = (
        f"# {config.label()}\n\nA run exported from KRR Explorer, reproduced with `krrcore` alone "
        "(`pip install -r requirements.txt` in the KRR Explorer repository).\n\n"
        f"| setting | value |\n|---|---|\n{settings}\n"
    )
    cells = [_cell("markdown", intro, 0)]
    parts = sections(config)
    if config.info.iterative:
        parts.append(Section("Convergence", "The residual and the test metric per iteration.", _PLOT))
    for part in parts:
        cells.append(_cell("markdown", f"## {part.title}\n\n{part.text}", len(cells)))
        cells.append(_cell("code", part.code, len(cells)))
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": NBFORMAT,
        "nbformat_minor": NBFORMAT_MINOR,
    }


def notebook_json(config: RunConfig) -> str:
    """The .ipynb file's text."""
    return json.dumps(notebook(config), indent=1, ensure_ascii=False) + "\n"

"""The "reproduce in Python" snippet, generated from the same RunConfig that keys the run's cache."""
from __future__ import annotations

from .config import RunConfig


def _kwargs(params: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def reproduce_snippet(config: RunConfig) -> str:
    """Python code that runs ``config`` with krrcore alone (no Streamlit), printing the same stream."""
    loader = "from_csv" if config.data.is_csv else "load"
    kernel_args = _kwargs(config.kernel_kwargs())
    kernel_call = f"make_kernel({config.kernel!r}{', ' + kernel_args if kernel_args else ''})"
    lines = [
        f"from krrcore.datasets import {loader}",
        "from krrcore.kernels import make_kernel",
        "from krrcore.registry import SOLVERS",
        "",
        f"data = {config.data.load_call()}",
        f"kernel = {kernel_call}",
        f"model = SOLVERS[{config.solver!r}].make(kernel=kernel, {_kwargs(config.estimator_kwargs())})",
    ]
    if config.info.iterative:
        lines += [
            "for record in model.iter_fit(data.X_train, data.y_train, data.X_test, data.y_test):",
            "    print(record.iteration, f\"{record.seconds:.3f}s\", record.residual, record.val_metric)",
            "print(model.stop_reason_)",
        ]
    else:
        lines += ["model.fit(data.X_train, data.y_train)"]
    lines += [
        "",
        "from krrcore.metrics import evaluate",
        "prediction = model.predict(data.X_test)",
        "print(evaluate(data.task, data.to_original_units(data.y_test), data.to_original_units(prediction)))",
    ]
    return "\n".join(lines) + "\n"

"""What a worker receives for one run: plain, hashable values, never an array or a tensor.

:class:`DataSpec` says which data (a registry name with its knobs, or an uploaded table identified by
its bytes' sha256) and :class:`FitSpec` the whole run: the data, the solver, the kernel and the
constructor parameters. A worker rebuilds a built-in problem from them itself
(:func:`krr_app.jobs.worker.load_data`); the pages key their caches and label their runs on the same
:class:`DataSpec` (:class:`krr_app.jobs.config.RunConfig` holds one).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace

from krrcore.kernels import make_kernel
from krrcore.registry import get_solver
from krrcore.solvers.logistic import EncodedLogisticFalkon

#: The losses a classification run may fit: the squared loss (every solver, on the encoded labels)
#: and the logistic loss (:class:`~krrcore.solvers.logistic.LogisticFalkon`'s Newton steps) ...
LOSSES = ("squared", "logistic")
#: ... the latter with these solvers' centres and parameters.
LOGISTIC_SOLVERS = ("falkon",)

#: Parameters as the spec and the pages' cache keys carry them: hashable, in name order.
Params = tuple[tuple[str, object], ...]


def frozen(mapping) -> Params:
    """``mapping`` as :data:`Params` (a dict's items in name order); :func:`dict` turns it back."""
    return tuple(sorted(dict(mapping).items()))


@dataclass(frozen=True)
class DataSpec:
    """Which data: a :func:`krrcore.datasets.load` entry with its parameters, or an uploaded table
    identified by ``csv_digest`` (the sha256 of its bytes), read by :func:`krrcore.datasets.from_csv`
    where it was uploaded and sent with the run. ``csv_options`` are from_csv's keyword arguments
    that differ from its defaults (``roles`` as a tuple of (column, role) pairs, ``missing``, ``task``)."""

    name: str
    n: int | None = None
    seed: int = 0
    knobs: Params = ()
    csv_digest: str | None = None
    csv_target: str | None = None
    csv_filename: str | None = None
    csv_options: Params = ()

    def csv_kwargs(self) -> dict:
        """``csv_options`` as from_csv's keyword arguments (``roles`` as a dict)."""
        return {k: dict(v) if k == "roles" else v for k, v in self.csv_options}

    @property
    def is_csv(self) -> bool:
        return self.csv_digest is not None

    def load_kwargs(self) -> dict:
        return {"n": self.n, "seed": self.seed, **dict(self.knobs)}

    def load_call(self) -> str:
        """The krrcore call that loads this data (for the reproduce snippet)."""
        if self.is_csv:
            options = "".join(f", {k}={v!r}" for k, v in self.csv_kwargs().items())
            n = "" if self.n is None else f", n={self.n}"
            name = self.csv_filename or "your_file.csv"
            return f"from_csv({name!r}, target={self.csv_target!r}{options}{n}, seed={self.seed})"
        args = [repr(self.name)] + [f"{k}={v!r}" for k, v in self.load_kwargs().items() if v is not None]
        return f"load({', '.join(args)})"


@dataclass(frozen=True)
class FitSpec:
    """One run: data, solver (a :data:`krrcore.registry.SOLVERS` key), kernel and parameters."""

    run_id: str
    data: DataSpec
    solver: str
    kernel: str
    kernel_params: Params
    params: Params
    loss: str = "squared"  # "logistic": the solver's logistic model on classification data (LOSSES)

    def build_estimator(self):
        kernel = make_kernel(self.kernel, **dict(self.kernel_params))
        info = get_solver(self.solver)
        if self.loss == "squared":
            return info.make(kernel=kernel, **dict(self.params))
        if self.solver not in LOGISTIC_SOLVERS:
            raise ValueError(
                f"the logistic loss runs with {', '.join(get_solver(k).label for k in LOGISTIC_SOLVERS)}, "
                f"not {info.label}"
            )
        return EncodedLogisticFalkon(kernel=kernel, **{**dict(info.defaults), **dict(self.params)})

    def reporting_every_iteration(self) -> FitSpec:
        """This run with a record after every iteration (``eval_every=1`` for the solvers that
        report every few, e.g. ASkotch's every B block steps): a stepped run's step is one iteration."""
        if "eval_every" not in inspect.signature(get_solver(self.solver).estimator).parameters:
            return self
        return replace(self, params=frozen({**dict(self.params), "eval_every": 1}))

"""A battery of hostile calls: every estimator (regressors and classifiers) × bad parameter values,
input kinds, bad data, refits and predictions, plus the leverage functions and the CSV reader.

Each call is classified as

* **result**: it returned, and what it returned is right (finite predictions of the right shape;
  for the inputs that must work, as good as the plain fit);
* **warned**: it returned with a krrcore warning that names what is wrong;
* **clear error**: an exception of the library's own kinds (``ValueError``/``TypeError`` and their
  krrcore subclasses, ``SolverDivergedError``, ``NotFittedError``), raised from krrcore's or
  scikit-learn's code (not from inside torch or numpy), whose message names the parameter or column;
* **silent** (a bad value that gave a result with no word, or a wrong answer), **refused a good
  call** (an input that must work raised), **cryptic** (an error from inside torch,
  numpy or Python, or one that names nothing), **crash** (``MemoryError``, a non-``Exception``),
  **hang** (past :data:`CALL_SECONDS`).

The test fails on any of the last four. ``python -m pytest tests/core/test_hostile.py -s`` prints the
count of each class.
"""

from __future__ import annotations

import copy
import math
import signal
import threading
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import NotFittedError

from krrcore import CLASSIFIERS, LogisticFalkon, leverage
from krrcore.kernels import GaussianKernel, LaplacianKernel, LinearKernel, PolynomialKernel, median_heuristic
from krrcore.registry import SOLVERS
from krrcore.stream import SolverDivergedError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

#: A call running longer than this is a hang (the data are tiny: every good call takes well under 1 s).
CALL_SECONDS = 30
N, D = 40, 3
SMALL = {"M": 10, "maxiter": 5, "rank": 5, "blocks": 2}
FAILURES = ("silent", "cryptic", "crash", "hang", "refused a good call")
CLEAR = (ValueError, TypeError, SolverDivergedError, NotFittedError, ConnectionError)
INSIDE = ("/torch/", "/numpy/", "/scipy/", "/pandas/")


class Hang(BaseException):
    pass


@dataclass
class Case:
    """One call: ``run()`` returns the value to check; ``expect``: "result" (must return a right
    answer), "refuse" (must raise clearly or warn), "any" (either); ``names``: words one of which
    an error or warning must contain; ``check(value)``: True when a result is right."""

    id: str
    run: object
    expect: str
    names: tuple = ()
    check: object = None
    outcome: str = ""
    detail: str = field(default="", repr=False)


def _data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1]


X0, Y0 = _data()
LABELS = np.where(X0[:, 0] > 0, "up", "down")


def _estimators():
    out = []
    for key, info in SOLVERS.items():
        base = {k: v for k, v in SMALL.items() if k in info.knobs}
        out.append((key, False, lambda p, info=info, base=base: info.make(**{"kernel": _kernel(), **base, **p})))
    seen = set()
    for info in SOLVERS.values():
        if info.estimator in seen:
            continue
        seen.add(info.estimator)
        base = {**dict(info.defaults), **{k: v for k, v in SMALL.items() if k in info.knobs}}
        cls = CLASSIFIERS[info.estimator]
        out.append((f"{cls.__name__}", True, lambda p, cls=cls, base=base: cls(**{"kernel": _kernel(), **base, **p})))
    logistic = {"M": 10, "maxiter": 4, "final_steps": 2}
    out.append(("LogisticFalkon", True, lambda p: LogisticFalkon(**{"kernel": _kernel(), **logistic, **p})))
    return out


def _kernel():
    """A new kernel for every estimator made: ``set_params(kernel__sigma=2)`` changes the kernel it
    is given in place, so a kernel shared by the cases would carry one case's σ into the next."""
    return GaussianKernel(1.0)


def _predictions_ok(model, X, classifier):
    out = model.predict(X)
    out = out.detach().cpu().numpy() if isinstance(out, torch.Tensor) else np.asarray(out)
    if out.shape[0] != len(X):
        return False
    return set(np.unique(out)) <= set(model.classes_) if classifier else bool(np.isfinite(out).all())


#: Parameter values that must be refused (or warned about), by parameter; each must be named.
BAD_PARAMS = {
    "penalty": [-1.0, 0.0, math.nan, math.inf, True, "1e-3", None, 1e300, [1e-3]],
    "kernel": ["gaussian", 5, GaussianKernel],
    "dtype": ["float16", "int64", None, 3],
    "device": ["tpu", "meta", 5, "cuda:99"] + ([] if torch.cuda.is_available() else ["cuda"]),
    "memory_budget": [-1, 0, 1.5, True, "1GB", 10],
    "seed": [-1, 2**70, 1.5, "0", True],
    "M": [0, -1, 1.5, True, "10", None],
    "maxiter": [-1, 1.5, "10", True, None],
    "tol": [-1.0, math.nan, "x", True],
    "callback": [5, "stop", lambda r: np.ones(3), lambda r: "yes"],
    "timeout": [-1, 0, math.nan, "1"],
    "metric": ["nope", 3],
    "centers": [np.zeros((0, D)), np.zeros((5, D + 1)), "nope", np.full((5, D), np.nan), 7],
    "rank": [0, -2, 1.5, True],
    "blocks": [0, -1, 1.5, "2"],
    "eval_train": ["yes", 2],
    "stall_patience": [0, -1, 2.5],
}
#: Words that name a parameter in its messages besides its own name.
ALIASES = {"memory_budget": ("memory_budget", "budget")}
#: Parameter values that must give a right result (the library's own extremes that are fine).
GOOD_PARAMS = {
    "penalty": [1e-300, 1e-8, 10.0],
    "kernel": [None, LaplacianKernel(2.0), LinearKernel(), PolynomialKernel(degree=3)],
    "dtype": ["float32", torch.float64],
    "seed": [2**63 - 1, np.random.default_rng(1), None],
    "callback": [lambda r: False, lambda r: None, lambda r: np.bool_(r.iteration > 2)],
    "timeout": [1e-9, 1e6],
    "centers": [X0[:7].copy()],
    "M": [10**6],
}


def _bad_inputs():
    """(id, X, y, names, expect) for the fit's data."""
    X, y = X0, Y0
    nan = X.copy()
    nan[2, 1] = np.nan
    inf = X.copy()
    inf[5, 2] = np.inf
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    gap = frame.copy()
    gap.loc[3, "b"] = None
    text = frame.astype(object)
    text.loc[4, "c"] = "ten"
    return [
        ("nan", nan, y, ("NaN", "column"), "refuse"),
        ("inf", inf, y, ("infinite", "column"), "refuse"),
        ("frame-missing", gap, y, ("'b'",), "refuse"),
        ("frame-text", text, y, ("'c'",), "refuse"),
        ("strings", X.astype(str).astype(object) + "x", y, ("numbers", "non-numeric"), "refuse"),
        ("empty", np.zeros((0, D)), np.zeros(0), ("empty",), "refuse"),
        ("no-features", np.zeros((N, 0)), y, ("0 feature",), "refuse"),
        ("1-d", X[:, 0], y, ("Reshape", "dimensions"), "refuse"),
        ("3-d", X[:, :, None], y, ("dimensions",), "refuse"),
        ("complex", X + 1j, y, ("real", "Complex"), "refuse"),
        ("y-short", X, y[:-3], ("rows", "mismatched"), "refuse"),
        ("y-nan", X, np.where(np.arange(N) == 3, np.nan, y), ("y",), "refuse"),
        ("y-none", X, None, ("y",), "refuse"),
        ("x-none", None, y, ("X",), "refuse"),
        ("dict", {"a": 1}, y, ("X", "numbers", "dimensions"), "refuse"),
        ("huge", X * 1e200, y, ("X", "range", "penalty", "kernel"), "any"),
        ("sparse-like", _Sparse(), y, ("sparse", "Sparse"), "refuse"),
        ("meta", torch.zeros((N, D), device="meta"), y, ("meta",), "refuse"),
    ]


class _Sparse:
    def toarray(self):
        return X0


def _good_inputs(classifier):
    """(id, X_fit, X_predict) inputs that must fit and predict right."""
    X = X0
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    return [
        ("numpy", X, X),
        ("frame", frame, frame),
        ("tensor", torch.from_numpy(X.copy()), torch.from_numpy(X.copy())),
        ("list", X.tolist(), X.tolist()),
        ("float32", X.astype(np.float32), X.astype(np.float32)),
        ("int", np.round(X * 3).astype(np.int64), np.round(X * 3).astype(np.int64)),
        ("readonly", _readonly(X), _readonly(X)),
        ("fortran", np.asfortranarray(X), np.asfortranarray(X)),
        ("grad", torch.from_numpy(X.copy()).requires_grad_(), torch.from_numpy(X.copy())),
        ("offset", X + 1e8, X + 1e8),
        ("scaled-down", X * 1e-6, X * 1e-6),
        ("duplicates", np.repeat(X[:20], 2, axis=0), X),
        ("constant-column", np.c_[X[:, :2], np.ones(N)], np.c_[X[:, :2], np.ones(N)]),
    ]


def _readonly(X):
    X = X.copy()
    X.setflags(write=False)
    return X


def _predict_cases(model_factory, classifier):
    frame = pd.DataFrame(X0, columns=["a", "b", "c"])
    return [
        ("reordered", frame, frame[["c", "a", "b"]], ("Feature names",)),
        ("renamed", frame, frame.rename(columns={"c": "z"}), ("Feature names",)),
        ("too-few", X0, X0[:, :2], ("features",)),
        ("too-many", X0, np.c_[X0, X0], ("features",)),
        ("nan", X0, np.where(X0 > 1.5, np.nan, X0), ("NaN",)),
        ("1-d", X0, X0[0], ("Reshape", "dimensions")),
        ("empty", X0, np.zeros((0, D)), ("empty",)),
        ("strings", X0, np.full((3, D), "a", dtype=object), ("numbers", "non-numeric")),
    ]


#: ``sample_weight`` values every estimator must refuse by name (the weights' own checks, or, for a
#: solver that cannot solve the weighted system, its refusal of any weights).
BAD_WEIGHTS = {
    "short": np.ones(N - 3),
    "long": np.ones(N + 1),
    "negative": np.where(np.arange(N) == 4, -1.0, 1.0),
    "nan": np.where(np.arange(N) == 4, np.nan, 1.0),
    "inf": np.where(np.arange(N) == 4, np.inf, 1.0),
    "zeros": np.zeros(N),
    "2-d": np.ones((N, 2)),
    "text": "heavy",
    "strings": np.array(["1"] * N),
    "dict": {"w": 1.0},
    "complex": np.ones(N) + 1j,
}


def _weighted(factory, weights, classifier):
    """A fit with ``weights``; a result must be a right model (its predictions the labels it knows, or finite)."""

    def run():
        y = LABELS if classifier else Y0
        model = factory({}).fit(X0, y, sample_weight=weights)
        return _predictions_ok(model, X0, classifier)

    return run


def _uniform_weights(factory, classifier):
    """Equal weights (3 for every row) are the unweighted problem: weights are rescaled to mean 1."""

    def run():
        y = LABELS if classifier else Y0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            weighted = factory({}).fit(X0, y, sample_weight=np.full(N, 3.0))
        plain = _fitted(factory, classifier)
        if classifier:
            return np.array_equal(weighted.predict(X0), plain.predict(X0))
        return np.allclose(weighted.predict(X0), plain.predict(X0), rtol=1e-6, atol=1e-8)

    return run


def _with_std(factory, params, classifier):
    """``predict(X, return_std=True)``: the pair (mean, std) where the model has a posterior — the
    mean its plain prediction, the std finite and positive — else refused by name."""

    def run():
        if params:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = factory(params).fit(X0, LABELS if classifier else Y0)
        else:
            model = _fitted(factory, classifier)
        mean, std = model.predict(X0[:7], return_std=True)
        mean, std = np.asarray(mean), np.asarray(std)
        return (
            np.allclose(mean, np.asarray(model.predict(X0[:7])))
            and std.shape == mean.shape
            and bool(np.isfinite(std).all() and (std > 0).all())
        )

    return run


#: Each estimator's model of (X0, y) with its battery settings, fitted once (by the first case that
#: asks) and copied for every case that starts from a fitted model: the refits and predictions
#: test what follows the fit, and copying is ~100 times cheaper than fitting again.
_FITTED: dict = {}


def _fitted(factory, classifier, X=None):
    """A copy of the estimator fitted on ``X`` (X0 or its DataFrame) and the battery's targets."""
    X = X0 if X is None else X
    key = (id(factory), classifier, isinstance(X, pd.DataFrame))
    if key not in _FITTED:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _FITTED[key] = factory({}).fit(X, LABELS if classifier else Y0)
    return copy.deepcopy(_FITTED[key])


def _fit_and_check(factory, params, X, y, classifier, Xp=None):
    def run():
        model = factory(params).fit(X, y)
        return _predictions_ok(model, X if Xp is None else Xp, classifier)

    return run


def build_cases() -> list[Case]:
    cases: list[Case] = []
    for name, classifier, factory in _estimators():
        y = LABELS if classifier else Y0
        declared = set(factory({}).get_params(deep=False))
        for param, values in BAD_PARAMS.items():
            if param not in declared:
                continue
            for value in values:
                cases.append(
                    Case(
                        f"{name}-{param}={value!r:.30}",
                        _fit_and_check(factory, {param: value}, X0, y, classifier),
                        "refuse",
                        ALIASES.get(param, (param,)),
                    )
                )
        for param, values in GOOD_PARAMS.items():
            if param not in declared:
                continue
            for value in values:
                cases.append(
                    Case(
                        f"{name}-{param}={value!r:.30}-good",
                        _fit_and_check(factory, {param: value}, X0, y, classifier),
                        "any",
                        (param, "penalty", "M", "kernel"),
                        check=bool,
                    )
                )
        for input_id, X, yy, names, expect in _bad_inputs():
            target = _classifier_target(yy) if classifier else yy
            if classifier and input_id == "y-nan":
                names = ("label",)
            if classifier and input_id == "empty":
                names = ("empty", "0 class")
            cases.append(
                Case(
                    f"{name}-input-{input_id}",
                    _fit_and_check(factory, {}, X, target, classifier),
                    expect,
                    names,
                    check=bool,
                )
            )
        for input_id, Xf, Xp in _good_inputs(classifier):
            # Duplicated rows give duplicated uniform centres: SketchySAGA's steps may then diverge,
            # which it names (the settings to change); every other solver must fit them. X·1e-6
            # against σ = 1 makes every kernel value 1 − 1e-12: y less its mean (fit_intercept)
            # leaves a system of condition ~1e20, where the solvers without a preconditioner may
            # diverge, naming what to change; the preconditioned and direct ones must fit it.
            unpreconditioned = name.lower().startswith(("nystrom_cg", "nystromcg", "sketchysaga"))
            expect = "any" if input_id == "duplicates" or (input_id == "scaled-down" and unpreconditioned) else "result"
            cases.append(
                Case(
                    f"{name}-good-{input_id}",
                    _fit_and_check(factory, {}, Xf, y, classifier, Xp),
                    expect,
                    ("lr_scale", "penalty"),
                    check=bool,
                )
            )
        cases.append(Case(f"{name}-offset-quality", _offset_quality(factory, classifier), "result", (), check=bool))
        for target_id, target in (("zero-y", 0 * Y0), ("constant-y", 0 * Y0 + 5.0)):
            if not classifier:
                cases.append(
                    Case(
                        f"{name}-{target_id}",
                        _fit_and_check(factory, {}, X0, target, classifier),
                        "result",
                        (),
                        check=bool,
                    )
                )
        if classifier:
            for lab_id, labels, names in (
                ("one-class", np.array(["a"] * N), ("class",)),
                ("mixed-types", np.array(["a", 1] * (N // 2), dtype=object), ("label",)),
                ("continuous", Y0, ("label", "continuous", "Unknown")),
                ("2-d", np.c_[LABELS, LABELS], ("y", "shape", "column")),
            ):
                cases.append(
                    Case(
                        f"{name}-labels-{lab_id}", _fit_and_check(factory, {}, X0, labels, classifier), "refuse", names
                    )
                )
        for param, values in BAD_PARAMS.items():
            if param not in declared:
                continue
            for value in values[:3]:
                cases.append(
                    Case(
                        f"{name}-refit-{param}={value!r:.30}",
                        _refit(factory, {param: value}, classifier),
                        "result",
                        (),
                        check=bool,
                    )
                )
        for input_id, X, yy, _names, _ in _bad_inputs()[:12]:
            cases.append(
                Case(
                    f"{name}-refit-input-{input_id}", _refit_data(factory, X, yy, classifier), "result", (), check=bool
                )
            )
        for case_id, Xf, Xp, names in _predict_cases(factory, classifier):
            cases.append(Case(f"{name}-predict-{case_id}", _predict(factory, Xf, Xp, y, classifier), "refuse", names))
        cases.append(Case(f"{name}-predict-unfitted", lambda f=factory: f({}).predict(X0), "refuse", ("fitted",)))
        cases.append(Case(f"{name}-set-params-nested", _nested(factory, classifier), "result", (), check=bool))
        cases.append(
            Case(f"{name}-set-params-unknown", lambda f=factory: f({}).set_params(kernel__nope=1), "refuse", ("nope",))
        )
        cases.append(Case(f"{name}-threads", _threads(factory, classifier), "result", (), check=bool))
        weight = ("sample_weight",)
        for weight_id, weights in BAD_WEIGHTS.items():
            cases.append(Case(f"{name}-weights-{weight_id}", _weighted(factory, weights, classifier), "refuse", weight))
        cases.append(Case(f"{name}-weights-uniform", _uniform_weights(factory, classifier), "any", weight, check=bool))
        posterior = "uncertainty" in declared and not classifier
        cases.append(
            Case(
                f"{name}-return-std",
                _with_std(factory, {}, classifier),
                "refuse",
                ("return_std", "uncertainty", "posterior"),
                check=bool,
            )
        )
        if posterior:
            cases.append(
                Case(
                    f"{name}-return-std-uncertainty",
                    _with_std(factory, {"uncertainty": True}, classifier),
                    "result",
                    (),
                    check=bool,
                )
            )
    cases += _leverage_cases()
    cases += _table_cases()
    return cases


def _classifier_target(y):
    """The classifier's version of a regression target of :func:`_bad_inputs`: labels in its place."""
    if y is None:
        return None
    if y is Y0:
        return LABELS
    if len(y) != N:
        return LABELS[: len(y)]
    return np.where(np.isnan(y), None, LABELS)


def _offset_quality(factory, classifier):
    def run():
        y = LABELS if classifier else Y0
        plain = _fitted(factory, classifier).score(X0, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            moved = factory({}).fit(X0 + 1e8, y).score(X0 + 1e8, y)
        return abs(plain - moved) < 0.05

    return run


def _refit(factory, params, classifier):
    """A fitted model whose refit with a bad parameter fails keeps its predictions exactly."""

    def run():
        model = _fitted(factory, classifier)
        before = model.predict(X0)
        original = model.get_params(deep=False)
        model.set_params(**params)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X0[:30], (LABELS if classifier else Y0)[:30])
        except CLEAR:
            model.set_params(**original)
            return np.array_equal(model.predict(X0), before)
        return _predictions_ok(model, X0, classifier)  # accepted: a fitted model of the new data

    return run


def _refit_data(factory, X, y, classifier):
    def run():
        model = _fitted(factory, classifier)
        before = model.predict(X0)
        attributes = set(vars(model))
        new_y = y
        if classifier:  # new labels, so a refit that kept them would show
            new_y = np.where(X0[:, 0] > 0, "left", "right") if y is Y0 else _classifier_target(y)
        try:
            model.fit(X, new_y)
        except CLEAR:
            return np.array_equal(model.predict(X0), before) and set(vars(model)) == attributes
        return False  # bad data must not fit

    return run


def _predict(factory, Xf, Xp, y, classifier):
    def run():
        return _fitted(factory, classifier, Xf).predict(Xp)

    return run


def _nested(factory, classifier):
    def run():
        model = factory({})
        model.set_params(kernel__sigma=2.0)
        y = LABELS if classifier else Y0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X0, y)
        return model.kernel.sigma == 2.0 and _predictions_ok(model, X0, classifier)

    return run


def _threads(factory, classifier):
    """Two threads fitting one instance: one is refused by name, and the model is one whole fit."""

    def run():
        y = LABELS if classifier else Y0
        model = factory({})
        errors = []

        def fit():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model.fit(X0, y)
            except Exception as exc:  # noqa: BLE001 - recorded and judged below
                errors.append(exc)

        threads = [threading.Thread(target=fit) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(CALL_SECONDS)
        if any(type(e).__name__ != "ConcurrentFitError" for e in errors):
            raise errors[0]
        return _predictions_ok(model, X0, classifier)

    return run


def _leverage_cases() -> list[Case]:
    X = np.random.default_rng(1).standard_normal((60, 3))
    k = GaussianKernel(1.0)
    cases = []
    for fn in (leverage.bless, leverage.bless_r, leverage.uniform, leverage.recursive_rls):
        name = fn.__name__
        for lam in (1e-300, 0.0, -1.0, math.nan, True, "0.1", 10.0):
            cases.append(Case(f"{name}-penalty={lam!r}", lambda fn=fn, lam=lam: fn(X, k, lam), "refuse", ("penalty",)))
        for kw in (
            {"q": 1},
            {"q": True},
            {"q2": -1},
            {"seed": 2**70},
            {"seed": -1},
            {"points": "some"},
            {"points": [1000]},
        ):
            cases.append(Case(f"{name}-{kw}", lambda fn=fn, kw=kw: fn(X, k, 1e-2, **kw), "refuse", tuple(kw)))
        cases.append(Case(f"{name}-kernel", lambda fn=fn: fn(X, "gaussian", 1e-2), "refuse", ("kernel",)))
        cases.append(Case(f"{name}-nan", lambda fn=fn: fn(np.where(X > 2, np.nan, X), k, 1e-2), "refuse", ("NaN",)))
        cases.append(Case(f"{name}-good", lambda fn=fn: fn(X, k, 1e-2).d_eff > 0, "result", (), check=bool))
    for args, names in (
        ((1, 1e-3, True), ("q",)),
        ((1, 0, 2), ("penalty",)),
        ((1, math.nan, 2), ("penalty",)),
        ((1, 1e-3, 1), ("q",)),
        ((1e-3, 1, 2), ("lambda0",)),
        ((1, 1e-300, 1.0001), ("levels",)),
        ((True, 1e-3, 2), ("lambda0",)),
    ):
        cases.append(Case(f"lambda_path{args}", lambda args=args: leverage.lambda_path(*args), "refuse", names))
    cases.append(
        Case("lambda_path-good", lambda: leverage.lambda_path(1, 1e-3, 2)[-1] == 1e-3, "result", (), check=bool)
    )
    for lams in (True, [1e-3, True], [], [[1e-3]], [-1], [math.nan]):
        cases.append(
            Case(
                f"exact_scores_path-{lams!r}",
                lambda lams=lams: leverage.exact_scores_path(X, k, lams),
                "refuse",
                ("penalties",),
            )
        )
    cases.append(Case("exact_scores-True", lambda: leverage.exact_scores(X, k, True), "refuse", ("penalty",)))
    cases.append(Case("compare-1e-300", lambda: leverage.compare_with_exact(X, k, 1e-300), "refuse", ("penalty",)))
    cases.append(
        Case(
            "compare-memory",
            lambda: leverage.compare_with_exact(X, k, 1e-2, memory_budget=1000),
            "refuse",
            ("memory_budget", "GiB"),
        )
    )
    for Xm, names in ((X * 1e200, ()), (X * 1e300, ()), (np.ones((5, 3)), ("distinct",)), (X[:1], ("rows",))):
        expect = "result" if not names else "refuse"
        cases.append(
            Case(
                f"median_heuristic-{names or 'scaled'}",
                lambda Xm=Xm: median_heuristic(Xm),
                expect,
                names,
                check=lambda v: math.isfinite(v) and v > 0,
            )
        )
    for kw, names in (({"p": 3}, ("p",)), ({"max_points": True}, ("max_points",)), ({"seed": -1}, ("seed",))):
        cases.append(Case(f"median_heuristic-{kw}", lambda kw=kw: median_heuristic(X, **kw), "refuse", names))
    return cases


def _table_cases() -> list[Case]:
    """The CSV reader: what it must read right, and what it must refuse by name."""
    import gzip

    from krrcore import sharded
    from krrcore.datasets.tabular import from_csv

    def table(text):
        return text if isinstance(text, bytes) else text.encode()

    def read(data, target="y", check=None):
        def run():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return from_csv(table(data), target)

        return run

    rows = range(30)
    comma = "price,k,y\n" + "".join(f'"{1000 + 37 * i:,}",{i % 7},{i % 3}\n' for i in rows)
    points = "a;b;y\n" + "".join(f"{1000000 + 1234 * i:,};{i},5;{i % 3}\n".replace(",", ".", 2) for i in rows)
    cr = "a,b,y\r" + "".join(f"{i * 3 % 7},{i * 2 % 5},{i % 3}\r" for i in rows)
    inf = "a,b,y\n" + "".join(f"{i * 3 % 7},{'inf' if i == 3 else i % 5},{i % 3}\n" for i in rows)
    kept = lambda names: lambda d: set(names) <= {n.split("=")[0] for n in d.feature_names}  # noqa: E731
    cases = [
        Case("csv-thousands-comma", read(comma), "result", (), check=kept(["price", "k"])),
        Case("csv-thousands-points", read(points), "result", (), check=kept(["a", "b"])),
        Case("csv-gzip", read(gzip.compress(points.encode())), "result", (), check=kept(["a", "b"])),
        Case("csv-cr-only", read(cr), "result", (), check=lambda d: d.X_train.shape[1] == 2),
        Case("csv-inf", read(inf), "refuse", ("'b'",)),
        Case("csv-json", read('{"a": [1, 2, 3], "y": [1, 2, 3]}'), "refuse", ("y", "column", "table")),
        Case("csv-zip", read(b"PK\x03\x04rest"), "refuse", ("ZIP",)),
        Case("csv-empty", read(""), "refuse", ("empty",)),
        Case(
            "csv-no-target",
            read("a,b\n" + "".join(f"{i},{i % 4}\n" for i in rows)),
            "refuse",
            ("y", "target", "column"),
        ),
        Case("csv-gzip-damaged", read(b"\x1f\x8b\x08\x00broken"), "refuse", ("gzip",)),
        Case("connect-timeout", lambda: sharded.connect("tcp://127.0.0.1:1", timeout=-1), "refuse", ("timeout",)),
        Case(
            "connect-closed-port", lambda: sharded.connect("tcp://127.0.0.1:1", timeout=1), "refuse", ("no scheduler",)
        ),
    ]
    return cases


CASES = build_cases()
TALLY: Counter = Counter()
FAILED: list[str] = []


def _deepest_file(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    return frames[-1].filename if frames else ""


def _names(text: str, names) -> bool:
    return not names or any(n.lower() in text.lower() for n in names)


def classify(case: Case) -> str:
    def alarm(signum, frame):
        raise Hang()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, CALL_SECONDS)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                value = case.run()
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except Hang:
        case.detail = f"past {CALL_SECONDS} s"
        return "hang"
    except CLEAR as exc:
        message = str(exc)
        where = _deepest_file(exc)
        case.detail = f"{type(exc).__name__}: {message[:200]} (from {where})"
        if any(part in where for part in INSIDE) and "krrcore" not in where:
            return "cryptic"
        if case.expect == "result":
            return "refused a good call"
        return "clear error" if _names(message, case.names) else "cryptic"
    except (MemoryError, RecursionError, SystemError) as exc:
        case.detail = repr(exc)
        return "crash"
    except Exception as exc:  # noqa: BLE001 - anything else is not the library's word
        case.detail = f"{type(exc).__name__}: {str(exc)[:200]} (from {_deepest_file(exc)})"
        return "cryptic"
    finally:
        signal.signal(signal.SIGALRM, previous)
    said = " ".join(str(w.message) for w in caught)
    if case.expect == "refuse":
        if caught and _names(said, case.names):
            return "warned"
        case.detail = f"returned {value!r:.80} with warnings {said[:120]!r}"
        return "silent"
    if case.check is not None and not case.check(value):
        case.detail = f"returned a wrong answer {value!r:.80}"
        return "silent"
    return "warned" if caught else "result"


CHUNK = 60


@pytest.fixture(scope="module", autouse=True)
def summary():
    yield
    total = sum(TALLY.values())
    print(f"\nhostile battery: {total} calls — " + ", ".join(f"{k}: {v}" for k, v in sorted(TALLY.items())))
    for line in FAILED[:40]:
        print("  FAIL", line)


def test_the_battery_has_at_least_2000_calls():
    assert len(CASES) >= 2000, len(CASES)


@pytest.mark.parametrize("start", range(0, len(CASES), CHUNK))
def test_hostile_calls(start):
    bad = []
    for case in CASES[start : start + CHUNK]:
        outcome = classify(case)
        TALLY[outcome] += 1
        if outcome in FAILURES:
            bad.append(f"{case.id}: {outcome}: {case.detail}")
    FAILED.extend(bad)
    assert not bad, "\n".join(bad)

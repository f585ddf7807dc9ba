"""Parameters declared once and checked once, and the library's bad-input battery: every parameter
of every estimator refuses a wrong value with a message naming it, before any work; seeds as
scikit-learn takes them; ``fit``'s ``stop_event``; tensors that require grad or live on ``meta``;
``from krrcore import *``."""

from __future__ import annotations

import dataclasses
import inspect
import threading

import numpy as np
import pytest
import torch

import krrcore
from krrcore import CLASSIFIERS, ExactKRR, Falkon, FalkonCV, GaussianKernel, NystromPCG, SketchySAGA
from krrcore.registry import SOLVERS
from krrcore.solvers import REGRESSORS, base, loops
from krrcore.solvers import params as params_module
from krrcore.solvers.params import ParameterError, declared

ESTIMATORS = [getattr(krrcore, name) for name in REGRESSORS] + list(CLASSIFIERS.values()) + [FalkonCV]
KERNEL = GaussianKernel(1.0)


def _data(n=40, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0])


def _no_work(monkeypatch):
    """Fail the test if a fit gets past its checks: converting the data is the first piece of work."""

    def refuse(*args, **kwargs):
        raise AssertionError("the fit started working before refusing the parameter")

    monkeypatch.setattr(base.KRRBase, "_prepare_fit", refuse)


def test_star_import_gives_every_listed_name():
    namespace = {}
    exec("from krrcore import *", namespace)
    assert [name for name in krrcore.__all__ if name not in namespace] == []
    assert "KRRClassifierMixin" in namespace


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_the_constructor_is_the_declaration(cls):
    """__init__'s signature is the declared parameters (scikit-learn reads it), each with a constraint
    its default meets; the shared runtime knobs come from one class, not from each solver."""
    signature = inspect.signature(cls)
    fields = declared(cls)
    assert sorted(signature.parameters) == sorted(fields)
    for name, field in fields.items():
        assert signature.parameters[name].default == field.default
        assert field.metadata["constraint"].accepts(field.default), (cls.__name__, name)
    owners = {
        f.name: next(k for k in reversed(cls.__mro__) if f.name in vars(k).get("__annotations__", {}))
        for f in dataclasses.fields(cls)
    }
    knobs = ("maxiter", "tol", "callback", "timeout", "eval_train", "metric", "stall_patience")
    if issubclass(cls, loops.IterativeKRR):
        assert {owners[k] for k in knobs} == {loops.IterativeKRR}
        assert owners["seed"] is base.Seeded
    assert {owners[k] for k in ("kernel", "penalty", "dtype", "device", "memory_budget")} == {base.KRRBase}


def test_the_registry_knobs_are_declared_parameters():
    for key, info in SOLVERS.items():
        names = declared(info.estimator)
        assert set(info.knobs) <= set(names), key
        assert {k for k, _ in info.defaults} <= set(names), key


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_every_parameter_refuses_a_wrong_value_by_name_before_any_work(cls, monkeypatch):
    X, y = _data()
    y = np.where(y > 0, "a", "b") if cls in CLASSIFIERS.values() else y
    _no_work(monkeypatch)
    for name in declared(cls):
        model = cls(**{name: object()})
        with pytest.raises(ParameterError, match=rf"\b{name}\b.*got <object object"):
            model.fit(X, y)
        assert not hasattr(model, "trace_")


def test_the_parameters_are_validated_once_per_fit(monkeypatch):
    calls = []
    original = params_module.validate
    monkeypatch.setattr(base, "validate", lambda estimator: (calls.append(estimator), original(estimator)))
    X, y = _data()
    Falkon(KERNEL, 1e-3, M=10, maxiter=2).fit(X, y)
    assert len(calls) == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"jitter": "x"}, r"jitter must be None or a finite number >= 0, got 'x'"),
        ({"jitter": float("nan")}, r"jitter must be finite, got nan"),
        ({"jitter": -1e-3}, r"jitter must be >= 0, got -0.001"),
        ({"callback": 5}, r"callback must be None or a callable f\(record\) -> bool, got 5"),
        (
            {"seed": "abc"},
            r"seed must be an integer >= 0, None, a numpy.random.Generator, a numpy.random.RandomState "
            r"or a torch.Generator, got 'abc'",
        ),
        ({"seed": -1}, r"seed must be .*, got -1"),
        ({"seed": 1.5}, r"seed must be .*, got 1.5"),
        ({"maxiter": "10"}, r"maxiter must be an integer, got '10'"),
        ({"tol": -1.0}, r"tol must be >= 0, got -1.0"),
        ({"eval_train": "yes"}, r"eval_train must be True or False, got 'yes'"),
        ({"metric": "accuracy"}, r"metric must be one of \('auto', "),
        ({"device": "meta"}, r"device='meta' holds no values"),
        ({"device": "gpu7"}, r"device must be None, a torch.device or a name such as 'cpu' or 'cuda', got 'gpu7'"),
        ({"refine": -1}, r"refine must be >= 0, got -1"),
    ],
)
def test_bad_parameters_are_named_before_any_work(kwargs, message, monkeypatch):
    X, y = _data()
    _no_work(monkeypatch)
    with pytest.raises(ParameterError, match=message):
        Falkon(KERNEL, 1e-3, M=10, **kwargs).fit(X, y)
    with pytest.raises(ValueError, match=message):  # a ValueError, as every krrcore check
        Falkon(KERNEL, 1e-3, M=10, **kwargs).memory_estimate(40, 2)


@pytest.mark.parametrize(
    "make", [lambda: Falkon(KERNEL, 1e-3, M=10, maxiter=2), lambda: ExactKRR(KERNEL, 1e-3)], ids=["iterative", "direct"]
)
def test_a_stop_event_without_is_set_is_refused_by_name(make, monkeypatch):
    X, y = _data()
    _no_work(monkeypatch)
    with pytest.raises(
        ParameterError,
        match=r"stop_event must be None or a threading.Event \(anything with "
        r"is_set\(\)\), got 'yes'",
    ):
        make().fit(X, y, stop_event="yes")


def test_a_stop_event_with_is_set_is_taken():
    X, y = _data()
    model = Falkon(KERNEL, 1e-3, M=10, maxiter=5).fit(X, y, stop_event=threading.Event())
    assert model.n_iter_ == 5


def test_seeds_as_scikit_learn_takes_them():
    """None, numpy Generators, RandomStates and torch Generators are drawn from once per fit; the
    integer used is seed_, and seed=seed_ repeats the fit."""
    X, y = _data(200)

    def fit(seed):
        return SketchySAGA(KERNEL, 1e-3, M=20, maxiter=5, seed=seed).fit(X, y)

    assert fit(7).seed_ == 7
    for make in (
        lambda: np.random.default_rng(3),
        lambda: np.random.RandomState(3),
        lambda: torch.Generator().manual_seed(3),
    ):
        one, two = fit(make()), fit(make())
        assert isinstance(one.seed_, int) and one.seed_ == two.seed_  # the same generator state
        assert np.array_equal(one.predict(X), two.predict(X))
        assert np.array_equal(one.predict(X), fit(one.seed_).predict(X))
    generator = np.random.default_rng(3)
    assert fit(generator).seed_ != fit(generator).seed_  # drawn from, so it advances
    first, second = fit(None), fit(None)
    assert first.seed_ != second.seed_ and not np.array_equal(first.center_indices_, second.center_indices_)
    assert np.array_equal(first.predict(X), fit(first.seed_).predict(X))


def test_tensors_that_require_grad_are_read_for_their_values():
    X, y = _data()
    Xt, yt = torch.tensor(X, requires_grad=True), torch.tensor(y, requires_grad=True)
    model = NystromPCG(KERNEL, 1e-3, rank=5, maxiter=5).fit(Xt, yt)
    reference = NystromPCG(KERNEL, 1e-3, rank=5, maxiter=5).fit(X, y)
    out = model.predict(Xt)
    assert not out.requires_grad
    assert torch.equal(out, torch.as_tensor(reference.predict(X)))


def test_tensors_on_the_meta_device_are_refused_by_name():
    X, y = _data()
    meta_X, meta_y = torch.empty(40, 2, device="meta"), torch.empty(40, device="meta")
    with pytest.raises(ValueError, match=r"X is on the 'meta' device, which holds a shape but no values"):
        Falkon(KERNEL, 1e-3, M=10).fit(meta_X, meta_y)
    with pytest.raises(ValueError, match=r"y is on the 'meta' device"):
        Falkon(KERNEL, 1e-3, M=10).fit(X, meta_y)
    model = Falkon(KERNEL, 1e-3, M=10, maxiter=2).fit(X, y)
    with pytest.raises(ValueError, match=r"X is on the 'meta' device"):
        model.predict(meta_X)

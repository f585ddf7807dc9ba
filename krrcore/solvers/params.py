"""Each estimator's parameters, declared once: the name, the default and the values it accepts.

An estimator class is a dataclass (:func:`parameters`) whose fields are its constructor parameters,
each made by :func:`param` with its default and its :class:`Constraint`. So

* the dataclass writes ``__init__``, which only stores (scikit-learn's contract: ``get_params``,
  ``set_params`` and ``clone`` read its signature, which is a real one);
* a parameter shared by several estimators is declared once, on the class they share, and
  inherited — the runtime knobs (``maxiter``, ``tol``, ``seed``, ``dtype``, ``device``,
  ``memory_budget``, ``callback``, ``timeout``, ``eval_train``, ``metric``, ``stall_patience``)
  on :class:`~krrcore.solvers.base.KRRBase`, :class:`~krrcore.solvers.base.Seeded` and
  :class:`~krrcore.solvers.loops.IterativeKRR`; a subclass that needs another default writes
  ``maxiter: int = default(1000)`` and keeps the constraint;
* :func:`validate` checks every parameter once, at the start of ``fit`` (and of
  ``memory_estimate``) before any work, and the message names the parameter, the value given and
  what it accepts: "maxiter must be an integer, got '10'", "tol must be >= 0, got -1.0",
  "callback must be None or a callable f(record) -> bool, got 5". Checks that need the data (a
  rank at most n) stay where the data is known.

This is scikit-learn's ``_parameter_constraints`` with ``_validate_params``, kept as one table per
class (the dataclass fields) with krrcore's own constraints: the messages stay krrcore's, which
tests and the app quote, and a few checks stay with the code that owns them
(:func:`krrcore.memory.check_memory_budget`, :func:`krrcore.device.resolve_dtype`,
:func:`krrcore.centers.resolve_selector`). A subclass that writes its own ``__init__`` keeps it, and
with it the checking of its parameters (a user's solver).
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np
import torch

from .._validation import check_positive
from ..centers import CENTER_SELECTORS, CenterSelector, resolve_selector
from ..device import resolve_dtype
from ..kernels import Kernel
from ..memory import check_memory_budget
from ..metrics import METRICS


class ParameterError(ValueError, TypeError):
    """A parameter (or ``fit`` argument) outside what it accepts: a ``ValueError`` (krrcore's checks
    have always raised one) and a ``TypeError`` (what scikit-learn's own parameter errors also are)."""


class Constraint:
    """What values a parameter accepts: :meth:`accepts` says whether ``value`` is one, ``text``
    describes them for the message ("an integer >= 0")."""

    text = "a valid value"

    def accepts(self, value) -> bool:
        raise NotImplementedError

    def applies(self, value) -> bool:
        """Whether ``value`` is of the kind this constraint is about (a number for a range, ...):
        a union names the one that applies, with its precise bound."""
        return False

    def check(self, value, name: str) -> None:
        if not self.accepts(value):
            raise ParameterError(f"{name} must be {self.text}, got {value!r}")

    def __or__(self, other: "Constraint") -> "Constraint":
        return AnyOf(self, other)


class AnyOf(Constraint):
    def __init__(self, *constraints: Constraint):
        self.constraints = tuple(
            c for part in constraints for c in (part.constraints if isinstance(part, AnyOf) else (part,))
        )
        self.text = " or ".join(c.text for c in self.constraints)

    def accepts(self, value) -> bool:
        return any(c.accepts(value) for c in self.constraints)

    def check(self, value, name: str) -> None:
        if self.accepts(value):
            return
        applying = [c for c in self.constraints if c.applies(value)]
        if len(applying) == 1 and isinstance(applying[0], (Integer, Real)):
            applying[0].check(value, name)  # a number out of range: its bound
        raise ParameterError(f"{name} must be {self.text}, got {value!r}")


class Integer(Constraint):
    def __init__(self, minimum: int):
        self.minimum = minimum
        self.text = f"an integer >= {minimum}"

    def accepts(self, value) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)) and value >= self.minimum

    def applies(self, value) -> bool:
        return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))

    def check(self, value, name: str) -> None:
        if not self.applies(value):
            raise ParameterError(f"{name} must be an integer, got {value!r}")
        if value < self.minimum:
            raise ParameterError(f"{name} must be >= {self.minimum}, got {value}")


class Real(Constraint):
    """A finite real number (not a bool) in [low, high]; ``open_low`` excludes ``low``."""

    def __init__(self, low: float = -math.inf, high: float = math.inf, *, open_low: bool = False):
        self.low, self.high, self.open_low = low, high, open_low
        if high < math.inf:
            self.text = f"a number in {'(' if open_low else '['}{low:g}, {high:g}]"
        else:
            self.text = f"a finite number {'>' if open_low else '>='} {low:g}"

    def accepts(self, value) -> bool:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            return False
        return (value > self.low if self.open_low else value >= self.low) and value <= self.high

    def applies(self, value) -> bool:
        return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))

    def check(self, value, name: str) -> None:
        if not self.applies(value):
            raise ParameterError(f"{name} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ParameterError(f"{name} must be finite, got {value}")
        if not self.accepts(value):
            bound = (
                f"a number in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}]"
                if self.high < math.inf
                else f"{'>' if self.open_low else '>='} {self.low:g}"
            )
            raise ParameterError(f"{name} must be {bound}, got {value}")


class Options(Constraint):
    def __init__(self, *options):
        self.options = options
        self.text = f"one of {options}"

    def accepts(self, value) -> bool:
        return isinstance(value, (str, type(None))) and value in self.options


class Boolean(Constraint):
    text = "True or False"

    def accepts(self, value) -> bool:
        return isinstance(value, (bool, np.bool_))


class NoneValue(Constraint):
    text = "None"

    def accepts(self, value) -> bool:
        return value is None


class Callable(Constraint):
    text = "a callable f(record) -> bool"

    def accepts(self, value) -> bool:
        return callable(value)


class Instance(Constraint):
    def __init__(self, cls: type, text: str):
        self.cls, self.text = cls, text

    def accepts(self, value) -> bool:
        return isinstance(value, self.cls)


class Checked(Constraint):
    """Accepted when ``function(value)`` returns; its own ``ValueError`` names the parameter."""

    def __init__(self, function, text: str):
        self.function, self.text = function, text

    def accepts(self, value) -> bool:
        try:
            self.function(value)
        except (ValueError, TypeError):
            return False
        return True

    def check(self, value, name: str) -> None:
        try:
            self.function(value)
        except (ValueError, TypeError) as exc:
            raise ParameterError(str(exc)) from None


NONE = NoneValue()
POSITIVE = Real(0.0, open_low=True)
NON_NEGATIVE = Real(0.0)
UNIT_INTERVAL = Real(0.0, 1.0)
COUNT = Integer(1)
BOOLEAN = Boolean()
#: A record every so many iterations, or None for the solver's own default.
EVERY = NONE | COUNT
#: A Nyström preconditioner's damping ρ (:func:`krrcore.nystrom.resolve_damping`).
DAMPING = Options("damped", "regularization") | POSITIVE


#: Why λ must be > 0: the reason every message about it gives (krrcore's and the app's).
PENALTY_REASON = "with λ = 0 the system K + λnI is singular in general"


def is_valid_penalty(value) -> bool:
    """The rule for λ, declared once: a finite number > 0 (:data:`PENALTIES`, and every front end's
    check of a λ before a fit)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and value > 0


# What the parameters every estimator shares accept (their declarations: krrcore.solvers.base).
def _check_penalty(penalty) -> None:
    if check_positive(penalty, "penalty", allow_zero=True) == 0:
        raise ValueError(f"penalty must be > 0: {PENALTY_REASON}")


def _check_device(device) -> None:
    if device is None:
        return
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device must be None, a torch.device or a name such as 'cpu' or 'cuda', got {device!r}"
        ) from None
    if resolved.type == "meta":
        raise ValueError("device='meta' holds no values (tensors there have shapes only); use 'cpu' or 'cuda'")
    if resolved.type != "cpu":
        try:
            torch.empty(0, device=resolved)
        except (RuntimeError, AssertionError, ValueError) as exc:
            available = "'cpu'" + (", 'cuda'" if torch.cuda.is_available() else "")
            reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            raise ValueError(
                f"device={device!r} is not available in this torch build or machine ({reason}); "
                f"available: {available}, or None for the default"
            ) from None


def _check_centers(centers) -> None:
    if isinstance(centers, str):
        resolve_selector(centers)  # names the selectors when the name is not one of them
    elif not isinstance(centers, CenterSelector) and not hasattr(centers, "__len__"):
        raise ValueError(
            f"centers must be one of {sorted(CENTER_SELECTORS)}, a CenterSelector or an array of "
            f"centres, got {centers!r}"
        )
    elif not isinstance(centers, CenterSelector):
        shape = tuple(getattr(centers, "shape", None) or np.shape(np.asarray(centers, dtype=object)))
        if len(shape) != 2 or shape[0] == 0 or shape[1] == 0:
            raise ValueError(
                f"centers given as an array must be 2-D with at least one row and one column (M × d), got shape {shape}"
            )


KERNELS = NONE | Instance(Kernel, "a krrcore.kernels.Kernel")
PENALTIES = Checked(_check_penalty, "a finite number > 0")
DTYPES = Checked(resolve_dtype, "float32 or float64")
DEVICES = Checked(_check_device, "None, 'cpu', 'cuda' or a torch.device")
MEMORY_BUDGETS = Checked(check_memory_budget, "a positive whole number of bytes or None")
CENTERS = Checked(_check_centers, "a selector name, a CenterSelector or an array")
TOLERANCE = NONE | NON_NEGATIVE
CALLBACKS = NONE | Callable()
#: Seconds of solver (or search) time, or None for no limit.
TIMEOUTS = NONE | POSITIVE
#: The metric of the records' train/validation values ("auto": by the targets).
METRIC_NAMES = Options("auto", *METRICS)


class Seed(Constraint):
    """What ``seed`` accepts, as scikit-learn's ``random_state``: an integer >= 0, None (fresh
    entropy), a ``numpy.random.Generator``, a ``numpy.random.RandomState`` or a ``torch.Generator``."""

    text = "an integer >= 0, None, a numpy.random.Generator, a numpy.random.RandomState or a torch.Generator"

    #: The largest integer seed: torch's generators take a signed 64-bit one.
    maximum = 2**63 - 1

    def accepts(self, value) -> bool:
        return (
            value is None
            or (Integer(0).accepts(value) and value <= self.maximum)
            or isinstance(value, (np.random.Generator, np.random.RandomState, torch.Generator))
        )

    def check(self, value, name: str) -> None:
        if Integer(0).accepts(value) and value > self.maximum:
            raise ParameterError(
                f"{name} must be an integer in [0, 2**63 - 1], got {value} (a seed of "
                f"{value.bit_length()} bits; torch's generators take 63)"
            )
        super().check(value, name)


def resolve_seed(seed) -> int:
    """The integer seed a fit uses for ``seed`` (see :class:`Seed`): the integer itself, or one drawn
    from the generator given (which advances it, as scikit-learn's estimators do) or from fresh
    entropy for None."""
    if seed is None:
        return int(np.random.default_rng().integers(2**63))
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if isinstance(seed, np.random.RandomState):
        return int(seed.randint(np.iinfo(np.int64).max))
    if isinstance(seed, torch.Generator):
        return int(torch.randint(2**62, (1,), generator=seed))
    return int(seed)


def check_stop_event(stop_event) -> None:
    """``fit``'s ``stop_event``: None or an object with ``is_set()`` (a ``threading.Event``)."""
    if stop_event is not None and not callable(getattr(stop_event, "is_set", None)):
        raise ParameterError(
            f"stop_event must be None or a threading.Event (anything with is_set()), got {stop_event!r}"
        )


@dataclasses.dataclass(frozen=True)
class _Default:
    value: object


def param(default, constraint: Constraint, *, positional: bool = False):
    """A parameter: its default and the :class:`Constraint` its values meet (keyword-only unless
    ``positional``)."""
    return dataclasses.field(default=default, kw_only=not positional, metadata={"constraint": constraint})


def default(value) -> _Default:
    """In a subclass: the same parameter as the base class declares, with another default."""
    return _Default(value)


def parameters(cls):
    """Make ``cls`` a dataclass of its parameters (the fields declared by :func:`param` on it and its
    bases); ``__init__`` stores them, nothing else. ``repr``, equality and hashing stay scikit-learn's."""
    inherited = {}
    for base in reversed(cls.__mro__[1:]):
        inherited.update(getattr(base, "__dataclass_fields__", {}))
    for name in cls.__dict__.get("__annotations__", {}):
        value = cls.__dict__.get(name)
        if isinstance(value, _Default):
            if name not in inherited:
                raise TypeError(f"{cls.__name__}.{name}: default() changes an inherited parameter; none is declared")
            base = inherited[name]
            setattr(cls, name, dataclasses.field(default=value.value, kw_only=base.kw_only, metadata=base.metadata))
    # A subclass that writes its own __init__ (a user's solver, a test's scripted one) keeps it.
    own = next((vars(base)["__init__"] for base in cls.__mro__[:-1] if "__init__" in vars(base)), None)
    generate = own is None or getattr(own, "_declared", False)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        value = cls.__dict__.get(name)
        declared_here = isinstance(value, dataclasses.Field) and "constraint" in value.metadata
        if generate and not declared_here and not str(annotation).startswith("ClassVar"):
            raise TypeError(
                f"{cls.__name__}.{name} is annotated but not declared with param() or default(): "
                f"a parameter needs its constraint, a class constant the annotation ClassVar[...]"
            )
    cls = dataclasses.dataclass(eq=False, repr=False, init=generate)(cls)
    if generate:
        cls.__init__._declared = True
    return cls


def declared(cls) -> dict[str, dataclasses.Field]:
    """The parameters of an estimator class, by name, in constructor order."""
    return {f.name: f for f in dataclasses.fields(cls)}


def validate(estimator) -> None:
    """Check every parameter of ``estimator`` against its declared constraint (:class:`ParameterError`).
    A class that writes its own ``__init__`` has parameters of its own making, and checks them itself."""
    if not getattr(type(estimator).__init__, "_declared", False):
        return
    for field in dataclasses.fields(estimator):
        field.metadata["constraint"].check(getattr(estimator, field.name), field.name)

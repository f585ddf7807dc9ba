"""Classifiers built on the same solvers: KRR on encoded labels, one mixin for every solver.

Kernel ridge regression classifies by regressing on an encoding of the labels and reading the
class from the fitted function (the FALKON paper's classification experiments; the ASkotch
paper's binary tasks): two classes become targets ±1 (one column; ``decision_function`` > 0
means ``classes_[1]``); k > 2 classes become one-hot 0/1 columns solved together (one
factorisation or one preconditioner for all k right-hand sides) and ``predict`` takes the
arg-max. Labels may be any sortable values (ints, strings, ...); ``classes_`` holds them sorted.

:class:`KRRClassifierMixin` does the encoding around a regressor's ``iter_fit`` and ``predict``,
so each classifier below is the mixin plus its solver: it takes exactly the solver's parameters,
streams the same :class:`~krrcore.stream.IterationRecord` (train/validation metric: the
classification error of the encoded problem) and works with ``cross_val_score(...,
scoring="accuracy")`` and ``GridSearchCV`` on raw labels.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import column_or_1d

from .._validation import as_tensor
from .askotch import ASkotch, Skotch
from .base import distributed_backend
from .checks import fit_guard
from .exact import ExactKRR, NystromKRR
from .falkon import Falkon, NystromCG, NystromGD
from .pcg import CG, NystromPCG
from .sketchysaga import SketchySAGA


def _labels(y, name: str) -> np.ndarray:
    """``y`` as a 1-D numpy array of class labels (a column vector is accepted with a warning)."""
    if y is None:
        raise ValueError(f"{name} is required: this estimator requires y to be passed, but the target y is None")
    if isinstance(y, torch.Tensor):
        y = y.detach().cpu().numpy()
    y = column_or_1d(y, warn=True)
    if y.dtype == object:
        y = _one_label_type(y, name)
    check_classification_targets(y)
    return y


def _label_kind(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "missing"
    if isinstance(value, (str, bytes)):
        return "string"
    if isinstance(value, (bool, np.bool_, int, float, np.number)):
        return "number"
    return type(value).__name__


def _one_label_type(labels: np.ndarray, name: str) -> np.ndarray:
    """Object-dtype labels as one type: all numbers become a numeric array, all strings stay. A mix
    is refused, as scikit-learn refuses it: sorting them, to give ``classes_`` an order, has no
    rule for 'a' against 1 or None."""
    kinds: dict[str, list] = {}
    for value in labels.tolist():
        kinds.setdefault(_label_kind(value), []).append(value)
    if set(kinds) == {"number"}:
        return np.asarray(labels.tolist())
    if len(kinds) < 2:
        return labels

    seen = "; ".join(
        f"{len(values)} {kind} label{'s' if len(values) != 1 else ''} "
        f"(e.g. {', '.join(list(dict.fromkeys(map(repr, values)))[:3])})"
        for kind, values in kinds.items()
    )
    missing = len(kinds.get("missing", ()))
    fix = (
        f"drop the {missing} sample{'s' if missing != 1 else ''} without a label (None or NaN)"
        if missing
        else "convert them to one type, e.g. all to strings with y.astype(str)"
    )
    raise ValueError(f"{name} mixes label types — {seen}; class labels must be all numbers or all strings: {fix}")


class KRRClassifierMixin(ClassifierMixin):
    """Turns a krrcore regressor into a classifier (put it first: ``class C(KRRClassifierMixin, Falkon)``).

    Fitted attributes beyond the regressor's: ``classes_`` (sorted labels). ``decision_function``
    returns the regression outputs (n,) for two classes, (n, k) otherwise; ``predict`` returns
    labels from ``classes_`` (a numpy array, whatever the input type); ``score`` is accuracy.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        tags.regressor_tags = None
        return tags

    def _encode(self, labels: np.ndarray, name: str) -> np.ndarray:
        index = np.searchsorted(self.classes_, labels)
        index = np.clip(index, 0, len(self.classes_) - 1)
        unseen = self.classes_[index] != labels
        if unseen.any():
            raise ValueError(
                f"{name} has labels not seen in y: {sorted(set(labels[unseen].tolist()))[:5]} "
                f"(classes_: {self.classes_.tolist()})"
            )
        if len(self.classes_) == 2:
            return np.where(index == 1, 1.0, -1.0)
        return np.eye(len(self.classes_))[index]

    def iter_fit(self, X, y, X_val=None, y_val=None, *, sample_weight=None, stop_event: threading.Event | None = None):
        """The regressor's record stream on the encoded labels; sets ``classes_`` first.
        ``sample_weight`` goes to the regressor (weighted KRR on the encoded labels); the classes
        are those of the samples with a positive weight, of which there must be two at least. A fit
        that fails leaves ``classes_`` and the model as they were (:func:`~krrcore.solvers.checks.fit_guard`)."""
        with fit_guard(self):
            if distributed_backend(y) is not None:
                raise ValueError(
                    f"{type(self).__name__} encodes labels in this process; on sharded data fit the "
                    f"regressor on ±1 or one-hot targets (krrcore.sharded.generate encodes them)"
                )
            labels = _labels(y, "y")
            classes = np.unique(labels)
            if len(classes) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least 2 classes in y; got "
                    f"{len(classes)} class(es) {classes.tolist()}"
                )
            if sample_weight is not None:
                weights = as_tensor(sample_weight, "sample_weight", dtype=torch.float64, device="cpu", ndim=(1,))
                if weights.shape[0] == len(labels):
                    weighted = np.unique(labels[(weights > 0).numpy()])
                    if 0 < len(weighted) < 2:
                        raise ValueError(
                            f"{type(self).__name__} needs samples of at least 2 classes with a "
                            f"positive sample_weight; got 1 class {weighted.tolist()} (the others "
                            f"weigh 0)"
                        )
            self.classes_ = classes
            Y = self._encode(labels, "y")
            Y_val = None if y_val is None else self._encode(_labels(y_val, "y_val"), "y_val")
            yield from super().iter_fit(X, Y, X_val, Y_val, sample_weight=sample_weight, stop_event=stop_event)

    def decision_function(self, X):
        """Regression outputs: (n,) for two classes (> 0: ``classes_[1]``), (n, k) for k classes.

        Returns a torch tensor for torch input, else a numpy array.
        """
        out = self._outputs(X)
        if len(self.classes_) == 2:
            out = out[:, 0]
        return out if isinstance(X, torch.Tensor) else out.detach().cpu().numpy()

    def predict(self, X) -> np.ndarray:
        """Class labels (from ``classes_``) as a numpy array."""
        scores = self._outputs(X).detach().cpu()
        index = (scores[:, 0] > 0).long() if len(self.classes_) == 2 else scores.argmax(1)
        return self.classes_[index.numpy()]


class ExactKRRClassifier(KRRClassifierMixin, ExactKRR):
    """:class:`~krrcore.solvers.exact.ExactKRR` on encoded labels (:class:`KRRClassifierMixin`)."""


class NystromKRRClassifier(KRRClassifierMixin, NystromKRR):
    """:class:`~krrcore.solvers.exact.NystromKRR` on encoded labels (:class:`KRRClassifierMixin`)."""


class FalkonClassifier(KRRClassifierMixin, Falkon):
    """:class:`~krrcore.solvers.falkon.Falkon` on encoded labels (:class:`KRRClassifierMixin`)."""


class NystromCGClassifier(KRRClassifierMixin, NystromCG):
    """:class:`~krrcore.solvers.falkon.NystromCG` on encoded labels (:class:`KRRClassifierMixin`)."""


class NystromGDClassifier(KRRClassifierMixin, NystromGD):
    """:class:`~krrcore.solvers.falkon.NystromGD` on encoded labels (:class:`KRRClassifierMixin`)."""


class SketchySAGAClassifier(KRRClassifierMixin, SketchySAGA):
    """:class:`~krrcore.solvers.sketchysaga.SketchySAGA` on encoded labels (:class:`KRRClassifierMixin`)."""


class ASkotchClassifier(KRRClassifierMixin, ASkotch):
    """:class:`~krrcore.solvers.askotch.ASkotch` on encoded labels (:class:`KRRClassifierMixin`)."""


class SkotchClassifier(KRRClassifierMixin, Skotch):
    """:class:`~krrcore.solvers.askotch.Skotch` on encoded labels (:class:`KRRClassifierMixin`)."""


class NystromPCGClassifier(KRRClassifierMixin, NystromPCG):
    """:class:`~krrcore.solvers.pcg.NystromPCG` on encoded labels (:class:`KRRClassifierMixin`)."""


class CGClassifier(KRRClassifierMixin, CG):
    """:class:`~krrcore.solvers.pcg.CG` on encoded labels (:class:`KRRClassifierMixin`)."""


#: The classifier of each regressor class.
CLASSIFIERS = {
    cls.__bases__[1]: cls
    for cls in (
        ExactKRRClassifier,
        NystromKRRClassifier,
        FalkonClassifier,
        NystromCGClassifier,
        NystromGDClassifier,
        SketchySAGAClassifier,
        ASkotchClassifier,
        SkotchClassifier,
        NystromPCGClassifier,
        CGClassifier,
    )
}

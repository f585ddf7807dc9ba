"""Classifier labels of mixed types are refused with a message naming them (scikit-learn refuses
such a mix too); object arrays of numbers are numbers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from krrcore.kernels import GaussianKernel
from krrcore.solvers.classifiers import ExactKRRClassifier, FalkonClassifier

X = np.random.default_rng(0).standard_normal((6, 2))


@pytest.mark.parametrize(
    "labels, message",
    [
        (
            np.array([None, "a", "b", None, "a", "b"], dtype=object),
            "y mixes label types — 2 missing labels (e.g. None); 4 string labels (e.g. 'a', 'b'); "
            "class labels must be all "
            "numbers or all strings: drop the 2 samples without a label (None or NaN)",
        ),
        (
            pd.Series([1, "a", 2, "a", 1, 2]),
            "y mixes label types — 4 number labels (e.g. 1, 2); 2 string labels (e.g. 'a'); class labels must be all "
            "numbers or all strings: convert them to one type, e.g. all to strings with y.astype(str)",
        ),
        (
            pd.Series(["a", None, "b", "a", "b", "a"]),
            "y mixes label types — 5 string labels (e.g. 'a', 'b'); 1 missing label (e.g. nan); class "
            "labels must be all "
            "numbers or all strings: drop the 1 sample without a label (None or NaN)",
        ),
    ],
)
def test_mixed_label_types_are_refused_naming_them(labels, message):
    with pytest.raises(ValueError) as caught:
        FalkonClassifier(GaussianKernel(1.0), M=3).fit(X, labels)
    assert str(caught.value) == message


def test_validation_labels_are_checked_the_same_way():
    with pytest.raises(ValueError, match=r"^y_val mixes label types — 1 string label \(e.g. 'a'\); 1 number label"):
        ExactKRRClassifier(GaussianKernel(1.0)).fit(X, ["a", "b"] * 3, X[:2], np.array(["a", 3], dtype=object))


def test_object_arrays_of_numbers_are_numbers():
    model = FalkonClassifier(GaussianKernel(1.0), M=3).fit(X, pd.Series([1, 2] * 3, dtype=object))
    assert model.classes_.tolist() == [1, 2] and model.classes_.dtype.kind == "i"
    assert set(model.predict(X).tolist()) <= {1, 2}

"""Silent data problems get a message or a correct result: complex input, values
near the float64 limit in standardisation, float32 overflow, squared distances that overflow."""

import numpy as np
import pandas as pd
import pytest
import torch

from krrcore._validation import as_tensor
from krrcore.datasets.core import assemble
from krrcore.kernels import GaussianKernel
from krrcore.solvers.falkon import Falkon


def test_complex_input_is_refused_not_truncated():
    X = np.array([[1 + 2j, 3.0], [4.0, 5 - 1j]])
    with pytest.raises(ValueError, match=r"X must be real-valued: Complex data not supported .* pass X.real"):
        as_tensor(X, "X")
    frame = pd.DataFrame({"a": [1.0, 2.0], "b": [1j, 2 + 0j]})
    with pytest.raises(ValueError, match=r"must be real-valued"):
        Falkon(GaussianKernel(1.0), 1e-3, M=1).fit(frame, np.ones(2))


def _assemble(X, target):
    meta = dict(
        name="t",
        title="t",
        feature_names=tuple(f"x{i}" for i in range(X.shape[1])),
        source="test",
        description="",
        suggested_kernel={"name": "gaussian", "sigma": 1.0},
        suggested_penalty=1e-3,
        synthetic=True,
    )
    return assemble(X=X, target=target, index=np.arange(len(X)), n_test=40, task="regression", **meta)


def test_values_near_the_float64_limit_standardise_to_z_scores():
    """A column of values ~1e307 used to overflow in the sum of squares and become zeros; now its
    z-scores are those of the same column in ordinary units."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 3))
    huge = X.copy()
    huge[:, 1] *= 1e307
    huge[:, 2] = np.where(np.arange(200) % 2, 1.7e308, -1.7e308)
    data, ref = _assemble(huge, X[:, 0]), _assemble(X, X[:, 0])
    np.testing.assert_allclose(data.X_train[:, :2], ref.X_train[:, :2], atol=1e-12)
    assert np.isfinite(data.X_train).all() and abs(data.X_train[:, 2].std() - 1) < 1e-12
    np.testing.assert_allclose(data.standardize(huge[:5]), data.X_test[:5], atol=1e-12)
    y = _assemble(X, X[:, 0] * 1e307)
    np.testing.assert_allclose(y.y_train, ref.y_train, atol=1e-12)


def test_float32_overflow_is_named():
    with pytest.raises(ValueError, match=r"X has values up to 1e\+307, beyond float32's range .* dtype='float64'"):
        as_tensor(np.array([[1e307, 1.0]]), "X", dtype=torch.float32)


def test_squared_distances_that_overflow_are_named():
    X = np.random.default_rng(0).standard_normal((50, 2))
    X[3, 0] = 1e307
    with pytest.raises(ValueError, match=r"X has values up to 1e\+307: their squared distances overflow float64"):
        Falkon(GaussianKernel(1.0), 1e-3, M=10, centers=X[10:20]).fit(X, X[:, 1])


@pytest.mark.parametrize(
    "column",
    [
        pd.array([1, None, 3, 4], dtype="Int64"),  # nullable integers: to_numpy gives objects with pd.NA
        pd.array([1.0, None, 3.0, 4.0], dtype="Float64"),
        [1.0, np.nan, 3.0, 4.0],
        pd.array(["1", "2", None, "4"], dtype="string"),
    ],
    ids=["Int64", "Float64", "float-NaN", "string"],
)
def test_pandas_missing_values_are_named_as_missing_not_non_numeric(column):
    frame = pd.DataFrame({"age": column, "height": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(
        ValueError,
        match=r"X has missing values \(NaN, None or pd.NA\) in column\(s\) 'age' "
        r"\(1 of 4 rows\): drop those rows",
    ) as info:
        Falkon(GaussianKernel(1.0), 1e-3, M=2).fit(frame, np.ones(4))
    assert "non-numeric" not in str(info.value)
    with pytest.raises(ValueError, match=r"y has missing values .* column\(s\) 'target' \(1 of 4 rows\)"):
        Falkon(GaussianKernel(1.0), 1e-3, M=2).fit(frame.fillna(0), pd.Series(column, name="target"))


def test_pandas_text_cells_and_numpy_gaps_are_named_by_column():
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0], "colour": ["red", "2", "blue"]})
    with pytest.raises(ValueError, match=r"non-numeric entries in column\(s\) 'colour' \(e.g. 'red', 'blue'\)"):
        as_tensor(frame, "X")
    X = np.ones((4, 3))
    X[1, 2], X[3, 0] = np.nan, np.inf
    with pytest.raises(
        ValueError,
        match=r"X contains 1 NaN \(missing\) value\(s\) and 1 infinite value\(s\) "
        r"in column\(s\) \[0, 2\]",
    ):
        as_tensor(X, "X")
    filled = pd.DataFrame({"a": pd.array([1, 2, 3], dtype="Int64"), "b": [0.5, 1.5, 2.5]})
    assert as_tensor(filled, "X").tolist() == [[1.0, 0.5], [2.0, 1.5], [3.0, 2.5]]

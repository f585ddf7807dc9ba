"""The estimators' input contract, each piece shown on every solver and classifier: feature names as
scikit-learn keeps them, a failed fit that leaves the estimator as it was, nested set_params, one
fit at a time per instance, parameters refused by name, and numerics that stay right (or say why)
under a large offset, an extreme penalty, zero targets and a degenerate kernel."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import r2_score
from sklearn.utils.estimator_checks import check_dataframe_column_names_consistency

from krrcore import CLASSIFIERS
from krrcore.kernels import GaussianKernel, LinearKernel, PolynomialKernel
from krrcore.registry import SOLVERS
from krrcore.solvers.checks import ConcurrentFitError, ModelWarning, OffsetWarning, PenaltyWarning
from krrcore.solvers.params import ParameterError

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SMALL = {"M": 30, "maxiter": 40, "rank": 8, "blocks": 2}


def _make(key, classifier=False, **params):
    info = SOLVERS[key]
    chosen = {"kernel": GaussianKernel(1.0), **{k: v for k, v in SMALL.items() if k in info.knobs}, **params}
    if classifier:
        return CLASSIFIERS[info.estimator](**{**dict(info.defaults), **chosen})
    return info.make(**chosen)


def _data(n=120, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1]


KEYS = list(SOLVERS)


@pytest.mark.parametrize("key", KEYS)
def test_reordered_or_renamed_columns_raise_and_names_are_kept(key):
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _make(key).fit(frame, y)
    assert model.feature_names_in_.tolist() == ["a", "b", "c"] and model.n_features_in_ == 3
    with pytest.raises(ValueError, match="Feature names must be in the same order as they were in fit"):
        model.predict(frame[["c", "a", "b"]])
    with pytest.raises(ValueError, match="Feature names unseen at fit time:\n- z"):
        model.predict(frame.rename(columns={"c": "z"}))
    np.testing.assert_allclose(model.predict(frame), model.predict(X))  # numpy: no names to check


@pytest.mark.parametrize("key", ["falkon", "exact", "askotch", "sketchysaga"])
def test_scikit_learns_own_column_names_check_passes(key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check_dataframe_column_names_consistency(key, _make(key))
        check_dataframe_column_names_consistency(key, _make(key, classifier=True))


@pytest.mark.parametrize("key", KEYS)
def test_a_failed_refit_keeps_the_old_model(key):
    X, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _make(key).fit(X, y)
    before = dict(vars(model))
    expected = model.predict(X)
    bad = np.c_[X[:, :2], X[:, :2]]
    bad[3, 1] = np.nan  # other width, and a NaN
    with pytest.raises(ValueError, match="NaN"):
        model.fit(bad, y)
    assert vars(model).keys() == before.keys() and all(vars(model)[k] is before[k] for k in before)
    np.testing.assert_array_equal(model.predict(X), expected)
    model.set_params(memory_budget=1024)  # refused for memory: the old model stays
    with pytest.raises(ValueError, match="memory_budget|MiB"):  # MemoryLimitError, or too small a block
        model.fit(np.c_[X, X], y)
    model.set_params(memory_budget=None)
    np.testing.assert_allclose(model.predict(X), expected, rtol=1e-10, atol=1e-12)  # other blocks: round-off
    assert model.n_features_in_ == 3


@pytest.mark.parametrize("key", KEYS)
def test_a_failed_classifier_refit_keeps_its_classes(key):
    X, _ = _data()
    labels = np.where(X[:, 0] > 0, "yes", "no")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = _make(key, classifier=True).fit(X, labels)
    expected = model.predict(X)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.fit(bad, np.where(X[:, 0] > 0, "up", "down"))
    assert model.classes_.tolist() == ["no", "yes"]
    np.testing.assert_array_equal(model.predict(X), expected)


def test_an_unfitted_estimator_stays_unfitted_after_a_failed_fit():
    model = _make("falkon")
    with pytest.raises(ParameterError, match="penalty"):
        model.set_params(penalty=-1).fit(*_data())
    assert not any(name.endswith("_") and not name.startswith("_") for name in vars(model))


def test_set_params_reaches_the_kernel():
    model = _make("falkon")
    model.set_params(kernel__sigma=2.5)
    assert model.kernel.sigma == 2.5 and model.get_params()["kernel__sigma"] == 2.5
    with pytest.raises(ValueError, match="sigma must be > 0"):
        model.set_params(kernel__sigma=-1)
    with pytest.raises(ValueError, match=r"GaussianKernel has no parameter\(s\) \['degree'\]"):
        model.set_params(kernel__degree=3)


def test_a_second_thread_fitting_the_same_instance_is_refused():
    X, y = _data(n=300)
    started, release = threading.Event(), threading.Event()

    def hold(record):
        started.set()
        release.wait(10)
        return False

    model = _make("falkon", callback=hold, maxiter=2)
    errors = []
    first = threading.Thread(target=lambda: model.fit(X, y))
    first.start()
    assert started.wait(30)
    try:
        model.fit(X, y)
    except ConcurrentFitError as exc:
        errors.append(str(exc))
    finally:
        release.set()
        first.join(30)
    assert errors and "being fitted by another thread" in errors[0] and "clone" in errors[0]
    assert model.predict(X).shape == (300,)  # the first fit's model, whole
    model.fit(X, y)  # and the instance is free again


@pytest.mark.parametrize(
    "params, match",
    [
        ({"seed": 2**70}, r"seed must be an integer in \[0, 2\*\*63 - 1\]"),
        ({"callback": lambda record: np.ones(3)}, "callback must return True"),
        ({"centers": np.zeros((0, 3))}, "centers given as an array must be 2-D with at least one row"),
        ({"penalty": 1e300}, "penalty=1e\\+300 gives λn"),
    ],
)
def test_bad_parameters_are_named(params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _make("falkon", **params).fit(*_data())


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_on_a_cpu_build_is_refused_by_name():
    with pytest.raises(ParameterError, match="device='cuda' is not available"):
        _make("exact", device="cuda").fit(*_data())


@pytest.mark.parametrize("key", KEYS)
def test_a_large_offset_fits_as_well_as_centerd_data(key):
    X, y = _data(n=200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        centerd = r2_score(y, _make(key).fit(X, y).predict(X))
        model = _make(key).fit(X + 1e8, y)
    moved = r2_score(y, model.predict(X + 1e8))
    assert centerd > 0.4
    assert abs(moved - centerd) < 0.02, (moved, centerd)
    np.testing.assert_allclose(model.x_origin_.numpy(), X.mean(0) + 1e8)


def test_a_dot_product_kernel_under_a_large_offset_warns():
    X, y = _data()
    with pytest.warns(OffsetWarning, match="LinearKernel is not translation invariant"):
        _make("exact", kernel=LinearKernel()).fit(X + 1e6, y)


@pytest.mark.parametrize("key", KEYS)
def test_a_penalty_below_round_off_warns_by_name(key):
    with pytest.warns(PenaltyWarning, match="penalty=1e-300 gives λn"):
        try:
            _make(key, penalty=1e-300).fit(*_data())
        except ValueError as exc:  # a solver may refuse outright: then it says why
            assert "penalty" in str(exc)


@pytest.mark.parametrize("key", KEYS)
def test_all_zero_targets_give_the_zero_model(key):
    X, y = _data()
    model = _make(key).fit(X, 0 * y)
    assert model.converged_ and np.all(model.predict(X) == 0)
    assert all(np.isfinite(r.residual) for r in model.trace_)


@pytest.mark.parametrize("key", ["falkon_bless", "nystrom_direct"])
def test_a_degenerate_kernel_is_not_called_converged(key):
    X = np.random.default_rng(0).standard_normal((200, 3))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    with pytest.warns(ModelWarning, match="no better than zero on its training data"):
        model = _make(key, kernel=PolynomialKernel(degree=30), M=40).fit(X, y)
    assert not model.converged_ and "no better than zero" in model.stop_reason_


# -- the leverage functions under the same policy ---------------------------------------------------


def test_bless_at_a_penalty_below_round_off_is_refused_before_any_level_runs():
    from krrcore import leverage

    X = np.random.default_rng(0).standard_normal((300, 3))
    for sampler in (leverage.bless, leverage.bless_r, leverage.compare_with_exact):
        with pytest.raises(ValueError, match="penalty=1e-300 is below what float64 resolves") as caught:
            sampler(X, GaussianKernel(1.0), 1e-300)
        # Raised by the input checks, before the first level (or the exact scores) allocated anything.
        assert caught.traceback[-1].path.name == "_inputs.py"


def test_a_bless_level_whose_d_eff_estimate_exceeds_n_is_refused_before_its_draws():
    from krrcore import leverage

    X = np.random.default_rng(0).standard_normal((300, 3))
    with pytest.raises(ValueError, match="above the n=300 points any d_eff is at most"):
        leverage.bless(X, GaussianKernel(1.0), 1e-12)


@pytest.mark.parametrize(
    "args, match",
    [
        ((1, 1e-3, True), "q must be a number"),
        ((1, 0, 2), "penalty must be > 0"),
        ((1, float("nan"), 2), "penalty must be finite"),
        ((1, 1e-3, 1), "q must be > 1"),
        ((1, 1e-300, 1.0001), "levels"),
    ],
)
def test_lambda_path_arguments_are_checked(args, match):
    from krrcore.leverage import lambda_path

    with pytest.raises(ValueError, match=match):
        lambda_path(*args)


def test_exact_scores_path_does_not_read_true_as_one():
    from krrcore.leverage import exact_scores_path

    with pytest.raises(ValueError, match=r"penalties\[1\] must be a number, got True"):
        exact_scores_path(np.eye(3), GaussianKernel(1.0), [1e-3, True])


def test_the_median_heuristic_of_huge_values_is_finite():
    from krrcore.kernels import median_heuristic

    X = np.random.default_rng(0).standard_normal((50, 2))
    assert median_heuristic(X * 1e200) == pytest.approx(median_heuristic(X) * 1e200, rel=1e-12)


# -- tables ---------------------------------------------------------------------------------------


def _table(header, cells, sep=","):
    return (header + "\n" + "".join(sep.join(row) + "\n" for row in cells)).encode()


def test_numbers_with_thousands_separators_are_read_as_numbers_not_ids():
    import gzip

    from krrcore.datasets.reading import read_csv_bytes
    from krrcore.datasets.tabular import from_csv

    comma = _table("price,k,y", [(f'"{123456 + 1000 * i:,}"', str(i % 7), str(i % 3)) for i in range(30)])
    frame, fmt = read_csv_bytes(comma)
    assert frame["price"].tolist()[:2] == [123456, 124456] and fmt.thousands == ","
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = from_csv(comma, "y")
    assert "price" in data.feature_names  # a number, not "an ID" left out
    points = _table(
        "a;b;y", [(f"{1234567 + 1111 * i:,}".replace(",", "."), f"{i},5", str(i % 3)) for i in range(30)], sep=";"
    )
    for raw in (points, gzip.compress(points)):
        frame, fmt = read_csv_bytes(raw)
        assert frame["a"].tolist()[0] == 1234567 and frame["b"].tolist()[1] == 1.5
        assert fmt.describe() == "semicolon-separated, decimal comma, thousands separated by points"


def test_cr_only_line_ends_and_inf_cells_named_by_column():
    from krrcore.datasets.reading import read_csv_bytes
    from krrcore.datasets.tabular import from_csv

    frame, _ = read_csv_bytes(b"a,b,y\r1,2,0\r3,4,1\r")
    assert frame.shape == (2, 3)
    table = _table("a,b,y", [(str(i * 3 % 7), "inf" if i == 3 else str(i % 5), str(i % 3)) for i in range(30)])
    with pytest.raises(ValueError, match=r"infinite values \(inf\) in column\(s\) 'b' \(1 cell, e.g. data row 4\)"):
        from_csv(table, "y")


def test_connect_refuses_a_bad_timeout_and_a_closed_local_port_after_a_short_grace():
    from krrcore import sharded
    from krrcore.distributed.cluster import ClusterUnavailable

    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0, got -1"):
        sharded.connect("tcp://127.0.0.1:1", timeout=-1)
    with pytest.raises(ClusterUnavailable, match="no scheduler listens at tcp://127.0.0.1:1"):
        sharded.connect("tcp://127.0.0.1:1", timeout=0.5)  # the grace ends with a shorter timeout

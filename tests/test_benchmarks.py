"""The benchmark suite runs end to end: ``python -m benchmarks --quick`` prints every case's tables
and writes its CSV and figures (HTML and PNG) with finite numbers. Nothing here asserts that
anything is fast: the figures are measurements for docs/benchmarks.md, not claims a test can check.
"""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks import cases, cases_vs_peers, solvers, suite, summary
from benchmarks.common import call_isolated

ROOT = Path(__file__).resolve().parents[1]

#: Columns of each case's summary that must be finite numbers in every row.
FINITE = {
    "falkon_vs_nystroem-summary": ("seconds", "test MSE", "peak MiB"),
    "falkon_vs_nystroem-floor": ("floor s", "floor GFLOP/s", "GEMM GFLOP/s"),
    "full_system-summary": ("seconds", "test MSE", "peak MiB"),
    "qm9-summary": ("solver s", "final SMAPE", "best SMAPE", "peak MiB"),
    "qm9-floor": ("floor_s",),
    "leverage-summary": ("seconds", "dictionary size"),
    "scaling-summary": ("s/iter", "floor s", "x floor", "peak MiB", "GEMM GFLOP/s"),
    "tune-summary": ("test MSE", "seconds", "MSE / grid best", "seconds / grid"),
    "app-summary": (
        "app solver s (first Run)",
        "app solver s (Run again)",
        "krrcore s (same threads)",
        "Run → first chart s",
        "Run → result s",
        "live fit / wall time",
    ),
    "uncertainty-summary": ("coverage 90%", "coverage 50%", "test MSE", "fit s", "µs/point, mean + std"),
    "speed-precision": ("fit s", "test MSE"),
    "speed-centres": ("fit s", "test MSE"),
    "speed-moonshot": ("fit s",),
    "logistic-summary": ("accuracy %", "fit s"),
    "threads-summary": ("median s", "max / median", "CPU / wall", "speed-up vs 1 thread"),
}
#: Every solver and peer the quick run must have measured (the test extra installs the peers).
FULL_SYSTEM_LABELS = {solvers.LABELS[s] for s in cases_vs_peers.FULL_SOLVERS}


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stdout


def test_quick_run_prints_every_case_table(quick_run):
    _, stdout = quick_run
    for name in cases.CASES:
        assert f"## {name}: summary" in stdout, name
    assert "## Targets, from every case" in stdout
    assert "FAILED" not in stdout, [line for line in stdout.splitlines() if "FAILED" in line]
    assert "skipped" not in stdout, [line for line in stdout.splitlines() if "skipped" in line]


def test_quick_run_writes_csv_with_finite_numbers(quick_run):
    out, _ = quick_run
    for table, columns in FINITE.items():
        rows = _rows(out / f"{table}.csv")
        assert rows, table
        for row in rows:
            for column in columns:
                assert math.isfinite(float(row[column])), (table, column, row)
    full = _rows(out / "full_system-summary.csv")
    assert {r["solver"] for r in full} == FULL_SYSTEM_LABELS
    assert len({r["n"] for r in full}) == 2  # against n
    peers = {r["solver"] for r in _rows(out / "falkon_vs_nystroem-summary.csv")}
    assert {"FALKON (krrcore)", "Nystroem+Ridge (scikit-learn)"} <= peers
    # Iterative rows are shown as multiples of the floor measured at their n, M, d and dtype.
    for row in full:
        if row["solver"] in {"FALKON (krrcore)", "NyströmPCG (krrcore)", "CG (krrcore)", "ASkotch (krrcore)"}:
            assert float(row["x floor"]) > 0, row
    targets = _rows(out / "targets.csv")
    assert len(targets) == 4 and all(r["measured"] for r in targets)


def test_quick_run_writes_html_and_png_figures(quick_run):
    from PIL import Image

    out, _ = quick_run
    for name in cases.CASES:
        if name == "threads":  # a table of medians and spread, no curve to draw
            continue
        htmls = sorted(out.glob(f"{name}-*.html"))
        assert htmls, name
        for html in htmls:
            text = html.read_text()
            assert "Plotly.newPlot" in text, html
            png = html.with_suffix(".png")
            image = Image.open(png)
            assert image.size[0] >= 800 and image.size[1] >= 400, png
            assert len(image.convert("RGB").getcolors(maxcolors=1 << 16) or range(1 << 16)) > 20, png  # not blank
    # The curves of the figures are the CSV's numbers: FALKON's trace carries finite test errors.
    results = json.loads((out / "falkon_vs_nystroem.json").read_text())
    falkon = [r for r in results if r["solver"] == "falkon"]
    assert falkon and all(math.isfinite(p["test_mse"]) and p["seconds"] >= 0 for r in falkon for p in r["points"])


def test_list_names_every_case():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--list"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == list(cases.CASES)


def test_unknown_case_is_refused_with_the_choices():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--case", "falkon_vs_sklearn"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "invalid choice: 'falkon_vs_sklearn'" in proc.stderr and "full_system" in proc.stderr


def test_fit_runs_in_a_fresh_process_and_a_failure_comes_back_as_its_message():
    floor = call_isolated(
        solvers.fit_one,
        {"solver": "floor", "n": 300, "n_test": 50, "M": 30, "dtype": "float32", "sigma": 5.0, "threads": 1},
    )
    assert floor["floor_s"] > 0 and math.isfinite(floor["floor_GFLOP/s"]), floor
    failed = call_isolated(
        solvers.fit_one,
        {
            "solver": "no_such_solver",
            "n": 300,
            "n_test": 50,
            "dtype": "float32",
            "sigma": 5.0,
            "penalty": 1e-3,
            "threads": 1,
        },
    )
    assert failed["solver"] == "no_such_solver" and "unknown peer 'no_such_solver'" in failed["error"]


def test_a_missing_peer_is_skipped_with_its_reason(monkeypatch):
    import torch

    monkeypatch.setitem(sys.modules, "gpytorch", None)  # import gpytorch now raises ImportError
    threads = torch.get_num_threads()
    try:
        result = solvers.fit_one(
            {
                "solver": "gpytorch",
                "n": 200,
                "n_test": 50,
                "dtype": "float32",
                "sigma": 5.0,
                "penalty": 1e-3,
                "threads": threads,
            }
        )
    finally:
        torch.set_num_threads(threads)
    assert result["skipped"].startswith("gpytorch is not installed") and "pip install gpytorch" in result["skipped"]
    summary = cases_vs_peers.full_system_summarise([result])
    assert any(
        "CG + pivoted Cholesky (GPyTorch) at n = 200: skipped — gpytorch is not installed" in note
        for note in summary.notes
    )


def test_merge_keeps_earlier_sizes_and_replaces_remeasured_ones():
    old = [{"n": 10, "v": 1}, {"n": 20, "v": 2}]
    new = [{"n": 20, "v": 3}, {"n": 30, "v": 4}]
    assert suite.merge(old, new) == [{"n": 10, "v": 1}, {"n": 20, "v": 3}, {"n": 30, "v": 4}]


def test_seconds_to_target_is_the_first_point_at_or_below_it():
    points = [{"seconds": 1.0, "test_mse": 0.9}, {"seconds": 2.0, "test_mse": 0.5}, {"seconds": 3.0, "test_mse": 0.4}]
    assert summary.seconds_to(points, 0.5) == 2.0
    assert math.isnan(summary.seconds_to(points, 0.1))


def test_only_direct_solves_are_refused_past_the_case_size_limit():
    config = {"direct_max_n": 5_000}
    for solver in ("falkon", "nystrom_pcg", "askotch", "rlaopt"):
        assert solvers._refusal({**config, "solver": solver}, 6_000, 4) is None, solver
    for solver in ("exact", "sk_krr"):
        assert "n > 5,000: a direct O(n³) solve" in solvers._refusal({**config, "solver": solver}, 6_000, 4)
    # GPyTorch without KeOps holds K: refused where two n×n float32 matrices exceed the free memory.
    assert "GPyTorch (without KeOps) evaluates the whole K" in solvers._refusal({"solver": "gpytorch"}, 10**6, 4)


def _docs(out: Path, docs: Path) -> subprocess.CompletedProcess:
    """``python -m benchmarks --docs DIR`` on a results folder: it measures nothing."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--out", str(out), "--docs", str(docs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_docs_page_holds_every_case_from_the_results_and_is_written_the_same_twice(quick_run, tmp_path):
    from test_text_hygiene import violations

    out, _ = quick_run
    docs = tmp_path / "docs"
    _docs(out, docs)
    page = (docs / "benchmarks.md").read_text()
    for name, case in cases.CASES.items():
        assert (docs / "data" / f"{name}.json").read_text() == (out / f"{name}.json").read_text()
        assert f"## {name}: {case.title}" in page and f"### {name}: summary\n\n| " in page, name
        assert f"Measured with `python -m benchmarks --case {name} --quick" in page
    assert page.count("A smoke run (`--quick`)") == len(cases.CASES)
    assert "## Targets" in page and "| target | measured | holds |" in page
    machine = json.loads((out / "leverage.machine.json").read_text())
    assert f"on {machine['cpu']}, {machine['cores']} cores," in page
    assert f"load average {machine['load_average'][0]:g} at the start of the case" in page  # how busy it was
    assert (
        "![FALKON against scikit-learn's Nystroem + Ridge" in page and (docs / "bench-falkon-vs-nystroem.png").exists()
    )
    assert violations(docs / "benchmarks.md", docs) == []  # no date, no clock time
    _docs(out, docs)  # again, from the same results
    assert (docs / "benchmarks.md").read_text() == page


def test_docs_page_draws_a_case_stored_from_another_machine_and_a_smoke_run_never_replaces_it(quick_run, tmp_path):
    out, _ = quick_run
    docs, empty = tmp_path / "docs", tmp_path / "no-results"
    (docs / "data").mkdir(parents=True)
    empty.mkdir()
    (docs / "data" / "leverage.json").write_text((out / "leverage.json").read_text())
    gpu = {
        "cpu": "Intel Xeon Platinum 8480+",
        "cores": 16,
        "memory_GiB": 125.8,
        "gpu": "NVIDIA H100 80GB HBM3",
        "torch": "2.13.0+cu128",
        "torch_threads": 16,
        "quick": False,
    }
    (docs / "data" / "leverage.machine.json").write_text(json.dumps(gpu))
    _docs(empty, docs)
    page = (docs / "benchmarks.md").read_text()
    line = "on Intel Xeon Platinum 8480+, 16 cores, 125.8 GiB, NVIDIA H100 80GB HBM3, torch 2.13.0+cu128 (16 threads)."
    assert "## leverage: " in page and line in page and "A smoke run" not in page
    assert "## scaling:" not in page and "not run (scaling at n = 10⁶ not in these results)" in page
    proc = _docs(out, docs)  # the quick run's leverage must not replace it
    assert "leverage: kept the stored measurement (the results folder holds a --quick smoke run)" in proc.stdout
    page = (docs / "benchmarks.md").read_text()
    assert line in page and "## scaling:" in page


def test_without_chromium_everything_but_the_png_is_written_and_the_run_says_why(tmp_path):
    """No Chrome/Chromium (BROWSER_PATH names a missing file, PATH holds only the interpreter): the
    app case, which drives the app in Chromium, is skipped with its reason; CSV, Markdown and HTML
    are written; the PNG export is skipped, said once where it happened and again at the end."""
    out = tmp_path / "results"
    env = {
        **os.environ,
        "BROWSER_PATH": str(tmp_path / "no-chromium"),
        "PATH": str(Path(sys.executable).parent),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--case", "app", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert (
        f"every problem: skipped — needs Chromium to drive the app (BROWSER_PATH={tmp_path / 'no-chromium'} is "
        "not an executable file)" in proc.stdout
    )
    skipped = [line for line in proc.stdout.splitlines() if "PNG export" in line]
    assert len(skipped) == 2 and skipped[-1].startswith(
        "# PNG export was skipped — RuntimeError: Kaleido requires Google Chrome to be installed."
    ), skipped
    assert "the figures are in the HTML files" in skipped[-1]
    written = {p.name for p in out.iterdir()}
    assert {"app.json", "app-summary.csv", "app.md", "app-app_vs_library.html", "targets.csv"} <= written
    assert not [name for name in written if name.endswith(".png")]
    assert "skipped — needs Chromium" in (out / "app.md").read_text()


def test_the_app_case_reads_the_pictures_sentence_the_page_writes():
    from benchmarks.bench_app import PICTURES
    from krr_app.parts.fit_views import pictures_text

    for count, seconds, wall, share in ((31, 0.0776, 3.45, "2.2"), (1031, 1234.0, 10_000.0, "12.3")):
        match = PICTURES.search(pictures_text(count, seconds, wall))
        assert match is not None and match.group(3) == share, pictures_text(count, seconds, wall)


def test_the_live_fit_target_reads_the_classroom_problems_share_of_wall_time():
    """The live fit's target holds when every browser placement's share on the classroom problem is
    at most 10%, fails above, and says when the problem was not measured."""
    from benchmarks.bench_app import CLASSROOM
    from benchmarks.targets import targets

    def row(app):
        return targets({"app": app})[-1]

    shares = [
        {"problem": CLASSROOM, "browser": "shares the 2 cores", "live fit / wall time": 0.034},
        {"problem": CLASSROOM, "browser": "on core 1 only", "live fit / wall time": 0.051},
    ]
    assert row(shares) == {
        "target": f"Live fit ≤ 10% of the run's wall time ({CLASSROOM})",
        "measured": "3.4% (browser shares the 2 cores); 5.1% (browser on core 1 only)",
        "holds": "yes",
    }
    assert row(shares[:1] + [{**shares[1], "live fit / wall time": 0.12}])["holds"] == "NO"
    assert row([{**shares[0], "problem": "Two moons, n = 2,000, M = 100, t = 5"}])["holds"] == "—"


def test_kernel_ops_measures_block_sizes_and_the_promoted_product_idle_and_loaded():
    """The two side measurements the product code cites (ops.CPU_BLOCK_BYTES, KernelOperator._promote)
    run and print what they claim to measure."""
    for flag, expected in (
        ("--rows", ("float32", "float64", "block_rows", "fused_s")),
        ("--promoted", ("idle", "one core busy", "krrcore: torch's copy", "numpy's copy")),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_kernel_ops", flag, "--quick"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert all(word in proc.stdout for word in expected), proc.stdout


def _fit(**extra):
    return {
        "solver": "cg",
        "label": "CG (krrcore)",
        "n": 30_000,
        "dtype": "float32",
        "iterations": 12,
        "setup_s": 3.0,
        "points": [
            {"iteration": 0, "seconds": 3.0, "test_mse": 1.0},
            {"iteration": 12, "seconds": 9.0, "test_mse": 0.8},
        ],
        **extra,
    }


def test_docs_refuses_zero_iterations_a_refusal_a_skip_and_an_error_no_better_than_the_mean():
    from benchmarks.docs import measured, refusal

    assert refusal(_fit()) is None
    assert refusal(_fit(mean_error=0.9)) is None
    assert "no iteration within its time limit (its set-up took 29.3 s)" in refusal(
        _fit(iterations=0, setup_s=29.3, points=[{"iteration": 0, "seconds": 29.3, "test_mse": 1.0}])
    )
    assert "no better than predicting the mean (0.75)" in refusal(_fit(mean_error=0.75))
    diverged = _fit(
        points=[{"iteration": 0, "seconds": 1.0, "test_mse": 1.0}, {"iteration": 6, "seconds": 58.0, "test_mse": 10.8}]
    )
    assert "final test MSE 10.8 is no better than predicting the mean (1)" in refusal(diverged)
    smape = {
        "solver": "falkon",
        "iterations": 3,
        "mean_error": 0.4,
        "points": [{"iteration": 0, "smape": 0.9}, {"iteration": 3, "smape": 0.5}],
    }
    assert "final test SMAPE 0.5" in refusal(smape)
    assert refusal(
        {"solver": "falkon", "error": "krrcore.memory.TimeLimitError: Refused before starting: ..."}
    ).startswith("refused by its own estimate: ")
    assert refusal({"solver": "gpytorch", "skipped": "needs 27 GiB"}) == "not run: needs 27 GiB"
    kept, notes = measured([_fit(), _fit(solver="rlaopt", label="PCG + Nyström (rlaopt)", mean_error=0.5)])
    assert kept == [_fit()]
    assert notes == [
        (
            "Left out of the tables — PCG + Nyström (rlaopt) at n = 30,000 (float32): its final test MSE "
            "0.8 is no better than predicting the mean (0.5): not a solution worth timing"
        )
    ]


def test_docs_page_shows_no_failure_as_a_result(tmp_path):
    """The stored full-system and QM9 results hold a fit with zero iterations, fits ending worse than
    the mean and refusals: the page leaves each out of its tables and says why."""
    from benchmarks.docs import page

    (tmp_path / "data").mkdir()
    for name in ("full_system", "qm9"):
        for suffix in (".json", ".machine.json"):
            source = ROOT / "docs" / "data" / f"{name}{suffix}"
            (tmp_path / "data" / f"{name}{suffix}").write_text(source.read_text())
    text = page(tmp_path)
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert not [row for row in rows if row.startswith("| NyströmPCG (krrcore) | 30,000 |")]
    assert not [row for row in rows if row.startswith("| CG (krrcore) | 60,000 |")]
    assert rows and any(row.startswith("| FALKON (krrcore) | 30,000 |") for row in rows)
    assert "Left out of the tables — NyströmPCG (krrcore) at n = 30,000 (float32): no iteration" in text
    assert "Left out of the tables — falkon at n = 10,000 (float32): refused by its own estimate" in text


def test_full_system_time_limit_leaves_room_for_the_slowest_set_up():
    assert cases_vs_peers.full_system_time_limit(30_000) >= 3 * 29.3  # NyströmPCG's set-up on a busy machine
    assert cases_vs_peers.full_system_time_limit(100_000) > cases_vs_peers.full_system_time_limit(60_000) > 90


def test_gpu_case_refuses_to_measure_without_cuda_and_shows_the_stored_run(monkeypatch, capsys):
    from benchmarks import bench_gpu

    monkeypatch.setattr(bench_gpu.torch.cuda, "is_available", lambda: False)
    rows = bench_gpu.measure(quick=False)
    assert rows and all(r["stored"] for r in rows)
    assert "refused to measure: no CUDA device on this machine" in capsys.readouterr().out
    tables, _, _ = bench_gpu.summarise(rows)
    assert all("compute floor s" in row and "memory floor s" in row for row in tables["summary"])


def test_gpu_pass_plan_runs_on_the_cpu_with_its_floors_beside_it():
    """The pass plan at --quick sizes on this machine's CPU: fused (blocked here), blocked, pykeops
    (or why not), and both floors of the pass, finite."""
    from benchmarks import bench_gpu

    row = bench_gpu.run_plan("pass-1e6-M5k-f32", bench_gpu.PLANS["pass-1e6-M5k-f32"], torch.device("cpu"), True, {})
    for key in ("fused_s", "blocked_s", "compute_floor_s", "memory_floor_s"):
        assert math.isfinite(row[key]) and row[key] > 0, key
    assert row["pykeops_note"] if math.isnan(row["pykeops_s"]) else row["pykeops_s"] > 0
    tables, _, _ = bench_gpu.summarise([{"plan": "machine", "device": "cpu"}, row])
    assert tables["summary"][0]["x compute floor"] == row["fused_s"] / row["compute_floor_s"]


def test_threads_case_limits_every_pool_and_summarises_medians_and_spread():
    """Two fits per cell at a tiny size, in this process: each pool held at the fit's thread count
    while it ran, and torch's own count given back afterwards."""
    from benchmarks import bench_threads

    before = torch.get_num_threads()
    cfg = {**bench_threads.CONFIG, **bench_threads.QUICK, "n": 1_500, "dtype": "float64", "budget": 64 * 2**20}
    fits = [bench_threads.fit_threads({**cfg, "threads": t, "repeat": r}) for t in (1, 2) for r in (0, 1)]
    assert torch.get_num_threads() == before
    assert all(f["iterations"] == cfg["maxiter"] and f["budget"] == "64 MiB" for f in fits)
    assert "×1" in fits[0]["pools"] and "×2" not in fits[0]["pools"]
    tables, _, notes = bench_threads.summarise(fits)
    rows = tables["summary"]
    assert [(r["threads"], r["fits"]) for r in rows] == [(1, 2), (2, 2)]
    for r in rows:
        assert r["min s"] <= r["median s"] <= r["max s"] and r["max / median"] >= 1
    assert rows[1]["speed-up vs 1 thread"] == rows[0]["median s"] / rows[1]["median s"]
    assert "thread pools in the fit's process" in notes[0]

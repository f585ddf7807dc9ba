"""``python -m benchmarks``: run the cases, print their tables, write CSV and plotly figures.

Output folder (``--out``, default ``benchmark-results/``, git-ignored), for each case NAME:

* ``NAME.json`` — the raw results (one dict per fit), so that a later ``--merge`` run at other
  ``--sizes`` adds to them and the tables and figures are drawn from all of them;
* ``NAME-TABLE.csv`` — each printed table, and ``NAME.md`` all of them in Markdown;
* ``NAME-FIGURE.html`` and ``NAME-FIGURE.png`` — each figure, the PNG exported by plotly's
  ``write_image`` (kaleido, which drives the Chrome/Chromium it finds: Debian's
  ``/usr/bin/chromium`` here; ``BROWSER_PATH`` points it elsewhere). Without one the PNGs, and
  the ``app`` case (it drives the app in Chromium), are skipped and the run says why;
* ``targets.csv`` — the performance targets beside the measured values, from every case's results
  in the folder, and ``machine.json`` — the machine, the date and the versions of the last run;
* ``NAME.machine.json`` — the same for the run that measured NAME.

``--docs [DIR]`` keeps each case's results in ``DIR/data/`` (default ``docs/``) and writes
``DIR/benchmarks.md`` from them (:mod:`benchmarks.docs`); alone, it measures nothing and takes the
results folder as it is; with ``--case``, ``--quick`` or ``--sizes`` it does so after measuring.

``--quick`` is a smoke run (small sizes, seconds per solver, every fit in this process rather
than a fresh one each): it checks that every case and peer runs; its figures are not measurements.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

from benchmarks.cases import CASES
from benchmarks.targets import targets
from benchmarks import common
from benchmarks.common import markdown_table, print_table
from benchmarks.docs import write_docs

DEFAULT_OUT = Path("benchmark-results")


def machine() -> dict:
    """Where and when: CPU, cores, memory, GPU, versions — printed and stored with every case."""
    import torch

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        with open("/proc/meminfo") as fh:
            mem = int(next(line.split()[1] for line in fh if line.startswith("MemTotal"))) / 2**20
    except (OSError, StopIteration):
        mem = math.nan
    versions = {"python": platform.python_version(), "torch": torch.__version__}
    for package in ("sklearn", "gpytorch", "rlaopt", "plotly", "kaleido"):
        try:
            from importlib.metadata import version

            versions[package] = version({"sklearn": "scikit-learn"}.get(package, package))
        except Exception:  # not installed: the case prints its own reason
            versions[package] = "not installed"
    gpu = {"gpu": torch.cuda.get_device_name(0)} if torch.cuda.is_available() else {}
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_GiB": round(mem, 1),
        **gpu,
        "torch_threads": torch.get_num_threads(),
        **versions,
    }


def _cell(value):
    if isinstance(value, float) and not math.isnan(value) and value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
        return f"{value:.4e}"
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def write_csv(path: Path, rows: list[dict]) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _cell(row.get(k, "")) for k in columns})


#: Why PNG export was skipped in this run (None while it works): kaleido renders with a
#: Chrome/Chromium; without one the CSV, Markdown and HTML are still written.
png_skipped: str | None = None


def write_figures(figures: dict[str, object], out: Path, prefix: str) -> list[Path]:
    """HTML (plotly.js inlined: opens offline) and PNG for each figure; the PNGs in one kaleido
    session, skipped (and said once) when kaleido or a browser is missing. Returns the paths written."""
    global png_skipped
    import plotly.io as pio

    paths = []
    for name, fig in figures.items():
        html = out / f"{prefix}-{name}.html"
        fig.write_html(html, include_plotlyjs=True)
        paths.append(html)
    if png_skipped or not figures:
        return paths
    pngs = [out / f"{prefix}-{name}.png" for name in figures]
    try:
        figs = list(figures.values())
        pio.write_images(
            figs, pngs, width=[f.layout.width or 900 for f in figs], height=[f.layout.height or 520 for f in figs]
        )
        paths += pngs
    except Exception as exc:  # kaleido missing or no Chrome: say so, keep the HTML
        first_line = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
        png_skipped = (
            f"{type(exc).__name__}: {first_line} ({common.find_chromium()[1]}); the figures are in the "
            f"HTML files. For PNGs: pip install kaleido, apt-get install chromium (or set BROWSER_PATH)"
        )
        print(f"# PNG export skipped — {png_skipped}", flush=True)
    return paths


def summarise_case(name: str, results: list[dict], out: Path) -> None:
    summary = CASES[name].summarise(results)
    markdown = [f"## {name}: {CASES[name].title}"]
    for table, rows in summary.tables.items():
        print_table(rows, f"{name}: {table}")
        write_csv(out / f"{name}-{table}.csv", rows)
        markdown += [f"### {table}", markdown_table(rows)]
    for note in summary.notes:
        print(f"# {note}")
    (out / f"{name}.md").write_text("\n\n".join(markdown + [f"- {note}" for note in summary.notes]) + "\n")
    write_figures(summary.figures, out, name)


def load_results(out: Path) -> dict[str, list[dict]]:
    return {name: json.loads((out / f"{name}.json").read_text()) for name in CASES if (out / f"{name}.json").exists()}


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    """Old results at sizes the new run did not measure, then the new ones."""
    sizes = {r.get("n") for r in new}
    return [r for r in old if r.get("n") not in sizes] + new


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="cases:\n" + "\n".join(f"  {c.name:20s} {c.title}" for c in CASES.values()),
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, checks that everything runs")
    parser.add_argument(
        "--case", nargs="+", choices=list(CASES), metavar="CASE", help="cases to run (default: all); see --list"
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"results folder (default {DEFAULT_OUT}/)")
    parser.add_argument(
        "--sizes",
        default=None,
        help="comma-separated n for the cases that take sizes (full_system, leverage, scaling; "
        "falkon_vs_nystroem and qm9 take the first)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the folder's earlier results at other sizes and draw from all of them",
    )
    parser.add_argument(
        "--summarise-only",
        action="store_true",
        help="measure nothing: redraw tables, figures and targets from the folder's results",
    )
    parser.add_argument(
        "--docs",
        type=Path,
        nargs="?",
        const=Path("docs"),
        default=None,
        metavar="DIR",
        help="keep the results folder's cases in DIR/data/ and write DIR/benchmarks.md from them (DIR: docs)",
    )
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse(argv)
    if args.list:
        for case in CASES.values():
            print(f"{case.name:20s} {case.title}")
        return 0
    out = args.out
    if args.docs and not (args.case or args.quick or args.sizes or args.summarise_only):
        write_docs(out, args.docs)  # --docs alone measures nothing: the results folder as it is
        return 0
    out.mkdir(parents=True, exist_ok=True)
    common.ISOLATE = not args.quick
    info = {**machine(), "quick": args.quick}
    print("# " + ", ".join(f"{k}: {v}" for k, v in info.items()), flush=True)
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else None
    previous = load_results(out)
    for name in args.case or list(CASES):
        if not args.summarise_only:
            print(f"\n# === {name}: {CASES[name].title}", flush=True)
            t0, load = time.perf_counter(), os.getloadavg()[0]
            results = CASES[name].measure(args.quick, sizes)
            if args.merge and name in previous:
                results = merge(previous[name], results)
            (out / f"{name}.json").write_text(json.dumps(results, indent=1, default=float))
            # The machine's load around the case: a busy machine stretches every timing in it alike.
            loads = {"load_average": [round(load, 1), round(os.getloadavg()[0], 1)]}
            elsewhere = None if args.quick else CASES[name].measured_on(results)
            (out / f"{name}.machine.json").write_text(json.dumps(elsewhere or {**info, **loads}, indent=1))
            print(f"# {name}: measured in {time.perf_counter() - t0:.0f} s", flush=True)
        if (out / f"{name}.json").exists():
            summarise_case(name, json.loads((out / f"{name}.json").read_text()), out)
    if not args.summarise_only:
        (out / "machine.json").write_text(json.dumps(info, indent=1))
    rows = targets(load_results(out))
    print_table(rows, "Targets, from every case's results in " + str(out))
    write_csv(out / "targets.csv", rows)
    (out / "targets.md").write_text(markdown_table(rows) + "\n")
    if args.docs:
        write_docs(out, args.docs)
    if png_skipped:
        print(f"\n# PNG export was skipped — {png_skipped}", flush=True)
    print(f"\n# results in {out.resolve()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

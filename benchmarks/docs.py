"""``python -m benchmarks --docs``: the results folder's cases kept in the repository and written out
as ``docs/benchmarks.md``.

Two steps, both in :func:`write_docs`:

1. **Store.** Every case with results in the results folder (``NAME.json``) is copied into
   ``DOCS/data/`` with the machine it ran on (``NAME.machine.json``), replacing that case's stored
   results — unless the new ones come from a ``--quick`` smoke run and the stored ones do not: a
   smoke run never replaces a measurement. The key figures (:data:`KEY_FIGURES`) and every other
   figure PNG the run exported are copied into ``DOCS/``.
2. **Write.** ``DOCS/benchmarks.md`` is drawn from ``DOCS/data/`` alone: the targets, then one
   section per stored case (in the suite's order) with its own machine line, its command, its
   figures and its tables. A case measured elsewhere — another machine, a GPU — is a pair of files
   in ``DOCS/data/``, rendered like the rest with the machine it names.

Only measurements reach a results table (:func:`measured`): a fit that failed, was refused or
skipped, did no iteration, or ended with a test error at or above the error of predicting the
mean is left out, and the case's notes say which and why in words.

The page is a pure function of ``DOCS/data/`` and the figure files present: writing it again from
the same files gives the same bytes. It carries no date (the product's text carries none; the
machine line says where a case ran, its command how to run it again).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from benchmarks.cases import CASES
from benchmarks.targets import targets
from benchmarks.common import markdown_table

#: Figures the README and docs/measurements.md show under names of their own; any other figure of
#: a case is ``bench-NAME-FIGURE.png``.
KEY_FIGURES = {
    "falkon_vs_nystroem-test_error_vs_seconds": "bench-falkon-vs-nystroem.png",
    "full_system-time_vs_n": "bench-full-system-time.png",
    "full_system-curves_largest_n": "bench-full-system-largest-n.png",
    "scaling-iteration_and_memory_vs_n": "bench-falkon-scaling.png",
    "qm9-smape_vs_seconds": "bench-qm9.png",
    "leverage-racc_and_time_vs_n": "bench-leverage.png",
    "app-app_vs_library": "bench-app.png",
}
PAGE = "benchmarks.md"
DATA = "data"

INTRO = """\
# Benchmarks

<!-- Written by `python -m benchmarks --docs` from docs/data/; edit benchmarks/docs.py, not this page. -->

`python -m benchmarks` runs every case side by side with the peers a user would pick instead and
writes its tables, CSV and plotly figures to `benchmark-results/`; `python -m benchmarks --docs`
then keeps each case's results in `docs/data/` (with the machine it ran on) and writes this page
from them. `--case NAME` runs some cases, `--sizes` with `--merge` measures a large case in parts,
`--quick` is a smoke run whose figures are not measurements, `--list` names the cases.

Each fit runs in a fresh process; peak memory is the process's resident high-water mark during the
fit (`krrcore.memory.PeakMemory`). Every iterative row carries **x floor**: its seconds per
iteration (per pass over K for the full system, per B block iterations for ASkotch) over the
**hardware floor**, one blocked pass K_nMᵀ(K_nM v) at the same n, M, d and dtype (distance GEMM +
exp + two mat-vecs, nothing cached; `benchmarks.common.hardware_floor`). An iteration can run below
the floor: krrcore keeps the rows of K_nM that fit its storage budget and reads them in later
iterations. Timings are measurements of one machine, never asserted by a test: compare ratios
within a case. Other measurements, each with its command: [measurements.md](measurements.md).
"""


#: Error metrics of a fit's ``points``, each lower-is-better.
ERRORS = ("test_mse", "smape")


def mean_error(result: dict) -> tuple[str, float] | None:
    """(metric, the error of predicting the training targets' mean) for a fit's result: its
    ``mean_error`` when the fit recorded one, else its error before the first iteration (zero
    coefficients: the prediction 0, the targets' mean where they are centred, as the HIGGS
    look-alike's ±1 labels nearly are), or None when neither is known."""
    points = result.get("points") or []
    metric = next((m for m in ERRORS if points and m in points[-1]), None)
    if metric is None:
        return None
    if isinstance(result.get("mean_error"), (int, float)):
        return metric, float(result["mean_error"])
    start = next((p for p in points if p.get("iteration") == 0 and metric in p), None)
    return (metric, float(start[metric])) if start else None


def refusal(result: dict) -> str | None:
    """Why ``result`` is not a measurement a results table may show (None when it is one)."""
    if "error" in result:
        message = str(result["error"])
        refused = "Refused before starting" in message or "LimitError" in message
        return ("refused by its own estimate: " if refused else "failed: ") + message
    if "skipped" in result:
        return f"not run: {result['skipped']}"
    if result.get("iterations") == 0:
        setup = result.get("setup_s")
        spent = f" (its set-up took {setup:.1f} s)" if isinstance(setup, (int, float)) and math.isfinite(setup) else ""
        return f"no iteration within its time limit{spent}: no solution was measured"
    baseline = mean_error(result)
    if baseline is not None:
        metric, mean = baseline
        final = result["points"][-1][metric]
        if not (isinstance(final, (int, float)) and math.isfinite(final)) or final >= mean:
            name = "test MSE" if metric == "test_mse" else "test SMAPE"
            return (
                f"its final {name} {final:.3g} is no better than predicting the mean ({mean:.3g}): "
                "not a solution worth timing"
            )
    return None


def measured(results: list[dict]) -> tuple[list[dict], list[str]]:
    """(the results that are measurements, a note for each one left out, saying why)."""
    kept, notes = [], []
    for r in results:
        why = refusal(r)
        if why is None:
            kept.append(r)
            continue
        where = f" at n = {r['n']:,}" if isinstance(r.get("n"), int) else ""
        what = r.get("label") or r.get("solver") or "a run"
        dtype = f" ({r['dtype']})" if r.get("dtype") else ""
        notes.append(f"Left out of the tables — {what}{where}{dtype}: {why}")
    return kept, notes


def figure_file(case: str, figure: str) -> str:
    key = f"{case}-{figure}"
    return KEY_FIGURES.get(key, f"bench-{key}.png")


def machine_line(machine: dict) -> str:
    """Where a case ran, in one line: CPU, cores, memory, GPU, versions and how busy the machine
    was — never when."""
    parts = [machine.get("cpu", "unknown CPU")]
    if machine.get("cores"):
        parts.append(f"{machine['cores']} cores")
    memory = machine.get("memory_GiB")
    if isinstance(memory, (int, float)) and math.isfinite(memory):
        parts.append(f"{memory:g} GiB")
    parts.append(machine.get("gpu") or "no GPU")
    versions = [
        f"{name} {machine[key]}" for key, name in (("python", "Python"), ("torch", "torch")) if machine.get(key)
    ]
    if machine.get("torch_threads"):
        versions[-1:] = [f"{versions[-1]} ({machine['torch_threads']} threads)"] if versions else []
    versions += [
        f"{name} {machine[key]}"
        for key, name in (("sklearn", "scikit-learn"), ("gpytorch", "GPyTorch"), ("rlaopt", "rlaopt"))
        if machine.get(key) not in (None, "not installed")
    ]
    load = machine.get("load_average")
    busy = [f"load average {load[0]:g} at the start of the case, {load[1]:g} at its end"] if load else []
    return ", ".join(parts + versions + busy)


def _load(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def store(out: Path, docs: Path) -> list[str]:
    """Copy the results folder's cases (and their figures) into ``docs``; returns what was done, a
    line each."""
    data = docs / DATA
    data.mkdir(parents=True, exist_ok=True)
    done = []
    run_machine = _load(out / "machine.json") or {}
    for name in CASES:
        results = out / f"{name}.json"
        if not results.exists():
            continue
        machine = _load(out / f"{name}.machine.json") or run_machine
        stored = _load(data / f"{name}.machine.json")
        if machine.get("quick") and stored is not None and not stored.get("quick"):
            done.append(f"{name}: kept the stored measurement (the results folder holds a --quick smoke run)")
            continue
        shutil.copyfile(results, data / f"{name}.json")
        (data / f"{name}.machine.json").write_text(json.dumps(machine, indent=1, sort_keys=True) + "\n")
        done.append(f"{name}: stored in {data}")
        for png in sorted(out.glob(f"{name}-*.png")):
            figure = png.stem[len(name) + 1 :]
            shutil.copyfile(png, docs / figure_file(name, figure))
    return done


def page(docs: Path) -> str:
    """The page, drawn from ``docs/data`` and the figure files in ``docs``."""
    data = docs / DATA
    stored = {name: _load(data / f"{name}.json") for name in CASES if (data / f"{name}.json").exists()}
    left_out = {}
    for name, results in stored.items():
        stored[name], left_out[name] = measured(results)
    parts = [INTRO]
    if not stored:
        parts.append("No results are stored yet: run `python -m benchmarks`, then `python -m benchmarks --docs`.\n")
        return "\n".join(parts)
    parts.append(
        "## Targets\n\nFrom every stored case's results (a target whose case is not stored says so):\n\n"
        + markdown_table(targets(stored))
        + "\n"
    )
    for name, results in stored.items():
        case, machine = CASES[name], _load(data / f"{name}.machine.json") or {}
        summary = case.summarise(results)
        command = f"python -m benchmarks --case {name}" + (" --quick" if machine.get("quick") else "")
        if case.sized:
            sizes = sorted({r["n"] for r in results if isinstance(r.get("n"), int)})
            command += f" --sizes {','.join(map(str, sizes))}" if sizes else ""
        lines = [f"## {name}: {case.title}", "", f"Measured with `{command}` on {machine_line(machine)}."]
        if machine.get("quick"):
            lines.append("A smoke run (`--quick`): it shows that the case runs; its figures are not measurements.")
        for figure, fig in summary.figures.items():
            if (docs / figure_file(name, figure)).exists():
                title = fig.layout.title.text or figure
                lines += ["", f"![{title}]({figure_file(name, figure)})"]
        for table, rows in summary.tables.items():
            if rows:
                lines += ["", f"### {name}: {table}", "", markdown_table(rows)]
        notes = summary.notes + left_out[name]
        if notes:
            lines += [""] + [f"- {note}" for note in notes]
        parts.append("\n".join(lines) + "\n")
    unknown = sorted(
        p.stem for p in data.glob("*.json") if not p.name.endswith(".machine.json") and p.stem not in CASES
    )
    if unknown:
        parts.append(
            "Stored results of cases this version of the suite does not know (not drawn): "
            + ", ".join(f"`{u}`" for u in unknown)
            + ".\n"
        )
    return "\n".join(parts)


def write_docs(out: Path, docs: Path) -> Path:
    """Store the results folder's cases in ``docs`` and write ``docs/benchmarks.md``; returns its path."""
    for line in store(out, docs):
        print(f"# {line}")
    path = docs / PAGE
    path.write_text(page(docs))
    print(f"# {path}")
    return path

"""The layers of krrcore, krr_app and the pages: nothing imports upward or in a circle, krrcore
never imports the app nor holds its job machinery, each app room imports only what its __init__
allows, and docs/architecture.md's module map is the code's.

The graph is read from the sources by tools/import_graph.py with ``ast``: imports inside functions
count too, so a lazy import cannot hide a cycle or an upward arrow. :data:`LAYERS` declares the
order; a module imports only from its own layer or the layers below.
"""

from __future__ import annotations

import ast
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "krrcore"
sys.path.insert(0, str(ROOT / "tools"))
import import_graph  # noqa: E402

#: The layers, bottom to top: (name, members). A member is a module, or ``pkg.*``: the package and
#: everything under it. Every module of the graph is listed once.
LAYERS = [
    (
        "krrcore: basics",
        (
            "krrcore._validation",
            "krrcore.device",
            "krrcore.stream",
            "krrcore.progress",
            "krrcore.metrics",
            "krrcore.cg",
            "krrcore.numbers",
        ),
    ),
    ("krrcore: kernels, linear algebra, memory", ("krrcore.kernels", "krrcore.linalg", "krrcore.memory")),
    (
        "krrcore: kernel products",
        ("krrcore.fused", "krrcore.ops", "krrcore.full_system", "krrcore.nystrom", "krrcore.preconditioner"),
    ),
    ("krrcore: where rows live", ("krrcore.rows",)),
    ("krrcore: centre sets", ("krrcore.center_set",)),
    ("krrcore: leverage scores", ("krrcore.leverage.*",)),
    ("krrcore: centre selection", ("krrcore.centers",)),
    ("krrcore: data sets", ("krrcore.datasets.*",)),
    ("krrcore: one problem on many machines", ("krrcore.distributed.*", "krrcore.sharded", "krrcore.cluster")),
    ("krrcore: solvers", ("krrcore.solvers.*",)),
    ("krrcore: registry, diagnostics and tuning", ("krrcore.registry", "krrcore.diagnostics.*", "krrcore.tuning.*")),
    ("krrcore: the package", ("krrcore",)),
    (
        "krr_app: settings and text",
        (
            "krr_app",
            "krr_app.cli",
            "krr_app.settings",
            "krr_app.text",
            "krr_app.explain",
            "krr_app.units",
            "krr_app.tiles",
        ),
    ),
    ("krr_app: figures", ("krr_app.charts.*",)),
    (
        "krr_app: jobs on workers",
        (
            "krr_app.jobs",
            "krr_app.jobs.spec",
            "krr_app.jobs.worker",
            "krr_app.jobs.surface",
            "krr_app.jobs.preload",
            "krr_app.jobs.lifecycle",
            "krr_app.jobs.server",
        ),
    ),
    ("krr_app: configurations", ("krr_app.jobs.config",)),
    (
        "krr_app: runs and the live channel",
        (
            "krr_app.jobs.engine",
            "krr_app.jobs.executor",
            "krr_app.jobs.run_status",
            "krr_app.jobs.live_api",
            "krr_app.jobs.runs",
        ),
    ),
    ("krr_app: teaching", ("krr_app.teaching.*",)),
    ("krr_app: page parts", ("krr_app.parts.*",)),
    ("the pages", ("app_pages.*", "app")),
]

GRAPH = import_graph.read_graph(ROOT)


def _imports_any(module: str, prefixes: tuple[str, ...]) -> list[str]:
    return sorted(i for i in GRAPH[module] if any(i == p or i.startswith(p + ".") for p in prefixes))


def test_no_import_cycle():
    found = import_graph.cycles(GRAPH)
    assert found == [], "import cycles: " + "; ".join(" -> ".join(c) for c in found)


def test_no_upward_import():
    assert import_graph.upward_imports(GRAPH, LAYERS) == []


def test_every_module_has_one_layer():
    assert [m for m in GRAPH if import_graph.layer_of(m, LAYERS) is None] == []
    members = [m for _, layer in LAYERS for m in layer]
    assert len(members) == len(set(members))


def test_the_checks_see_function_level_and_relative_imports(tmp_path):
    """A function-level ``from .solvers import base`` added to krrcore.ops is a cycle (the solvers
    import ops) and an upward import; ``from . import x`` resolves to the module x."""
    shutil.copytree(CORE, tmp_path / "krrcore", ignore=shutil.ignore_patterns("__pycache__"))
    ops = tmp_path / "krrcore" / "ops.py"
    ops.write_text(ops.read_text() + "\n\ndef _probe():\n    from .solvers import base\n    from . import rows\n")
    graph = import_graph.read_graph(tmp_path)
    assert {"krrcore.solvers.base", "krrcore.rows"} <= set(graph["krrcore.ops"])
    cycles = import_graph.cycles(graph)
    assert any("krrcore.ops" in c and "krrcore.solvers.base" in c for c in cycles), cycles
    upward = import_graph.upward_imports(graph, LAYERS)
    assert any(line.startswith("krrcore.ops -> krrcore.solvers.base (line") for line in upward), upward
    assert any(line.startswith("krrcore.ops -> krrcore.rows") for line in upward), upward


def test_distributed_is_reached_from_the_solvers_only():
    """Below the solvers nothing imports krrcore.distributed; the fit's choice is one function
    (solvers.base.distributed_backend), every other operation goes through krrcore.rows."""
    importers = sorted(
        m
        for m, targets in GRAPH.items()
        if any(t == "krrcore.distributed" or t.startswith("krrcore.distributed.") for t in targets)
        and not m.startswith("krrcore.distributed")
    )
    assert importers == [
        "krr_app.jobs.executor",
        "krr_app.jobs.preload",
        "krr_app.jobs.worker",
        "krrcore.cluster",
        "krrcore.sharded",
        "krrcore.solvers.base",
    ]
    text = "".join(p.read_text() for p in CORE.rglob("*.py") if "distributed" not in p.parts)
    assert re.findall(r"isinstance\([^)]*Sharded", text) == []


def test_sharded_rows_offer_every_operation_of_local_rows():
    from krrcore.distributed.rows import ShardedRows
    from krrcore.rows import LocalRows

    operations = {n for n, v in vars(LocalRows).items() if callable(v) and not n.startswith("_")}
    assert operations and operations <= set(vars(ShardedRows))
    assert ShardedRows.local is False and LocalRows.local is True


@pytest.mark.parametrize(
    "low, high",
    [
        ("krrcore.full_system", ("krrcore.solvers",)),
        ("krrcore.linalg", ("krrcore.solvers", "krrcore.full_system")),
        ("krrcore.center_set", ("krrcore.leverage", "krrcore.centers", "krrcore.solvers")),
        ("krrcore.memory", ("krrcore.ops", "krrcore.solvers", "krrcore.leverage")),
    ],
)
def test_low_layers_do_not_import_upward(low, high):
    assert _imports_any(low, high) == []


def test_leverage_builds_on_center_set_not_on_centers():
    for module in (m for m in GRAPH if m.startswith("krrcore.leverage")):
        assert _imports_any(module, ("krrcore.centers", "krrcore.solvers")) == [], module


def test_no_krrcore_module_imports_the_app():
    for module, imports in import_graph.all_imports(ROOT).items():
        if module.split(".")[0] == "krrcore":
            assert not [i for i in imports if i.split(".")[0] in ("streamlit", "krr_app", "plotly")], module


def test_architecture_module_map_matches_the_code():
    """docs/architecture.md's module map is what ``python tools/import_graph.py --write`` draws from
    the code: every module, its layer, its summary and its imports."""
    written = import_graph.written_map((ROOT / "docs" / "architecture.md").read_text())
    assert written == import_graph.module_map(GRAPH, LAYERS), "run: python tools/import_graph.py --write"


def test_center_selectors_are_a_static_table():
    import krrcore.centers as centers

    assert sorted(centers.CENTER_SELECTORS) == ["bless", "bless_r", "uniform"]
    text = (CORE / "centers.py").read_text() + "".join(p.read_text() for p in (CORE / "leverage").glob("*.py"))
    assert "CENTER_SELECTORS[" not in text.replace("return CENTER_SELECTORS[spec]()", "")  # no registration


def test_the_app_holds_no_linear_algebra():
    """krr_app and the pages keep widgets, charts, text and caching: every number comes from krrcore."""
    root = CORE.parent
    for path in [*(root / "krr_app").rglob("*.py"), *(root / "app_pages").rglob("*.py"), root / "app.py"]:
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                assert not any(n and (n == "torch" or n.startswith("torch.")) for n in names), path
        assert "linalg" not in text and ".eigh(" not in text and ".svd(" not in text, path


def test_no_benchmark_figures_in_docstrings():
    """Measured figures go stale in docstrings: they live in docs/, beside the command that measures them."""
    pattern = re.compile(r"[Mm]easured[^.]*?\d|\d×( fewer| faster| slower| too| the iterations)|\d–\d+(\.\d+)?×")
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                doc = ast.get_docstring(node) or ""
                if pattern.search(doc):
                    offenders.append(f"{path.relative_to(CORE)}:{getattr(node, 'name', 'module')}")
    from krrcore.registry import SOLVERS

    offenders += [f"registry:{key}" for key, info in SOLVERS.items() if pattern.search(info.description)]
    assert offenders == []


def test_readme_lists_every_app_setting():
    from krr_app import settings

    readme = (CORE.parent / "docs" / "serving.md").read_text()
    names = [n for n in vars(settings) if n.isupper()]
    missing = [n for n in names if f"| `{n}` |" not in readme]
    assert names and missing == []


ROOMS = ("charts", "jobs", "teaching", "parts")


def _room_rules(room: str) -> tuple[set[str], set[str]]:
    """(what the room's modules may import, what they never import) from its ``__init__`` docstring:
    the ````names```` after "May import:" and after "Never:"."""
    doc = ast.get_docstring(ast.parse((ROOT / "krr_app" / room / "__init__.py").read_text())) or ""
    allowed, _, never = doc.partition("May import:")[2].partition("Never:")
    return set(re.findall(r"``([\w.]+)``", allowed)), set(re.findall(r"``([\w.]+)``", never))


def _room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "krr_app":
        return None
    return parts[1] if len(parts) > 1 and parts[1] in ROOMS else "root"


@pytest.mark.parametrize("room", ROOMS)
def test_each_app_room_imports_only_what_its_docstring_allows(room):
    """A room's modules import krrcore, their own room, and what the room's ``__init__`` allows
    (``krr_app`` there means the root's modules: settings, text, explain, cli); nothing it forbids."""
    allowed, never = _room_rules(room)
    assert allowed, f"krr_app/{room}/__init__.py says what it may import"
    rooms_allowed = {
        "root" if name == "krr_app" else name.split(".")[1] for name in allowed if name.split(".")[0] == "krr_app"
    }
    externals = import_graph.all_imports(ROOT)
    offenders = []
    for module in (m for m in GRAPH if _room_of(m) == room):
        for target in GRAPH[module]:
            target_room = _room_of(target)
            if target_room is not None and target_room != room and target_room not in rooms_allowed:
                offenders.append(f"{module} -> {target}")
        offenders += [f"{module} -> {name}" for name in externals[module] if name.split(".")[0] in never]
    assert offenders == []


def test_the_root_of_the_app_imports_no_room():
    offenders = [
        f"{m} -> {t}" for m in GRAPH if _room_of(m) == "root" for t in GRAPH[m] if _room_of(t) not in (None, "root")
    ]
    assert offenders == []


def test_krrcore_holds_no_job_machinery():
    """The library keeps no front end's run pipeline: no Dask Event, Variable, Queue or pub/sub, no
    worker events or topics (they are krr_app.jobs'); importing krrcore loads no job module."""
    signalling = {"Event", "Variable", "Queue", "Pub", "Sub"}
    offenders = []
    for path in CORE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "distributed":
                offenders += [f"{path.name}: {a.name}" for a in node.names if a.name in signalling]
            if isinstance(node, ast.Attribute) and node.attr in ("log_event", "subscribe_topic", "get_events"):
                offenders.append(f"{path.name}: .{node.attr}")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "distributed"
                and node.attr in signalling
            ):
                offenders.append(f"{path.name}: distributed.{node.attr}")
    assert offenders == []
    import subprocess

    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import krrcore, sys; print(sorted(m for m in sys.modules "
            "if m.startswith(('krrcore', 'krr_app', 'distributed', 'streamlit'))))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    modules = ast.literal_eval(loaded)
    assert [m for m in modules if not m.startswith("krrcore")] == []
    assert [m for m in modules if re.search(r"remote|surface|worker_setup|topic|jobs", m)] == []

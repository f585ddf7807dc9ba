"""krrcore's layers: nothing imports upward or in a circle, and krrcore never imports the app.

Read from the sources with ``ast`` (imports inside functions count too), so a lazy import cannot
hide a cycle.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "krrcore"


def _module_name(path: Path) -> str:
    parts = path.relative_to(CORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


MODULES = {_module_name(p): _imports(p) for p in CORE.rglob("*.py")}


def _imports_any(module: str, prefixes: tuple[str, ...]) -> list[str]:
    return sorted(i for i in MODULES[module] if any(i == p or i.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("low, high", [
    ("krrcore.full_system", ("krrcore.solvers",)),
    ("krrcore.linalg", ("krrcore.solvers", "krrcore.full_system")),
    ("krrcore.center_set", ("krrcore.leverage", "krrcore.centers", "krrcore.solvers")),
    ("krrcore.memory", ("krrcore.ops", "krrcore.solvers", "krrcore.leverage")),
])
def test_low_layers_do_not_import_upward(low, high):
    assert _imports_any(low, high) == []


def test_leverage_builds_on_center_set_not_on_centers():
    for module in (m for m in MODULES if m.startswith("krrcore.leverage")):
        assert _imports_any(module, ("krrcore.centers", "krrcore.solvers")) == [], module


def test_no_krrcore_module_imports_the_app():
    for module, imports in MODULES.items():
        assert _imports_any(module, ("streamlit", "krr_app", "plotly")) == [], module


def test_center_selectors_are_a_static_table():
    import krrcore.centers as centers

    assert sorted(centers.CENTER_SELECTORS) == ["bless", "bless_r", "uniform"]
    text = (CORE / "centers.py").read_text() + "".join(p.read_text() for p in (CORE / "leverage").glob("*.py"))
    assert "CENTER_SELECTORS[" not in text.replace("return CENTER_SELECTORS[spec]()", "")   # no registration


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


def test_readme_module_map_matches_the_code():
    """Every row of the module tables in docs/architecture.md names a module that exists, and every public krrcore
    module and krr_app module has a row."""
    root = CORE.parent
    readme = (root / "docs" / "architecture.md").read_text()
    rows = {m for line in readme.splitlines() if line.startswith("| `krr")
            for m in re.findall(r"`(krr(?:core|_app)\.[\w.]+)`", line.split("|")[1])}
    assert rows
    for module in rows:
        path = root / module.replace(".", "/")
        assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), module
    for package in ("krrcore", "krr_app"):
        for path in (root / package).iterdir():
            name = path.stem if path.suffix == ".py" else path.name
            if name.startswith("_") or not (path.suffix == ".py" or (path / "__init__.py").is_file()):
                continue
            assert f"{package}.{name}" in rows, f"{package}.{name} has no row in docs/architecture.md's module map"


def test_readme_lists_every_app_setting():
    from krr_app import settings

    readme = (CORE.parent / "docs" / "serving.md").read_text()
    names = [n for n in vars(settings) if n.isupper()]
    missing = [n for n in names if f"| `{n}` |" not in readme]
    assert names and missing == []

"""The import graph of krrcore, krr_app and the app's pages, read from the code.

Every ``import`` statement counts, those inside functions included (read with ``ast``, so a lazy
import cannot hide an edge). ``from . import x`` and ``from .x import y`` resolve to the module
they load (``pkg.x``, or ``pkg.x.y`` when ``y`` is a module). Importing ``a.b`` also runs
``a/__init__.py``; like import-linter, the graph leaves out that implicit parent edge and keeps
only the modules a statement names.

``python tools/import_graph.py`` prints the graph as Mermaid text (``--dot`` as Graphviz DOT);
``--write`` puts the module map into docs/architecture.md between its markers, ``--check`` exits 1
when that map is out of date. tests/test_layers.py checks the same graph for cycles and upward
imports against its declared layers, and the map against the code.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Packages (folders) and scripts whose modules make up the graph.
PACKAGES = ("krrcore", "krr_app", "app_pages")
SCRIPTS = ("app.py",)
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAP_START, MAP_END = "<!-- module-map:start -->", "<!-- module-map:end -->"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the graph by dotted name (a package by its ``__init__``)."""
    files = {
        module_name(p, root): p
        for package in PACKAGES
        if (root / package).is_dir()
        for p in sorted((root / package).rglob("*.py"))
    }
    files.update({module_name(root / s, root): root / s for s in SCRIPTS if (root / s).is_file()})
    return files


def _resolve(name: str, modules) -> str | None:
    """The module of the graph a dotted name loads: itself, else its longest known prefix."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(path: Path, name: str, modules) -> dict[str, int]:
    """The modules of the graph that ``path`` (module ``name``) imports, each with the line of its
    first import statement."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target, line):
        target = _resolve(target, modules) if target else None
        if target and target != name:
            found.setdefault(target, line)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:  # ``from pkg import mod`` loads pkg.mod; ``from mod import f``, mod
                full = f"{target}.{alias.name}"
                add(full if full in modules else target, node.lineno)
    return found


def read_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module → {imported module of the graph: line}, for every module of the graph."""
    files = module_files(root)
    return {name: imports_of(path, name, files) for name, path in files.items()}


def all_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """module → every dotted name it imports, outside the graph too (``streamlit``, ``torch``)."""
    out = {}
    for name, path in module_files(root).items():
        names = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module)
        out[name] = names
    return out


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The import cycles: each strongly connected component of more than one module, as one cycle
    through it (Tarjan's algorithm, then a path back to its first module)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_cycle_through(graph, set(c), c[0]) for c in components]


def _cycle_through(graph, component: set[str], start: str) -> list[str]:
    """A shortest path start → … → start inside the component (breadth first)."""
    previous, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    path = [v]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if w in component and w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    return [start]


def layer_of(module: str, layers) -> int | None:
    """Position (bottom = 0) of the layer listing ``module``: by its name, or as ``pkg.*`` (the
    package ``pkg`` and everything under it); None when no layer lists it."""
    for position, (_, members) in enumerate(layers):
        for member in members:
            if member == module or (
                member.endswith(".*") and (module == member[:-2] or module.startswith(member[:-1]))
            ):
                return position
    return None


def upward_imports(graph, layers) -> list[str]:
    """Every import from a module to a module of a higher layer, as 'a -> b (line n)'."""
    out = []
    for module, targets in sorted(graph.items()):
        here = layer_of(module, layers)
        for target, line in sorted(targets.items()):
            there = layer_of(target, layers)
            if here is not None and there is not None and there > here:
                out.append(
                    f"{module} -> {target} (line {line}: layer '{layers[here][0]}' imports '{layers[there][0]}')"
                )
    return out


def _summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first.replace("|", "\\|")


def mermaid(graph, layers) -> str:
    """The graph as Mermaid text: one subgraph per layer, top layer first."""
    ids = {m: "m" + str(i) for i, m in enumerate(sorted(graph))}
    lines = ["flowchart TD"]
    for position in reversed(range(len(layers))):
        title = layers[position][0]
        members = [m for m in sorted(graph) if layer_of(m, layers) == position]
        if members:
            lines.append(f'  subgraph L{position}["{title}"]')
            lines += [f'    {ids[m]}["{m}"]' for m in members]
            lines.append("  end")
    for module in sorted(graph):
        lines += [f"  {ids[module]} --> {ids[t]}" for t in sorted(graph[module])]
    return "\n".join(lines)


def dot(graph) -> str:
    lines = ["digraph imports {", "  rankdir=BT;", "  node [shape=box, fontsize=10];"]
    for module in sorted(graph):
        lines.append(f'  "{module}";')
        lines += [f'  "{module}" -> "{t}";' for t in sorted(graph[module])]
    return "\n".join(lines + ["}"])


def layer_edges(graph, layers) -> set[tuple[int, int]]:
    """(a, b) for every pair of distinct layers where a module of layer a imports one of layer b."""
    edges = set()
    for module, targets in graph.items():
        here = layer_of(module, layers)
        for target in targets:
            there = layer_of(target, layers)
            if None not in (here, there) and here != there:
                edges.add((here, there))
    return edges


def module_map(graph, layers, root: Path = ROOT) -> str:
    """The module map of docs/architecture.md: the layers and which import which (Mermaid), then
    every layer from the top down with its modules and the first paragraph of their docstrings."""
    files = module_files(root)
    out = [
        "Generated from the code by `python tools/import_graph.py --write`; tests/test_layers.py checks that "
        "it is current, that nothing imports in a circle, and that a module imports only from its own layer "
        "or the layers below.",
        "",
        "```mermaid",
        "flowchart TD",
    ]
    used = sorted({layer_of(m, layers) for m in graph} - {None}, reverse=True)
    out += [f'  L{p}["{layers[p][0]}"]' for p in used]
    out += [f"  L{a} --> L{b}" for a, b in sorted(layer_edges(graph, layers), key=lambda e: (-e[0], -e[1]))]
    out += ["```", ""]
    for position in used:
        members = [m for m in sorted(graph) if layer_of(m, layers) == position]
        out += [f"### {layers[position][0]}", "", "| module | what it is |", "| --- | --- |"]
        out += [f"| `{m}` | {_summary(files[m])} |" for m in members]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def _declared_layers():
    sys.path.insert(0, str(ROOT / "tests"))
    from test_layers import LAYERS  # the layer order is declared once, where it is checked

    return LAYERS


def written_map(text: str) -> str | None:
    """The module map between the markers of docs/architecture.md's text, or None."""
    if MAP_START not in text or MAP_END not in text:
        return None
    return text.split(MAP_START, 1)[1].split(MAP_END, 1)[0].strip("\n") + "\n"


def write_map(path: Path, text_map: str) -> None:
    text = path.read_text()
    if written_map(text) is None:
        raise SystemExit(f"{path} has no {MAP_START} … {MAP_END} markers")
    head, rest = text.split(MAP_START, 1)
    tail = rest.split(MAP_END, 1)[1]
    path.write_text(f"{head}{MAP_START}\n{text_map}{MAP_END}{tail}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dot", action="store_true", help="print Graphviz DOT instead of Mermaid")
    parser.add_argument("--write", action="store_true", help="update the module map in docs/architecture.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/architecture.md's map is stale")
    args = parser.parse_args(argv)
    graph, layers = read_graph(), _declared_layers()
    if args.write or args.check:
        expected = module_map(graph, layers)
        if args.check:
            same = written_map(ARCHITECTURE.read_text()) == expected
            print("module map up to date" if same else "module map out of date: run tools/import_graph.py --write")
            return 0 if same else 1
        write_map(ARCHITECTURE, expected)
        return 0
    print(dot(graph) if args.dot else mermaid(graph, layers))
    found = cycles(graph)
    for cycle in found:
        print("cycle: " + " -> ".join(cycle), file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

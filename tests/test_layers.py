"""The house's shape, checked: imports point down the layers DESIGN.md lists, no module imports
itself back through others, and no file grows past what a reader takes in one sitting.

Imports are read from the source (``ast``): top-level and function-level imports alike, since a
deferred import is still a dependency, and ``importlib.import_module`` with a literal name.
The layer order is the order of the top-level entries in DESIGN.md's "Layers" block, so the map
and the code cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernel_ext", "widgets")
MAX_LINES = 400
# widgets/ is a package of its own next to kernel_ext/; the magics show its views, so it sits
# right under them. The package root (kernel_ext/__init__.py) is the lazy facade over everything.
WIDGETS_BELOW = "magics"
FACADE = "__init__"


def design_layers() -> list[str]:
    """Top-level entries of DESIGN.md's layer block, bottom first (``errors.py`` -> ``errors``)."""
    text = (ROOT / "DESIGN.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    names = [m.group(1) for m in re.finditer(r"^  ([A-Za-z_]+)(?:\.py|/)\s", block, re.MULTILINE)]
    order = [n for n in names if n != "__main__"] + ["__main__"]
    order.insert(order.index(WIDGETS_BELOW), "widgets")
    return [*order, FACADE]


def modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield ".".join(parts), path


def imported(path: Path, name: str, known: set[str]) -> Iterator[tuple[str, int]]:
    """Project modules ``path`` imports, with line numbers (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                targets = [node.args[0].value]
        for target in targets:
            while target and target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != name:
                yield target, node.lineno


def unit(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "widgets":
        return "widgets"
    return parts[1] if len(parts) > 1 else FACADE


GRAPH = {name: path for name, path in modules()}
EDGES = {name: sorted(set(imported(path, name, set(GRAPH)))) for name, path in GRAPH.items()}


def test_design_lists_every_top_level_unit():
    listed = set(design_layers())
    present = {unit(m) for m in GRAPH}
    assert present - listed == set(), f"units missing from DESIGN.md's layer block: {sorted(present - listed)}"


def test_imports_point_down_the_layers():
    order = {name: i for i, name in enumerate(design_layers())}
    upward = []
    for source, targets in EDGES.items():
        for target, line in targets:
            a, b = unit(source), unit(target)
            if a != b and order.get(b, -1) > order.get(a, -1):
                upward.append(f"{GRAPH[source].relative_to(ROOT)}:{line} imports {target} ({a} -> {b})")
    assert upward == [], "upward imports:\n" + "\n".join(upward)


# The sandbox's facade and its two subpackage facades are its public surface; frames is the wire
# format both sides of the boundary share (programs inside the sandbox import it directly).
SANDBOX_PUBLIC = {"kernel_ext.sandbox", "kernel_ext.sandbox.session", "kernel_ext.sandbox.shtools", "kernel_ext.sandbox.frames"}


def test_outside_the_sandbox_only_its_facades_are_imported():
    private = []
    for source, targets in EDGES.items():
        if source == "kernel_ext.sandbox" or source.startswith("kernel_ext.sandbox."):
            continue
        for target, line in targets:
            if target.startswith("kernel_ext.sandbox.") and target not in SANDBOX_PUBLIC:
                private.append(f"{GRAPH[source].relative_to(ROOT)}:{line} imports {target}")
    assert private == [], "imports past the sandbox's facade:\n" + "\n".join(private)


def test_no_import_cycle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target, _line in EDGES[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            visit(module)
    # A package facade that lazily exports its submodules is not a cycle of behaviour: drop the
    # facade -> submodule edges before judging (the lazy table is strings, but TYPE_CHECKING
    # imports in a facade would otherwise count).
    real = [c for c in cycles if not all(m == c[0] or m.startswith(c[0] + ".") for m in c)]
    assert real == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in real)


@pytest.mark.parametrize("name", sorted(GRAPH))
def test_no_file_over_the_limit(name):
    lines = GRAPH[name].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{GRAPH[name].relative_to(ROOT)} has {lines} lines (limit {MAX_LINES}): split it along a seam"


def test_the_walk_sees_deferred_relative_and_dynamic_imports(tmp_path):
    known = {"kernel_ext", "kernel_ext.a", "kernel_ext.a.b", "kernel_ext.c"}
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from . import b\n    import importlib\n    importlib.import_module('kernel_ext.c')\n"
                      "from kernel_ext.a.b import thing\n")
    found = {t for t, _ in imported(source, "kernel_ext.a.m", known)}
    assert found == {"kernel_ext.a.b", "kernel_ext.c"}

"""Hosting stands apart from the agent: server/, magics/ and hosting/ never import it.

Every module is parsed (``ast``), so an import inside a function, ``importlib.import_module``
or ``__import__`` with a literal name, and ``from kernel_ext import pipeline`` all count. The one
way hosting reaches a body is by name, in ``hosting/bodies.py``'s table, resolved when a run
starts; that table is checked to resolve here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AGENT = ("kernel_ext.pipeline", "kernel_ext.scenarios")  # what thinks: the orchestrator and authored bodies
ABOVE_HOSTING = ("kernel_ext.server", "kernel_ext.magics", "kernel_ext.cli", "kernel_ext.__main__")
RULES = {
    "kernel_ext/server": AGENT,
    "kernel_ext/magics": AGENT,
    "kernel_ext/hosting": AGENT + ABOVE_HOSTING,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """Every module name the source imports, wherever the import statement stands."""
    found: list[tuple[int, str]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]  # from kernel_ext import pipeline
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__"):
                found.append((node.lineno, node.args[0].value))
    return found


def violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        module = module_name(path)
        for line, name in imported_names(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return bad


@pytest.mark.parametrize("folder", sorted(RULES))
def test_hosting_and_its_front_ends_do_not_import_the_agent(folder):
    assert (ROOT / folder).is_dir()
    assert violations(folder, RULES[folder]) == []


@pytest.mark.parametrize("source", [
    "import kernel_ext.pipeline.orchestrator",
    "from kernel_ext.pipeline.generation import generate",
    "from kernel_ext import pipeline",
    "def later():\n    from kernel_ext.scenarios import side_effects_run",
    "import importlib\nimportlib.import_module('kernel_ext.pipeline.generation')",
    "from importlib import import_module\nimport_module('kernel_ext.pipeline')",
    "__import__('kernel_ext.pipeline.loop')",
    "from ..pipeline import loop",
])
def test_the_walk_sees_every_form_of_import(source):
    names = [name for _, name in imported_names(source, "kernel_ext.server.handlers")]
    assert any(name.startswith(AGENT) for name in names), names


def test_the_seam_names_a_body_for_every_kind():
    from kernel_ext.hosting.bodies import RUN_BODIES, body_factory
    from kernel_ext.hosting.requests import KINDS

    assert set(RUN_BODIES) == set(KINDS)
    for kind, target in RUN_BODIES.items():
        assert target.startswith(AGENT) and ":" in target
        assert callable(body_factory(kind))

"""A BESSER generator that can start a process is marked ``confined`` in our registry.

BESSER's SQL generator runs the generated ``sql_alchemy.py`` (the model's method bodies in it)
with ``subprocess``; its Django generator runs ``django-admin``. A target marked ``confined``
runs whole in a one-off sandbox (``generation/confined.py``); the others run in the host
process. This walk keeps the mark honest as BESSER changes: for every BESSER target of the
registry it reads the generator modules its ``produce`` imports, follows their imports within
``besser.generators`` (relative ones and package ``__init__`` files included), and scans each
as source (``ast``; nothing imported, nothing run) with the product walk's scanner
(``test_sec_spawn_walk.uses_in``: every spelling of a process start). A new BESSER release
that adds a process start to another generator fails here until that target is confined.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
from pathlib import Path

import pytest

from kernel_ext.generation.registry import ALL_TARGETS

from .test_sec_spawn_walk import uses_in

SCOPE = "besser.generators"


def _file_of(root: Path, dotted: str) -> Path | None:
    """The source file of ``dotted`` under the folder of package ``besser`` (``root``), never importing it."""
    parts = dotted.split(".")[1:]
    base = root.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


def _imports(tree: ast.Module, dotted: str, is_package: bool) -> set[str]:
    """Absolute names of the modules a module imports (``from X import Y``: X, and X.Y if a module)."""
    package = dotted if is_package else dotted.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def spawning_modules(roots: set[str], besser_dir: Path, scope: str = SCOPE) -> dict[str, list[str]]:
    """``{module: [process starts]}`` over ``roots`` and every ``scope`` module they reach."""
    seen: set[str] = set()
    todo = [r for r in roots if r.startswith(scope)]
    found: dict[str, list[str]] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path = _file_of(besser_dir, name)
        if path is None:  # a class or function imported from a module, not a module
            continue
        # Parents run first on import: their ``__init__`` is part of the generator's code.
        parent = name.rpartition(".")[0]
        if parent.startswith(scope):
            todo.append(parent)
        source = path.read_text(encoding="utf-8")
        uses = uses_in(source, name.replace(".", "/") + ("/__init__.py" if path.name == "__init__.py" else ".py"))
        if uses:
            found[name] = sorted({f"{u.callee} (line {u.line})" for u in uses})
        tree = ast.parse(source, filename=str(path))
        todo.extend(m for m in _imports(tree, name, path.name == "__init__.py") if m.startswith(scope) and m not in seen)
    return found


def _produce_imports(spec) -> set[str]:
    tree = ast.parse(inspect.cleandoc("\n" + inspect.getsource(spec.produce)))
    return {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}


def _besser_dir() -> Path:
    found = importlib.util.find_spec("besser")
    assert found is not None and found.origin, "BESSER is not installed"
    return Path(found.origin).parent


BESSER = [spec for spec in ALL_TARGETS if spec.kind == "besser"]


@pytest.mark.parametrize("spec", BESSER, ids=[s.name for s in BESSER])
def test_a_generator_that_can_start_a_process_is_confined(spec):
    roots = _produce_imports(spec)
    assert any(r.startswith(SCOPE) for r in roots), f"{spec.name}: produce imports no BESSER generator module: {roots}"
    spawns = spawning_modules(roots, _besser_dir())
    if spawns:
        assert spec.confined, (
            f"BESSER's {spec.label} generator can start processes, so target {spec.name!r} must be confined=True "
            f"(generation/targets.py):\n" + "\n".join(f"  {m}: {', '.join(u)}" for m, u in sorted(spawns.items())))


def test_the_walk_sees_the_known_process_starts():
    """BESSER 8.4.1's SQL and Django generators start processes; the walk must see both (it can fail).

    If a BESSER release drops them, this fails on purpose: revisit the ``confined`` marks."""
    by_name = {s.name: s for s in BESSER}
    for name in ("sql", "django"):
        assert spawning_modules(_produce_imports(by_name[name]), _besser_dir()), f"the walk missed {name}'s subprocess"
        assert by_name[name].confined


def test_the_walk_follows_imports_into_other_generator_modules(tmp_path):
    """A generator whose helper module (relative import, package ``__init__``, ``from pkg import mod``)
    starts a process is caught; one that starts none is not."""
    gen = tmp_path / "generators"
    for folder in ("a", "b", "c", "clean"):
        (gen / folder).mkdir(parents=True)
    (gen / "__init__.py").write_text("class GeneratorInterface: pass\n")
    (gen / "a" / "__init__.py").write_text("from .a_generator import *\n")
    (gen / "a" / "a_generator.py").write_text("from ..b import helpers\nclass AGenerator: pass\n")
    (gen / "b" / "__init__.py").write_text("")
    (gen / "b" / "helpers.py").write_text("import os as o\ndef go():\n    o.system('x')\n")
    (gen / "c" / "__init__.py").write_text("import subprocess\nRUN = subprocess.run\n")
    (gen / "c" / "c_generator.py").write_text("from besser.generators import GeneratorInterface\n")
    (gen / "clean" / "__init__.py").write_text("from besser.generators.clean.gen import G\n")
    (gen / "clean" / "gen.py").write_text("import json, os\nclass G:\n    def run(self):\n        os.makedirs('x')\n")
    assert set(spawning_modules({"besser.generators.a"}, tmp_path)) == {"besser.generators.b.helpers"}
    assert set(spawning_modules({"besser.generators.c.c_generator"}, tmp_path)) == {"besser.generators.c"}
    assert spawning_modules({"besser.generators.clean"}, tmp_path) == {}

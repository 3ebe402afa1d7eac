"""The host's trees are made one at a time with nothing running Python code in the middle.

CPython 3.11 counts the AST converter's depth per interpreter: when a collection runs Python code
(a gc callback, a finalizer) in the middle of a conversion and another thread converts a tree of
its own (the traceback module does for every line it underlines), the first one ends in
``SystemError: AST constructor recursion depth mismatch``. One of 30 runs at once failed so in CI.
"""

from __future__ import annotations

import ast
import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ext.pyparse import parse_source

ROOT = Path(__file__).resolve().parents[1] / "kernel_ext"
ENTRIES = ["parse_source", "compile_source(tree)", "compile_source(text)", "pysource.parse_statements"]

# Run in a child process: the neighbour thread would break pytest's own parsing too.
STRESS = r"""
import ast, gc, json, sys, threading, time
from kernel_ext.model.pysource import parse_statements
from kernel_ext.pyparse import compile_source, parse_source

SOURCE = "\n".join(f"def f{i}(a, b):\n    return [x * (a + b) for x in range({i}) if x % 2]" for i in range(300))
TREE_SOURCE = "x = [a for a in b]\n" * 400
made = {
    "parse_source": lambda: parse_source(SOURCE, "many.py"),
    "compile_source(tree)": lambda: compile_source(parse_source(TREE_SOURCE, "tree.py"), "tree.py"),
    "compile_source(text)": lambda: compile_source(SOURCE, "many.py"),
    "pysource.parse_statements": lambda: parse_statements(SOURCE, "model.py"),
}[sys.argv[1]]
stop = threading.Event()

def gives_the_gil_away(phase, info):  # as a finalizer or a gc callback in a busy server
    time.sleep(0)

def neighbour():  # as the traceback module, underlining a logged line
    while not stop.is_set():
        try:
            ast.parse("a.b(c)[d] + e * f(g)")
        except SystemError:
            pass

gc.callbacks.append(gives_the_gil_away)
thread = threading.Thread(target=neighbour, daemon=True)
thread.start()
failures = []
for _ in range(int(sys.argv[2])):
    try:
        made()
    except SystemError as exc:
        failures.append(str(exc))
stop.set()
thread.join()
print(json.dumps({"failures": failures, "collector_on": gc.isenabled()}))
"""


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_tree_made_while_another_thread_parses_is_never_a_system_error(entry):
    rounds = 40  # without the fix, about 38 of 40 failed here
    done = subprocess.run([sys.executable, "-c", STRESS, entry, str(rounds)], capture_output=True, text=True,
                          timeout=240, cwd=ROOT.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["failures"] == [], f"{len(result['failures'])} of {rounds}: {result['failures'][:2]}"
    assert result["collector_on"]


def test_the_collector_is_running_again_after_a_tree_and_after_a_refusal():
    assert gc.isenabled()
    parse_source("x = 1")
    with pytest.raises(SyntaxError):
        parse_source("x = (")
    assert gc.isenabled()


def _converts_a_tree(node: ast.AST) -> bool:
    """``ast.parse(...)``, or ``compile(...)`` given ``PyCF_ONLY_AST`` or a tree."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if name == "parse" and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "ast":
        return True
    return name == "compile" and not (isinstance(func, ast.Attribute) and func.attr == "compile" and
                                      isinstance(func.value, ast.Name) and func.value.id in {"re", "re2"})


def _held(tree: ast.Module) -> set[int]:
    """Line numbers of calls inside ``with one_tree_at_a_time():`` blocks."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call) and getattr(item.context_expr.func, "id", "") == "one_tree_at_a_time"
            for item in node.items
        ):
            for inner in ast.walk(node):
                if hasattr(inner, "lineno"):
                    lines.add(inner.lineno)
    return lines


def test_every_tree_the_host_process_makes_is_made_under_the_lock():
    sandboxed = {"tools/import_worker.py"}  # runs in the sandbox's own process, never in the server's
    loose: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in sandboxed:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        held = _held(tree)
        for node in ast.walk(tree):
            if _converts_a_tree(node) and node.lineno not in held:
                loose.append(f"{rel}:{node.lineno}")
    assert loose == [], "parse or compile outside pyparse.one_tree_at_a_time(): " + ", ".join(loose)

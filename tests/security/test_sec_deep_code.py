"""Deeply nested code is a named syntax refusal or finding, never an escaped RecursionError/MemoryError.

CPython answers some nestings (a hundred thousand ``-``, ``.b``, ``+1``, ``()``) with
``RecursionError`` or ``MemoryError`` rather than ``SyntaxError``; every parse of code the
host did not write goes through ``kernel_ext.pyparse``, which names them. Driven through the
Executor (the Python API), the ``python -m kernel_ext calls`` CLI, and the validation's source
checks; each case also asserts the workspace kept its files and nothing outside changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ext.validation.source_checks import static_findings

from .world import call, file_executor

REPO = Path(__file__).resolve().parents[2]
DEPTH = 100_000
SHAPES = {
    "parentheses": "x = " + "(" * DEPTH + ")" * DEPTH,
    "brackets": "x = " + "[" * DEPTH + "]" * DEPTH,
    "unary_minus": "x = " + "-" * DEPTH + "1",
    "attributes": "x = a" + ".b" * DEPTH,
    "additions": "x = 1" + "+1" * DEPTH,
    "calls": "x = f" + "()" * DEPTH,
}
ORIGINAL = "a = 1\n"


def cli(ws: Path, name: str, arguments: dict) -> dict:
    """``python -m kernel_ext calls`` with the call on stdin (200 KB does not fit in one argv string)."""
    argv = [sys.executable, "-m", "kernel_ext", "calls", "--workspace", str(ws), "--allow", "edit", "--approve", "yes", "-"]
    plan = json.dumps([{"name": name, "arguments": arguments}])
    proc = subprocess.run(argv, cwd=REPO, input=plan, capture_output=True, text=True, check=False, timeout=120)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    (out,) = json.loads(proc.stdout)
    return {"ok": out["ok"], "code": (out.get("error") or {}).get("code"), "observation": out["observation"]}


def api(ws: Path, name: str, arguments: dict) -> dict:
    result = call(file_executor(ws), name, **arguments)
    return {"ok": result.ok, "code": result.error.code if result.error else None, "observation": result.observation}


ENTRIES = {"api": api, "cli": cli}


@pytest.mark.parametrize("entry", list(ENTRIES))
@pytest.mark.parametrize("shape", list(SHAPES))
def test_deep_code_is_a_named_syntax_refusal(world, entry, shape):
    ws = world.ws
    (ws / "ok.py").write_text(ORIGINAL)
    (ws / "deep.py").write_text(SHAPES[shape] + "\n")
    before = sorted(p.name for p in ws.iterdir())
    drive = ENTRIES[entry]
    checked = drive(ws, "check_syntax", {"path": "deep.py"})
    edited = drive(ws, "modify_file", {"path": "ok.py", "old_text": "a = 1", "new_text": SHAPES[shape]})
    created = drive(ws, "write_file", {"path": "new_deep.py", "content": SHAPES[shape] + "\n"})
    for name, outcome in (("check_syntax", checked), ("modify_file", edited), ("write_file", created)):
        assert not outcome["ok"] and outcome["code"] == "syntax_error", (name, outcome)
        assert "internal" not in outcome["observation"].lower(), (name, outcome)
    assert (ws / "ok.py").read_text() == ORIGINAL and sorted(p.name for p in ws.iterdir()) == before
    assert world.unchanged()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_source_checks_report_deep_code_as_a_finding(world, shape):
    files = {"main.py": b"import deep\n", "deep.py": SHAPES[shape].encode()}
    findings = static_findings(files, "backend")
    deep = [f for f in findings if f.path == "backend/deep.py"]
    assert deep and all(f.severity == "blocker" and f.code == "syntax_error" for f in deep), findings
    assert "None" not in deep[0].message
    assert world.unchanged()

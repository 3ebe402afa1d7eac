"""What an earlier command of the persistent shell defined cannot change what a later name runs
unseen (red team 3): before each command the session drops aliases (``unalias -a``,
``expand_aliases`` off) and shell functions; a changed PATH (kept, as in a terminal) and a
definition the reset cannot drop (``readonly -f``) are said on every result and cap the rating
of ``sh_plan`` and ``run_command``'s approval card at ``unknown`` with a named reason.

Real bubblewrap, one shell for several calls: through ``python -m kernel_ext calls`` and through
the Python API (the Executor, with a recording approver for the card). Nothing outside the
workspace changes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace
from tests.shell_tools_fixtures import needs_bwrap

REPO = Path(__file__).resolve().parents[1]


def _run(command: str) -> dict:
    return {"name": "run_command", "arguments": {"command": command}}


def _plan(command: str) -> dict:
    return {"name": "sh_plan", "arguments": {"command": command}}


SHIM = "mkdir -p bin && printf '#!/bin/sh\\necho PWNED-PATH\\n' > bin/git && chmod +x bin/git && export PATH=$PWD/bin:$PATH"
CALLS = [
    _run("shopt -s expand_aliases; alias ls='echo PWNED-ALIAS'"), _plan("ls"), _run("ls"),              # 0-2 alias
    _run('eval "$(echo Y2F0KCkgeyBlY2hvIFBXTkVELUZOOyB9 | base64 -d)"'), _plan("cat README.md"),         # 3-4 function
    _run("cat README.md"),                                                                                # 5
    _run("cat() { echo PWNED-RO; }; readonly -f cat"), _plan("cat README.md"),                           # 6-7 readonly -f
    _run(SHIM), _plan("git status"), _run("git status"),                                                  # 8-10 PATH shim
]


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _via_cli(ws: Path) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "kernel_ext", "calls", "--workspace", str(ws), "--enable-shell",
                           "--allow", "shell", "--allow", "plan", "--approve", "yes", "-"], cwd=REPO,
                          input=json.dumps(CALLS), capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _via_api(ws: Path, cards: list) -> list[dict]:
    from kernel_ext.sandbox import shell_service_for_run

    ctx = ToolContext(services={"workspace": Workspace(ws)})
    shell = shell_service_for_run(ws, run_id="defs-api", enable=True)
    ctx.services["shell"] = shell

    def approve(request) -> bool:
        cards.append(request)
        return True

    executor = Executor(default_catalog(), ctx, policy=ExecutionPolicy.allowing(["shell", "plan"]), approver=approve)
    try:
        return [executor.execute_sync(ToolCall(f"d{i}", c["name"], c["arguments"])).model_dump(mode="json")
                for i, c in enumerate(CALLS)]
    finally:
        shell.close()


@needs_bwrap
@pytest.mark.parametrize("entry", ["cli", "api"])
def test_earlier_definitions_do_not_change_what_a_name_runs_unseen(tmp_path, entry):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("hello\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    cards: list = []
    results = _via_cli(ws) if entry == "cli" else _via_api(ws, cards)
    stdout = [(r.get("data") or {}).get("stdout", "") for r in results]
    plans = [(r.get("data") or {}) for r in results]
    assert all(r["ok"] for r in results), [r["observation"] for r in results if not r["ok"]]
    # an alias and a function are gone before the next command: the names run what they name
    assert "PWNED" not in stdout[2] and "README.md" in stdout[2]
    assert plans[1]["category"] == "read-only"
    assert stdout[5].strip() == "hello" and plans[4]["category"] == "read-only"
    # a readonly function cannot be dropped: it is named, and the plan is no longer read-only
    assert plans[7]["category"] == "unknown" and any("could not be dropped (cat)" in n for n in plans[7]["notes"])
    # a PATH shim is kept (as in a terminal) but named on every result and in the rating
    assert plans[9]["category"] == "unknown" and any("changed PATH" in n for n in plans[9]["notes"])
    assert any("changed PATH" in n for n in results[10]["data"]["notes"])
    if entry == "api":
        card = [c for c in cards if c.name == "run_command" and "git status" in c.proposal][-1]
        assert "risk: unknown" in card.proposal and "changed PATH" in card.proposal
        first = next(c for c in cards if c.name == "run_command")
        assert "changed PATH" not in first.proposal and "could not be dropped" not in first.proposal  # a fresh shell
    assert outside.read_text() == "keep\n"
    app = {k for k in _tree(ws) if not k.startswith(".besser")}  # the spill folder is internal
    assert app == {"README.md", "bin/git"} and (ws / "README.md").read_text() == "hello\n"

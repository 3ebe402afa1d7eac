"""The file tools from the command line: ``tool`` (one call) and ``calls`` (one run, many calls)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cli(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernel_ext", *argv], cwd=REPO, input=stdin, capture_output=True, check=False, text=True, timeout=120
    )


def test_read_file_from_the_command_line(tmp_path):
    (tmp_path / "x.py").write_text("a = 1\nb = 2\n")
    proc = run_cli("tool", "--workspace", str(tmp_path), "read_file", '{"path": "x.py"}')
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["ok"] and result["observation"].splitlines()[1:] == ["   1| a = 1", "   2| b = 2"]
    assert result["data"]["read_id"]


def test_edit_tools_from_the_command_line(tmp_path):
    (tmp_path / "x.py").write_text("a = 1\nb = 2\n")
    base = ("tool", "--workspace", str(tmp_path), "--allow", "edit", "--approve", "yes")
    modify = json.loads(run_cli(*base, "modify_file", json.dumps({"path": "x.py", "old_text": "b = 2", "new_text": "b = 3"})).stdout)
    assert modify["ok"], modify["observation"]
    create = json.loads(run_cli(*base, "write_file", json.dumps({"path": "pkg/y.py", "content": "Y = 1\n"})).stdout)
    assert create["ok"] and (tmp_path / "pkg" / "y.py").read_text() == "Y = 1\n"
    delete = json.loads(run_cli(*base, "delete_file", '{"path": "pkg/y.py"}').stdout)
    assert delete["ok"] and not (tmp_path / "pkg" / "y.py").exists()
    assert (tmp_path / "x.py").read_text() == "a = 1\nb = 3\n"
    denied = json.loads(run_cli("tool", "--workspace", str(tmp_path), "--allow", "edit", "write_file",
                                '{"path": "z.py", "content": "z = 1\\n"}').stdout)
    assert denied["error"]["code"] == "approval_denied" and not (tmp_path / "z.py").exists()


def test_read_then_replace_lines_in_one_run(tmp_path):
    (tmp_path / "x.py").write_text("a = 1\nb = 2\n")
    plan = [
        {"name": "read_file", "arguments": {"path": "x.py"}},
        {"name": "replace_file_lines", "arguments": {"path": "x.py", "read_id": "{{0.read_id}}", "start_line": 2, "end_line": 2, "new_text": "b = 20"}},
        {"name": "replace_file_lines", "arguments": {"path": "x.py", "read_id": "{{0.read_id}}", "start_line": 1, "end_line": 1, "new_text": "a = 10"}},
    ]
    proc = run_cli("calls", "--workspace", str(tmp_path), "--allow", "edit", "--approve", "yes", "-", stdin=json.dumps(plan))
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert [r["ok"] for r in results] == [True, True, False]
    assert results[2]["error"]["code"] == "read_id_spent"
    assert (tmp_path / "x.py").read_text() == "a = 1\nb = 20\n"

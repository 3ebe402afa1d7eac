"""``python -m kernel_ext tool``: one call through the Executor, result as JSON."""

from __future__ import annotations

import json
import subprocess
import sys


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_ext", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_unknown_tool_is_a_named_error_with_exit_zero(project):
    proc = cli("tool", "--workspace", str(project), "no_such_tool", "{}")
    assert proc.returncode == 0
    result = json.loads(proc.stdout)
    assert result["ok"] is False and result["error"]["code"] == "unknown_tool"


def test_usage_errors_exit_non_zero(project, tmp_path):
    assert cli("tool", "--workspace", str(tmp_path / "missing"), "x", "{}").returncode == 2
    assert cli("tool", "--workspace", str(project), "--allow", "everything", "x", "{}").returncode == 2
    assert cli("tool", "--workspace", str(project)).returncode == 2


def test_list_prints_provider_schemas(project):
    proc = cli("tool", "--workspace", str(project), "--list")
    assert proc.returncode == 0
    schemas = json.loads(proc.stdout)
    assert {"read_file", "replace_file_lines", "write_file"} <= {s["name"] for s in schemas}
    assert "run_command" not in {s["name"] for s in schemas}  # shell tools are never offered without the operator
    for schema in schemas:
        assert set(schema) == {"name", "description", "parameters"}
        assert schema["parameters"]["type"] == "object"

"""A run's own files (``workspace/internal.py``) from the command line: the spill folder and the
probe are readable and searchable, never changed by a file tool; a run_command id is readable
by ``sh_detail`` / ``sh_logs`` from another process (the record store outlives the call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernel_ext.workspace import COMMAND_OUTPUT_DIR, INTERNAL_NAMES, PROBE_FILE

REPO = Path(__file__).resolve().parents[1]
LOG = f"{COMMAND_OUTPUT_DIR}/cmd-20260101-120000-00001abcd.log"


def cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_ext", *argv], cwd=REPO, capture_output=True, check=False, text=True,
                          timeout=180, env={**os.environ, **(env or {})})


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("path", [LOG, PROBE_FILE])
def test_internal_files_are_read_and_searched_but_never_changed_by_a_tool(tmp_path, path):
    (tmp_path / COMMAND_OUTPUT_DIR).mkdir()
    (tmp_path / path).write_text("$ seq 3\nline one\nneedle = 1\n")
    before = tree(tmp_path)
    changes = [
        {"name": "write_file", "arguments": {"path": path, "content": "x = 1\n"}},
        {"name": "modify_file", "arguments": {"path": path, "old_text": "needle = 1", "new_text": "needle = 2"}},
        {"name": "replace_file_lines", "arguments": {"path": path, "start_line": 2, "end_line": 2, "new_text": "y\n",
                                                     "read_id": "{{0.read_id}}"}},
        {"name": "delete_file", "arguments": {"path": path}},
    ]
    calls = [{"name": "read_file", "arguments": {"path": path}},
             {"name": "search_in_files", "arguments": {"pattern": "needle", "path": path}}, *changes]
    proc = cli("calls", "--workspace", str(tmp_path), "--allow", "edit", "--approve", "yes", json.dumps(calls))
    assert proc.returncode == 0, proc.stderr
    read, search, *refused = json.loads(proc.stdout)
    assert read["ok"] and "needle = 1" in read["observation"], read
    assert search["ok"] and search["data"]["total"] == 1, search
    assert [r["error"]["code"] for r in refused] == ["protected_path"] * 4, refused
    assert tree(tmp_path) == before  # nothing changed on disk


def test_a_run_command_id_is_readable_by_sh_detail_and_sh_logs_in_another_process(tmp_path):
    env = {"BESSER_SHELL_STATE_DIR": str(tmp_path / "state")}
    work = tmp_path / "work"
    work.mkdir()
    base = ("tool", "--workspace", str(work), "--enable-shell")
    ran = json.loads(cli(*base, "--allow", "shell", "--approve", "yes", "run_command", '{"command": "seq 1 30000"}', env=env).stdout)
    record_id, spilled = ran["data"]["id"], ran["data"]["full_output_path"]
    assert ran["ok"] and spilled == f"{COMMAND_OUTPUT_DIR}/{record_id}.log" and f"sh_detail {record_id}" in ran["observation"]
    detail = json.loads(cli(*base, "sh_detail", json.dumps({"id": record_id, "match": "^29999$"}), env=env).stdout)
    assert detail["ok"] and detail["data"]["lines"] == ["29999: 29999"], detail
    logs = json.loads(cli(*base, "sh_logs", json.dumps({"id": record_id, "stream": "stdout", "stdout_cursor": 168894 - 12}), env=env).stdout)
    assert logs["ok"] and logs["data"]["status"] == "exited" and logs["data"]["stdout"].split() == ["29999", "30000"], logs
    unknown = json.loads(cli(*base, "sh_detail", '{"id": "cmd-20260101-120000-00001abcd"}', env=env).stdout)
    assert unknown["error"]["code"] == "unknown_command_id"


def test_one_list_of_internal_names_serves_every_tree_operation():
    from kernel_ext.generation.manifest import SKIPPED_DIRS
    from kernel_ext.pipeline.snapshots import SKIPPED
    from kernel_ext.sandbox.shtools.checkpoints import DEFAULT_SKIP
    from kernel_ext.sandbox.shtools.effects import SKIP
    from kernel_ext.server.archive import EXCLUDED_NAMES
    from kernel_ext.validation.staging import SKIP_DIRS

    for skipped in (SKIPPED_DIRS, SKIPPED, DEFAULT_SKIP, SKIP, EXCLUDED_NAMES, SKIP_DIRS):
        assert INTERNAL_NAMES <= skipped

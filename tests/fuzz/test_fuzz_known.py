"""Each failure the fuzzer once found, reproduced exactly: every row must now be a named refusal.

Named means the very code the fix gives (``REFUSAL``), not any answer: ``ok`` for a path of
1,000 bytes or a lone surrogate would be the bug coming back.

The rows were strict xfails while the failures were open (see ``known.py``); all are fixed,
so each row is a plain regression test. A new finding goes back in as a strict xfail naming
the module that must fix it.
"""

from __future__ import annotations

import pytest
from file_tool_helpers import tree_state

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall, always_approve
from kernel_ext.errors import ErrorCode
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

from .known import KNOWN

# The refusal each finding's fix gives: the fence and the boundary name bad text, the argument
# parser names JSON it will not parse, and nesting past the one depth bound (safejson.MAX_JSON_DEPTH).
REFUSAL = {
    "path_component_too_long": ErrorCode.INVALID_ARGUMENT,
    "lone_surrogate": ErrorCode.INVALID_ARGUMENT,
    "nul_in_a_folder": ErrorCode.INVALID_ARGUMENT,
    "integer_over_4300_digits": ErrorCode.INVALID_JSON,
    "deeply_nested_json": ErrorCode.ARGUMENTS_TOO_DEEP,
}
LONG = "0" * 1000  # one path component of 1,000 bytes (NAME_MAX is 255)
SURROGATE = "\ud800"  # what JSON "\ud800" decodes to
NUL = "a\x00b"


def row(tool: str, arguments, finding: str | None = None, label: str = "", code: ErrorCode | None = None):
    marks = [pytest.mark.xfail(strict=True, reason=KNOWN[finding][1])] if finding in KNOWN else []
    return pytest.param(tool, arguments, code or REFUSAL[finding], marks=marks, id=f"{tool}-{label or finding}")


def file_rows(path: str, finding: str, label: str):
    return [
        row("list_files", {"path": path}, finding, label),
        row("read_file", {"path": path}, finding, label),
        row("check_syntax", {"path": path}, finding, label),
        row("search_in_files", {"pattern": "x", "path": path}, finding, label),
        row("write_file", {"path": path, "content": ""}, finding, label),
        row("modify_file", {"path": path, "old_text": "a", "new_text": "b"}, finding, label),
        row("delete_file", {"path": path}, finding, label),
        row("replace_file_lines", {"path": path, "read_id": "r1", "start_line": 1, "end_line": 1, "new_text": "x"},
            finding, label),  # the path's text is refused before the unknown read id is looked up
    ]


ROWS = [
    *file_rows(LONG, "path_component_too_long", "long"),
    *file_rows(SURROGATE, "lone_surrogate", "surrogate"),
    row("search_in_files", {"pattern": SURROGATE}, "lone_surrogate", "surrogate-pattern"),
    row("run_command", {"command": "true", "working_dir": LONG}, "path_component_too_long"),
    row("run_command", {"command": "true", "working_dir": SURROGATE}, "lone_surrogate", "surrogate-dir"),
    row("run_command", {"command": "true " + SURROGATE}, "lone_surrogate", "surrogate-command"),
    row("run_command", {"command": "true", "working_dir": NUL}, "nul_in_a_folder"),
    row("sh_checkpoint", {"label": "x", "dir": LONG}, "path_component_too_long"),
    row("sh_checkpoint", {"label": "x", "dir": SURROGATE}, "lone_surrogate"),
    row("sh_checkpoint", {"label": "x", "dir": NUL}, "nul_in_a_folder"),
    row("sh_restore", {"label": "x", "dir": SURROGATE}, "lone_surrogate"),
    row("sh_restore", {"label": "x", "dir": NUL}, "nul_in_a_folder"),
    row("sh_run", {"command": "true", "cwd": LONG}, "path_component_too_long"),
    row("sh_run", {"command": "true", "cwd": SURROGATE}, "lone_surrogate"),
    row("sh_run", {"command": "true", "cwd": NUL}, "nul_in_a_folder"),
    row("read_file", "1" * 4301, "integer_over_4300_digits", "digits"),
    row("read_file", '{"path": ' + "9" * 5000 + "}", "integer_over_4300_digits", "digits-in-object"),
    row("read_file", "[" * 5000, "deeply_nested_json", "nested"),
    row("read_file", '{"path": ' + "[" * 5000 + "]" * 5000 + "}", "deeply_nested_json", "nested-in-object"),
]


@pytest.fixture
def executor(tmp_path):
    from kernel_ext.sandbox.config import ShellSettings
    from kernel_ext.sandbox.session.service import ShellService

    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "app.py").write_text("x = 1\n")
    shell = ShellService(ws, run_id="known", enabled=True, home=home,
                         settings=ShellSettings(session_network=False, allowed_programs=frozenset({"true"})))
    yield Executor(default_catalog(), ToolContext(services={"workspace": Workspace(ws), "shell": shell}),
                   policy=ExecutionPolicy.allowing(["read", "plan", "edit", "shell"]), approver=always_approve)
    shell.close()


@pytest.mark.parametrize(("tool", "arguments", "code"), ROWS)
def test_hostile_arguments_get_their_named_refusal(executor, tool, arguments, code):
    if tool not in default_catalog():
        pytest.skip(f"{tool} is not in this catalog")
    root = executor.context.workspace.roots[0]
    before = tree_state(root)
    result = executor.execute_sync(ToolCall("k1", tool, arguments))  # nothing may escape
    assert not result.ok, f"{tool} answered ok: {result.observation[:300]}"
    assert result.error.code == code, result.error
    assert tree_state(root) == before

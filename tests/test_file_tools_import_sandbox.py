"""The import check executes generated code, so it runs confined (F3's tier, network off)."""

from __future__ import annotations

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall, always_approve
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace


def test_a_module_being_checked_cannot_write_anywhere_real(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "escaped.txt"
    # Outside the project: whatever the sandbox lets it write lands in its private /tmp, never here.
    leaky = f"open({str(outside)!r}, 'w').write('escaped')\nVALUE = 1\n"
    ex = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(project)}),
                  policy=ExecutionPolicy.allowing([Category.EDIT]), approver=always_approve)
    ex.execute_sync(ToolCall("c1", "write_file", {"path": "models.py", "content": "X = 1\n"}))
    ex.execute_sync(ToolCall("c2", "write_file", {"path": "sql_alchemy.py", "content": leaky}))
    assert not outside.exists()
    # Inside the project: the checker sees it read-only, so a module that writes there fails to import.
    inside = f"open({str(project / 'planted.txt')!r}, 'w').write('planted')\nVALUE = 1\n"
    result = ex.execute_sync(ToolCall("c3", "write_file", {"path": "pydantic_classes.py", "content": inside}))
    assert not result.ok and result.error.code == "breaks_import"
    assert not (project / "planted.txt").exists() and not (project / "pydantic_classes.py").exists()


def test_a_guarded_module_that_stays_inside_is_accepted(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    ex = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(project)}),
                  policy=ExecutionPolicy.allowing([Category.EDIT]), approver=always_approve)
    result = ex.execute_sync(ToolCall("c1", "write_file", {"path": "sql_alchemy.py", "content": "import sqlalchemy\nVALUE = 1\n"}))
    assert result.ok, result.observation

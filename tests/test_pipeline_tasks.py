"""task_list rules, through the real Executor and the real file tools."""

from __future__ import annotations

import pytest

from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall, always_approve
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.tools.task_list import TaskList
from kernel_ext.workspace import Workspace


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "main.py").write_text("def health():\n    return {'ok': True}\n")
    tasks = TaskList()
    ctx = ToolContext(services={"workspace": Workspace(tmp_path), "task_list": tasks})
    ex = Executor(default_catalog(), ctx, policy=ExecutionPolicy.allowing([Category.EDIT, Category.PLAN]), approver=always_approve)
    counter = iter(range(1, 1000))

    def call(name, **arguments):
        return ex.execute_sync(ToolCall(f"c{next(counter)}", name, arguments))

    return tmp_path, tasks, call


def test_done_needs_evidence_of_a_write_of_this_run(setup):
    root, tasks, call = setup
    tasks.add("add an auth module", origin="request")
    refused = call("task_list", action="done", id="T1")
    assert refused.error.code == "evidence_required"
    not_written = call("task_list", action="done", id="T1", evidence=[{"id": "T1", "path": "main.py", "quote": "def health():"}])
    assert not_written.error.code == "evidence_not_written"
    assert call("write_file", path="auth.py", content="def login(user):\n    return user\n").ok
    wrong_quote = call("task_list", action="done", id="T1", evidence=[{"id": "T1", "path": "auth.py", "quote": "def logout():"}])
    assert wrong_quote.error.code == "evidence_not_found"
    comment = call("task_list", action="done", id="T1", evidence=[{"id": "T1", "path": "auth.py", "quote": "# nothing"}])
    assert comment.error.code in ("evidence_not_found", "evidence_not_code")
    ok = call("task_list", action="done", id="T1", evidence=[{"id": "T1", "path": "auth.py", "quote": "def login(user):"}])
    assert ok.ok and tasks.get("T1").status == "implemented"


def test_existing_needs_the_file_read_in_this_run(setup):
    root, tasks, call = setup
    tasks.add("a health endpoint", origin="request")
    evidence = [{"id": "T1", "path": "main.py", "quote": "return {'ok': True}"}]
    unread = call("task_list", action="done", id="T1", existing=True, evidence=evidence)
    assert unread.error.code == "evidence_not_read"
    assert call("read_file", path="main.py").ok
    ok = call("task_list", action="done", id="T1", existing=True, evidence=evidence)
    assert ok.ok and tasks.get("T1").status == "existing"


def test_blocked_needs_a_reason_and_a_later_check_clears_it(setup):
    root, tasks, call = setup
    state = {"passes": False}

    async def verifier():
        return state["passes"], "frontend files present" if state["passes"] else "no frontend files"

    tasks.add("build the frontend", origin="request", verifier=verifier)
    assert call("task_list", action="blocked", id="T1").error.code == "missing_argument"
    assert call("task_list", action="blocked", id="T1", reason="no node toolchain").ok
    assert tasks.get("T1").status == "blocked" and tasks.open_tasks()  # still required
    failed = call("task_list", action="done", id="T1")
    assert failed.ok and "check failed" in failed.observation and tasks.get("T1").status == "blocked"
    state["passes"] = True
    assert call("task_list", action="done", id="T1").ok
    assert tasks.get("T1").status == "verified" and not tasks.open_tasks()


def test_blocked_takes_items_each_with_its_reason(setup):
    """action=blocked reads the ``blocked`` items its schema offers (the eval's oracle path), one call."""
    _root, tasks, call = setup
    tasks.add("a", origin="request")
    tasks.add("b", origin="request")
    assert call("task_list", action="blocked").error.code == "missing_argument"
    assert call("task_list", action="blocked", blocked=[{"id": "T1", "reason": "no loan dates in the model"},
                                                        {"id": "T2", "reason": "needs a key"}]).ok
    assert [(t.status, t.reason) for t in tasks.tasks.values()] == [("blocked", "no loan dates in the model"),
                                                                     ("blocked", "needs a key")]


def test_a_verifier_exception_is_a_failed_check(setup):
    root, tasks, call = setup

    def broken():
        raise RuntimeError("checker crashed")

    tasks.add("x", origin="request", verifier=broken)
    result = call("task_list", action="done", id="T1")
    assert "check failed" in result.observation and "RuntimeError" in result.observation
    assert tasks.get("T1").status == "open"


def test_drop_only_work_outside_the_request(setup):
    root, tasks, call = setup
    tasks.add("from the plan", origin="request")
    assert call("task_list", action="add", text="polish the README").ok
    assert call("task_list", action="drop", id="T1", reason="too hard").error.code == "task_required"
    assert call("task_list", action="drop", id="T2", reason="not asked for").ok
    assert tasks.get("T1").status == "open" and tasks.get("T2").status == "dropped"


def test_mixed_and_unknown_ids(setup):
    root, tasks, call = setup
    result = call("task_list", action="mixed", add_texts=["a", "b"], blocked=[{"id": "T1", "reason": "waiting"}])
    assert result.ok and tasks.get("T1").status == "blocked" and tasks.get("T2").status == "open"
    assert call("task_list", action="done", id="T9").error.code == "unknown_task"


def test_written_lines_carry_through_later_edits_and_outside_changes_are_named(setup):
    root, tasks, call = setup
    tasks.add("auth", origin="request")
    cite = lambda quote, path="auth.py": call("task_list", action="done", id="T1",  # noqa: E731
                                              evidence=[{"id": "T1", "path": path, "quote": quote}])
    assert call("write_file", path="auth.py", content="def login(user):\n    return user\n\n\ndef who():\n    return 1\n").ok
    assert call("modify_file", path="auth.py", old_text="return 1", new_text="return 2").ok
    assert cite("def login(user):").ok  # written by the first write, carried through the second
    assert call("modify_file", path="main.py", old_text="return {'ok': True}", new_text="return {'ok': 1}").ok
    refused = cite("def health():", "main.py")
    assert refused.error.code == "evidence_untouched"
    assert cite("return {'ok': 1}", "main.py").ok
    (root / "auth.py").write_text("def login(user):\n    return user\n\n\ndef who():\n    return 3\n")  # not through the tools
    assert cite("return 3").error.code == "evidence_untouched"
    assert call("delete_file", path="auth.py").ok
    assert call("write_file", path="auth.py", content="def login(user):\n    return user\n").ok
    assert cite("return user").ok  # a file created again is all written by this run

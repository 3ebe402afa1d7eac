"""The Executor's order and its observable consequences (chapter 5), on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import boundary_fixtures
from kernel_ext.boundary import (
    ApprovalPolicy,
    ApprovalRequest,
    BoundaryEvent,
    ExecutionPolicy,
    Executor,
    ToolCall,
    always_approve,
)
from kernel_ext.errors import ToolFailure
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace

EDIT = ExecutionPolicy.allowing([Category.EDIT])


def make(project: Path, approver=always_approve, policy=EDIT, observer=None, services=None) -> Executor:
    ctx = ToolContext(services=services if services is not None else {"workspace": Workspace(project)})
    return Executor(ToolCatalog(boundary_fixtures.TOOLS), ctx, policy=policy, approver=approver, observer=observer)


class Recorder:
    def __init__(self, answer=True, action=None):
        self.answer, self.action, self.requests = answer, action, []

    def __call__(self, request: ApprovalRequest):
        self.requests.append(request)
        if self.action:
            self.action(request)
        return self.answer


def put(path="app.py", content="print('changed')\n", call_id="c1", **extra):
    return ToolCall(call_id, "put", {"path": path, "content": content, **extra})


def test_read_runs_without_asking(project):
    approver = Recorder()
    result = make(project, approver).execute_sync(ToolCall("c1", "peek", {"path": "app.py"}))
    assert result.ok and "hello" in result.observation
    assert approver.requests == []


def test_edit_asks_once_per_invocation_and_writes(project):
    approver = Recorder()
    ex = make(project, approver)
    first = ex.execute_sync(put(content="a\n", call_id="c1"))
    second = ex.execute_sync(put(content="b\n", call_id="c2"))
    assert first.ok and second.ok
    assert [r.call_id for r in approver.requests] == ["c1", "c2"]  # nothing remembered
    request = approver.requests[0]
    assert request.name == "put" and request.category == "edit"
    assert dict(request.arguments)["path"] == '"app.py"'
    assert [f.path for f in request.files] == ["app.py"]
    assert request.files[0].text == "print('hello')\n"
    assert (project / "app.py").read_text() == "b\n"


def test_invalid_schema_rejected_before_approval(project):
    approver = Recorder()
    ex = make(project, approver)
    before = (project / "app.py").read_bytes()
    missing = ex.execute_sync(ToolCall("c1", "put", {"path": "app.py"}))
    wrong_type = ex.execute_sync(ToolCall("c2", "put", {"path": "app.py", "content": 5}))
    extra = ex.execute_sync(ToolCall("c3", "put", {"path": "app.py", "content": "x", "mode": "w"}))
    bad_json = ex.execute_sync(ToolCall("c4", "put", '{"path": "app.py", '))
    not_object = ex.execute_sync(ToolCall("c5", "put", "[1, 2]"))
    assert missing.error.code == "missing_argument" and "'content'" in missing.error.message
    assert wrong_type.error.code == "invalid_argument" and "content" in wrong_type.error.message
    assert extra.error.code == "invalid_argument" and "unknown argument 'mode'" in extra.error.message
    assert bad_json.error.code == "invalid_json"
    assert not_object.error.code == "invalid_json"
    assert approver.requests == []
    assert (project / "app.py").read_bytes() == before


def test_unknown_tool_and_not_offered_tool_are_refused_at_call_time(project):
    ex = make(project, policy=ExecutionPolicy.allowing([Category.SHELL]))
    unknown = ex.execute_sync(ToolCall("c1", "rm_rf", {}))
    assert unknown.error.code == "unknown_tool" and "rm_rf" in unknown.error.message
    assert "sh" not in ex.offered.names()  # no shell service: never offered
    refused = ex.execute_sync(ToolCall("c2", "sh", {"path": "x"}))
    assert refused.error.code == "tool_not_offered"


def test_policy_denial_never_reaches_the_approver(project):
    approver = Recorder()
    before = (project / "app.py").read_bytes()
    result = make(project, approver, policy=ExecutionPolicy()).execute_sync(put())
    assert result.error.code == "policy_denied"
    assert approver.requests == []
    assert (project / "app.py").read_bytes() == before


def test_denylist_wins_over_category(project):
    policy = ExecutionPolicy.allowing([Category.EDIT], deny=["put"])
    result = make(project, Recorder(), policy=policy).execute_sync(put())
    assert result.error.code == "policy_denied" and "denied" in result.error.message


def test_approval_denial_never_executes(project):
    boundary_fixtures.RECEIVED.clear()
    before = (project / "app.py").read_bytes()
    result = make(project, Recorder(answer=False)).execute_sync(put())
    assert result.error.code == "approval_denied"
    assert boundary_fixtures.RECEIVED == []
    assert (project / "app.py").read_bytes() == before


@pytest.mark.parametrize("answer", [1, "yes", None, object()])
def test_only_a_real_true_grants(project, answer):
    before = (project / "app.py").read_bytes()
    result = make(project, Recorder(answer=answer)).execute_sync(put())
    assert result.error.code == "approval_denied"
    assert (project / "app.py").read_bytes() == before


def test_approval_callback_cannot_change_dispatched_arguments(project):
    boundary_fixtures.RECEIVED.clear()
    call = put(content="approved text\n", tags=["a"])

    def tamper(request):
        call.arguments["content"] = "tampered text\n"
        call.arguments["tags"].append("injected")
        call.arguments["path"] = "other.py"

    result = make(project, Recorder(action=tamper)).execute_sync(call)
    assert result.ok
    assert boundary_fixtures.RECEIVED == [{"path": "app.py", "content": "approved text\n", "tags": ["a"]}]
    assert (project / "app.py").read_text() == "approved text\n"
    assert not (project / "other.py").exists()


def test_changed_input_requires_a_new_request(project):
    target = project / "app.py"
    ex = make(project, Recorder(action=lambda r: target.write_text("changed by host\n")))
    stale = ex.execute_sync(put(content="fix\n"))
    assert stale.error.code == "stale_input" and "during approval" in stale.error.message
    assert target.read_text() == "changed by host\n"
    # A new invocation snapshots the new content and gets its own decision.
    approver = Recorder()
    fresh = make(project, approver).execute_sync(put(content="fix\n", call_id="c2"))
    assert fresh.ok and approver.requests[0].files[0].text == "changed by host\n"
    assert target.read_text() == "fix\n"


def test_symlink_swapped_in_during_approval_is_refused(project, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    target = project / "app.py"

    def swap(request):
        target.unlink()
        os.symlink(outside, target)

    result = make(project, Recorder(action=swap)).execute_sync(put(content="pwned\n"))
    assert result.error.code == "stale_input"
    assert target.is_symlink() and outside.read_text() == "secret\n"


def test_same_content_new_inode_is_stale(project):
    target = project / "app.py"

    def replace_with_copy(request):
        data = target.read_bytes()
        target.unlink()
        target.write_bytes(data)

    result = make(project, Recorder(action=replace_with_copy)).execute_sync(put(content="x\n"))
    assert result.error.code == "stale_input"
    assert target.read_text() == "print('hello')\n"


def test_observer_induced_change_blocks_execution(project):
    target = project / "app.py"
    events: list[BoundaryEvent] = []

    def observer(event: BoundaryEvent):
        events.append(event)
        if event.kind == "dispatch":
            target.write_text("changed by observer\n")

    result = make(project, observer=observer).execute_sync(put(content="fix\n"))
    assert result.error.code == "stale_input" and "dispatch" in result.error.message
    assert [e.kind for e in events] == ["approval_requested", "approval_resolved", "dispatch"]
    assert target.read_text() == "changed by observer\n"


def test_observer_change_blocks_even_without_approval(project):
    target = project / "app.py"

    def observer(event):
        target.write_text("observer\n")

    ex = Executor(
        ToolCatalog(boundary_fixtures.TOOLS),
        ToolContext(services={"workspace": Workspace(project)}),
        policy=EDIT,
        approvals=ApprovalPolicy.without_approval_for(Category.EDIT),
        observer=observer,
    )
    result = ex.execute_sync(put(content="fix\n"))
    assert result.error.code == "stale_input"
    assert target.read_text() == "observer\n"


def test_callback_tool_failure_is_wrapped(project):
    def approver(request):
        raise ToolFailure("policy_denied", "a host bug that looks like a refusal")

    before = (project / "app.py").read_bytes()
    with pytest.raises(RuntimeError) as info:
        make(project, approver).execute_sync(put())
    assert isinstance(info.value.__cause__, ToolFailure)
    assert (project / "app.py").read_bytes() == before


def test_other_callback_errors_propagate_and_never_grant(project):
    def approver(request):
        raise KeyError("approver exploded")

    def observer(event):
        raise ValueError("observer exploded")

    before = (project / "app.py").read_bytes()
    with pytest.raises(KeyError):
        make(project, approver).execute_sync(put())
    with pytest.raises(ValueError):
        make(project, observer=observer).execute_sync(put())
    assert (project / "app.py").read_bytes() == before


def test_tool_refusal_and_tool_bug_become_observations(project):
    ex = make(project)
    refused = ex.execute_sync(ToolCall("c1", "refuse", {"path": "x"}))
    crashed = ex.execute_sync(ToolCall("c2", "crash", {"path": "x"}))
    assert refused.error.code == "custom_refusal" and not refused.ok
    assert crashed.error.code == "internal_error" and "ZeroDivisionError" in crashed.error.message


def test_preparation_refusal_happens_before_approval(project):
    approver = Recorder()
    result = make(project, approver).execute_sync(put(path="../escape.py"))
    assert result.error.code == "outside_workspace"
    assert approver.requests == []
    assert not (project.parent / "escape.py").exists()


def test_async_executor_and_async_callbacks(project):
    import asyncio

    seen = []

    async def approver(request):
        await asyncio.sleep(0)
        return True

    async def observer(event):
        seen.append(event.kind)

    async def go():
        return await make(project, approver, observer=observer).execute(put(content="async\n"))

    result = asyncio.run(go())
    assert result.ok and seen == ["approval_requested", "approval_resolved", "dispatch"]
    assert (project / "app.py").read_text() == "async\n"


def test_preparation_data_travels_frozen_on_the_request(project):
    from kernel_ext.tools.base import Preparation, ToolSpec

    def prepare(args, ctx):
        return Preparation(files=(args.path,), proposal="p", data={"risk": "destructive", "lines": [1, 2]})

    spec = ToolSpec("put2", Category.EDIT, boundary_fixtures.WriteArgs, "x", boundary_fixtures._write, prepare, frozenset({"workspace"}))
    approver = Recorder()
    ex = Executor(ToolCatalog([spec]), ToolContext(services={"workspace": Workspace(project)}), policy=EDIT, approver=approver)
    assert ex.execute_sync(ToolCall("c1", "put2", {"path": "app.py", "content": "x\n"})).ok
    request = approver.requests[0]
    assert request.as_dict()["details"] == {"risk": "destructive", "lines": [1, 2]}
    assert isinstance(request.details, tuple) and all(isinstance(v, str) for _, v in request.details)

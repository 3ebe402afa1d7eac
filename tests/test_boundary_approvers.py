"""Approvers: scripted, and the async approver the Jupyter card resolves."""

from __future__ import annotations

import asyncio

import pytest

import boundary_fixtures
from kernel_ext.boundary import AsyncApprover, ExecutionPolicy, Executor, ScriptedApprover, ToolCall
from kernel_ext.tools.base import Category, ToolContext
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace


def executor(project, approver):
    ctx = ToolContext(services={"workspace": Workspace(project)})
    return Executor(
        ToolCatalog(boundary_fixtures.TOOLS), ctx, policy=ExecutionPolicy.allowing([Category.EDIT]), approver=approver
    )


def put(call_id, content):
    return ToolCall(call_id, "put", {"path": "app.py", "content": content})


def test_scripted_approver_answers_in_order_then_denies(project):
    approver = ScriptedApprover([True, False])
    ex = executor(project, approver)
    results = [ex.execute_sync(put(f"c{i}", f"{i}\n")) for i in range(3)]
    assert [r.ok for r in results] == [True, False, False]
    assert [r.call_id for r in approver.seen] == ["c0", "c1", "c2"]
    assert (project / "app.py").read_text() == "0\n"


async def test_async_approver_waits_for_a_decision(project):
    cards = []
    approver = AsyncApprover(on_request=cards.append)
    task = asyncio.create_task(executor(project, approver).execute(put("c1", "approved\n")))
    while not approver.pending():
        await asyncio.sleep(0.001)
    assert [c.call_id for c in cards] == ["c1"]
    assert (project / "app.py").read_text() == "print('hello')\n"  # nothing before the click
    assert approver.resolve("c1", True)
    result = await task
    assert result.ok and (project / "app.py").read_text() == "approved\n"
    assert not approver.resolve("c1", False)  # a second decision is refused


async def test_async_approver_deny_and_unknown_call(project):
    approver = AsyncApprover()
    assert not approver.resolve("nope", True)
    task = asyncio.create_task(executor(project, approver).execute(put("c1", "x\n")))
    while not approver.pending():
        await asyncio.sleep(0.001)
    approver.resolve("c1", False)
    result = await task
    assert result.error.code == "approval_denied"
    assert (project / "app.py").read_text() == "print('hello')\n"


async def test_async_approver_timeout_counts_as_denial(project):
    approver = AsyncApprover(timeout=0.05)
    result = await executor(project, approver).execute(put("c1", "x\n"))
    assert result.error.code == "approval_denied"
    assert approver.decided["c1"] is False and approver.pending() == ()
    assert (project / "app.py").read_text() == "print('hello')\n"


async def test_cancelling_the_run_cancels_the_pending_request(project):
    approver = AsyncApprover()
    task = asyncio.create_task(executor(project, approver).execute(put("c1", "x\n")))
    while not approver.pending():
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert approver.pending() == ()
    assert not approver.resolve("c1", True)
    assert (project / "app.py").read_text() == "print('hello')\n"


def test_a_denial_names_who_decided():
    """Issue 31, item 10: a person's "no" is theirs, an expired card nobody's, never "the host did not approve"."""
    from kernel_ext.boundary.approval import denial_words

    assert denial_words("modify_file", "terminal") == "the person denied 'modify_file' at the terminal; nothing ran"
    assert denial_words("modify_file", "card") == "the person denied 'modify_file' on its card; nothing ran"
    assert denial_words("test_api", "timeout") == "nobody answered the card for 'test_api' before it expired; nothing ran"
    assert denial_words("x", "duplicate id") == "'x' was not approved; nothing ran"

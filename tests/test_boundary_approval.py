"""The approval request as a card sees it, and the host approvers' own contract (mutation testing found them unpinned).

The Executor's use of all this is in ``test_boundary_executor``; here: the request's JSON view
and frozen arguments, the fixed approvers, and ``AsyncApprover``'s waiting, resolving and
timing out, on a real event loop.
"""

from __future__ import annotations

import asyncio

from kernel_ext.boundary.approval import (
    ApprovalRequest,
    AsyncApprover,
    always_approve,
    always_deny,
    freeze_arguments,
    thaw_arguments,
)
from kernel_ext.workspace.versions import FileSnapshot


def request(call_id: str = "c1") -> ApprovalRequest:
    return ApprovalRequest(
        call_id, "write_file", "edit", freeze_arguments({"path": "a.py", "content": "é = 1\n"}),
        files=(FileSnapshot("a.py", True, "ab" * 32, None, "old text"), FileSnapshot("b.py", False, problem="gone")),
        proposal="write 7 characters to a.py", details=(("risk", '"write"'),),
    )


def test_the_card_view_holds_every_field_but_file_text():
    assert request().as_dict() == {
        "call_id": "c1", "name": "write_file", "category": "edit",
        "arguments": {"path": "a.py", "content": "é = 1\n"},
        "files": [{"path": "a.py", "exists": True, "sha256": "ab" * 32, "problem": ""},
                  {"path": "b.py", "exists": False, "sha256": "", "problem": "gone"}],
        "proposal": "write 7 characters to a.py",
        "details": {"risk": "write"},
    }
    assert request().argument("content") == "é = 1\n"


def test_arguments_freeze_as_canonical_json_text():
    frozen = freeze_arguments({"b": {"z": 1, "a": "é"}, "a": [1, "x"]})
    assert frozen == (("b", '{"a": "é", "z": 1}'), ("a", '[1, "x"]'))
    assert thaw_arguments(frozen) == {"b": {"a": "é", "z": 1}, "a": [1, "x"]}


def test_the_fixed_approvers_say_what_their_names_say():
    assert always_deny(request()) is False and always_approve(request()) is True


def test_an_async_publisher_is_awaited_and_its_decision_returned():
    async def go():
        seen = []
        approver = AsyncApprover(timeout=10)

        async def publish(req):  # a card published by a coroutine, answered at once
            seen.append(req.call_id)
            assert approver.pending() == ("c1",)
            approver.resolve(req.call_id, True, by="host")

        approver.on_request = publish
        decision = await approver(request())
        return decision, seen, approver

    decision, seen, approver = asyncio.run(go())
    assert decision is True and seen == ["c1"]
    assert approver.decided == {"c1": True} and approver.decided_by == {"c1": "host"} and approver.pending() == ()


def test_a_timeout_is_a_denial_named_timeout():
    async def go():
        approver = AsyncApprover(timeout=0.05)
        return await approver(request()), approver

    decision, approver = asyncio.run(go())
    assert decision is False and approver.decided == {"c1": False} and approver.decided_by == {"c1": "timeout"}
    late = approver.resolve("c1", True)  # too late: named, and nothing changes
    assert approver.pending() == () and not late.accepted and late.code == "ALREADY_DECIDED"
    assert approver.decided == {"c1": False}


def test_resolve_settles_once_and_stores_a_plain_bool():
    async def go():
        approver = AsyncApprover(timeout=10)
        waiting = asyncio.ensure_future(approver(request()))
        for _ in range(1000):  # the request registers within a few loop turns
            if approver.pending():
                break
            await asyncio.sleep(0)
        first = approver.resolve("c1", 0)
        second = approver.resolve("c1", True)
        return first, second, await waiting, approver

    first, second, decision, approver = asyncio.run(go())
    assert (first.accepted, second.accepted, second.code, decision) == (True, False, "ALREADY_DECIDED", False)
    assert approver.decided["c1"] is False and approver.decided_by["c1"] == "card"
    unknown = AsyncApprover().resolve("unknown", True)
    assert not unknown.accepted and unknown.code == "NO_SUCH_APPROVAL"


def test_two_waits_under_one_call_id_both_end_cleanly():
    async def go():
        approver = AsyncApprover(timeout=0.05)
        return await asyncio.gather(approver(request("same")), approver(request("same"))), approver

    decisions, approver = asyncio.run(go())
    assert decisions == [False, False] and approver.pending() == () and approver.decided_by == {"same": "timeout"}

"""Runs as tasks: approvals answered from outside, cancellation, failures, reload from disk."""

from __future__ import annotations

import asyncio

from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import load_finished, start_run
from kernel_ext.scenarios.calculator import BUG, FIX
from kernel_ext.scenarios.side_effects_run import side_effects_body


async def wait_for_pending(run, seen=()):
    """The pending approvals once one not in ``seen`` appears."""
    for _ in range(2000):
        pending = tuple(c for c in run.pending_approvals() if c not in seen)
        if pending:
            return pending
        await asyncio.sleep(0.005)
    raise AssertionError("no approval was requested")


async def test_cards_answered_from_outside_complete_the_run(tmp_path):
    run = start_run(side_effects_body(), RunLayout.create(tmp_path))
    assert run.status in ("running", "waiting_for_approval")
    (edit,) = await wait_for_pending(run)
    assert run.status == "waiting_for_approval"
    assert run.decide(edit, True) and not run.decide(edit, True)  # a second decision is refused
    (test,) = await wait_for_pending(run, seen={edit})
    assert run.decide(test, True)
    done = await asyncio.wait_for(run.wait(), 30)
    assert done.status == "completed" and run.status == "completed"
    assert FIX in (run.context.layout.app_dir / "calculator.py").read_text()
    types = [e.type for e in run.events.events]
    assert types.count("approval_requested") == 2 and types[-1] == "done"
    card = next(e for e in run.events.events if e.type == "approval_requested")
    assert "-    return a - b" in card.request["proposal"]  # the card carries the diff


async def test_denied_card_leaves_the_file_and_blocks(tmp_path):
    run = start_run(side_effects_body(), RunLayout.create(tmp_path))
    (edit,) = await wait_for_pending(run)
    run.decide(edit, False)
    (test,) = await wait_for_pending(run, seen={edit})
    run.decide(test, False)
    done = await asyncio.wait_for(run.wait(), 30)
    assert done.status == "blocked"
    assert BUG in (run.context.layout.app_dir / "calculator.py").read_text()


async def test_cancel_while_a_card_waits_ends_with_cancelled(tmp_path):
    layout = RunLayout.create(tmp_path)
    run = start_run(side_effects_body(), layout)
    await wait_for_pending(run)
    assert run.cancel()
    done = await asyncio.wait_for(run.wait(), 10)
    assert done.status == "cancelled"
    assert BUG in (layout.app_dir / "calculator.py").read_text()
    reloaded = load_finished(layout.run_dir)
    assert [e.type for e in reloaded.events.events][-2:] == ["error", "done"]
    assert reloaded.status == "cancelled"


async def test_a_body_that_raises_still_ends_visibly(tmp_path):
    async def broken(ctx):
        ctx.events.emit("run_started", request="x")
        raise LookupError("bug in a run body")

    run = start_run(broken, RunLayout.create(tmp_path))
    done = await run.wait()
    assert done.status == "failed"
    error = [e for e in run.events.events if e.type == "error"][0]
    assert error.code == "INTERNAL" and "LookupError" in error.message


async def test_policy_without_test_category_denies_without_asking(tmp_path):
    run = start_run(side_effects_body(allowed=("edit",)), RunLayout.create(tmp_path))
    (edit,) = await wait_for_pending(run)
    run.decide(edit, True)
    done = await asyncio.wait_for(run.wait(), 30)
    results = [e for e in run.events.events if e.type == "tool_result"]
    assert results[-1].error_code == "policy_denied"
    assert done.status == "blocked"


async def test_cancelled_before_its_first_step_still_ends(tmp_path):
    run = start_run(side_effects_body(), RunLayout.create(tmp_path))
    run.cancel()  # same step as the start: the body never runs
    done = await asyncio.wait_for(run.wait(), 30)
    assert done is not None and done.status == "cancelled"
    error, last = run.events.events[-2:]
    assert (error.type, error.code, error.message) == ("error", "CANCELLED", "the run was cancelled before it started")
    assert (last.type, last.summary) == ("done", "cancelled before it started")
    assert load_finished(run.context.layout.run_dir).status == "cancelled"  # the log on disk ends the same way


async def test_an_expired_approval_says_timeout(tmp_path):
    run = start_run(side_effects_body(allowed=("edit",)), RunLayout.create(tmp_path), approval_timeout=0.05)
    await asyncio.wait_for(run.wait(), 30)
    resolved = [e for e in run.events.events if e.type == "approval_resolved"]
    assert resolved and resolved[0].by == "timeout" and resolved[0].approved is False

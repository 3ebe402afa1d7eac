"""The run handle's own promises (``hosting/run.py``). A run reloaded from its folder (``hosting/run.py``: ``load_finished``) after it ended: it replays,
runs nothing, cannot be cancelled (and its cancel while running ended its log in those words), and answers a late decision by name from its log (a card it
decided is ``ALREADY_DECIDED``, one it asked and never settled ``APPROVAL_CLOSED``, any other call
``NO_SUCH_APPROVAL``), deciding nothing. The run is the real side-effects scenario (the real
Executor and approver) started with ``start_run``, its log on disk.
"""

from __future__ import annotations

import asyncio
import logging

from jupyter_fixtures import poll

from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import Run, load_finished, start_run
from kernel_ext.scenarios.calculator import BUGGY_CALCULATOR, CALCULATOR
from kernel_ext.scenarios.side_effects_run import side_effects_body


async def cancelled_at_second_card(tmp_path) -> tuple[Run, str, str]:
    """A run whose first card was approved and whose second was open when it was cancelled."""
    run = start_run(side_effects_body(), RunLayout.create(tmp_path / "runs"))
    first = (await poll(run.pending_approvals))[0]
    assert run.decide(first, True)
    second = (await poll(lambda: [c for c in run.pending_approvals() if c != first]))[0]
    assert run.cancel() is True
    done = await asyncio.wait_for(run.wait(), 30)
    assert done is not None and done.status == "cancelled"
    error, last = run.events.events[-2:]
    assert (error.type, error.code, error.message) == ("error", "CANCELLED", "the run was cancelled")
    assert (last.type, last.status, last.summary) == ("done", "cancelled", "cancelled before it finished")
    return run, first, second


async def test_a_reloaded_run_answers_late_decisions_by_name_and_decides_nothing(tmp_path):
    live, first, second = await cancelled_at_second_card(tmp_path)
    run_dir = live.context.layout.run_dir
    log_before = (run_dir / "events.jsonl").read_bytes()
    app_before = (run_dir / "app" / CALCULATOR).read_text()
    reloaded = load_finished(run_dir)
    assert reloaded.id == live.id and reloaded.events.run_id == live.id and reloaded.task is None
    assert reloaded.status == "cancelled" and reloaded.pending_approvals() == ()
    decided = reloaded.decide(first, False)
    assert (decided.accepted, decided.code, decided.reason) == (
        False, "ALREADY_DECIDED", f"{first!r} was already decided; a decision is final")
    closed = reloaded.decide(second, True)
    assert (closed.accepted, closed.code, closed.reason) == (
        False, "APPROVAL_CLOSED", f"{second!r} can no longer be decided: the run is cancelled")
    unknown = reloaded.decide("c999", True)
    assert (unknown.accepted, unknown.code) == (False, "NO_SUCH_APPROVAL")
    assert reloaded.cancel() is False and live.cancel() is False  # nothing runs: nothing to cancel
    assert (run_dir / "events.jsonl").read_bytes() == log_before
    assert (run_dir / "app" / CALCULATOR).read_text() == app_before != BUGGY_CALCULATOR  # the first edit, nothing more


async def test_a_live_run_s_own_refusals_are_false_verdicts(tmp_path):
    live, first, second = await cancelled_at_second_card(tmp_path)
    again = live.decide(first, True)
    assert (again.accepted, again.code) == (False, "ALREADY_DECIDED")
    late = live.decide(second, True)
    assert late.accepted is False and late.code in ("ALREADY_DECIDED", "APPROVAL_CLOSED")


async def test_a_body_that_raises_ends_the_run_failed_in_words_and_logs_its_traceback(tmp_path, caplog):
    async def broken(ctx) -> None:
        ctx.events.emit("text", text="about to fail")
        raise ValueError("boom")

    run = start_run(broken, RunLayout.create(tmp_path / "runs"))
    with caplog.at_level(logging.ERROR, logger="kernel_ext.hosting.run"):
        done = await asyncio.wait_for(run.wait(), 30)
    error = run.events.events[-2]
    assert (error.type, error.code, error.message) == ("error", "INTERNAL", "ValueError: boom")
    assert done is not None and (done.status, done.summary) == ("failed", "the run stopped on an internal error")
    records = [r for r in caplog.records if r.name == "kernel_ext.hosting.run"]
    assert [r.getMessage() for r in records] == [f"run {run.id} failed"] and records[0].exc_info[0] is ValueError
    assert load_finished(run.context.layout.run_dir).status == "failed"


async def test_a_secret_learnt_mid_run_is_redacted_from_then_on_in_the_events_and_the_log(tmp_path):
    from kernel_ext.secrets import REDACTED

    late = "pk-learnt-Qx7vR2mZp9LwT4nB"  # the provider's key, resolved after the run started
    given = "sk-given-Hy3kD8sVq1NcJ6fW"

    async def body(ctx) -> None:
        ctx.add_secrets([late, ""])
        ctx.add_secrets([late])
        ctx.events.emit("text", text=f"key {late} and {given}")

    run = start_run(body, RunLayout.create(tmp_path / "runs"), known_secrets=(given,))
    await asyncio.wait_for(run.wait(), 30)
    assert run.context.known_secrets == tuple(sorted((late, given)))
    text = next(e for e in run.events.events if e.type == "text").text
    assert text == f"key {REDACTED} and {REDACTED}"
    on_disk = (run.context.layout.run_dir / "events.jsonl").read_text()
    assert late not in on_disk and given not in on_disk and REDACTED in on_disk


async def test_the_handle_carries_its_request_and_a_named_task(tmp_path):
    from kernel_ext.hosting.options import RunRequest

    request = RunRequest(request="fix it")
    seen: list = []

    async def body(ctx) -> None:
        seen.append(ctx.options)

    run = start_run(body, RunLayout.create(tmp_path / "runs"), options=request)
    assert run.task.get_name() == f"besser-run-{run.id}"  # what a task dump of the server names
    done = await asyncio.wait_for(run.wait(), 30)
    assert seen == [request] and run.context.options is request and done.status == "completed"


def test_a_reloaded_log_without_done_waits_for_nothing_and_says_interrupted(tmp_path):
    from kernel_ext.hosting.bus import EventLog

    empty = RunLayout.create(tmp_path / "runs")
    begun = RunLayout.create(tmp_path / "runs")
    log = EventLog(begun.run_id, begun.events_path)
    log.emit("text", text="started elsewhere")
    log.close_file()
    for layout, count in ((empty, 0), (begun, 1)):
        reloaded = load_finished(layout.run_dir)
        assert len(reloaded.events.events) == count and reloaded.status == "interrupted"
        assert asyncio.run(reloaded.wait()) is None

"""Widgets without a kernel: the reducer over replayed logs, cards decided once, the run view
driving a real in-process run, the request report's redaction, and the static fallbacks."""

from __future__ import annotations

import asyncio
import re

import pytest
from jupyter_fixtures import completed_scenario_events, poll

from kernel_ext.hosting.bus import EventLog
from kernel_ext.hosting.events import make_event
from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import start_run
from kernel_ext.scenarios.side_effects_run import side_effects_body
from widgets.approval import ApprovalCard
from widgets.report import RequestReport
from widgets.runview import RunView
from widgets.state import ApprovalView, RunViewState

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def event(seq, type_, **fields):
    return make_event(type_, "r-1", **fields).model_copy(update={"seq": seq})


async def test_state_after_a_replayed_event_log(tmp_path):
    events = await completed_scenario_events(tmp_path)
    persisted = EventLog.load(events[0].run_id, tmp_path / "replay_runs" / events[0].run_id / "events.jsonl").events
    assert [e.seq for e in persisted] == [e.seq for e in events]
    state = RunViewState.replay(persisted)
    assert state.status == "completed" and state.finished and state.last_seq == len(events)
    assert state.provider_kind == "scripted" and state.request == "fix the calculator"
    assert state.phases["customize"].status == "done" and state.phases["customize"].duration_s is not None
    assert state.phases["generate"].status == "pending"
    assert [c.name for c in state.calls.values()] == ["read", "edit", "test"] and all(c.ok for c in state.calls.values())
    assert [(a.name, a.approved, a.outcome) for a in state.approvals.values()] == [("edit", True, "executed"), ("test", True, "executed")]
    assert state.current_call is None and state.open_approvals() == []
    # a resumed stream repeating events changes nothing; dicts (SSE data) reduce the same way
    before = (state.last_seq, state.event_count)
    assert all(state.apply(e) == set() for e in persisted)
    assert (state.last_seq, state.event_count) == before
    from_json = RunViewState.replay(e.model_dump(mode="json") for e in persisted)
    assert from_json.approvals.keys() == state.approvals.keys() and from_json.status == "completed"


async def test_denied_cards_show_denied(tmp_path):
    state = RunViewState.replay(await completed_scenario_events(tmp_path, approve=(False, False)))
    assert state.status == "blocked"
    assert [a.outcome for a in state.approvals.values()] == ["denied", "denied"]


def test_every_card_outcome_from_events():
    card = {"name": "edit", "category": "edit", "request": {"arguments": {"path": "a.py"}}}
    log = [
        event(1, "run_started", request="r"),
        *(event(n, "approval_requested", call_id=c, **card) for n, c in ((2, "ok"), (3, "stale"), (4, "late"), (5, "open"))),
        event(6, "approval_resolved", call_id="ok", name="edit", approved=True, by="card"),
        event(7, "tool_result", call_id="ok", name="edit", ok=True),
        event(8, "approval_resolved", call_id="stale", name="edit", approved=True, by="card"),
        event(9, "tool_result", call_id="stale", name="edit", ok=False, error_code="stale_input"),
        event(10, "approval_resolved", call_id="late", name="edit", approved=False, by="timeout"),
        event(11, "tool_result", call_id="late", name="edit", ok=False, error_code="approval_denied"),
        event(12, "done", status="cancelled"),
    ]
    state = RunViewState.replay(log)
    assert {c: a.outcome for c, a in state.approvals.items()} == {
        "ok": "executed", "stale": "stale input", "late": "expired", "open": "cancelled",
    }
    interrupted = RunViewState.replay([*log[:5], event(6, "done", status="interrupted")])
    assert {a.outcome for a in interrupted.approvals.values()} == {"interrupted"}


def test_card_buttons_are_disabled_after_a_decision():
    sent = []
    card = ApprovalCard(ApprovalView("call-2", "edit", "edit", {"arguments": {"path": "a.py"}}), lambda c, a: sent.append((c, a)))
    assert not card.approve_button.disabled and not card.deny_button.disabled
    card.approve_button.click()
    assert card.approve_button.disabled and card.deny_button.disabled
    card.deny_button.click()
    card.approve_button.click()
    assert sent == [("call-2", True)]
    resolved = ApprovalView("call-2", "edit", "edit", {}, approved=True, outcome="executed")
    card.update(resolved)
    assert card.approve_button.disabled and "executed" in card.to_html()


def test_a_card_decided_elsewhere_or_refused_cannot_be_clicked():
    sent = []
    elsewhere = ApprovalCard(ApprovalView("c", "edit", "edit", {}), lambda c, a: sent.append(a))
    elsewhere.update(ApprovalView("c", "edit", "edit", {}, approved=False, decided_by="card", outcome="denied"))
    elsewhere.approve_button.click()
    assert sent == [] and elsewhere.approve_button.disabled
    refused = ApprovalCard(ApprovalView("c", "edit", "edit", {}), lambda c, a: False)
    refused.approve()
    assert refused.approve_button.disabled and "already decided" in refused.to_html()


def test_an_undelivered_decision_enables_the_card_again():
    def broken(call_id, approved):
        raise ConnectionError("server unreachable")

    card = ApprovalCard(ApprovalView("c", "edit", "edit", {}), broken)
    card.deny()
    assert not card.approve_button.disabled and "not delivered" in card.to_html()


async def test_an_async_decision_is_awaited():
    decided = asyncio.Event()

    async def decide(call_id, approved):
        decided.set()
        return False

    card = ApprovalCard(ApprovalView("c", "edit", "edit", {}), decide)
    card.approve()
    await asyncio.wait_for(decided.wait(), 30)
    await poll(lambda: "already decided" in card.to_html())
    assert card.deny_button.disabled


async def test_run_view_drives_a_real_run_through_its_cards(tmp_path):
    layout = RunLayout.create(tmp_path)
    run = start_run(side_effects_body(), layout)
    view = RunView(decide=run.decide, note="in-process")
    view.replay(run.events.events)
    run.events.add_listener(view.apply)
    for _ in range(2):
        card = await view.wait_for_approval(timeout=20)
        card.approve_button.click()
        assert card.decided and card.approve_button.disabled
    state = await view.wait(timeout=30)
    assert state.status == "completed" and [c.card.outcome for c in view.cards] == ["executed", "executed"]
    assert all(c.approve_button.disabled and c.deny_button.disabled for c in view.cards)
    assert "completed" in view._header.value and "customize" in view.timeline._html.value
    bundle = view._repr_mimebundle_()
    assert WIDGET_VIEW in bundle and "[executed] edit" in bundle["text/plain"] and "<table" in bundle["text/html"]


def test_done_shows_the_authorship_split_with_links():
    view = RunView()
    view.replay([
        event(1, "run_started", request="r", run_dir="/srv/runs/r-1", provider_label="replay:jwt", provider_kind="replay", sandbox_tier="bwrap"),
        event(2, "phase", phase="generate", status="started"),
        event(3, "phase", phase="generate", status="done", duration_s=1.25),
        event(4, "task_list", tasks=[{"id": "T1", "text": "JWT auth", "status": "implemented"}, {"id": "T2", "text": "Dockerfile", "status": "open"}]),
        event(5, "finding", severity="blocker", source="ruff", message="F821 undefined name", path="auth.py", line=3),
        event(6, "cost", input_tokens=100, output_tokens=20, cost_usd=0.0123, turns=2, elapsed_s=3.0),
        event(7, "done", status="blocked", blockers=["F821 in auth.py"], summary="one blocker left",
              authorship={"generator_untouched": ["main.py", "models.py"], "generator_llm_modified": ["schemas.py"], "llm_authored": ["auth.py"]}),
    ])
    page = view._done.value
    assert "4 files" not in page and "2 files (50%)" in page and "written by the LLM: 1 file (25%)" in page
    assert 'href="' in page and "auth.py" in page and "blocker: F821 in auth.py" in page
    assert "1.2 s" in view.timeline._html.value or "1.3 s" in view.timeline._html.value
    assert "bwrap" in view.timeline._html.value and "$0.0123" in view.timeline._html.value
    assert "◑ T1 JWT auth" in view._tasks.value.replace("</span>", "") and "☐ T2 Dockerfile" in view._tasks.value.replace("</span>", "")
    assert "implemented, not verified" in view._tasks.value and "F821" in view._findings.value
    assert "modified by the LLM: 1 file (" in page
    text = view.to_text()
    assert "done: blocked" in text and "written by the LLM: 1 file" in text


def test_request_report_redacts_credentials():
    report = {
        "name": "login flow",
        "requests": [
            {"method": "POST", "path": "/auth/login", "status": 200, "expected_status": 200, "duration_ms": 12.4,
             "request": {"headers": {"Content-Type": "application/json"}, "body": {"username": "ann", "password": "hunter2hunter2"}},
             "response": {"headers": {"Set-Cookie": "session=abcdef123456"}, "body": {"access_token": "eyJhbGciOi.eyJzdWIiOiJhbm4.c2lnbmF0dXJl"}},
             "assertions": [{"path": "access_token", "expected": "present", "actual": "present", "ok": True}]},
            {"method": "GET", "path": "/books/1", "status": 404, "expected_status": 200,
             "request": {"headers": {"Authorization": "Bearer eyJhbGciOi.eyJzdWIiOiJhbm4.c2lnbmF0dXJl", "X-Api-Key": "k-1234567890"}},
             "response": {"body": {"detail": "Not Found"}}},
        ],
    }
    widget = RequestReport(report)
    bundle = widget._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}  # no widget: a reopened notebook shows it with no kernel
    shown = widget.to_text() + widget.to_html()
    for secret in ("hunter2hunter2", "abcdef123456", "eyJzdWIiOiJhbm4", "k-1234567890"):
        assert secret not in shown
    assert "[redacted]" in widget.to_text() and "[redacted]" in widget.to_html()
    assert "1/2 requests passed" in widget.to_text() and not widget.passed
    assert "FAIL 1 GET /books/1 → 404 (expected 200)" in bundle["text/plain"]
    # each request is a row of its own cells (got and expected apart) that opens on its bodies
    rows = re.findall(r"<details class='besser-req'><summary class='besser-req-line'>(.*?)</summary>", widget.to_html())
    assert len(rows) == 2 and re.findall(r"<span>(.*?)</span>", rows[1])[:5] == ["1", "GET", "<code>/books/1</code>", "404", "200"]
    assert "besser-st-passed" in rows[0] and "besser-st-failed" in rows[1] and ">executed<" not in widget.to_html()
    with pytest.raises(TypeError):
        RequestReport("not a report")


def test_a_cancelled_run_leaves_no_phase_in_progress_and_phases_align():
    view = RunView(run_id="r-1").replay([
        event(1, "run_started", request="r", provider_label="p", provider_kind="scripted"),
        event(2, "phase", phase="select", status="started"), event(3, "phase", phase="select", status="done", duration_s=0.1),
        event(4, "phase", phase="customize", status="started"),
        event(5, "done", status="cancelled", authorship={}, blockers=[], summary="cancelled by you"),
    ])
    assert view.state.phases["customize"].status == "stopped" and view.state.phases["select"].status == "done"
    strip = view.timeline.to_html()
    assert "◐" not in strip and "■ customize" in strip and "stopped" in strip  # final, and says how it ended
    cells = re.findall(r"<td [^>]*>", strip)
    assert cells and all("vertical-align:top" in cell for cell in cells)  # a second line never shifts its neighbours


def test_tasks_implemented_but_not_verified_say_what_would_verify_them():
    view = RunView(run_id="r-1").replay([event(1, "task_list", tasks=[{"id": "T1", "text": "Add JWT auth", "status": "implemented"}])])
    html = view._tasks.value
    assert "implemented, not verified" in html and "only by a check attached to it that passed" in html
    verified = RunView(run_id="r-1").replay([event(1, "task_list", tasks=[{"id": "T1", "text": "Add JWT auth", "status": "verified"}])])
    assert "besser-tasks-why" not in verified._tasks.value


def test_a_card_open_when_a_person_cancelled_says_who_cancelled_and_each_thing_once():
    """``done.cancelled_by`` (who ended the run) reaches the open card's row: not "nobody"."""
    card = {"name": "edit", "category": "edit", "request": {"arguments": {"path": "a.py"}}}
    start = [event(1, "run_started", request="r"), event(2, "approval_requested", call_id="c1", **card)]
    by_person = RunView(run_id="r-1").replay([*start, event(3, "done", status="cancelled", summary="cancelled before it finished",
                                                          cancelled_by="person")])
    [line] = [line for line in by_person.to_text().splitlines() if "edit a.py" in line]
    assert line.strip() == "[cancelled] edit a.py · not run · you cancelled the run", line
    assert "done: cancelled cancelled before it finished (you cancelled the run)" in by_person.to_text()
    unknown = RunView(run_id="r-1").replay([*start, event(3, "done", status="cancelled")])  # an older log: nobody said who
    assert "[cancelled] edit a.py · not run · nobody" in unknown.to_text()
    server = RunView(run_id="r-1").replay([*start, event(3, "done", status="cancelled", cancelled_by="server")])
    assert "nobody (the Jupyter server stopped)" in server.to_text()


def test_the_detached_note_names_buttons_only_where_there_are_some():
    card = {"name": "edit", "category": "edit", "request": {"arguments": {"path": "a.py"}}}
    start = [event(1, "run_started", request="r")]
    asking = RunView(run_id="r-1").replay([*start, event(2, "approval_requested", call_id="c1", **card)])
    assert "its buttons do nothing" in asking._header.value
    running = RunView(run_id="r-1").replay(start)
    assert "button" not in re.search(r'besser-detached">detached:.*?</div>', running._header.value).group(0)
    running.cancel_run = lambda: None
    running.set_note("")
    assert "its Cancel button does nothing" in running._header.value
    ended = RunView(run_id="r-1").replay([*start, event(2, "done", status="completed")])
    assert "button" not in ended._header.value and "%besser attach r-1" in ended._header.value


def test_the_answer_hint_is_the_banner_and_goes_when_the_run_ends():
    card = {"name": "edit", "category": "edit", "request": {"arguments": {"path": "a.py"}}}
    view = RunView(run_id="r-1").replay([event(1, "run_started", request="r"), event(2, "approval_requested", call_id="c1", **card)])
    view.set_awaited(True)
    assert "answer below with Approve or Deny; this cell waits until the run ends" in view._header.value
    view.apply(event(3, "done", status="completed"))
    assert "answer below" not in view._header.value and "answer below" not in view.to_html()

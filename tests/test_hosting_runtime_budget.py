"""Budgets count waiting (issue 28, item 10): a run parked at an approval card still spends its
runtime budget; past it the card is withdrawn, the run ends ``timeout`` and its place goes to the
next queued run at once (before, a run with ``max_runtime_s=8`` was still live at 51 s).

The scenario body (the real Executor, the run's real ``AsyncApprover``) parks at its edit card.
Over REST on a real server (its own process, one run at a time, the operator's runtime cap of
2 s), and in process with the budget a ``RunRequest`` asks for. Every wait is on an event.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from run_load import client_for
from server_process import start_server

from kernel_ext.boundary.approval import WITHDRAWN_NOTE
from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.options import OperatorSettings, RunRequest
from kernel_ext.scenarios.calculator import BUGGY_CALCULATOR, CALCULATOR
from kernel_ext.scenarios.side_effects_run import side_effects_body
from widgets.state import RunViewState

SCENARIO = {"kind": "scenario", "scenario": "side-effects"}


async def events_until(client: httpx.AsyncClient, run_id: str, last: str) -> list[dict]:
    """The run's events over SSE, up to and including the first of type ``last``."""
    seen: list[dict] = []
    async with client.stream("GET", f"runs/{run_id}/events", timeout=httpx.Timeout(120, connect=60)) as stream:
        assert stream.status_code == 200
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                seen.append(json.loads(line[5:]))
                if seen[-1]["type"] == last:
                    return seen
    raise AssertionError(f"run {run_id} ended its stream without a {last!r}: {[e['type'] for e in seen]}")


def withdrawn_then_timeout(events: list[dict]) -> dict:
    """The card asked, withdrawn by the budget, then the run's ``timeout``; the card's request."""
    types = [e["type"] for e in events]
    card = next(e for e in events if e["type"] == "approval_requested")
    resolved = [e for e in events if e["type"] == "approval_resolved"]
    assert [(e["call_id"], e["approved"], e["by"], e["note"]) for e in resolved] == [(card["call_id"], False, "timeout", WITHDRAWN_NOTE)]
    assert types.index("approval_resolved") > types.index("approval_requested")
    assert events[-2]["type"] == "error" and events[-2]["code"] == "RUNTIME_BUDGET_SPENT"
    assert events[-1]["type"] == "done" and events[-1]["status"] == "timeout"
    view = RunViewState.replay(events)
    assert view.status == "timeout" and view.card_for(card["call_id"]).outcome == "expired"
    return card


@pytest.mark.slow
async def test_a_card_past_the_runtime_budget_is_withdrawn_the_run_times_out_and_the_queued_run_starts(tmp_path: Path):
    server = start_server(tmp_path, args=("--BesserAgentApp.max_concurrent_runs=1", "--BesserAgentApp.max_runtime_s=2"))
    try:
        async with client_for(server.agent_url, server.token) as client:
            first = (await client.post("runs", json=SCENARIO)).json()["run"]
            second = (await client.post("runs", json=SCENARIO)).json()["run"]
            assert first["status"] in ("running", "waiting_for_approval") and (second["status"], second["queue_position"]) == ("queued", 1)
            first_events, second_events = await asyncio.gather(
                events_until(client, first["id"], "done"), events_until(client, second["id"], "approval_requested"))

            card = withdrawn_then_timeout(first_events)
            assert card["expires_at"] is not None  # the card said when it would close (the budget's end)
            admitted = [e["position"] for e in second_events if e["type"] == "queued"]
            assert admitted == [1, 0]  # waited at 1, then started once the first's place was freed
            assert (await client.get(f"runs/{first['id']}")).json()["run"]["status"] == "timeout"

            # a late decision is refused by name, and changes nothing on disk
            run_dir = Path(first["run_dir"])
            log_before = (run_dir / "events.jsonl").read_bytes()
            late = await client.post(f"runs/{first['id']}/approvals/{card['call_id']}",
                                     json={"approved": True, "digest": card["digest"]})
            assert late.status_code == 409 and late.json()["code"] == "ALREADY_DECIDED", late.text
            assert (run_dir / "events.jsonl").read_bytes() == log_before
            assert (run_dir / "app" / CALCULATOR).read_text() == BUGGY_CALCULATOR  # the edit never ran
            await client.post(f"runs/{second['id']}/cancel", json={})
    finally:
        server.stop()


async def test_the_budget_a_request_asks_for_bounds_its_cards_and_frees_the_place(tmp_path: Path):
    manager = RunManager(tmp_path / "runs", OperatorSettings(max_concurrent_runs=1))
    parked = manager.start_body(side_effects_body(), options=RunRequest(request="fix it", max_runtime_s=0.5))
    behind = manager.start_body(side_effects_body(), options=RunRequest(request="fix it too", max_runtime_s=600))
    admitted = asyncio.Event()
    behind.events.add_listener(lambda e: admitted.set() if e.type == "queued" and e.position == 0 else None)
    done = await asyncio.wait_for(parked.wait(), 30)
    assert done is not None and done.status == "timeout"
    withdrawn_then_timeout([e.model_dump(mode="json") for e in parked.events.events])
    why = "the run's runtime budget (0.5 s) was spent while an approval card waited"
    assert (parked.events.events[-2].message, parked.events.events[-1].summary) == (why, why)
    await asyncio.wait_for(admitted.wait(), 30)  # its place went to the next run
    assert manager.admission.running == 1 and manager.admission.waiting == 0
    verdict = parked.decide("call-2", True)
    assert not verdict and verdict.code == "ALREADY_DECIDED"
    assert (parked.context.layout.app_dir / CALCULATOR).read_text() == BUGGY_CALCULATOR
    behind.cancel()
    await behind.wait()

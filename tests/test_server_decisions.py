# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""A person's decisions over REST (``server/handlers/decisions.py``) on a real Jupyter server: the
body's refusal and its words, the card's digest binding the decision to the request shown, the
refusals naming their run, and the exact replies of a decision and a cancel.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import extension_config, jp_asyncio_loop, jp_server_config, runs_dir  # noqa: F401
from test_server_api import manager_of, pending_call, start_scenario
from tornado.httpclient import HTTPClientError


async def post(jp_fetch, *path: str, body: dict | str):
    return await jp_fetch("besser-agent", "runs", *path, method="POST", body=body if isinstance(body, str) else json.dumps(body))


async def refused(jp_fetch, *path: str, body: dict | str) -> tuple[int, dict]:
    with pytest.raises(HTTPClientError) as caught:
        await post(jp_fetch, *path, body=body)
    return caught.value.code, json.loads(caught.value.response.body)


def card_digest(run, call_id: str) -> str:
    return next(e.digest for e in run.events.of_type("approval_requested") if e.call_id == call_id)


async def test_a_body_that_is_not_a_decision_is_refused_in_words_and_decides_nothing(jp_fetch, jp_serverapp, runs_dir):
    run_id = await start_scenario(jp_fetch)
    call = await pending_call(jp_serverapp, run_id)
    before = tree_state(runs_dir / run_id / "app")
    for body in ({"approved": "yes"}, {"digest": "x"}, "[true]"):
        status, reply = await refused(jp_fetch, run_id, "approvals", call, body=body)
        assert (status, reply) == (400, {
            "code": "INVALID_REQUEST",
            "message": 'the body must be {"approved": true} or {"approved": false} (and an optional "digest")'}), body
    run = manager_of(jp_serverapp).get(run_id)
    assert run.pending_approvals() == (call,) and tree_state(runs_dir / run_id / "app") == before
    run.cancel()


async def test_a_digest_of_another_request_is_stale_and_the_card_s_own_digest_decides(jp_fetch, jp_serverapp, runs_dir):
    run_id = await start_scenario(jp_fetch)
    call = await pending_call(jp_serverapp, run_id)
    run = manager_of(jp_serverapp).get(run_id)
    digest = card_digest(run, call)
    assert len(digest) == 64
    before = tree_state(runs_dir / run_id / "app")
    status, reply = await refused(jp_fetch, run_id, "approvals", call, body={"approved": True, "digest": "0" * 64})
    assert status == 409 and reply["code"] == "STALE_REQUEST"
    assert reply["message"] == f"run {run_id}: the decision names another request than {call!r} (digest differs); nothing was decided"
    assert run.pending_approvals() == (call,) and tree_state(runs_dir / run_id / "app") == before
    response = await post(jp_fetch, run_id, "approvals", call, body={"approved": True, "digest": digest})
    assert response.code == 200
    reply = json.loads(response.body)
    assert reply == {"run_id": run_id, "call_id": call, "approved": True, "status": reply["status"]}
    assert reply["status"] in ("running", "waiting_for_approval", "completed")  # the run goes on meanwhile
    resolved = [(e.call_id, e.approved) for e in run.events.of_type("approval_resolved")]
    assert resolved == [(call, True)]
    status, reply = await refused(jp_fetch, run_id, "approvals", call, body={"approved": False})
    assert status == 409 and reply["code"] == "ALREADY_DECIDED" and reply["message"].startswith(f"run {run_id}: {call!r}")
    status, reply = await refused(jp_fetch, run_id, "approvals", "c999", body={"approved": True})
    assert status == 404 and reply["code"] == "NO_SUCH_APPROVAL" and reply["message"] == f"run {run_id}: no approval of 'c999' was asked for"
    run.cancel()


async def test_a_cancel_replies_in_full_and_a_second_cancel_is_refused_in_words(jp_fetch, jp_serverapp, runs_dir):
    run_id = await start_scenario(jp_fetch)
    await pending_call(jp_serverapp, run_id)
    run = manager_of(jp_serverapp).get(run_id)
    response = await post(jp_fetch, run_id, "cancel", body="{}")
    assert response.code == 200 and json.loads(response.body) == {"run_id": run_id, "cancelled": True}
    done = await asyncio.wait_for(run.wait(), 30)
    assert done is not None and done.status == "cancelled"
    status, reply = await refused(jp_fetch, run_id, "cancel", body="{}")
    assert (status, reply) == (409, {"code": "RUN_NOT_ACTIVE", "message": f"run {run_id} is not running here (status cancelled)"})

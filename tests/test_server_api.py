# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""The REST + SSE surface under "/a%40b/besser-agent/": auth, runs, approvals, SSE, archive.

A real jupyter_server (pytest-jupyter) with the extension loaded from its entry point, real
hosted runs of the chapter-5 calculator, and real HTTP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import zipfile

import pytest
from jupyter_fixtures import (  # noqa: F401
    async_client,
    auth,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    parse_sse_text,
    poll,
    runs_dir,
)
from tornado.httpclient import HTTPClientError

from kernel_ext.scenarios.calculator import BUG, FIX
from kernel_ext.server.auth import ENV_TOKEN, ENV_URL
from kernel_ext.server.handlers.base import STATE_KEY

SCENARIO = json.dumps({"kind": "scenario", "scenario": "side-effects"})


def manager_of(app):
    return app.web_app.settings[STATE_KEY].manager


async def start_scenario(jp_fetch, **headers):
    response = await jp_fetch("besser-agent", "runs", method="POST", body=SCENARIO, headers=headers or None)
    assert response.code == 201
    return json.loads(response.body)["run"]["id"]


async def pending_call(app, run_id, seen=()):
    run = manager_of(app).get(run_id)
    return (await poll(lambda: [c for c in run.pending_approvals() if c not in seen]))[0]


async def decide(jp_fetch, run_id, call_id, approved=True, **headers):
    return await jp_fetch(
        "besser-agent", "runs", run_id, "approvals", call_id,
        method="POST", body=json.dumps({"approved": approved}), headers=headers or None,
    )


async def finish_run(jp_fetch, app, run_id, decisions=(True, True)):
    seen: set[str] = set()
    for approved in decisions:
        call = await pending_call(app, run_id, seen)
        seen.add(call)
        await decide(jp_fetch, run_id, call, approved)
    await asyncio.wait_for(manager_of(app).get(run_id).wait(), 30)


def endpoints(run_id="20250101-000000-abcdef", call_id="call-2"):
    return [
        ("GET", ("config",), None),
        ("GET", ("runs",), None),
        ("POST", ("runs",), SCENARIO),
        ("GET", ("runs", run_id), None),
        ("GET", ("runs", run_id, "events"), None),
        ("POST", ("runs", run_id, "approvals", call_id), json.dumps({"approved": True})),
        ("POST", ("runs", run_id, "cancel"), "{}"),
        ("GET", ("runs", run_id, "archive"), None),
        ("GET", ("runs", run_id, "export"), None),
    ]


@pytest.mark.parametrize("token", ["", "token not-the-right-one"])
async def test_every_endpoint_refuses_without_a_valid_token(jp_fetch, jp_serverapp, runs_dir, token):
    run_id = await start_scenario(jp_fetch)
    call = await pending_call(jp_serverapp, run_id)
    before = sorted(p.name for p in runs_dir.iterdir())
    for method, parts, body in endpoints(run_id, call):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("besser-agent", *parts, method=method, body=body, headers={"Authorization": token})
        assert refused.value.code == 403, (method, parts)
    # nothing happened: no new run, the card still waits, the file is untouched
    assert sorted(p.name for p in runs_dir.iterdir()) == before
    run = manager_of(jp_serverapp).get(run_id)
    assert run.pending_approvals() == (call,) and run.status == "waiting_for_approval"
    assert BUG in (runs_dir / run_id / "app" / "calculator.py").read_text()


async def test_every_endpoint_works_with_the_server_token(jp_fetch, jp_serverapp, runs_dir):
    config = json.loads((await jp_fetch("besser-agent", "config")).body)
    assert config["features"]["shell_tools_enabled"] is False and config["mode"] == "server"
    run_id = await start_scenario(jp_fetch)
    listed = json.loads((await jp_fetch("besser-agent", "runs")).body)["runs"]
    assert [r["id"] for r in listed] == [run_id]
    edit = await pending_call(jp_serverapp, run_id)
    one = json.loads((await jp_fetch("besser-agent", "runs", run_id)).body)["run"]
    assert one["status"] == "waiting_for_approval" and one["approvals"][0]["call_id"] == edit
    assert (await decide(jp_fetch, run_id, edit)).code == 200
    test = await pending_call(jp_serverapp, run_id, {edit})
    assert (await decide(jp_fetch, run_id, test)).code == 200
    await asyncio.wait_for(manager_of(jp_serverapp).get(run_id).wait(), 30)
    frames = parse_sse_text((await jp_fetch("besser-agent", "runs", run_id, "events")).body.decode())
    events = [f for f in frames if "data" in f]
    assert events[-1]["data"]["type"] == "done" and events[-1]["data"]["status"] == "completed"
    archive = await jp_fetch("besser-agent", "runs", run_id, "archive")
    assert archive.headers["Content-Type"] == "application/zip"
    with pytest.raises(HTTPClientError) as finished:
        await jp_fetch("besser-agent", "runs", run_id, "cancel", method="POST", body="{}")
    assert finished.value.code == 409 and json.loads(finished.value.response.body)["code"] == "RUN_NOT_ACTIVE"
    assert FIX in (runs_dir / run_id / "app" / "calculator.py").read_text()


async def test_capability_token_opens_our_endpoints_and_nothing_else(jp_fetch, jp_serverapp, jp_root_dir):
    token = os.environ[ENV_TOKEN]
    assert os.environ[ENV_URL] == jp_serverapp.connection_url + "besser-agent/"
    assert "/a%40b/" in os.environ[ENV_URL] and token != jp_serverapp.identity_provider.token
    config = await jp_fetch("besser-agent", "config", headers=auth(token))
    assert token not in config.body.decode() and jp_serverapp.identity_provider.token not in config.body.decode()
    run_id = await start_scenario(jp_fetch, **auth(token))
    call = await pending_call(jp_serverapp, run_id)
    assert (await decide(jp_fetch, run_id, call, False, **auth(token))).code == 200
    for method, parts, body in (
        ("GET", ("api", "contents"), None),
        ("POST", ("api", "contents"), json.dumps({"type": "file"})),
        ("GET", ("api", "kernels"), None),
        ("GET", ("api", "sessions"), None),
    ):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch(*parts, method=method, body=body, headers=auth(token))
        assert refused.value.code == 403, parts
    assert sorted(p.name for p in jp_root_dir.iterdir()) == []  # the POST created nothing


async def test_sse_resumes_after_last_event_id(jp_fetch, jp_serverapp):
    run_id = await start_scenario(jp_fetch)
    await finish_run(jp_fetch, jp_serverapp, run_id)
    total = len(manager_of(jp_serverapp).get(run_id).events.events)
    whole = [f for f in parse_sse_text((await jp_fetch("besser-agent", "runs", run_id, "events")).body.decode()) if "data" in f]
    assert [int(f["id"]) for f in whole] == list(range(1, total + 1))
    assert all(f["event"] == f["data"]["type"] for f in whole)
    resumed = await jp_fetch("besser-agent", "runs", run_id, "events", headers={"Last-Event-ID": "4"})
    rest = [f for f in parse_sse_text(resumed.body.decode()) if "data" in f]
    assert [int(f["id"]) for f in rest] == list(range(5, total + 1))
    by_query = await jp_fetch("besser-agent", "runs", run_id, "events", params={"after": str(total - 1)})
    assert [f["data"]["type"] for f in parse_sse_text(by_query.body.decode()) if "data" in f] == ["done"]
    with pytest.raises(HTTPClientError) as bad:
        await jp_fetch("besser-agent", "runs", run_id, "events", headers={"Last-Event-ID": "five"})
    assert bad.value.code == 400


async def test_live_sse_sends_heartbeats_and_ends_with_done(jp_fetch, jp_serverapp):
    run_id = await start_scenario(jp_fetch)
    frames: list[dict] = []
    async with async_client(jp_serverapp) as client:

        async def read():
            async with client.stream("GET", f"runs/{run_id}/events", headers={"Last-Event-ID": "0"}) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                buffer = ""
                async for chunk in response.aiter_text():
                    buffer += chunk
                    *complete, buffer = buffer.split("\n\n")
                    frames.extend(f for block in complete for f in parse_sse_text(block + "\n\n"))

        reader = asyncio.ensure_future(read())
        await poll(lambda: any(f.get("comment") == "heartbeat" for f in frames))
        await finish_run(jp_fetch, jp_serverapp, run_id)
        await asyncio.wait_for(reader, 20)
    data = [f["data"] for f in frames if "data" in f]
    assert [d["seq"] for d in data] == list(range(1, len(data) + 1))
    assert data[-1]["type"] == "done" and data[-1]["status"] == "completed"


async def test_a_second_decision_is_refused(jp_fetch, jp_serverapp, runs_dir):
    run_id = await start_scenario(jp_fetch)
    edit = await pending_call(jp_serverapp, run_id)
    assert (await decide(jp_fetch, run_id, edit, True)).code == 200
    for approved in (True, False):
        with pytest.raises(HTTPClientError) as again:
            await decide(jp_fetch, run_id, edit, approved)
        assert again.value.code == 409 and json.loads(again.value.response.body)["code"] == "ALREADY_DECIDED"
    with pytest.raises(HTTPClientError) as unknown:
        await decide(jp_fetch, run_id, "call-99", True)
    assert unknown.value.code == 404 and json.loads(unknown.value.response.body)["code"] == "NO_SUCH_APPROVAL"
    test = await pending_call(jp_serverapp, run_id, {edit})
    await decide(jp_fetch, run_id, test, False)
    await asyncio.wait_for(manager_of(jp_serverapp).get(run_id).wait(), 30)
    resolved = [e for e in manager_of(jp_serverapp).get(run_id).events.events if e.type == "approval_resolved"]
    assert [(e.call_id, e.approved) for e in resolved] == [(edit, True), (test, False)]
    with pytest.raises(HTTPClientError) as closed:
        await decide(jp_fetch, run_id, test, True)
    assert closed.value.code == 409


async def test_bodies_are_validated_and_operator_fields_ignored(jp_fetch, jp_serverapp, runs_dir, monkeypatch):
    for body, code in (("not json", "INVALID_JSON"), ('{"kind": "shell"}', "INVALID_REQUEST"), ("[1]", "INVALID_REQUEST"),
                       ('{"kind": "scenario", "allow": ["shell"]}', "INVALID_REQUEST"), ('{"kind": "generate"}', "INVALID_REQUEST")):
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("besser-agent", "runs", method="POST", body=body)
        assert refused.value.code == 400 and json.loads(refused.value.response.body)["code"] == code, body
    assert list(runs_dir.iterdir()) == []
    widening = {"kind": "scenario", "allow_shell_tools": True, "shell_tools_enabled": True, "sandbox_policy": "off", "operator": {"shell_tools_enabled": True}}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(widening))
    run = manager_of(jp_serverapp).get(json.loads(response.body)["run"]["id"])
    assert not hasattr(run.context.options, "allow_shell_tools")
    config = json.loads((await jp_fetch("besser-agent", "config")).body)
    assert config["features"]["shell_tools_enabled"] is False and config["sandbox"]["policy"] == "auto"
    assert manager_of(jp_serverapp).operator.shell_tools_enabled is False
    call = await pending_call(jp_serverapp, run.id)
    with pytest.raises(HTTPClientError) as bad_decision:
        await decide(jp_fetch, run.id, call, "yes")
    assert bad_decision.value.code == 400 and run.pending_approvals() == (call,)


async def test_unknown_runs_are_named(jp_fetch):
    with pytest.raises(HTTPClientError) as missing:
        await jp_fetch("besser-agent", "runs", "20250101-000000-abcdef")
    assert missing.value.code == 404 and json.loads(missing.value.response.body)["code"] == "RUN_NOT_FOUND"


async def test_cancel_ends_a_waiting_run(jp_fetch, jp_serverapp, runs_dir):
    run_id = await start_scenario(jp_fetch)
    await pending_call(jp_serverapp, run_id)
    response = await jp_fetch("besser-agent", "runs", run_id, "cancel", method="POST", body="{}")
    assert json.loads(response.body)["cancelled"] is True
    done = await asyncio.wait_for(manager_of(jp_serverapp).get(run_id).wait(), 10)
    assert done.status == "cancelled"
    assert BUG in (runs_dir / run_id / "app" / "calculator.py").read_text()


async def test_archive_leaves_out_internal_folders_and_links(jp_fetch, jp_serverapp, runs_dir):
    run_id = await start_scenario(jp_fetch)
    await finish_run(jp_fetch, jp_serverapp, run_id)
    run_dir = runs_dir / run_id
    (run_dir / ".besser" / "home" / "secret.txt").write_text("sandbox home")
    (run_dir / "app" / "__pycache__").mkdir(exist_ok=True)
    (run_dir / "app" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (run_dir / "app" / ".besser_command_output").mkdir()
    (run_dir / "app" / ".besser_command_output" / "out.txt").write_text("spill")
    (run_dir / "app" / ".besser_probe.py").write_text("# the runtime probe\n")
    (run_dir / "app" / ".besser_probe").mkdir()
    (run_dir / "app" / ".besser_probe" / "server.log").write_text("probe state")
    (run_dir / "app" / "passwd").symlink_to("/etc/passwd")
    response = await jp_fetch("besser-agent", "runs", run_id, "archive")
    names = zipfile.ZipFile(io.BytesIO(response.body)).namelist()
    assert f"{run_id}/app/calculator.py" in names and f"{run_id}/events.jsonl" in names
    assert not [n for n in names if ".besser" in n or "__pycache__" in n or n.endswith("passwd")]
    assert FIX in zipfile.ZipFile(io.BytesIO(response.body)).read(f"{run_id}/app/calculator.py").decode()


async def test_a_follower_that_leaves_does_not_disturb_the_run(jp_fetch, jp_serverapp):
    run_id = await start_scenario(jp_fetch)
    async with async_client(jp_serverapp) as client, client.stream("GET", f"runs/{run_id}/events") as response:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                break  # leave after the first event
    await asyncio.sleep(0.2)  # a few heartbeats find the connection closed
    await finish_run(jp_fetch, jp_serverapp, run_id)
    assert manager_of(jp_serverapp).get(run_id).status == "completed"


async def test_event_streams_past_the_servers_most_are_refused_by_name_and_a_closed_one_frees_its_place(jp_fetch, jp_serverapp):
    """Hundreds of streams at once held GET config for seconds (red team 2, F5): past the server's
    most, a stream is refused (429 TOO_MANY_STREAMS); one that closes gives its place back."""
    limits = jp_serverapp.web_app.settings[STATE_KEY].streams
    limits.max_open = 2
    run_id = await start_scenario(jp_fetch)
    async with async_client(jp_serverapp) as client:
        opened: list[asyncio.Future] = []
        leave = [asyncio.Event(), asyncio.Event()]
        first_event = [asyncio.Event(), asyncio.Event()]

        async def follow(index: int) -> None:
            async with client.stream("GET", f"runs/{run_id}/events") as response:
                assert response.status_code == 200
                async for line in response.aiter_lines():
                    if line.startswith("data:"):
                        first_event[index].set()
                        await leave[index].wait()
                        return

        for index in range(2):
            opened.append(asyncio.ensure_future(follow(index)))
            await asyncio.wait_for(first_event[index].wait(), 30)
        assert limits.open == 2
        refused = await client.get(f"runs/{run_id}/events")
        assert refused.status_code == 429
        assert refused.json()["code"] == "TOO_MANY_STREAMS"
        assert "event streams are open" in refused.json()["message"]
        leave[0].set()
        await asyncio.wait_for(opened[0], 30)
        await poll(lambda: limits.open == 1)
        first_event[0].clear()
        leave[0].clear()
        again = asyncio.ensure_future(follow(0))
        await asyncio.wait_for(first_event[0].wait(), 30)
        leave[0].set()
        leave[1].set()
        await asyncio.wait_for(asyncio.gather(again, opened[1]), 30)
    await finish_run(jp_fetch, jp_serverapp, run_id)
    await poll(lambda: limits.open == 0)


async def test_many_replays_of_a_finished_run_at_once_each_get_every_event(jp_fetch, jp_serverapp):
    """Replays wait their turn (a few are written at once), and none is cut short by waiting."""
    run_id = await start_scenario(jp_fetch)
    await finish_run(jp_fetch, jp_serverapp, run_id)
    expected = len(manager_of(jp_serverapp).get(run_id).events.since(0))
    async with async_client(jp_serverapp) as client:

        async def replay() -> int:
            response = await client.get(f"runs/{run_id}/events")
            assert response.status_code == 200
            return len([f for f in parse_sse_text(response.text) if "data" in f])

        counts = await asyncio.wait_for(asyncio.gather(*(replay() for _ in range(24))), 120)
    assert counts == [expected] * 24

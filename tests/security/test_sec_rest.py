# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""REST attacks on the extension of a real jupyter_server (127.0.0.1): credentials and XSRF.

A run waits on its first card (started with the server token). Every endpoint is then tried
without credentials, with wrong ones, and with the kernels' capability token where it must not
work (in the URL); a cookie-authenticated browser session is tried without its XSRF token.
Each refusal leaves the run exactly where it was and the runs folder unchanged.
"""

from __future__ import annotations

import json

import httpx
import pytest
from file_tool_helpers import tree_state
from jupyter_fixtures import (  # noqa: F401
    auth,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    poll,
    runs_dir,
    server_api,
)

from kernel_ext.server.auth import Capability
from kernel_ext.server.handlers.base import STATE_KEY

SCENARIO = json.dumps({"kind": "scenario", "scenario": "side-effects"})


async def waiting_run(jp_fetch, app):
    response = await jp_fetch("besser-agent", "runs", method="POST", body=SCENARIO)
    run = app.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    call_id = (await poll(run.pending_approvals))[0]
    return run, call_id


def endpoints(run_id: str, call_id: str):
    return [
        ("GET", "config", None),
        ("GET", "runs", None),
        ("POST", "runs", SCENARIO),
        ("GET", f"runs/{run_id}", None),
        ("GET", f"runs/{run_id}/events", None),
        ("POST", f"runs/{run_id}/approvals/{call_id}", json.dumps({"approved": True})),
        ("POST", f"runs/{run_id}/cancel", "{}"),
        ("GET", f"runs/{run_id}/archive", None),
    ]


def state_of(run, runs_dir) -> tuple:
    return run.status, run.pending_approvals(), len(run.events.events), tree_state(runs_dir)


CREDENTIALS = {
    "none": ({}, ""),
    "wrong_token": ({"Authorization": "token not-the-right-one"}, ""),
    "capability_of_another_start": ("another", ""),
    "bearer_garbage": ({"Authorization": "Bearer \u00e9\u00e9 x".encode("latin-1")}, ""),
    "capability_in_url": ({}, "capability"),
}


@pytest.mark.parametrize("credential", list(CREDENTIALS))
async def test_every_endpoint_refuses_bad_credentials_and_nothing_moves(jp_fetch, jp_serverapp, runs_dir, credential, monkeypatch):
    import os

    from kernel_ext.server.auth import ENV_TOKEN

    run, call_id = await waiting_run(jp_fetch, jp_serverapp)
    before = state_of(run, runs_dir)
    headers, query = CREDENTIALS[credential]
    if headers == "another":
        headers = auth(Capability.new().token)
    params = {"token": os.environ[ENV_TOKEN]} if query == "capability" else {}
    async with httpx.AsyncClient(base_url=server_api(jp_serverapp), timeout=20) as client:
        for method, path, body in endpoints(run.id, call_id):
            response = await client.request(method, path, content=body, headers=headers, params=params)
            assert response.status_code in (401, 403), (credential, method, path, response.status_code, response.text[:200])
            assert run.id not in response.text or path == "runs"  # nothing about the run leaks
    assert state_of(run, runs_dir) == before, "a refused request changed the run or the disk"
    run.cancel()


async def test_a_cookie_session_cannot_post_without_its_xsrf_token(jp_fetch, jp_serverapp, runs_dir):
    run, call_id = await waiting_run(jp_fetch, jp_serverapp)
    base = jp_serverapp.connection_url
    token = jp_serverapp.identity_provider.token
    async with httpx.AsyncClient(base_url=base, timeout=20, follow_redirects=False) as browser:
        login = await browser.get("login")
        xsrf = browser.cookies.get("_xsrf")
        assert login.status_code == 200 and xsrf
        logged_in = await browser.post("login", data={"password": token, "_xsrf": xsrf})
        assert logged_in.status_code == 302, logged_in.text[:300]
        api = base.rstrip("/") + "/besser-agent/"
        seen = await browser.get(api + "runs")  # the cookie alone authenticates reads
        assert seen.status_code == 200 and run.id in seen.text
        before = state_of(run, runs_dir)
        for method, path, body in endpoints(run.id, call_id):
            if method != "POST":
                continue
            forged = await browser.post(api + path, content=body, headers={"Content-Type": "application/json"})
            assert forged.status_code == 403, (path, forged.status_code, forged.text[:200])
            wrong = await browser.post(api + path, content=body, headers={"X-XSRFToken": "forged-" + xsrf})
            assert wrong.status_code == 403, (path, wrong.status_code)
        assert state_of(run, runs_dir) == before, "a forged POST changed the run or the disk"
        honest = await browser.post(api + f"runs/{run.id}/approvals/{call_id}", content=json.dumps({"approved": False}),
                                    headers={"X-XSRFToken": xsrf})
        assert honest.status_code == 200, honest.text[:300]  # the same session with its token is heard
    run.cancel()

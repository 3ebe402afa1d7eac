# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""Runs stuck in blocking work never leave a request unanswered (G0: nothing a model supplies stalls the server).

Runs send their blocking work (model loading, snapshots, tools) to asyncio's default executor.
Six runs stuck there (a model BESSER walked forever) used to fill it, and then ``GET config``
and every new ``POST runs`` hung until a restart: parsing the body, describing the
configuration and the token's peer check queued behind them. Request work now has its own
workers (``hosting/offloop.py``). Here more runs than the default executor has threads are held
in their model-loading step (a test-controlled, bounded hold: the one stand-in, for a load that
would never end), and the real server must still answer ``GET config`` and start a new run.
Those two requests come from a client on its own thread, as a browser would: the test's own
tornado client resolves addresses on the same default executor and would starve first.
"""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import Future
from typing import Any

import httpx
import pytest
from jupyter_fixtures import (  # noqa: F401
    auth,
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    poll,
    runs_dir,
    server_api,
)

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.model.examples import build_library_model
from kernel_ext.model.jsonform import model_to_dict
from kernel_ext.server.handlers.base import STATE_KEY

HOLD_S = 60  # the hold ends by itself: a failing test cannot leave threads behind for long
ANSWER_S = 20  # a hang detector for the requests, not a speed bound
DEFAULT_WORKERS = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor


@pytest.fixture
def held_loads(monkeypatch):
    """Every run's model load blocks (up to ``HOLD_S``) until the test releases it, then is refused."""
    from kernel_ext.pipeline import generation

    release = threading.Event()
    entered: list[str] = []

    def held(request, root=None):
        entered.append(request.request)
        release.wait(HOLD_S)
        raise ToolFailure(ErrorCode.TOO_LARGE, "held by the test, then refused")

    monkeypatch.setattr(generation, "_load_model", held)
    yield entered
    release.set()


async def _from_outside(app, method: str, path: str, body: Any = None) -> httpx.Response:
    """One request from a client thread of its own (never the loop's executor), awaited here."""
    answer: Future = Future()

    def send() -> None:
        try:
            with httpx.Client(base_url=server_api(app), headers=auth(app.identity_provider.token), timeout=ANSWER_S) as client:
                answer.set_result(client.request(method, path, json=body))
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            answer.set_exception(exc)

    threading.Thread(target=send, name="outside-client", daemon=True).start()
    return await asyncio.wait_for(asyncio.wrap_future(answer), ANSWER_S + 5)


@pytest.mark.parametrize("extension_config", [{"max_concurrent_runs": DEFAULT_WORKERS + 4}], indirect=True)
async def test_runs_stuck_in_blocking_work_do_not_starve_requests(jp_fetch, jp_serverapp, runs_dir, held_loads):
    """(``jp_fetch`` is requested for the server it starts listening; requests go through ``_from_outside``.
    The admission limit is raised past the default executor's threads, so every run starts and holds one.)"""
    manager = jp_serverapp.web_app.settings[STATE_KEY].manager
    body = {"kind": "generate", "request": "stuck", "provider": "none", "model_json": model_to_dict(build_library_model())}
    stuck = []
    for _ in range(DEFAULT_WORKERS + 2):
        response = await _from_outside(jp_serverapp, "POST", "runs", body)
        assert response.status_code == 201, response.text
        stuck.append(manager.get(response.json()["run"]["id"]))
    # Every thread of the default executor is now held (the last two runs queue behind them).
    await poll(lambda: len(held_loads) >= DEFAULT_WORKERS, timeout=ANSWER_S)

    config = await _from_outside(jp_serverapp, "GET", "config")
    assert config.status_code == 200 and isinstance(config.json(), dict), config.text
    another = await _from_outside(jp_serverapp, "POST", "runs", {**body, "request": "one more"})
    assert another.status_code == 201, another.text
    assert all(not run.task.done() for run in stuck[:DEFAULT_WORKERS]), "the held runs were meant to be stuck still"

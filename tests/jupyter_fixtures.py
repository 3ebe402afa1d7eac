"""Helpers shared by the server, magics and widget tests (imported, not a conftest)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from kernel_ext.hosting.layout import RunLayout
from kernel_ext.hosting.run import start_run
from kernel_ext.scenarios.side_effects_run import side_effects_body


async def poll(predicate, timeout: float = 20.0, interval: float = 0.01):
    """Wait until ``predicate()`` is truthy (its value is returned); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


async def completed_scenario_events(tmp_path: Path, approve=(True, True)):
    """A real hosted run of the chapter-5 scenario, answered from outside: its events."""
    run = start_run(side_effects_body(), RunLayout.create(tmp_path / "replay_runs"))
    seen: set[str] = set()
    for decision in approve:
        pending = await poll(lambda: [c for c in run.pending_approvals() if c not in seen])
        seen.add(pending[0])
        run.decide(pending[0], decision)
    await asyncio.wait_for(run.wait(), 30)
    return list(run.events.events)


def parse_sse_text(text: str) -> list[dict]:
    """Frames of an SSE body: ``{"id", "event", "data"}``; comments as ``{"comment": ...}``."""
    frames, current = [], {}
    for line in text.split("\n"):
        if not line:
            if current:
                frames.append(current)
            current = {}
        elif line.startswith(":"):
            frames.append({"comment": line[1:].strip()})
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            current[name] = json.loads(value) if name == "data" else value
    if current:
        frames.append(current)
    return frames


@pytest.fixture
async def jp_asyncio_loop():
    """pytest-jupyter's server on the loop pytest-asyncio runs the test in (else requests hang)."""
    return asyncio.get_running_loop()


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    path = tmp_path / "server_runs"
    path.mkdir()
    return path


@pytest.fixture
def extension_config(request) -> dict:
    """Extra ``BesserAgentApp`` traits; parametrize with ``indirect=True`` to set some."""
    return dict(getattr(request, "param", {}))


@pytest.fixture
def jp_server_config(runs_dir, extension_config):
    """The extension enabled, runs in a known folder, heartbeats fast enough to see in a test."""
    return {
        "ServerApp": {"jpserver_extensions": {"kernel_ext": True}, "ip": "127.0.0.1"},
        "BesserAgentApp": {"runs_dir": str(runs_dir), "heartbeat_interval": 0.05, **extension_config},
    }


def server_api(serverapp) -> str:
    """The extension's REST root on the real listening socket (same as BESSER_AGENT_URL)."""
    return serverapp.connection_url.rstrip("/") + "/besser-agent/"


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"token {token}"}


def async_client(serverapp, token: str | None = None) -> httpx.AsyncClient:
    token = token if token is not None else serverapp.identity_provider.token
    return httpx.AsyncClient(base_url=server_api(serverapp), headers=auth(token), timeout=20)

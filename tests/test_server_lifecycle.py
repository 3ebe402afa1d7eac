# ruff: noqa: F811 - fixtures imported from jupyter_fixtures are requested by name
"""The extension's lifetime: operator settings at start, recovery of interrupted runs, shutdown,
the kernel export, and the ``generate`` kind (F8) present or absent."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_fixtures import (  # noqa: F401
    extension_config,
    jp_asyncio_loop,
    jp_server_config,
    parse_sse_text,
    poll,
    runs_dir,
)
from tornado.httpclient import HTTPClientError

from kernel_ext.hosting.bus import EventLog
from kernel_ext.server.auth import ENV_TOKEN, ENV_URL
from kernel_ext.server.handlers.base import STATE_KEY

IN_FLIGHT = "20250102-030405-a1b2c3"
ELSEWHERE = "20250103-000000-e1e2e3"
FINISHED = "20250101-010101-0f0f0f"


@pytest.fixture
def other_host():
    """A live process standing in for a kernel that hosts a run in the same folder."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


@pytest.fixture
def earlier_runs(runs_dir, other_host):
    """A run left mid-approval by a server that died (torn last line), a finished one, and one
    hosted right now by another live process."""
    live = EventLog(IN_FLIGHT, runs_dir / IN_FLIGHT / "events.jsonl")
    live.emit("run_started", request="fix the calculator", provider_kind="scripted")
    live.emit("phase", phase="customize", status="started")
    live.emit("approval_requested", call_id="call-2", name="edit", category="edit", request={"arguments": {}})
    live.close_file()
    with open(runs_dir / IN_FLIGHT / "events.jsonl", "a") as torn:
        torn.write(f'{{"seq": 4, "run_id": "{IN_FLIGHT}", "type": "te')
    done = EventLog(FINISHED, runs_dir / FINISHED / "events.jsonl")
    done.emit("run_started", request="earlier")
    done.emit("done", status="completed")
    elsewhere = EventLog(ELSEWHERE, runs_dir / ELSEWHERE / "events.jsonl")
    elsewhere.emit("run_started", request="in a kernel")
    elsewhere.close_file()
    (runs_dir / ELSEWHERE / ".besser").mkdir()
    (runs_dir / ELSEWHERE / ".besser" / "host").write_text(f"{socket.gethostname()} {other_host.pid}")
    return runs_dir


@pytest.fixture
def operator_env(monkeypatch):
    for name in ("BESSER_LLM_ENABLE_SHELL_TOOLS", "BESSER_SANDBOX", "BESSER_LLM_PROVIDER", "BESSER_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("BESSER_LLM_ENABLE_SHELL_TOOLS", "1")
    monkeypatch.setenv("BESSER_SANDBOX", "landlock")
    return monkeypatch


def extension(app):
    return app.extension_manager.extension_points["besser_agent"].app


async def test_runs_in_flight_at_the_last_shutdown_are_marked_interrupted(earlier_runs, jp_fetch):
    lines = (earlier_runs / IN_FLIGHT / "events.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["type"] == "done" and last["status"] == "interrupted" and last["seq"] == 4
    assert lines[-2].endswith('"type": "te')  # the torn line is kept, on its own line
    run = json.loads((await jp_fetch("besser-agent", "runs", IN_FLIGHT)).body)["run"]
    assert run["status"] == "interrupted" and run["live"] is False
    frames = parse_sse_text((await jp_fetch("besser-agent", "runs", IN_FLIGHT, "events")).body.decode())
    assert [f["data"]["type"] for f in frames if "data" in f] == ["run_started", "phase", "approval_requested", "done"]
    finished = (earlier_runs / FINISHED / "events.jsonl").read_text().splitlines()
    assert len(finished) == 2 and json.loads(finished[-1])["status"] == "completed"  # left alone
    listed = {r["id"]: r["status"] for r in json.loads((await jp_fetch("besser-agent", "runs")).body)["runs"]}
    assert listed == {IN_FLIGHT: "interrupted", FINISHED: "completed", ELSEWHERE: "running"}
    assert len((earlier_runs / ELSEWHERE / "events.jsonl").read_text().splitlines()) == 1  # not closed under its host
    with pytest.raises(HTTPClientError) as closed:
        await jp_fetch("besser-agent", "runs", IN_FLIGHT, "approvals", "call-2", method="POST", body='{"approved": true}')
    assert closed.value.code == 409 and json.loads(closed.value.response.body)["code"] == "APPROVAL_CLOSED"


async def test_operator_environment_is_honoured_at_start(operator_env, jp_fetch):
    config = json.loads((await jp_fetch("besser-agent", "config")).body)
    assert config["features"]["shell_tools_enabled"] is True
    assert config["sandbox"]["policy"] == "landlock"


@pytest.mark.parametrize("extension_config", [{"shell_tools_enabled": False, "max_turns": 5}], indirect=True)
async def test_traitlets_take_precedence_over_the_environment(operator_env, jp_fetch):
    config = json.loads((await jp_fetch("besser-agent", "config")).body)
    assert config["features"]["shell_tools_enabled"] is False
    assert config["budgets"] == {"max_turns": 5} and config["sandbox"]["policy"] == "landlock"


async def test_stopping_cancels_runs_and_withdraws_the_export(jp_fetch, jp_serverapp, monkeypatch):
    assert os.environ[ENV_URL].endswith("/a%40b/besser-agent/") and os.environ[ENV_TOKEN]
    response = await jp_fetch("besser-agent", "runs", method="POST", body='{"kind": "scenario"}')
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    await poll(run.pending_approvals)
    await extension(jp_serverapp).stop_extension()
    done = await asyncio.wait_for(run.wait(), 10)
    assert done.status == "cancelled"
    assert "the Jupyter server is stopping" in " ".join(e.text for e in run.events.events if e.type == "text")
    assert ENV_URL not in os.environ and ENV_TOKEN not in os.environ


async def test_stopping_closes_the_ready_app_host(jp_serverapp):
    from api_fixtures import sandbox_cause

    if sandbox_cause() is not None:
        pytest.skip(f"no sandbox tier here: {sandbox_cause()}")
    from kernel_ext.sandbox import proctree
    from kernel_ext.validation.apphost.ready import READY

    READY.refill(None)
    host = await asyncio.to_thread(READY.wait, None, 120)
    assert host is not None and host.alive
    process = host.process
    inside = proctree.idents(proctree.descendants(process.pid))
    assert inside  # the sandbox's own processes, which must end with it
    await extension(jp_serverapp).stop_extension()
    assert READY.wait(None, 0) is None and host._closed and not host.scratch.exists()
    assert process.poll() is not None and not {i for i in proctree.idents(pid for pid, _ in inside) & inside if _running(i[0])}


def _running(pid: int) -> bool:
    """Alive, not a zombie waiting for its parent's reap (an ended sandbox's init may be one a moment)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].split()[0] != "Z"


@pytest.mark.slow
async def test_generate_runs_the_pipeline_on_the_server(jp_fetch, jp_serverapp):
    from kernel_ext.model.examples import build_library_model
    from kernel_ext.model.jsonform import model_to_dict

    body = {"kind": "generate", "request": "A FastAPI backend", "model_json": model_to_dict(build_library_model()),
            "provider": "none", "target": "fastapi_backend", "allow_shell_tools": True}
    response = await jp_fetch("besser-agent", "runs", method="POST", body=json.dumps(body))
    run = jp_serverapp.web_app.settings[STATE_KEY].manager.get(json.loads(response.body)["run"]["id"])
    done = await asyncio.wait_for(run.wait(), 600)
    assert done is not None and done.status == "completed" and run.events.events[0].type == "run_started"
    assert run.events.events[0].shell_tools_enabled is False

# ruff: noqa: F811 - the host fixture imported from api_fixtures is requested by name
"""The app runs confined: no network inside, start-up failures reported, time bounded.

A real HTTP server listens on the test process's 127.0.0.1; the same app, imported directly
in the test process, reaches it (so the test can fail), while inside the sandbox it cannot
(the network namespace has its own loopback), nor reach a public address or resolve a name.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from api_fixtures import APPS, app_workspace, call, executor_for, host, requires_sandbox  # noqa: F401 - host is a fixture
from sandbox_fixtures import tier_param

from kernel_ext.validation import staging
from kernel_ext.validation.apphost.host import AppHost
from kernel_ext.workspace import Workspace

pytestmark = requires_sandbox


@pytest.fixture
def loopback_server():
    class Hello(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello from the host")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def unsandboxed(app_dir, path: str) -> dict:
    """The net app imported in this process (no sandbox): the baseline the sandbox must differ from."""
    spec = importlib.util.spec_from_file_location("f6_net_app_baseline", app_dir / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=module.app), base_url="http://t") as client:
            return (await client.get(path)).json()

    return asyncio.run(go())


@pytest.mark.parametrize("tier", [tier_param("bwrap"), tier_param("landlock")])
def test_an_app_that_connects_out_fails_inside(tmp_path, loopback_server, tier):
    project = app_workspace("net_app", tmp_path / "project")
    baseline = unsandboxed(APPS / "net_app", f"/connect?host=127.0.0.1&port={loopback_server}")
    assert baseline["connected"] and "200" in baseline["received"]  # reachable without the sandbox
    requests = [
        {"method": "GET", "path": f"/connect?host=127.0.0.1&port={loopback_server}", "expected_fields": {"connected": True}},
        {"method": "GET", "path": "/connect?host=1.1.1.1&port=80", "expected_fields": {"connected": True}},
    ]
    if tier == "bwrap":  # Landlock denies TCP only (its documented limit); bubblewrap has no network at all
        requests.append({"method": "GET", "path": "/resolve?name=example.com", "expected_fields": {"connected": True}})
    own = AppHost(policy=tier)
    try:
        result = call(executor_for(project, own), "test_api", {"requests": requests})
    finally:
        own.close()
    assert result.ok and not result.data["passed"]
    rows = result.data["report"]["requests"]
    assert [r["response"]["body"]["connected"] for r in rows] == [False] * len(requests), result.observation
    assert "Error" in rows[0]["response"]["body"]["error"]
    assert result.data["report"]["network"] is False and result.data["report"]["sandbox"] == tier


def test_an_app_that_crashes_at_import_is_a_startup_failure(tmp_path, host):
    project = app_workspace("crash_app", tmp_path / "project")
    executor = executor_for(project, host)
    result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/", "expected_status": 200}]})
    assert result.ok and not result.data["passed"]
    report = result.data["report"]
    assert "NameError" in report["startup_error"] and "load_settings" in report["startup_error"]
    assert report["requests"] == [] and "application startup failed" in result.observation
    validation = call(executor, "validate_app", {})
    assert validation.ok and validation.data["boots"] is False and not validation.data["verified"]
    startup = [f for f in validation.data["findings"] if f["code"] == "startup_failed"]
    assert startup and startup[0]["severity"] == "blocker" and startup[0]["path"] == "backend/main.py" and startup[0]["line"] == 6


def test_a_failing_startup_handler_is_a_startup_failure(tmp_path, host):
    project = app_workspace("startup_crash_app", tmp_path / "project")
    executor = executor_for(project, host)
    result = call(executor, "test_api", {"requests": [{"method": "GET", "path": "/"}]})
    assert "start-up handler failed" in result.data["report"]["startup_error"]
    assert "database migration failed" in result.data["report"]["startup_error"]
    validation = call(executor, "validate_app", {})
    assert validation.data["boots"] is False
    assert any(f["code"] == "startup_failed" and f["severity"] == "blocker" for f in validation.data["findings"])


def test_a_scenario_past_its_deadline_or_one_that_kills_its_process_leaves_the_host_serving(tmp_path, host):
    project = app_workspace("net_app", tmp_path / "project")
    ws = Workspace(project)
    source = staging.read_source(ws, staging.locate(ws))
    staged = host.stage(source)
    slow = {"kind": "scenario", "requests": [{"method": "GET", "path": "/sleep?seconds=30", "has_json": False, "headers": {}}]}
    reply = host.run(staged, slow, timeout=1.5)
    assert reply["op"] == "error" and reply["code"] == "timeout"
    gone = {"kind": "scenario", "requests": [{"method": "GET", "path": "/exit", "has_json": False, "headers": {}}]}
    reply = host.run(staged, gone, timeout=30)
    assert reply["op"] == "error" and reply["code"] == "child_died" and "exit code 3" in reply["message"]
    quick = {"kind": "scenario", "requests": [{"method": "GET", "path": "/sleep?seconds=0", "has_json": False, "headers": {}}]}
    reply = host.run(staged, quick, timeout=30)
    assert reply["op"] == "result" and reply["result"]["requests"][0]["status"] == 200


def test_a_host_that_died_is_started_again(tmp_path):
    project = app_workspace("net_app", tmp_path / "project")
    own = AppHost()
    try:
        executor = executor_for(project, own)
        request = {"requests": [{"method": "GET", "path": "/sleep?seconds=0", "expected_status": 200}]}
        assert call(executor, "test_api", request).data["passed"]
        os.kill(own.process.pid, signal.SIGKILL)
        own.process.wait(timeout=10)
        again = call(executor, "test_api", request)
        assert again.ok and again.data["passed"], again.observation
        assert own.starts == 2
    finally:
        own.close()
    assert own.process is None

"""Secrets never reach a command, a result, an event on disk, or a test_api report.

The server process holds provider keys and other credentials (set in its environment for the
test). A sandboxed command hunts for them in its environment and in every /proc/*/environ it
can name; an app run by test_api does the same and echoes a credential it is sent. Everything
the run records (results, ``events.jsonl`` on disk) is searched for the exact values.
"""

from __future__ import annotations

import json
import os

import pytest
from api_fixtures import requires_sandbox
from sandbox_fixtures import CONFINED_TIERS, tier_param

from kernel_ext.boundary import (
    ApprovalPolicy,
    ExecutionPolicy,
    Executor,
    ToolCall,
    always_approve,
)
from kernel_ext.hosting.bus import EventLog
from kernel_ext.pipeline.reporting import report_call, report_result
from kernel_ext.secrets import secret_values
from kernel_ext.tools.base import RunState, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.validation.apphost.host import AppHost
from kernel_ext.workspace import Workspace

from .world import output, shell_executor

SECRETS = {
    "OPENAI_API_KEY": "sk-sec-0123456789abcdefABCDEF",
    "ANTHROPIC_API_KEY": "sk-ant-sec-9876543210fedcba",
    "BESSER_AGENT_TOKEN": "capability-token-5f2e9d81c4b7a6e3",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-7Hq2Lm9Xz4Pw8Rt1",
    "GITHUB_TOKEN": "ghp_sec4f8a1b2c3d4e5f6a7b8c9d0",
    "DATABASE_URL": "postgresql://app:db-pass-31a9c7e2@db.invalid/app",
}
VALUES = ("sk-sec-0123456789abcdefABCDEF", "sk-ant-sec-9876543210fedcba", "capability-token-5f2e9d81c4b7a6e3",
          "aws-secret-7Hq2Lm9Xz4Pw8Rt1", "ghp_sec4f8a1b2c3d4e5f6a7b8c9d0", "db-pass-31a9c7e2")


@pytest.fixture
def server_secrets(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    return SECRETS


def assert_nowhere(text: str, where: str) -> None:
    for value in VALUES:
        assert value not in text, f"{where} shows {value!r}"


@pytest.mark.parametrize("policy", [tier_param(t) for t in CONFINED_TIERS])
def test_a_command_finds_no_secret_in_any_environment_it_can_name(world, registry, policy, server_secrets, tmp_path):
    executor = shell_executor(world, registry, policy)
    events = EventLog("sec-env", tmp_path / "events.jsonl", known_secrets=secret_values())
    hunts = [
        "env",
        "tr '\\0' '\\n' < /proc/self/environ",
        "tr '\\0' '\\n' < /proc/$$/environ",
        "tr '\\0' '\\n' < /proc/$PPID/environ",
        "tr '\\0' '\\n' < /proc/1/environ",
        f"tr '\\0' '\\n' < /proc/{os.getpid()}/environ",  # the server itself
        "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null; true",
        "echo $OPENAI_API_KEY $BESSER_AGENT_TOKEN $DATABASE_URL; true",
        "python3 -c 'import os; print(dict(os.environ))'",
    ]
    for n, command in enumerate(hunts):
        call = ToolCall(f"c{n}", "run_command", {"command": command})
        report_call(events, call)
        result = executor.execute_sync(call)
        report_result(events, result)
        assert_nowhere(output(result) + json.dumps(result.data), f"{command!r} ({policy})")
        assert result.data.get("secrets_env_scrubbed", 0) >= len(SECRETS), result.data
    # A command that names a secret literally (a model that guessed or was told it) is redacted in events.
    literal = ToolCall("c-lit", "run_command", {"command": f"echo {SECRETS['OPENAI_API_KEY']} > /dev/null"})
    report_call(events, literal)
    report_result(events, executor.execute_sync(literal))
    events.close_file()
    assert_nowhere((tmp_path / "events.jsonl").read_text(), "events.jsonl")
    assert world.unchanged()


ENV_APP = '''
import os
from fastapi import FastAPI, Header

app = FastAPI()


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return handle.read().decode(errors="replace")
    except OSError as exc:
        return f"unreadable: {exc.strerror}"


@app.get("/env")
def env():
    return {"environ": dict(os.environ)}


@app.get("/proc")
def proc(server: int = 0):
    pids = ["self", "1", str(os.getppid()), *([str(server)] if server else [])]
    return {pid: environ(pid) for pid in pids}


@app.get("/echo")
def echo(authorization: str = Header(default="")):
    print(f"handling {authorization}", flush=True)
    return {"you_sent": authorization}
'''


@requires_sandbox
def test_an_app_under_test_api_finds_no_server_secret_and_echoes_are_redacted(world, server_secrets, tmp_path):
    backend = world.ws / "backend"
    backend.mkdir()
    (backend / "main.py").write_text(ENV_APP)
    bearer = "Bearer user-token-a81f3c9e27d4b6"
    requests = [
        {"method": "GET", "path": "/env", "expected_status": 200},
        {"method": "GET", "path": f"/proc?server={os.getpid()}", "expected_status": 200},
        {"method": "GET", "path": "/echo", "headers": {"Authorization": bearer}, "expected_status": 200},
    ]
    host = AppHost()
    events = EventLog("sec-api", tmp_path / "events.jsonl", known_secrets=secret_values())
    try:
        executor = Executor(default_catalog(), ToolContext(services={"workspace": Workspace(world.ws), "app_host": host},
                                                          state=RunState(run_id="sec-api")),
                            policy=ExecutionPolicy.allowing(["test"]), approvals=ApprovalPolicy.without_approval_for("test"),
                            approver=always_approve)
        call = ToolCall("t1", "test_api", {"scenario_id": "env", "requests": requests})
        report_call(events, call)
        result = executor.execute_sync(call)
        report_result(events, result)
    finally:
        host.close()
    events.close_file()
    assert result.ok, result.observation
    report = json.dumps(result.data, default=str)
    environ = result.data["report"]["requests"][0]["response"]["body"]["environ"]
    assert "PATH" in environ and not (set(SECRETS) - {"DATABASE_URL"}) & set(environ)  # the app ran, saw no secret name
    assert environ.get("DATABASE_URL", "sqlite").startswith("sqlite")  # the host's fresh database, not the server's
    for text, where in ((result.observation, "observation"), (report, "report"),
                        ((tmp_path / "events.jsonl").read_text(), "events.jsonl")):
        assert_nowhere(text, where)
        assert "user-token-a81f3c9e27d4b6" not in text, f"{where} shows the echoed credential"
    assert world.unchanged()

"""The server's ready app host (issue 32, item 4): a cold test_api finds the libraries imported.

A ready host is started after a host's first job and taken, once, by the next run whose host is
made. These tests hold what it must not change: the call's result, containment (nothing of one
run reaches the next; no secret in its environment), its end with the server, and a dead one
(the call starts cold, saying so; another is started). Real bubblewrap, real hosts, real apps.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from api_fixtures import app_workspace, call, executor_for, library_workspace, requires_sandbox
from appenv_fixtures import app_project, wheelhouse  # noqa: F401 - a fixture, requested by name

from kernel_ext.sandbox import proctree
from kernel_ext.tools.base import RunState
from kernel_ext.validation.apphost.host import ENV_RESTART_NOTE, AppHost
from kernel_ext.validation.apphost.ready import READY, TAKEN_NOTE
from kernel_ext.validation.hosting import app_host, close_app_hosts
from kernel_ext.validation.library_scenario import library_requests

pytestmark = requires_sandbox
ROOT = Path(__file__).resolve().parent.parent
HOST_PROGRAM = "kernel_ext.validation.apphost.main"
START_S = 120


@pytest.fixture(autouse=True)
def no_ready_host_before_or_after():
    READY.close()
    yield
    READY.close()


def ready_host() -> AppHost:
    """Have the ready host started and wait until it is up."""
    READY.refill(None)
    host = READY.wait(None, START_S)
    assert host is not None and host.alive and host.ready.get("op") == "ready"
    return host


def run_through_the_table(project: Path, run_id: str, requests: list[dict]):
    """One test_api call of a new run whose host the tool finds itself (as a run's does); (result, host)."""
    state = RunState(run_id=run_id)
    executor = executor_for(project, None, state=state)  # no host installed: the tool asks the run's table
    try:
        result = call(executor, "test_api", {"requests": requests})
        return result, app_host(state)
    finally:
        close_app_hosts(run_id, state)


def host_interpreter(host: AppHost) -> int:
    """The pid of the host program inside the sandbox (a descendant of the bwrap process)."""
    found = [pid for pid in proctree.descendants(host.process.pid) if HOST_PROGRAM in _cmdline(pid)]
    assert found, "the host program was not found under its sandbox"
    return found[0]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """True once ``pid`` has ended (its pidfd turns readable), False past ``timeout``."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def comparable(report: dict) -> dict:
    """A report without what differs between two runs of one scenario: times (the app's own
    ``x-process-time`` header among them) and notes."""
    kept = {k: v for k, v in report.items() if k not in ("timings", "total_ms", "notes")}
    kept["summary"] = re.sub(r"\d+ ms", "_ ms", report["summary"])
    kept["requests"] = []
    for row in report["requests"]:
        row = {k: v for k, v in row.items() if k != "duration_ms"}
        row["response"] = {**row["response"], "headers": {k: v for k, v in row["response"]["headers"].items() if k != "x-process-time"}}
        kept["requests"].append(row)
    return kept


def test_a_cold_call_through_the_ready_host_reports_what_a_host_started_by_the_call_reports(tmp_path):
    project = library_workspace(tmp_path / "library")
    requests = library_requests()
    before = AppHost()  # a host started by the call, as every cold call was before the ready host
    try:
        cold = call(executor_for(project, before), "test_api", {"requests": requests})
    finally:
        before.close()
    assert cold.ok and cold.data["passed"], cold.observation

    waiting = ready_host()
    result, used = run_through_the_table(project, "ready-lib", requests)
    assert used is waiting and result.ok and result.data["passed"], result.observation
    report = result.data["report"]
    assert TAKEN_NOTE in report["notes"] and TAKEN_NOTE not in cold.data["report"]["notes"]
    assert comparable(report) == comparable(cold.data["report"])
    assert report["timings"]["requests_ms"] > 0


def test_two_runs_in_a_row_through_ready_hosts_see_nothing_of_each_other(tmp_path):
    project = app_workspace("trace_app", tmp_path / "project")
    look = {"method": "GET", "path": "/look", "expected_status": 200}
    first_host = ready_host()
    first, used = run_through_the_table(project, "ready-trace-1", [{"method": "POST", "path": "/plant", "expected_status": 200},
                                                                    {**look, "expected_fields": {"files": True, "env": True,
                                                                                                 "module": True, "builtins": True}}])
    assert used is first_host and first.data["passed"], first.observation  # the traces are there to be seen
    assert TAKEN_NOTE in first.data["report"]["notes"]

    second_host = ready_host()  # started after the first run's first job, from nothing of it
    assert second_host is not first_host
    second, used = run_through_the_table(project, "ready-trace-2", [{**look, "expected_fields": {
        "files": False, "env": False, "module": False, "builtins": False}}])
    assert used is second_host and second.data["passed"], second.observation
    assert TAKEN_NOTE in second.data["report"]["notes"]


def test_the_ready_host_holds_no_secret(monkeypatch):
    secret = "sk-ready-host-" + "q7" * 12
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("BESSER_LLM_API_KEY", secret)
    host = ready_host()
    inner = host_interpreter(host)
    environ = Path(f"/proc/{inner}/environ").read_bytes()
    names = {entry.split(b"=", 1)[0] for entry in environ.split(b"\0") if entry}
    assert b"PATH" in names  # the environment was read (it is scrubbed, not empty)
    assert secret.encode() not in environ and b"OPENAI_API_KEY" not in names and b"BESSER_LLM_API_KEY" not in names
    assert secret.encode() not in Path(f"/proc/{host.process.pid}/environ").read_bytes()


SERVER = r"""
import sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
from kernel_ext.validation.apphost.ready import READY
from test_apphost_ready import host_interpreter
READY.refill(None)
host = READY.wait(None, 120)
print(host.process.pid, host_interpreter(host), flush=True)
if sys.stdin.readline().strip() == "stop":
    from kernel_ext.validation.hosting import close_ready_hosts
    print(close_ready_hosts(), flush=True)
    sys.stdin.readline()
"""


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_the_ready_host_ends_with_the_server(how):
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(ROOT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)
    try:
        sandbox, inner = (int(x) for x in server.stdout.readline().split())
        assert not wait_gone(inner, 0) and not wait_gone(sandbox, 0)
        if how == "stopped":
            server.stdin.write("stop\n")
            server.stdin.flush()
            assert server.stdout.readline().strip() == "1"
        else:
            os.kill(server.pid, signal.SIGKILL)
        assert wait_gone(inner) and wait_gone(sandbox), f"the ready host outlived the server ({how})"
    finally:
        server.kill()
        server.wait(timeout=30)


def test_a_killed_ready_host_makes_the_call_cold_with_a_named_line_and_is_replaced(tmp_path):
    project = app_workspace("net_app", tmp_path / "project")
    dead = ready_host()
    os.kill(host_interpreter(dead), signal.SIGKILL)
    dead.process.wait(timeout=30)
    result, used = run_through_the_table(project, "ready-killed", [{"method": "GET", "path": "/sleep?seconds=0",
                                                                     "expected_status": 200}])
    assert used is not dead and result.ok and result.data["passed"], result.observation
    notes = result.data["report"]["notes"]
    assert any(n.startswith("app host started cold: the server's ready host had ended (") for n in notes), notes
    assert dead._closed and not dead.scratch.exists()
    replacement = READY.wait(None, START_S)  # started after that call's first job
    assert replacement is not None and replacement is not dead and replacement.alive


def test_an_app_with_its_own_environment_falls_back_cold_and_says_so(wheelhouse, tmp_path):  # noqa: F811
    project = app_project(tmp_path / "project", "fastapi\nPyYAML==0.1\n",
                          "from fastapi import FastAPI\n\napp = FastAPI()\n\n"
                          "@app.get('/v')\ndef v():\n    import yaml\n    return {'yaml': yaml.__version__}\n")
    waiting = ready_host()
    result, used = run_through_the_table(project, "ready-appenv", [{"method": "GET", "path": "/v", "expected_status": 200,
                                                                     "expected_fields": {"yaml": "0.1"}}])
    assert used is waiting and result.ok and result.data["passed"], result.observation
    notes = result.data["report"]["notes"]
    assert ENV_RESTART_NOTE in notes and TAKEN_NOTE not in notes
    assert used.starts == 2  # the ready process was ended and a host with the app's overlay started


def test_nothing_is_started_ahead_until_a_host_has_served_a_job():
    states = [RunState(run_id=f"ready-idle-{i}") for i in range(3)]
    try:
        hosts = [app_host(state) for state in states]
        assert READY.wait(None, 0) is None and not any(h.alive for h in hosts)
        assert all(h.start_note.startswith("app host started cold: no ready host yet") for h in hosts)
    finally:
        for state in states:
            close_app_hosts(state.run_id, state)
    assert READY.close() == 0

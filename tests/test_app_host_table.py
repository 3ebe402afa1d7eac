"""No app host is taken from a run that uses it (issue 21, item 3).

Before, the least recently used host past four was closed while its run still used it (12 runs
at once: 10 ended ``blocked``, "the app host of this run was closed"). Now a host is closed only
when its run ends; one that sat idle has its process stopped, never with a job in flight, and
its run keeps it: the next job starts it again. Real sandboxed hosts and a real app.
"""

from __future__ import annotations

import threading
import time

from api_fixtures import app_workspace, requires_sandbox

from kernel_ext.tools.base import RunState
from kernel_ext.validation import staging
from kernel_ext.validation.hosting import app_host, close_app_hosts, open_hosts, reap_idle
from kernel_ext.workspace import Workspace


def job(seconds: float) -> dict:
    return {"kind": "scenario", "requests": [{"method": "GET", "path": f"/sleep?seconds={seconds}", "has_json": False, "headers": {}}]}


def test_many_runs_each_keep_their_host_until_they_end():
    states = [RunState(run_id=f"20260101-00000{i}-0a0b0c") for i in range(9)]
    before = open_hosts()
    hosts = [app_host(state) for state in states]
    try:
        assert open_hosts() == before + 9 and not any(host._closed for host in hosts)
        assert [app_host(state) for state in states] == hosts  # each run finds its own again
    finally:
        for state in states:
            close_app_hosts(state.run_id, state)
    assert all(host._closed for host in hosts) and open_hosts() == before


@requires_sandbox
def test_an_idle_host_is_stopped_never_one_with_a_job_in_flight_and_its_run_keeps_it(tmp_path):
    project = app_workspace("net_app", tmp_path / "project")
    ws = Workspace(project)
    source = staging.read_source(ws, staging.locate(ws))
    state = RunState(run_id="20260101-000100-0a0b0c")
    host = app_host(state)
    try:
        staged = host.stage(source)
        replies: list[dict] = []
        worker = threading.Thread(target=lambda: replies.append(host.run(staged, job(2), timeout=30)))
        worker.start()
        deadline = time.monotonic() + 60
        while host.busy == 0 or not host.alive:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.3)
        assert reap_idle(0.0) == 0 and host.alive  # idle past any bound, but a job is in flight
        worker.join(60)
        assert replies[0]["op"] == "result" and replies[0]["result"]["requests"][0]["status"] == 200

        assert reap_idle(3600.0) == 0 and host.alive  # used just now
        assert reap_idle(0.0) == 1 and not host.alive  # idle, nothing in flight: its process stops
        assert app_host(state) is host and not host._closed  # the run keeps its host
        again = host.run(host.stage(source), job(0), timeout=30)
        assert again["op"] == "result" and host.starts == 2
    finally:
        close_app_hosts(state.run_id, state)
    assert host.process is None and not host.scratch.exists()

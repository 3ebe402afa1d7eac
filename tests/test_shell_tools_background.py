# ruff: noqa: F811 - the h fixture imported from shell_tools_fixtures is requested by name
"""Background commands: a real server polled by byte cursor and killed with its children, caps, reaping."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest
from sandbox_fixtures import free_port, port_answers, processes_with, token, wait_until
from shell_tools_fixtures import h, harness, needs_bwrap  # noqa: F401 - h is a fixture

from kernel_ext.sandbox.shtools import jobs, shell

pytestmark = needs_bwrap


def poll_until(h, record, predicate, **cursors):
    """sh_logs until ``predicate(result)``; returns the last result (bounded wait, never a timing assertion)."""
    box = {}

    def check():
        box["r"] = h.call("sh_logs", id=record, **cursors)
        return predicate(box["r"])

    assert wait_until(check, timeout=15), box.get("r")
    return box["r"]


@pytest.fixture
def host_h(tmp_path):
    """The harness with the server's network (``host``): the test itself talks to the run's server."""
    found = harness(tmp_path, network="host")
    yield found
    found.service.close()


def test_background_server_polled_by_cursor_then_killed_with_its_children(host_h):
    h = host_h
    port, marker = free_port(), token()
    command = f"(sleep {marker} &); python -u -m http.server {port} --bind 127.0.0.1"
    started = h.call("sh_run", command=command, background=True)
    assert started.ok and started.data["status"] == "running" and started.data["background"] is True
    assert isinstance(started.data["pid"], int) and started.data["risk"] == "network"
    record = started.data["id"]
    first = poll_until(h, record, lambda r: "Serving HTTP" in r.data.get("stdout", "")).data
    assert first["status"] == "running" and first["stdout_cursor"] > 0 and first["running_ms"] > 0
    assert wait_until(lambda: port_answers(port))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/project.txt", timeout=5) as answer:
        assert answer.read() == b"inside-the-project\n"
    cursors = {"stdout_cursor": first["stdout_cursor"], "stderr_cursor": first["stderr_cursor"]}
    second = poll_until(h, record, lambda r: "GET /project.txt" in r.data.get("stderr", ""), **cursors).data
    assert "Serving HTTP" not in second.get("stdout", "")  # only what is new since the cursor
    assert second["stderr_cursor"] > first["stderr_cursor"] and second["stderr_lines"] >= 1
    assert processes_with(f"sleep {marker}")
    killed = h.call("sh_kill", id=record)
    assert killed.ok and killed.data["status"] == "killed" and killed.data["signals_sent"][0] == "SIGTERM"
    assert wait_until(lambda: not processes_with(f"sleep {marker}") and not port_answers(port), timeout=10)
    after = h.call("sh_logs", id=record).data
    assert after["status"] == "killed" and after["signal"] in ("SIGTERM", "SIGKILL")
    assert "Serving HTTP" in after["stdout"]  # cursor 0 again: everything, from the start
    stored = h.call("sh_detail", id=record, selector="stderr", match="GET /project.txt")
    assert stored.ok and stored.data["matches"] == 1


def test_kill_after_exit_is_already_exited_not_an_error(h):
    started = h.call("sh_run", command="echo quick", background=True)
    record = started.data["id"]
    done = poll_until(h, record, lambda r: r.data["status"] == "exited").data
    assert done["exit"] == 0 and done["stdout"] == "quick"
    again = h.call("sh_kill", id=record)
    assert again.ok and again.data["status"] == "already_exited" and again.data["exit"] == 0
    foreground = h.call("sh_run", command="true").data["id"]
    assert h.call("sh_kill", id=foreground).data["status"] == "already_exited"


def test_options_that_need_the_end_are_refused_in_the_background(h):
    before = h.tree()
    for option in ({"expect": {"exit": 0}}, {"trace": True}, {"retries": 2}, {"full": True}, {"timeout_ms": 1000}, {"retry_on_exit": [1]}):
        refused = h.call("sh_run", command="touch started.txt", background=True, **option)
        assert refused.error.code == "background_incompatible", option
    assert h.tree() == before and not h.shell.jobs.running()
    kept = h.call("sh_run", command="true", background=True, cwd="sub", sandbox={"network": False}, no_store=True)
    assert kept.ok


def test_background_limit_and_reaping_on_service_close(tmp_path):
    h = harness(tmp_path, max_background=2)
    markers = [token(), token()]
    for marker in markers:
        assert h.call("sh_run", command=f"sleep {marker}", background=True).ok
    refused = h.call("sh_run", command="sleep 1000", background=True)
    assert refused.error.code == "background_limit"
    assert all(wait_until(lambda m=m: processes_with(f"sleep {m}")) for m in markers)
    h.service.close()  # the run ended: nothing it started may survive
    assert wait_until(lambda: not any(processes_with(f"sleep {m}") for m in markers), timeout=10)
    assert all(job.status == "killed" for job in h.shell.jobs._jobs.values())


def test_gap_when_output_was_dropped_between_polls(h, monkeypatch):
    monkeypatch.setattr(jobs, "RING_BYTES", 4096)
    monkeypatch.setattr(shell, "STORE_BYTES", 4096)
    started = h.call("sh_run", command="head -c 200000 /dev/zero | tr '\\0' 'y'; echo; echo END", background=True)
    record = started.data["id"]
    poll_until(h, record, lambda r: r.data["status"] == "exited")
    head = h.call("sh_logs", id=record, full=True).data
    assert head["stdout_cursor"] == 4096 and head.get("stdout_more") and "gap" not in head
    late = h.call("sh_logs", id=record, stdout_cursor=head["stdout_cursor"], full=True).data
    assert late["gap"] is True and late["stdout"].rstrip().endswith("END") and late["stdout_cursor"] == 200000 + 5
    assert h.call("sh_logs", id=record, stdout_cursor=200006).error.code == "cursor_out_of_range"


def test_signals_other_than_term_and_stream_selection(h):
    loop = "trap 'echo got-usr1' USR1; echo ready; while :; do sleep 0.05; done"
    record = h.call("sh_run", command=loop, background=True).data["id"]
    poll_until(h, record, lambda r: "ready" in r.data.get("stdout", ""))
    nudged = h.call("sh_kill", id=record, signal="USR1")
    assert nudged.ok and nudged.data["status"] == "running"  # not a stop signal: no escalation
    only_out = poll_until(h, record, lambda r: "got-usr1" in r.data.get("stdout", ""), stream="stdout")
    assert "stderr_cursor" not in only_out.data
    killed = h.call("sh_kill", id=record, signal="kill")
    assert killed.data["status"] == "killed" and killed.data["signals_sent"] == ["SIGKILL"]


CHILD = """
import os, sys, time
sys.path.insert(0, {root!r})
from kernel_ext.sandbox.shtools.shell import Shell
shell = Shell({ws!r}, enable=True, policy="bwrap", state_dir={state!r})
shell.run("sleep {marker}", background=True)
deadline = time.monotonic() + 10
while not any(b"sleep {marker}" in open(f"/proc/{{p}}/cmdline", "rb").read() for p in os.listdir("/proc") if p.isdigit() and os.path.exists(f"/proc/{{p}}/cmdline")):
    if time.monotonic() > deadline:
        sys.exit(3)
    time.sleep(0.05)
{ending}
"""


@pytest.mark.parametrize("ending", ["sys.exit(0)", "os._exit(0)"], ids=["clean-exit", "abrupt-exit"])
def test_no_background_process_outlives_the_server(tmp_path, ending):
    marker = token()
    ws = tmp_path / "ws"
    ws.mkdir()
    root = str(Path(__file__).resolve().parents[1])
    code = textwrap.dedent(CHILD.format(root=root, ws=str(ws), state=str(tmp_path / "state"), marker=marker, ending=ending))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert wait_until(lambda: not processes_with(f"sleep {marker}"), timeout=10)


def test_the_service_close_hook_stops_the_shared_shell_without_patching_the_service(tmp_path):
    from kernel_ext.sandbox.session.service import ShellService

    service = ShellService(tmp_path, run_id="hook", enabled=True)
    first = shell.Shell.for_service(service, state_dir=tmp_path / "state")
    assert shell.Shell.for_service(service, state_dir=tmp_path / "state") is first  # one per service
    assert "close" not in vars(service)  # a hook, not a replaced method
    seen: list[str] = []
    service.on_close(lambda: seen.append("closed"))
    service.close()
    assert first.closed and seen == ["closed"]
    service.close()  # hooks run once
    assert seen == ["closed"]

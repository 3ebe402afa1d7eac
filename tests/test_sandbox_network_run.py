"""One private network per run (runnet): its session and its sh_run commands share it, other runs do not.

Everything real, through the boundary (the Executor's ``run_command`` and ``sh_run``): a server
that one of the run's commands starts on the run's loopback answers the run's later commands,
foreground and background, and the runtime probe; another run and the host's loopback never
reach it. The run's namespace ends with the run.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from sandbox_fixtures import free_port, port_answers, serving, tier_param, wait_until
from shell_tools_fixtures import harness, tree_of

from kernel_ext.sandbox import netns

pytestmark = [
    pytest.mark.parametrize("tier", [tier_param("bwrap")]),
    pytest.mark.skipif(netns.missing_cause() is not None, reason=f"no private network here: needs {netns.missing_cause()}"),
]
KNOCK = ("python3 -c \"import socket,sys\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 3).close(); print('REACHED')\n"
         "except OSError as e:\n    print('REFUSED', e)\"")
SERVE = ("(python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &); "
         "for i in $(seq 100); do " + KNOCK + " | grep -q REACHED && break; sleep 0.1; done")


@pytest.fixture
def runs(tmp_path):
    first, second = harness(tmp_path / "one", network="private"), harness(tmp_path / "two", network="private")
    yield first, second
    for h in (first, second):
        h.shell.close()
        h.service.close()


def _background_stdout(h, command: str) -> str:
    started = h.call("sh_run", command=command, background=True).data
    deadline = time.monotonic() + 60
    while h.shell.logs(started["id"]).get("status") == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    return h.shell.logs(started["id"], stream="stdout", full=True).get("stdout", "")


def _namespace(h, tool: str) -> str:
    return h.call(tool, command="readlink /proc/self/ns/net").data["stdout"].strip()


@pytest.mark.parametrize("starter", ["run_command", "sh_run_background"])
def test_a_server_one_command_starts_answers_the_runs_other_commands_only(tier, starter, runs):
    first, second = runs
    port = free_port()
    before = tree_of(second.ws)
    if starter == "run_command":
        assert first.call("run_command", command=SERVE.format(port=port)).ok
    else:  # a background sh_run that keeps serving, started before anything else of the run
        first.call("sh_run", command=f"python3 -m http.server {port} --bind 127.0.0.1", background=True)
    knock = KNOCK.format(port=port)
    assert wait_until(lambda: "REACHED" in first.call("sh_run", command=knock).data["stdout"], timeout=20)
    assert first.call("run_command", command=knock).data["stdout"].startswith("REACHED")
    assert _background_stdout(first, knock).startswith("REACHED")
    for tool in ("run_command", "sh_run"):  # another run: its own loopback, where nothing listens on that port
        assert second.call(tool, command=knock).data["stdout"].startswith("REFUSED")
    assert _background_stdout(second, knock).startswith("REFUSED")
    assert not port_answers(port)  # nor the host's loopback
    mine = {_namespace(first, "run_command"), _namespace(first, "sh_run")}
    theirs = {_namespace(second, "run_command"), _namespace(second, "sh_run")}
    assert len(mine) == 1 and len(theirs) == 1 and mine != theirs and os.readlink("/proc/self/ns/net") not in mine | theirs
    assert tree_of(second.ws) == before


def test_the_runtime_probe_in_sh_run_reaches_the_backend_run_command_started(tier, runs):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    first, second = runs
    probe = Path(netns.__file__).parents[1] / "pipeline" / "data" / "probe.py"
    for number, h in ((1, first), (2, second)):
        shutil.copy(probe, h.ws / "probe.py")
        (h.ws / "backend").mkdir()
        (h.ws / "backend" / "main_api.py").write_text(
            f"from fastapi import FastAPI\napp = FastAPI()\n\n@app.get('/hello')\ndef hello():\n    return {{'hi': {number}}}\n")
    port = free_port()
    booted = first.call("run_command", command=f"python probe.py up --port {port}")
    assert booted.ok, booted.observation
    answered = first.call("sh_run", command="python probe.py req GET /hello").data
    assert answered["exit"] == 0 and '{"hi":1}' in answered["stdout"]
    (second.ws / ".besser_probe").mkdir()
    (second.ws / ".besser_probe" / "port").write_text(str(port))  # run 2 aims its probe at run 1's port
    stranger = second.call("sh_run", command="python probe.py req GET /hello", timeout_ms=60000).data
    assert '{"hi":1}' not in stranger["stdout"] and '{"hi":2}' in stranger["stdout"], stranger  # its own backend


def test_the_runs_namespace_ends_with_the_run_and_is_remade_when_its_holder_goes(tier, runs):
    first, _ = runs
    ns = _namespace(first, "sh_run")
    network = first.service.network()
    assert network is not None and serving(ns)
    network.close()  # as if its holder ended: the next command gets a new namespace, still private
    network.closed = False
    again = _namespace(first, "sh_run")
    assert again.startswith("net:[") and again != ns and again != os.readlink("/proc/self/ns/net")
    assert wait_until(lambda: not serving(ns))
    first.shell.close()
    first.service.close()
    assert wait_until(lambda: not serving(again))

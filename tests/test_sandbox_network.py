"""A run's private network (netns): its own loopback, outbound through pasta, host only by choice.

Real bubblewrap, real pasta, real listeners on the host's 127.0.0.1. The loopback tests run
wherever bubblewrap does; only the outbound test needs pasta and a host that reaches out.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sandbox_fixtures import free_port, make_run, port_answers, serving, tier_param, wait_until

from kernel_ext.errors import ConfigurationError
from kernel_ext.sandbox import config, netns
from kernel_ext.sandbox.config import ShellSettings
from kernel_ext.sandbox.session.service import ShellService

pytestmark = pytest.mark.parametrize("tier", [tier_param("bwrap")])
NEEDS_PASTA = pytest.mark.skipif(netns.missing_cause() is not None,
                                 reason=f"no private network here: needs {netns.missing_cause()}")
# Connect to 127.0.0.1:PORT; print what happened (the probe a run would use on its own server).
PROBE = ("import socket,sys\ntry:\n    socket.create_connection(('127.0.0.1', int(sys.argv[1])), 3).close(); print('REACHED')\n"
         "except OSError as e:\n    print('REFUSED', e)\n")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def host_listener():
    """A real HTTP server on the host's loopback (where the Jupyter server would be)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def run(tmp_path):
    found = make_run(tmp_path)
    (found.ws / "probe.py").write_text(PROBE)
    return found


def _cli(ws, mode: str, command: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != config.ENABLE_VAR}
    env[config.NETWORK_VAR] = mode
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(ws), "--allow", "shell",
                           "--approve", "yes", "--enable-shell", "run_command", json.dumps({"command": command})],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    return json.loads(done.stdout)


@NEEDS_PASTA
def test_cli_private_run_cannot_reach_the_hosts_loopback_and_host_can(tier, run, host_listener):
    private = _cli(run.ws, "private", f"python3 probe.py {host_listener}")
    assert private["ok"], private
    assert private["data"]["stdout"].startswith("REFUSED")
    assert not any("host" in line for line in private["data"]["sandbox_limits"])
    assert private["data"]["network_mode"] == "private" and "(network private)" in private["observation"]
    host = _cli(run.ws, "host", f"python3 probe.py {host_listener}")
    assert host["data"]["stdout"].startswith("REACHED")
    assert any(line.startswith("network: host") for line in host["data"]["sandbox_limits"])  # named on the result
    assert "network: host" in host["observation"] and host["data"]["network_mode"] == "host"
    assert sorted(p.name for p in run.ws.iterdir()) == ["probe.py", "project.txt", "sub"]


def _service(run, ws, mode: str, name: str) -> ShellService:
    return ShellService(ws, run_id=name, enabled=True, settings=ShellSettings(network_mode=mode))


@NEEDS_PASTA
def test_a_runs_server_answers_its_own_commands_only(tier, run, host_listener):
    """Run 1 starts a server on its loopback; its next command's probe reaches it; run 2 and the host do not."""
    port = free_port()
    (run.other_ws / "probe.py").write_text(PROBE)
    first, second = _service(run, run.ws, "private", "net-a"), _service(run, run.other_ws, "private", "net-b")
    try:
        started = first.run(f"(python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &); "
                            f"for i in $(seq 50); do python3 probe.py {port} | grep -q REACHED && break; sleep 0.1; done")
        assert started.exit_code == 0
        assert first.run(f"python3 probe.py {port}").stdout.text.startswith("REACHED")
        assert second.run(f"python3 probe.py {port}").stdout.text.startswith("REFUSED")
        assert not port_answers(port)  # the host's loopback does not have it either
        assert second.run(f"python3 probe.py {host_listener}").stdout.text.startswith("REFUSED")
        # the same port is free in run 2's own loopback
        own = second.run(f"(python3 -m http.server {port} --bind 127.0.0.1 >/dev/null 2>&1 &); for i in $(seq 50); do "
                         f"python3 probe.py {port} | grep -q REACHED && break; sleep 0.1; done; python3 probe.py {port}")
        assert own.stdout.text.strip().endswith("REACHED")
    finally:
        first.close()
        second.close()


@NEEDS_PASTA
def test_pasta_ends_with_the_run(tier, run):
    service = _service(run, run.ws, "private", "net-c")
    try:
        devices = service.run("cut -d: -f1 /proc/net/dev | tail -n +3").stdout.text.split()
        assert "lo" in devices and len(devices) >= 2  # pasta's interface, configured before the command ran
        ns = service.run("readlink /proc/self/ns/net").stdout.text.strip()
        assert ns.startswith("net:[") and ns != os.readlink("/proc/self/ns/net")
        assert any("pasta" in Path(f"/proc/{pid}/cmdline").read_text() for pid in serving(ns))
    finally:
        service.close()
    assert wait_until(lambda: not serving(ns))


def test_private_without_pasta_is_no_network_with_a_note(tier, run, host_listener, monkeypatch):
    monkeypatch.setattr(netns, "missing_cause", lambda: "pasta (Debian package passt), which is not installed")
    service = _service(run, run.ws, "private", "net-d")
    try:
        record = service.run(f"cat /proc/net/dev; python3 probe.py {host_listener}")
    finally:
        service.close()
    assert "REFUSED" in record.stdout.text and "eth0" not in record.stdout.text
    assert not record.network
    assert any("network: off" in line and "passt" in line for line in record.limits)
    assert service.describe()["network_limits"] and not any("host" in line.split(":")[1] for line in record.limits)


@NEEDS_PASTA
def test_outbound_goes_through_pasta_in_private_mode(tier, run):
    try:
        socket.create_connection(("pypi.org", 443), 5).close()
    except OSError as exc:
        pytest.skip(f"this machine has no outbound network at all ({exc})")
    service = _service(run, run.ws, "private", "net-e")
    try:
        record = service.run("python3 -c \"import socket; socket.create_connection(('pypi.org', 443), 8).close(); print('OUT')\"")
    finally:
        service.close()
    assert record.stdout.text.strip() == "OUT", record.stderr.text


def test_settings_name_three_modes(tier):
    assert [netns.parse_mode(v) for v in ("off", "0", "on", "", "auto", "private", "host")] == \
        ["off", "off", "private", "private", "private", "private", "host"]
    for word in ("shared", "bridge"):  # only the documented words: the host's network is never reached by a synonym
        with pytest.raises(ConfigurationError, match="not one of off, private, host"):
            netns.parse_mode(word)
    with pytest.raises(ValueError, match="not one of off, private, host"):
        ShellSettings.from_environment({config.NETWORK_VAR: "bridge"})
    assert ShellSettings.from_environment({}).network_mode == "private"
    assert ShellSettings(session_network=False).network_mode == "off"
    assert not netns._default(["0" * 32, "00"], ["lo"]) and netns._default(["0" * 32, "00"], ["eth0"])
    assert netns.plan("host", "bwrap").limits == (netns.HOST_LIMIT,)
    assert netns.plan("private", "landlock") == netns.NetPlan("private", False, False, netns.plan("private", "landlock").limits)


@NEEDS_PASTA
def test_the_runtime_probe_reaches_its_runs_backend_only(tier, run):
    """probe.py (the runbook's runtime probe) through run_command: up, then req in the same run; another run's
    probe and the host's loopback do not reach that backend."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    probe = Path(netns.__file__).parents[1] / "pipeline" / "data" / "probe.py"
    app = "from fastapi import FastAPI\napp = FastAPI()\n\n@app.get('/hello')\ndef hello():\n    return {'hi': %d}\n"
    for number, ws in ((1, run.ws), (2, run.other_ws)):
        shutil.copy(probe, ws / "probe.py")
        (ws / "backend").mkdir()
        (ws / "backend" / "main_api.py").write_text(app % number)
    port = free_port()
    first, second = _service(run, run.ws, "private", "net-p1"), _service(run, run.other_ws, "private", "net-p2")
    try:
        booted = first.run(f"python probe.py up --port {port}")
        assert booted.exit_code == 0, booted.stdout.text
        answered = first.run("python probe.py req GET /hello")
        assert answered.exit_code == 0 and '{"hi":1}' in answered.stdout.text
        (run.other_ws / ".besser_probe").mkdir()
        (run.other_ws / ".besser_probe" / "port").write_text(str(port))  # run 2 aims its probe at run 1's port
        stranger = second.run("python probe.py req GET /hello")
        # run 2's probe finds no server of its own on that port, starts its own backend there (the same
        # port is free in its namespace) and reaches that one, never run 1's
        assert '{"hi":1}' not in stranger.stdout.text and '{"hi":2}' in stranger.stdout.text, stranger.stdout.text
        assert not port_answers(port)
    finally:
        first.close()
        second.close()

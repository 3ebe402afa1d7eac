"""No address of the host answers a private network (netseal), whichever tool starts the command.

pasta relays a private namespace's outbound connections through host sockets, so without the
seal a command reached the host's own listeners through any non-loopback local address (a second
address on ``lo``, one on ``eth0``, a ``0.0.0.0`` listener reached through either). Real listeners
on the host: ``127.0.0.1``, ``0.0.0.0``, ``::1``, ``::`` and an extra IPv4 and IPv6 address added to
``lo`` for the test (root only; removed in a finally), and every local address the host already
has. ``private`` reaches none of them and ``host`` reaches all, through ``run_command`` (the run's
session, where the runtime probe runs too) and ``sh_run`` (foreground and background) alike;
nothing outside the run changes on disk.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_fixtures import make_run, processes_with, tier_param, wait_until
from shell_tools_fixtures import tree_of

from kernel_ext.sandbox import config, dnsrelay, netns, netseal
from kernel_ext.sandbox.config import ShellSettings
from kernel_ext.sandbox.session.service import ShellService
from kernel_ext.sandbox.shtools.shell import Shell

pytestmark = [
    pytest.mark.parametrize("tier", [tier_param("bwrap")]),
    pytest.mark.skipif(netns.missing_cause() is not None, reason=f"no private network here: needs {netns.missing_cause()}"),
]
# Connect to each target (host, port) from inside; one line each: REACHED or no.
PROBE = """import json, socket, sys
for host, port in json.loads(sys.argv[1]):
    try:
        with socket.create_connection((host, port), 2) as s:
            print("REACHED", host, port, s.recv(64).decode().strip())
    except OSError as e:
        print("no", host, port, type(e).__name__)
"""
Target = tuple[str, int]


class Listeners:
    """Real TCP listeners on the host, each answering a marker line and closing."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []

    def listen(self, host: str) -> int:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, 0))
        sock.listen()
        self.sockets.append(sock)
        threading.Thread(target=self._serve, args=(sock, host), daemon=True).start()
        return sock.getsockname()[1]

    @staticmethod
    def _serve(sock: socket.socket, host: str) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(f"HOST-LISTENER {host}\n".encode())

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def _add(address: str) -> bool:
    # nodad: an IPv6 address is usable at once (no tentative phase in which a bind fails)
    extra = ["nodad"] if ":" in address else []
    return subprocess.run(["ip", "addr", "add", address, "dev", "lo", *extra], capture_output=True, check=False).returncode == 0


@contextlib.contextmanager
def added_addresses() -> Iterator[tuple[str, str]]:
    """A second IPv4 and IPv6 address on the host's ``lo`` (documentation ranges), removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("adding an address to the host's lo needs root (the 127.0.0.1 case is in test_sandbox_network)")
    added: list[str] = []
    try:
        for template in ("198.51.100.{}/32", "2001:db8:b5::{:x}/128"):
            for _ in range(20):  # another test or engineer may hold one: pick a free one
                candidate = template.format(random.randrange(100, 250))
                if _add(candidate):
                    added.append(candidate)
                    break
        if len(added) < 2:
            pytest.skip("could not add a test address to lo")
        wanted = [ipaddress.ip_network(address) for address in added]
        assert wait_until(lambda: all(w in netseal.host_prefixes() for w in wanted))  # the seal reads them
        yield added[0].split("/")[0], added[1].split("/")[0]
    finally:
        for address in added:
            subprocess.run(["ip", "addr", "del", address, "dev", "lo"], capture_output=True, check=False)


@pytest.fixture
def extra_addresses() -> Iterator[tuple[str, str]]:
    with added_addresses() as found:
        yield found


@pytest.fixture
def targets(extra_addresses) -> Iterator[list[Target]]:
    """Every way to a host listener: loopback, any-address listeners through each host-local address, the extras."""
    extra4, extra6 = extra_addresses
    listeners = Listeners()
    try:
        any4, any6 = listeners.listen("0.0.0.0"), listeners.listen("::")
        found: list[Target] = [("127.0.0.1", listeners.listen("127.0.0.1")), ("::1", listeners.listen("::1")),
                               (extra4, listeners.listen(extra4)), (extra6, listeners.listen(extra6))]
        for prefix in netseal.host_prefixes():
            if prefix.num_addresses == 1:
                found.append((_scoped(prefix.network_address), any6 if prefix.version == 6 else any4))
        yield found
    finally:
        listeners.close()


def _scoped(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """A link-local IPv6 address with its interface (the same name inside: pasta copies it)."""
    if address.version == 6 and address.is_link_local:
        with open("/proc/net/if_inet6") as table:
            for line in table:
                fields = line.split()
                if ipaddress.IPv6Address(bytes.fromhex(fields[0])) == address:
                    return f"{address}%{fields[5]}"
    return str(address)


def _cli(ws: Path, mode: str, tool: str, command: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != config.ENABLE_VAR}
    env[config.NETWORK_VAR] = mode
    done = subprocess.run([sys.executable, "-m", "kernel_ext", "tool", "--workspace", str(ws), "--allow", "shell",
                           "--approve", "yes", "--enable-shell", tool, json.dumps({"command": command})],
                          capture_output=True, text=True, timeout=180, env=env, check=False)
    data = json.loads(done.stdout)["data"]
    assert data.get("network_mode", mode) == mode
    return data["stdout"]


def _background(ws: Path, mode: str, state: Path, command: str) -> str:
    service = ShellService(ws, run_id=f"reach-{mode}", enabled=True, settings=ShellSettings(network_mode=mode))
    shell = Shell.for_service(service, state_dir=state)
    try:
        started = shell.run(command, background=True)
        deadline = time.monotonic() + 120
        while shell.logs(started["id"]).get("status") == "running" and time.monotonic() < deadline:
            time.sleep(0.2)
        return shell.logs(started["id"], stream="stdout", full=True).get("stdout", "")
    finally:
        shell.close()
        service.close()


ENTRY_POINTS = ("run_command", "sh_run", "sh_run_background")


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_private_reaches_no_address_of_the_host_and_host_reaches_all(tier, entry, targets, tmp_path):
    run = make_run(tmp_path)
    state = tmp_path / "state"
    before = tree_of(run.runs)
    command = f"python3 -c {shlex.quote(PROBE)} {shlex.quote(json.dumps(targets))}"
    seen = {}
    for mode in ("private", "host"):
        if entry == "sh_run_background":
            seen[mode] = _background(run.ws, mode, state, command)
        else:
            seen[mode] = _cli(run.ws, mode, entry, command)
    private = seen["private"].splitlines()
    assert len(private) == len(targets) and not [line for line in private if not line.startswith("no ")], seen["private"]
    host = seen["host"].splitlines()
    assert len(host) == len(targets) and all(line.startswith("REACHED") for line in host), seen["host"]
    assert tree_of(run.runs) == before  # nothing outside the command's output changed in the run or beside it


def test_an_address_the_host_gains_during_a_run_is_kept_out_too(tier, tmp_path):
    """The run's namespace outlives its first command: an address added later (a VPN coming up) is sealed
    out before the next command joins."""
    run = make_run(tmp_path)
    service = ShellService(run.ws, run_id="gains", enabled=True, settings=ShellSettings(network_mode="private"))
    shell = Shell.for_service(service, state_dir=tmp_path / "state")
    listeners = Listeners()
    try:
        assert service.run("true").exit_code == 0 and shell.run("true")["exit"] == 0  # the namespace exists
        with added_addresses() as (extra4, extra6):
            found = [(extra4, listeners.listen(extra4)), (extra6, listeners.listen(extra6)),
                     (extra4, listeners.listen("0.0.0.0"))]
            command = f"python3 -c {shlex.quote(PROBE)} {shlex.quote(json.dumps(found))}"
            seen = [service.run(command).stdout.text, shell.run(command)["stdout"]]
    finally:
        listeners.close()
        shell.close()
        service.close()
    for text in seen:
        assert len(text.splitlines()) == 3 and "REACHED" not in text, text


def test_a_seal_that_fails_leaves_no_outbound_network_and_says_so(tier, tmp_path, monkeypatch):
    """Fail closed: rules that cannot be written mean no pasta (loopback only), named on the result."""
    monkeypatch.setattr(netseal, "rule_batches", lambda prefixes: {4: "rule add to not-an-address unreachable\n"})
    run = make_run(tmp_path)
    service = ShellService(run.ws, run_id="seal-fails", enabled=True, settings=ShellSettings(network_mode="private"))
    shell = Shell.for_service(service, state_dir=tmp_path / "state")
    devices = "cut -d: -f1 /proc/net/dev | tail -n +3"
    try:
        result = shell.run(devices)
        record = service.run(devices)
    finally:
        shell.close()
        service.close()
    assert result["stdout"].split() == ["lo"] and record.stdout.text.split() == ["lo"]  # pasta never attached
    assert any("host's own addresses could not be kept out" in line for line in result["network_limits"])
    assert any("host's own addresses could not be kept out" in note for note in record.notes)


def test_without_nsenter_or_ip_private_is_no_network_with_a_note(tier, monkeypatch):
    monkeypatch.setattr(netseal, "tools", lambda: None)
    monkeypatch.setattr(netns, "missing_cause", netns.missing_cause.__wrapped__)
    plan = netns.plan("private", "bwrap")
    assert not plan.network and "nsenter" in plan.limits[0] and plan.limits[0].startswith("network: off")


def test_the_seal_covers_every_local_kind_the_kernel_lists(tier):
    prefixes = netseal.host_prefixes()
    assert ipaddress.ip_network("127.0.0.0/8") in prefixes  # an AnyIP range, not only single addresses
    batches = netseal.rule_batches([ipaddress.ip_network("10.0.0.5/32"), ipaddress.ip_network("fe80::1/128")])
    assert batches == {4: "rule add pref 100 to 10.0.0.5/32 unreachable\n", 6: "rule add pref 100 to fe80::1/128 unreachable\n"}


@pytest.mark.parametrize("mode", ["host", "off", "private"])
def test_a_background_sh_run_names_its_network_like_a_foreground_one(tier, mode, tmp_path):
    run = make_run(tmp_path)
    service = ShellService(run.ws, run_id=f"named-{mode}", enabled=True,
                           settings=ShellSettings(network_mode=mode, session_network=mode != "off"))
    shell = Shell.for_service(service, state_dir=tmp_path / "state")
    try:
        foreground = shell.run("true")
        background = shell.run("true", background=True)
    finally:
        shell.close()
        service.close()
    keys = ("network", "network_limits")
    assert {k: background[k] for k in keys if k in background} == {k: foreground[k] for k in keys if k in foreground}
    relayed = mode == "private" and bool(dnsrelay.loopback_resolvers())  # the relay's "UDP only" line
    assert ("network_limits" in background) == (mode == "host" or relayed) and ("network" in background) == (mode == "off")


# Send a DNS-shaped query (id 0x1234) to the resolver address given, port 53; print the reply or what failed.
ASK = """import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(bytes.fromhex("1234") + b"\\x01\\x00" + bytes(8) + b"query", (sys.argv[1], int(sys.argv[2])))
try:
    print("ANSWER", s.recv(512).hex())
except OSError as e:
    print("none", type(e).__name__)
"""


@pytest.fixture
def loopback_resolver(monkeypatch) -> Iterator[tuple[str, list[bytes]]]:
    """A fake resolver on a host loopback address (as systemd-resolved's 127.0.0.53), named as the host's."""
    address = f"127.0.{random.randrange(1, 250)}.{random.randrange(2, 250)}"
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((address, 0))
    seen: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                data, peer = sock.recvfrom(512)
            except OSError:
                return
            seen.append(data)
            sock.sendto(data[:12] + b"answer-from-host-resolver", peer)

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setattr(dnsrelay, "loopback_resolvers", lambda: [f"{address}@{sock.getsockname()[1]}"])
    yield address, seen
    sock.close()


def test_a_resolver_on_the_hosts_loopback_answers_inside_and_nothing_else_does(tier, loopback_resolver, tmp_path):
    address, seen = loopback_resolver
    run = make_run(tmp_path)
    service = ShellService(run.ws, run_id="dns", enabled=True, settings=ShellSettings(network_mode="private"))
    shell = Shell.for_service(service, state_dir=tmp_path / "state")
    ask = f"python3 -c {shlex.quote(ASK)} {address}"
    try:
        record = service.run(f"{ask} 53; {ask} 54")
        session = record.stdout.text.splitlines()
        fresh = shell.run(f"{ask} 53", no_store=True)
    finally:
        shell.close()
        service.close()
    answer = "ANSWER " + (bytes.fromhex("1234") + b"\x01\x00" + bytes(8) + b"answer-from-host-resolver").hex()
    assert session == [answer, "none TimeoutError"], session  # port 53 of that address only
    assert fresh["stdout"].strip() == answer
    udp_only = [line for line in fresh["network_limits"] if "relay" in line and "UDP only" in line]  # the README's caveat
    assert len(udp_only) == 1 and f"{address}@" in udp_only[0] and udp_only[0] in record.limits  # sandbox_limits too
    assert udp_only[0] in service.describe()["network_limits"]
    assert [query[2:] for query in seen] == [bytes.fromhex("0100") + bytes(8) + b"query"] * 2  # ids are the relay's
    assert wait_until(lambda: not processes_with(f"{address}@"))  # the relays ended with their sandboxes


def test_only_loopback_resolvers_are_relayed(tier, tmp_path):
    conf = tmp_path / "resolv.conf"
    conf.write_text("# systemd-resolved\nnameserver 127.0.0.53\nnameserver 10.0.0.2\nnameserver ::1\noptions edns0\n"
                    "nameserver not-an-address\nnameserver 127.0.0.53\n")
    assert dnsrelay.loopback_resolvers(str(conf)) == ["127.0.0.53", "::1"]
    assert dnsrelay.loopback_resolvers(str(tmp_path / "missing")) == []

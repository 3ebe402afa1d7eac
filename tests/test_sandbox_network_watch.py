"""The seal follows the host while commands run, and multicast, broadcast and bound sockets stay in.

Everything real: bubblewrap, pasta, host listeners (TCP and UDP on ``0.0.0.0`` and ``[::]``), and
addresses added to the host's ``lo`` (root only; removed in a finally). A command already running
in a run's private namespace keeps trying to reach an address the host gains after it started:
the watcher (``netwatch``) seals it out of the namespace as it appears, the host's listeners log
no connection, and the rule is there. Multicast (IPv6 ``ff02::1`` with a scope id, IPv4
``224.0.0.1``), broadcast and sockets bound to pasta's interface (``SO_BINDTODEVICE``,
``IP_UNICAST_IF``, ``IP_MULTICAST_IF``) reach no host listener either; in ``host`` mode the same
sends do (the test can fail). Entry points: ``run_command`` (the run's session, a command in its
background) and ``sh_run`` (background and foreground), through the boundary.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import random
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest
from sandbox_fixtures import free_port, tier_param, wait_until
from shell_tools_fixtures import harness, tree_of

from kernel_ext.sandbox import netns, netseal, netwatch

pytestmark = [
    pytest.mark.parametrize("tier", [tier_param("bwrap")]),
    pytest.mark.skipif(netns.missing_cause() is not None, reason=f"no private network here: needs {netns.missing_cause()}"),
]

# Until a stop file appears: connect to each target once (plainly and, for IPv4, bound to pasta's interface);
# print what answered. The started file says the loop runs.
LATE = """import json, socket, sys, time, pathlib
targets, folder = json.loads(sys.argv[1]), pathlib.Path(sys.argv[2])
(folder / "started").write_text("1")
deadline = time.monotonic() + 90
while time.monotonic() < deadline and not (folder / "stop").exists():
    for host, port in targets:
        for bound in (False, True):
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            try:
                with socket.socket(family) as s:
                    others = [n for _, n in socket.if_nameindex() if n != "lo"]  # pasta's interface, while it serves
                    if bound and others:
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, others[0].encode())
                    s.settimeout(0.3)
                    s.connect((host, port))
                    print("REACHED", host, bound, s.recv(64), flush=True)
            except OSError:
                pass
    time.sleep(0.05)
print("done", flush=True)
"""
# One datagram per way out that is not unicast to a routed address; "sent" or why not.
SEND = """import json, socket, struct, sys
port, bound_to = int(sys.argv[1]), sys.argv[2]
device = [name for _, name in socket.if_nameindex() if name != "lo"][0] if bound_to == "pasta" else bound_to
index = socket.if_nametoindex(device)
def bind(s): s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, device.encode())
def mcif4(s): s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, struct.pack("=4s4si", bytes(4), bytes(4), index))
def ucif4(s): s.setsockopt(socket.IPPROTO_IP, 50, struct.pack("!I", index))  # IP_UNICAST_IF
def mcif6(s): s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, index)
cases = [("ff02::1", index, None), ("ff02::1", 0, mcif6), ("ff02::1", index, bind), ("ff05::1", 0, None),
         ("224.0.0.1", 0, None), ("224.0.0.1", 0, mcif4), ("224.0.0.1", 0, bind), ("239.7.7.7", 0, bind),
         ("255.255.255.255", 0, None), ("255.255.255.255", 0, bind), *[(b, 0, o) for b in json.loads(sys.argv[3]) for o in (None, bind)],
         *[(a, 0, o) for a in json.loads(sys.argv[4]) for o in (bind, ucif4)]]
for host, scope, option in cases:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    try:
        if option: option(s)
        s.sendto(f"{host}/{option.__name__ if option else '-'}".encode(), (host, port, 0, scope) if family == socket.AF_INET6 else (host, port))
        print("sent", host, option.__name__ if option else "-")
    except OSError as e:
        print("no", host, option.__name__ if option else "-", e.strerror)
"""


class HostListeners:
    """TCP and UDP on ``0.0.0.0`` and ``[::]`` at one port, logging every connection and datagram."""

    def __init__(self) -> None:
        self.port = free_port()
        self.seen: list[str] = []
        self.sockets: list[socket.socket] = []
        for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                sock = socket.socket(family, kind)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((host, self.port))
                if kind == socket.SOCK_STREAM:
                    sock.listen()
                self.sockets.append(sock)
                threading.Thread(target=self._serve, args=(sock, kind), daemon=True).start()

    def _serve(self, sock: socket.socket, kind: int) -> None:
        while True:
            try:
                if kind == socket.SOCK_STREAM:
                    conn, peer = sock.accept()
                    self.seen.append(f"tcp from {peer}")
                    with conn:
                        conn.sendall(b"HOST-LISTENER\n")
                else:
                    data, peer = sock.recvfrom(512)
                    self.seen.append(f"udp from {peer}: {data!r}")
            except OSError:
                return

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@pytest.fixture
def listeners() -> Iterator[HostListeners]:
    found = HostListeners()
    yield found
    found.close()


def _unused(template: str) -> str:
    """An address the host does not have now (it is added while a command runs)."""
    taken = netseal.host_prefixes()
    while True:
        candidate = template.format(random.randrange(2, 250))
        if ipaddress.ip_network(candidate) not in taken:
            return candidate


def _free_address(template: str) -> str | None:
    for _ in range(20):  # another test or engineer may hold one: pick a free one
        candidate = template.format(random.randrange(2, 250))
        extra = ["nodad"] if ":" in candidate else []  # usable at once: no tentative phase
        if subprocess.run(["ip", "addr", "add", candidate, "dev", "lo", *extra], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


@contextlib.contextmanager
def host_addresses(templates: tuple[str, ...] = ("10.88.{}.1/32", "fd88::{:x}/128")) -> Iterator[list[str]]:
    """Addresses added to the host's ``lo`` now, removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("adding an address to the host's lo needs root")
    added: list[str] = []
    try:
        for template in templates:
            found = _free_address(template)
            if found is None:
                pytest.skip("could not add a test address to lo")
            added.append(found)
        yield [address.split("/")[0] for address in added]
    finally:
        for address in added:
            subprocess.run(["ip", "addr", "del", address, "dev", "lo"], capture_output=True, check=False)


def _rules(h) -> str:
    """``ip rule`` (both families) inside the run's namespace, read through the server's descriptors."""
    network = h.service.network()
    held = network.held if network is not None else None
    assert held is not None
    found = netseal.tools()
    assert found is not None
    user, net = held.paths()
    shown = [subprocess.run([found[0], f"--user={user}", f"--net={net}", "--preserve-credentials", "--", found[1], f"-{family}",
                             "rule"], capture_output=True, text=True, pass_fds=(held.user, held.net), check=True).stdout
             for family in (4, 6)]
    return "".join(shown)


@pytest.fixture
def run(tmp_path):
    h = harness(tmp_path, network="private")
    yield h
    h.shell.close()
    h.service.close()


@pytest.mark.parametrize("entry", ["run_command", "sh_run_background"])
def test_a_command_already_running_never_reaches_an_address_the_host_gains(tier, entry, run, listeners, tmp_path):
    assert netwatch.listening()
    sibling = tmp_path / "runs" / "r2"
    before = tree_of(sibling)
    assert run.call("sh_run", command="true").ok  # the run's namespace exists, sealed from the host's tables now
    folder = run.ws / "late"
    folder.mkdir()
    planned = [_unused("10.88.{}.1"), _unused("fd88::{:x}")]
    targets = [(address, listeners.port) for address in planned]
    command = f"python3 -c {shlex.quote(LATE)} {shlex.quote(json.dumps(targets))} late"
    done: dict[str, str] = {}
    if entry == "run_command":  # in the session's background, as `cmd & wait`
        worker = threading.Thread(target=lambda: done.update(
            out=run.call("run_command", command=f"{command} & wait", timeout=120).data["stdout"]))
        worker.start()
    else:
        started = run.call("sh_run", command=command, background=True).data
    assert wait_until(lambda: (folder / "started").exists(), timeout=60)
    time.sleep(0.5)  # it has tried (and failed: no such address yet) a few times
    guard = netwatch.find(run.service.network().held)
    assert guard is not None
    wanted = [ipaddress.ip_network(address) for address in planned]
    try:
        with host_addresses((f"{planned[0]}/32", f"{planned[1]}/128")):
            added = time.monotonic()
            assert wait_until(lambda: all(w in guard.sealed for w in wanted), timeout=10)
            window = guard.resealed_at - added
            rules = _rules(run)
            time.sleep(2)  # the command keeps trying both addresses (plain and bound to pasta's interface)
    finally:
        (folder / "stop").write_text("1")
    if entry == "run_command":
        worker.join(120)
        out = done.get("out", "")
    else:
        assert wait_until(lambda: run.shell.logs(started["id"]).get("status") != "running", timeout=30)
        out = run.shell.logs(started["id"], stream="stdout", full=True).get("stdout", "")
    print(f"watcher window (address added -> sealed): {window * 1000:.1f} ms")
    assert "done" in out and "REACHED" not in out, out
    assert listeners.seen == []  # the host's listeners saw nothing at any time
    for address in planned:
        assert f"to {address} unreachable" in rules, rules
    assert tree_of(sibling) == before


def _broadcasts() -> list[str]:
    """The broadcast address of each IPv4 subnet of the host."""
    shown = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True, check=False).stdout.split()
    return sorted({shown[i + 1] for i, word in enumerate(shown[:-1]) if word == "brd"})


@pytest.mark.parametrize("entry", ["run_command", "sh_run"])
def test_multicast_broadcast_and_bound_sockets_reach_no_host_listener(tier, entry, run, listeners, tmp_path):
    sibling = tmp_path / "runs" / "r2"
    before = tree_of(sibling)
    with host_addresses(("10.88.{}.1/32",)) as (extra,):
        command = (f"python3 -c {shlex.quote(SEND)} {listeners.port} pasta {shlex.quote(json.dumps(_broadcasts()))} "
                   f"{shlex.quote(json.dumps([extra]))}")
        out = run.call(entry, command=command).data["stdout"]
        time.sleep(1)  # anything relayed has arrived by now
    assert out.count("sent") + out.count("no ") >= 12, out
    assert listeners.seen == [], (listeners.seen, out)
    assert tree_of(sibling) == before


def test_in_host_mode_the_same_sends_do_arrive(tier, listeners, tmp_path):
    """The control: without a private network, the host's listeners get them (so the test above can fail)."""
    h = harness(tmp_path, network="host")
    try:
        device = next(name for _, name in socket.if_nameindex() if name != "lo")
        out = h.call("run_command", command=f"python3 -c {shlex.quote(SEND)} {listeners.port} {device} '[]' '[]'").data["stdout"]
        assert wait_until(lambda: any("224.0.0.1" in line for line in listeners.seen), timeout=5), (listeners.seen, out)
        assert any("255.255.255.255" in line for line in listeners.seen), (listeners.seen, out)
    finally:
        h.shell.close()
        h.service.close()


# Until a stop file appears, try the targets; then name the namespace's interfaces.
AFTER = LATE.replace('print("done", flush=True)', 'print("devices", *sorted(n for _, n in socket.if_nameindex()), flush=True)')


def test_a_reseal_that_fails_ends_the_namespaces_way_out_while_commands_run(tier, run, listeners, monkeypatch, caplog):
    """Fail closed: the watcher cannot write the new rule, so pasta (and the relay) stop at once: loopback only."""
    caplog.set_level(logging.ERROR, logger=netwatch.log.name)
    assert run.call("sh_run", command="true").ok
    folder = run.ws / "late"
    folder.mkdir()
    planned = _unused("10.88.{}.1")
    command = f"python3 -c {shlex.quote(AFTER)} {shlex.quote(json.dumps([(planned, listeners.port)]))} late"
    started = run.call("sh_run", command=command, background=True).data
    assert wait_until(lambda: (folder / "started").exists(), timeout=60)
    guard = netwatch.find(run.service.network().held)
    assert guard is not None and not guard.failed
    monkeypatch.setattr(netseal, "rule_batches", lambda prefixes: {4: "rule add to not-an-address unreachable\n"})
    try:
        with host_addresses((f"{planned}/32",)):
            assert wait_until(lambda: guard.failed, timeout=10)
            time.sleep(1)  # the command keeps trying
    finally:
        (folder / "stop").write_text("1")
    assert wait_until(lambda: run.shell.logs(started["id"]).get("status") != "running", timeout=30)
    out = run.shell.logs(started["id"], stream="stdout", full=True).get("stdout", "")
    assert "REACHED" not in out and out.strip().endswith("devices lo"), out  # pasta's interface is gone
    assert listeners.seen == []
    ended = [r.getMessage() for r in caplog.records if r.name == netwatch.log.name]
    assert ended and ended[0].startswith("a private network was ended: the host's own addresses could not be kept out"), ended
    monkeypatch.undo()
    again = run.call("sh_run", command="readlink /proc/self/ns/net; cut -d: -f1 /proc/net/dev | tail -n +3").data
    assert again["exit"] == 0 and len(again["stdout"].split()) >= 2, again  # the run's next command: a new namespace, way out again


def test_the_filter_covers_each_ipv4_prefix_multicast_and_broadcast(tier):
    first = netseal.filter_batch("eth0", [ipaddress.ip_network("10.0.0.5/32"), ipaddress.ip_network("fd00::5/128")], True)
    assert "pfifo limit 0" in first and "match ip dst 224.0.0.0/4 flowid 1:2" in first
    assert "match ip dst 255.255.255.255/32 flowid 1:2" in first and "match ip dst 10.0.0.5/32 flowid 1:2" in first
    assert "fd00::5" not in first  # IPv6 has no on-link fallback: its rules refuse a bound socket too
    later = netseal.filter_batch("eth0", [ipaddress.ip_network("10.0.0.6/32")], False)
    assert later == "filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.6/32 flowid 1:2\n"

"""The seal's own rules: what it reads from the host's tables, the tools it finds, what it says without them.

The host's prefixes are compared with what ``ip`` lists from the same kernel (read before and after,
so an address another process adds meanwhile cannot make the test fail: what both listings hold
must be read, and nothing neither holds): every address as a host prefix, every ``local`` route
(AnyIP ranges), IPv6 anycast routes, never a multicast or unicast route. The tools are found
where Debian puts them even when ``PATH`` leaves ``/usr/sbin`` out; without them nothing is
run and the note names what is missing.
"""

from __future__ import annotations

import ipaddress
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from kernel_ext.sandbox import netseal


def _listed() -> set[netseal.Prefix]:
    """What the host delivers to itself, by ``ip``: addresses, and local and anycast routes of every table."""
    found: set[netseal.Prefix] = set()
    shown = json.loads(subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True, check=True).stdout)
    found |= {ipaddress.ip_network(info["local"]) for link in shown for info in link.get("addr_info", [])}
    for family in ("-4", "-6"):
        routes = json.loads(subprocess.run(["ip", "-j", family, "route", "show", "table", "all"], capture_output=True, text=True,
                                           check=True).stdout)
        found |= {ipaddress.ip_network(route["dst"], strict=False) for route in routes
                  if route.get("type") in ("local", "anycast") and route.get("dst") not in (None, "default")}
    return found


def test_the_host_prefixes_are_what_the_kernel_lists_and_nothing_else():
    before = _listed()
    read = netseal.host_prefixes()
    after = _listed()
    assert len(read) == len(set(read))  # each once
    assert before & after <= set(read) <= before | after, (sorted(map(str, (before & after) - set(read))),
                                                          sorted(map(str, set(read) - (before | after))))
    assert ipaddress.ip_network("127.0.0.0/8") in read and ipaddress.ip_network("::1/128") in read
    assert not any(p.is_multicast for p in read)


def test_without_sbin_on_the_path_the_tools_are_still_found(monkeypatch):
    if not all(shutil.which(name, path="/usr/sbin:/sbin") for name in ("ip", "tc")):
        pytest.skip("ip or tc is not in /usr/sbin or /sbin here")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    found = netseal.tools.__wrapped__()
    assert found is not None
    nsenter, ip, tc = found
    assert nsenter == shutil.which("nsenter", path="/usr/bin:/bin")
    assert ip == (shutil.which("ip", path="/usr/bin:/bin") or shutil.which("ip", path="/usr/sbin:/sbin"))
    assert tc == (shutil.which("tc", path="/usr/bin:/bin") or shutil.which("tc", path="/usr/sbin:/sbin"))
    monkeypatch.setenv("PATH", "/nowhere")
    monkeypatch.setattr(netseal.shutil, "which", lambda name, path=None: None)
    assert netseal.tools.__wrapped__() is None


def test_without_the_tools_nothing_is_run_and_the_note_names_them(monkeypatch):
    monkeypatch.setattr(netseal, "tools", lambda: None)
    note = ("nsenter (util-linux), ip and tc (iproute2) to keep the host's addresses out, which are not installed")
    assert netseal.missing_cause() == note

    class NoNamespace:  # never reached: without the tools no helper is started
        def paths(self):
            raise AssertionError("a helper was started")

    assert netseal.seal(NoNamespace(), 5) == note
    assert netseal.fence(NoNamespace(), 5, ["eth0"], [ipaddress.ip_network("10.0.0.1/32")], True) == note
    monkeypatch.undo()
    assert netseal.missing_cause() is None or netseal.tools() is None


def test_a_helper_that_never_answers_is_ended_and_the_seal_says_it_timed_out(monkeypatch, tmp_path):
    """``ip`` (here: a stand-in that reads nothing and never exits, as a wedged helper would) is bounded."""
    from kernel_ext.sandbox.nsjoin import Held

    wedged = tmp_path / "wedged"
    wedged.write_text(f"#!/bin/sh\necho $$ > {tmp_path}/pid\nexec sleep 600\n")
    wedged.chmod(0o755)
    monkeypatch.setattr(netseal, "tools", lambda: (str(wedged), str(wedged), str(wedged)))
    owner = subprocess.Popen(["sleep", "600"])  # a process whose namespaces are held, as a sandbox's are
    held = Held.of(owner.pid)
    assert held is not None
    try:
        note = netseal.seal(held, 0.5, [ipaddress.ip_network("10.0.0.1/32")])
        fenced = netseal.fence(held, 0.5, ["eth0"], [ipaddress.ip_network("10.0.0.1/32")], True)
    finally:
        held.close()
        owner.kill()
        owner.wait()
    assert note == "the host's own addresses could not be kept out of the sandbox's network (timed out)"
    assert fenced == "the host's own addresses could not be filtered out of the sandbox's interface (timed out)"
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()  # ended


@pytest.mark.parametrize(("script", "said"), [
    ("exit 3", "exit 3"),
    ("printf 'RTNETLINK answers: File exists\\n' >&2; exit 2", "RTNETLINK answers: File exists"),
    ("printf 'x%.0s' $(seq 300) >&2; printf 'END' >&2; exit 1", "x" * 197 + "END"),
    ("printf '\\377bad' >&2; exit 1", "\ufffdbad"),
], ids=["silent", "message", "long", "not-utf8"])
def test_a_helper_that_fails_makes_the_seal_fail_and_says_why(monkeypatch, tmp_path, script, said):
    """``ip`` answering an error (here: a stand-in that reads its batch and fails as told) is never a success."""
    from kernel_ext.sandbox.nsjoin import Held

    failing = tmp_path / "failing"
    failing.write_text(f"#!/bin/sh\ncat > /dev/null\n{script}\n")
    failing.chmod(0o755)
    monkeypatch.setattr(netseal, "tools", lambda: (str(failing), str(failing), str(failing)))
    owner = subprocess.Popen(["sleep", "600"])
    held = Held.of(owner.pid)
    assert held is not None
    try:
        note = netseal.seal(held, 30, [ipaddress.ip_network("10.0.0.1/32")])
    finally:
        held.close()
        owner.kill()
        owner.wait()
    assert note == f"the host's own addresses could not be kept out of the sandbox's network ({said})"


@pytest.mark.skipif(os.geteuid() != 0, reason="changing the host's own tables needs root")
def test_an_ipv6_anyip_range_is_a_host_prefix():
    """A ``local`` route no address names (the IPv6 AnyIP range): only the routing table lists it."""
    anyip = f"fd91:{random.randrange(0x100, 0xfff):x}::/64"
    try:
        subprocess.run(["ip", "-6", "route", "add", "local", anyip, "dev", "lo", "table", "local"], check=True, capture_output=True)
        read = netseal.host_prefixes()
    finally:
        subprocess.run(["ip", "-6", "route", "del", "local", anyip, "dev", "lo", "table", "local"], capture_output=True, check=False)
    assert read.count(ipaddress.ip_network(anyip)) == 1

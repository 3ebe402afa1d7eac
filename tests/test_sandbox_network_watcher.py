# ruff: noqa: F811 - the run fixture is imported from test_sandbox_network_watch and requested by name
"""The watcher itself: which changes wake it, that a reseal leaves the network up, and its own life.

Real namespaces (bubblewrap, pasta) and real changes to the host's tables (root; removed in a
finally). Each kind of change alone must reseal a live namespace: an IPv6 address (the IPv6
groups) and an IPv4 AnyIP range (a ``local`` route: the IPv4 route group, no address message);
a reseal that succeeds leaves the namespace's way out alone (pasta keeps serving). An ended
sandbox is forgotten (its descriptors closed) and the watcher keeps resealing the next
namespace. Two watchers (two server processes) both listen; without netlink the watcher says so
and does not claim to listen; its thread never keeps a process from exiting.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_fixtures import tier_param, wait_until
from shell_tools_fixtures import harness
from test_sandbox_network_reseal import _free_block, _ip_batch, _sealed_in_the_namespace
from test_sandbox_network_watch import run  # noqa: F401 - a fixture

from kernel_ext.sandbox import netns, netwatch

ROOT = Path(__file__).resolve().parent.parent
needs_namespaces = [
    pytest.mark.parametrize("tier", [tier_param("bwrap")]),
    pytest.mark.skipif(netns.missing_cause() is not None, reason=f"no private network here: needs {netns.missing_cause()}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="changing the host's own tables needs root"),
]


def _guarded(h) -> netwatch.Sealed:
    assert netwatch.listening()
    assert h.call("sh_run", command="true").ok
    guard = netwatch.find(h.service.network().held)
    assert guard is not None and not guard.failed
    return guard


def _needs_namespaces(test):
    for mark in reversed(needs_namespaces):
        test = mark(test)
    return test


@_needs_namespaces
@pytest.mark.parametrize("kind", ["ipv6-address", "ipv4-anyip-route"])
def test_each_kind_of_change_alone_reseals_and_leaves_the_way_out_up(tier, run, kind):
    guard = _guarded(run)
    helpers = list(guard.helpers)
    block = _free_block()
    if kind == "ipv6-address":
        prefix, add, undo = f"fd89::{block:x}:7/128", "addr add {} dev lo nodad", "addr del {} dev lo"
    else:
        prefix, add, undo = f"10.89.{block}.64/26", "route add local {} dev lo table local", "route del local {} dev lo table local"
    try:
        _ip_batch([add.format(prefix)])
        _sealed_in_the_namespace(run, guard, [ipaddress.ip_network(prefix)])
    finally:
        subprocess.run(["ip", *undo.format(prefix).split()], capture_output=True, check=False)
    assert not guard.failed and guard.helpers == helpers and all(h.poll() is None for h in helpers)  # pasta still serves
    assert run.call("sh_run", command="cut -d: -f1 /proc/net/dev | tail -n +3 | grep -vc '^ *lo$'").data["stdout"].strip() != "0"


@_needs_namespaces
def test_an_ended_sandbox_is_forgotten_and_the_next_namespace_is_still_resealed(tier, tmp_path):
    first = harness(tmp_path / "first", network="private")
    try:
        ended = _guarded(first)
    finally:
        first.shell.close()
        first.service.close()
    assert wait_until(lambda: netwatch._watcher().find(ended.inode) is not ended, timeout=30), "the ended namespace is still watched"
    assert wait_until(lambda: _closed(ended.held.net), timeout=10)
    second = harness(tmp_path / "second", network="private")
    try:
        guard = _guarded(second)
        block = _free_block()
        address = f"10.89.{block}.9/32"
        try:
            _ip_batch([f"addr add {address} dev lo"])
            _sealed_in_the_namespace(second, guard, [ipaddress.ip_network(address)])
        finally:
            subprocess.run(["ip", "addr", "del", address, "dev", "lo"], capture_output=True, check=False)
    finally:
        second.shell.close()
        second.service.close()


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_two_watchers_both_listen():
    """As two server processes on one host would: the kernel picks each socket's port."""
    watchers = [netwatch._Watcher(), netwatch._Watcher()]
    assert [w.listening for w in watchers] == [True, True]


def test_without_netlink_the_watcher_says_so_and_does_not_claim_to_listen(monkeypatch, caplog):
    def refused(*args, **kwargs):
        raise PermissionError(1, "netlink refused here")

    monkeypatch.setattr(netwatch.socket, "socket", refused)
    with caplog.at_level(logging.WARNING, logger=netwatch.log.name):
        watcher = netwatch._Watcher()
    assert watcher.listening is False
    assert [r.getMessage() for r in caplog.records] == [
        "the host's addresses cannot be watched ([Errno 1] netlink refused here): new ones are sealed out before each command only"]


def test_the_watcher_thread_never_keeps_a_process_from_exiting():
    code = "from kernel_ext.sandbox import netwatch; assert netwatch.listening(); print('watching')"
    done = subprocess.run([sys.executable, "-c", code], cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "watching"), done.stderr


def test_a_reseal_or_filter_that_cannot_start_its_helper_seals_nothing_and_says_so(monkeypatch, tmp_path):
    """Fail closed: an ``OSError`` starting ``ip``/``tc`` (no descriptors left, say) is a failure, never a seal; a
    helper that never answers is ended at its bound."""
    from kernel_ext.sandbox import netseal
    from kernel_ext.sandbox.nsjoin import Held

    owner = subprocess.Popen(["sleep", "600"])
    held = Held.of(owner.pid)
    assert held is not None
    try:
        sealed = netwatch.Sealed(held)

        def cannot(*args, **kwargs):
            raise OSError(24, "Too many open files")

        monkeypatch.setattr(netseal, "seal", cannot)
        monkeypatch.setattr(netseal, "fence", cannot)
        prefix = ipaddress.ip_network("10.0.0.1/32")
        assert sealed.reseal([prefix]) == ("the host's own addresses could not be kept out of the sandbox's network "
                                           "([Errno 24] Too many open files)")
        assert sealed.fence(["eth0"]) == ("the host's own addresses could not be filtered out of the sandbox's interface "
                                          "([Errno 24] Too many open files)")
        assert sealed.sealed == [] and sealed.devices == []
        monkeypatch.undo()
        wedged = tmp_path / "wedged"
        wedged.write_text("#!/bin/sh\nexec sleep 600\n")
        wedged.chmod(0o755)
        monkeypatch.setattr(netseal, "tools", lambda: (str(wedged), str(wedged), str(wedged)))
        monkeypatch.setattr(netwatch, "JOIN_TIMEOUT_S", 0.5)
        assert sealed.fence(["eth0"]) == "the host's own addresses could not be filtered out of the sandbox's interface (timed out)"
    finally:
        held.close()
        owner.kill()
        owner.wait()

# ruff: noqa: F811 - the run fixture is imported from test_sandbox_network_watch and requested by name
"""A reseal re-reads the kernel's tables, not only the addresses netlink named.

Real namespaces: a run's private network (bubblewrap, pasta), its watcher (``netwatch``), and
changes made to the host's own tables (root: ``lo``'s addresses and its ``local`` table; removed
in a finally). The watcher is held at an exact moment through its namespace's lock (a gate the
test opens: the watcher has drained the trigger's message and waits there), so what arrives
next reaches it as one batch:

- two addresses in one batch, one of them an AnyIP range (a ``local`` route, announced by no
  ``RTM_NEWADDR``), must both be sealed out;
- an address whose netlink message was lost (the watcher's socket overflowed: ``ENOBUFS``) must
  be sealed out too.

The audit's survivor: a reseal of only the addresses netlink named passed every test before.
"""

from __future__ import annotations

import ipaddress
import os
import random
import subprocess
import threading

import pytest
from sandbox_fixtures import tier_param, wait_until
from test_sandbox_network_watch import _rules, run  # noqa: F401 - run is a fixture

from kernel_ext.sandbox import netns, netseal, netwatch

pytestmark = [
    pytest.mark.parametrize("tier", [tier_param("bwrap")]),
    pytest.mark.skipif(netns.missing_cause() is not None, reason=f"no private network here: needs {netns.missing_cause()}"),
    pytest.mark.skipif(os.geteuid() != 0, reason="changing the host's own tables needs root"),
]


class Gate:
    """Stands in for a namespace's lock: the test holds it; ``waiting`` is set once the watcher asks for it."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock, self.waiting, self.held = lock, threading.Event(), threading.Lock()
        self.held.acquire()

    def __enter__(self) -> None:
        if threading.current_thread().name == "besser-netwatch":
            self.waiting.set()
            self.held.acquire()  # until the test opens the gate
            self.held.release()
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()

    def open(self) -> None:
        if self.held.locked():
            self.held.release()


def _free_block() -> int:
    """A third octet under 10.89/16 that the host holds nothing in."""
    taken = netseal.host_prefixes()
    while True:
        block = random.randrange(2, 250)
        if not any(p.version == 4 and p.overlaps(ipaddress.ip_network(f"10.89.{block}.0/24")) for p in taken):
            return block


def _ip_batch(lines: list[str]) -> None:
    subprocess.run(["ip", "-batch", "-"], input="".join(f"{line}\n" for line in lines), text=True, check=True, capture_output=True)


@pytest.fixture
def held_watcher(run):
    """The run's namespace, sealed, with its watcher about to be stopped at the gate by a trigger address."""
    assert netwatch.listening()
    assert run.call("sh_run", command="true").ok
    guard = netwatch.find(run.service.network().held)
    assert guard is not None
    block = _free_block()
    added: list[str] = []
    gate = Gate(guard._lock)
    guard._lock = gate
    try:
        def change(lines: list[str], undo: list[str]) -> None:
            added.extend(undo)
            _ip_batch(lines)

        change([f"addr add 10.89.{block}.1/32 dev lo"], [f"addr del 10.89.{block}.1/32 dev lo"])  # the trigger
        assert gate.waiting.wait(10), "the watcher never woke for the trigger address"
        yield guard, gate, block, change
    finally:
        gate.open()
        guard._lock = gate.lock
        for line in reversed(added):
            subprocess.run(["ip", *line.split()], capture_output=True, check=False)


def _sealed_in_the_namespace(run, guard, wanted: list[netseal.Prefix]) -> None:
    assert wait_until(lambda: all(w in guard.sealed for w in wanted), timeout=10), (
        f"not sealed out: {[str(w) for w in wanted if w not in guard.sealed]}")
    assert not guard.failed  # a reseal that succeeded leaves the namespace's way out alone
    rules = _rules(run)
    for prefix in wanted:
        shown = str(prefix.network_address) if prefix.prefixlen == prefix.max_prefixlen else str(prefix)
        assert f"to {shown} unreachable" in rules, rules


def test_two_addresses_in_one_batch_are_both_sealed_out(tier, run, held_watcher):
    guard, gate, block, change = held_watcher
    address, anyip = f"10.89.{block}.2/32", f"10.89.{block}.128/25"
    change([f"addr add {address} dev lo", f"route add local {anyip} dev lo table local"],
           [f"addr del {address} dev lo", f"route del local {anyip} dev lo table local"])
    gate.open()  # the watcher reseals for the trigger, then drains both as one batch
    _sealed_in_the_namespace(run, guard, [ipaddress.ip_network(address), ipaddress.ip_network(anyip)])


def test_an_address_whose_netlink_message_was_lost_is_sealed_out(tier, run, held_watcher):
    guard, gate, block, change = held_watcher
    churn, lost = f"10.89.{block}.3/32", f"10.89.{block}.4/32"
    # Far more messages than the watcher's socket holds (1 MiB): it overflows, and the kernel drops
    # what comes after, the lost address's own message among them.
    flood = [f"addr {verb} {churn} dev lo" for _ in range(3000) for verb in ("add", "del")]
    change([*flood, f"addr add {lost} dev lo"], [f"addr del {lost} dev lo"])
    gate.open()
    _sealed_in_the_namespace(run, guard, [ipaddress.ip_network(lost)])

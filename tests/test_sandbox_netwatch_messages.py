"""The watcher reads the addresses netlink names from the kernel's own messages, every one of a datagram.

Real netlink (``NETLINK_ROUTE``): the kernel's dump of every address (many ``RTM_NEWADDR`` in one
datagram, then ``NLMSG_DONE``) must name exactly the addresses ``ip`` lists; the messages sent when
an address is added to ``lo`` and removed again (root; removed in a finally) name it once, for the
addition only; a point-to-point address names its local side (``IFA_LOCAL``), not its peer.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import socket
import struct
import subprocess
from collections.abc import Iterator

import pytest

from kernel_ext.sandbox import netseal, netwatch

RTM_GETADDR, NLMSG_DONE, NLM_F_REQUEST, NLM_F_DUMP = 22, 3, 0x1, 0x300


def _dump() -> list[bytes]:
    """Every datagram of the kernel's answer to "all addresses, both families"."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as sock:
        request = struct.pack("=BBBBI", socket.AF_UNSPEC, 0, 0, 0, 0)
        sock.send(struct.pack("=IHHII", 16 + len(request), RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + request)
        datagrams: list[bytes] = []
        while True:
            data = sock.recv(1 << 16)
            datagrams.append(data)
            if NLMSG_DONE in _kinds(data):
                return datagrams


def _kinds(data: bytes) -> list[int]:
    """The message types of one netlink datagram, in order."""
    kinds, offset = [], 0
    while offset + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, offset)
        kinds.append(kind)
        offset += max(16, (length + 3) & ~3)
    return kinds


def _listed_by_ip() -> list[netseal.Prefix]:
    shown = json.loads(subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True, check=True).stdout)
    return [ipaddress.ip_network(info["local"]) for link in shown for info in link.get("addr_info", [])]


def test_a_dump_of_every_address_names_each_address_ip_lists_and_nothing_else():
    datagrams = _dump()
    named = [prefix for data in datagrams for prefix in netwatch._addresses(data)]
    listed = _listed_by_ip()
    assert sorted(named, key=str) == sorted(listed, key=str)
    assert any(len(netwatch._addresses(data)) > 1 for data in datagrams), "no datagram held two messages"
    assert all(p.prefixlen == p.max_prefixlen for p in named)  # an address, not its subnet


@contextlib.contextmanager
def _subscribed() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    sock.bind((0, netwatch.RTMGRP_IPV4_IFADDR | netwatch.RTMGRP_IPV6_IFADDR))
    with sock:
        yield sock


def _until_named(sock: socket.socket, wanted: netseal.Prefix) -> list[bytes]:
    """Datagrams received until one names ``wanted`` (the kernel sends it once the address is added)."""
    seen: list[bytes] = []
    while not any(wanted in netwatch._addresses(data) for data in seen):
        seen.append(sock.recv(1 << 16))
    return seen


@pytest.mark.skipif(os.geteuid() != 0, reason="adding an address to the host's lo needs root")
@pytest.mark.parametrize("family", [4, 6])
def test_an_added_address_is_named_once_and_its_removal_names_nothing(family):
    block = random.randrange(2, 250)
    address = f"10.87.{block}.{random.randrange(2, 250)}/32" if family == 4 else f"fd87::{block:x}:{random.randrange(2, 9999):x}/128"
    extra = ["nodad"] if family == 6 else []
    marker = "10.87.255.254/32" if family == 4 else "fd87::ffff:fffe/128"
    with _subscribed() as sock:
        try:
            subprocess.run(["ip", "addr", "add", address, "dev", "lo", *extra], check=True, capture_output=True)
            added = _until_named(sock, ipaddress.ip_network(address))
            subprocess.run(["ip", "addr", "del", address, "dev", "lo"], check=True, capture_output=True)
            subprocess.run(["ip", "addr", "add", marker, "dev", "lo", *extra], check=True, capture_output=True)
            removed = _until_named(sock, ipaddress.ip_network(marker))  # everything sent for the removal, then the marker
        finally:
            for gone in (address, marker):
                subprocess.run(["ip", "addr", "del", gone, "dev", "lo"], capture_output=True, check=False)
    assert [p for data in added for p in netwatch._addresses(data)] == [ipaddress.ip_network(address)]
    assert [p for data in removed for p in netwatch._addresses(data)] == [ipaddress.ip_network(marker)]


@pytest.mark.skipif(os.geteuid() != 0, reason="adding an address to the host's lo needs root")
def test_a_point_to_point_address_names_its_local_side_not_its_peer():
    block = random.randrange(2, 250)
    local, peer = f"10.86.{block}.1", f"10.86.{block}.2"
    with _subscribed() as sock:
        try:
            subprocess.run(["ip", "addr", "add", local, "peer", peer, "dev", "lo"], check=True, capture_output=True)
            added = _until_named(sock, ipaddress.ip_network(local))
        finally:
            subprocess.run(["ip", "addr", "del", local, "peer", peer, "dev", "lo"], capture_output=True, check=False)
    assert [p for data in added for p in netwatch._addresses(data)] == [ipaddress.ip_network(local)]

"""The host's addresses, watched: every live private namespace is resealed as soon as the host gains one.

The seal (``netseal``) is made from the host's tables as they are when a namespace is made. A
command already running in it must not reach an address the host gains later (a VPN coming up, a
container bridge, an address added to ``lo``): pasta would relay a connection to it onto the
host's listeners. So one daemon thread per server process listens on a netlink socket
(``NETLINK_ROUTE``, the IPv4 and IPv6 address and route groups) and, on every change, reseals every
live namespace with the prefixes it lacks: the address named in the message itself (IPv4 sends it
before its ``local`` route exists) and every prefix the tables list by then. The window in which
a running command can reach a new address is the time for this thread to wake and write the rule
and the filter (a few milliseconds: ``tests/test_sandbox_network_watch.py`` measures it). Where a
reseal fails, that namespace's network ends at once (its pasta and relay are stopped: loopback
only) and ``runnet`` makes the run a new one for its next command.

A namespace is registered (``watch``) before its first seal reads the tables, so no change is lost
between the two; it is forgotten when its sandbox's first process ends (a pidfd in the same loop).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import selectors
import socket
import struct
import subprocess
import threading
import time
from functools import cache

from kernel_ext.sandbox import netseal
from kernel_ext.sandbox.nsjoin import JOIN_TIMEOUT_S, Held, stop_helper

log = logging.getLogger(__name__)

RTMGRP_IPV4_IFADDR, RTMGRP_IPV4_ROUTE, RTMGRP_IPV6_IFADDR, RTMGRP_IPV6_ROUTE = 0x10, 0x40, 0x100, 0x400
RTM_NEWADDR = 20
IFA_ADDRESS, IFA_LOCAL = 1, 2
_HEADER, _IFADDR = struct.Struct("=IHHII"), struct.Struct("=BBBBI")


class Sealed:
    """One live private namespace: what is sealed out of it, the helpers serving it, its state."""

    def __init__(self, held: Held):
        self.held = held  # the registry's own copies of the descriptors
        self.inode = os.fstat(held.net).st_ino
        self.sealed: list[netseal.Prefix] = []
        self.devices: list[str] = []  # pasta's interface(s), once it made them
        self.helpers: list[subprocess.Popen] = []  # stopped when a reseal fails
        self.failed = False
        self.resealed_at = 0.0  # time.monotonic() of the last reseal that added something
        self._lock = threading.Lock()

    def reseal(self, extra: list[netseal.Prefix] | None = None) -> str | None:
        """Seal out the host's prefixes (and ``extra``) this namespace lacks; a note when that failed."""
        with self._lock:
            if self.failed:
                return "the sandbox's network was ended: the host's new addresses could not be kept out"
            fresh = [p for p in dict.fromkeys([*(extra or ()), *netseal.host_prefixes()]) if p not in self.sealed]
            if not fresh:
                return None
            try:
                note = netseal.seal(self.held, JOIN_TIMEOUT_S, fresh, initial=not self.sealed)
                if note is None and self.devices:
                    note = netseal.fence(self.held, JOIN_TIMEOUT_S, self.devices, fresh, initial=False)
            except OSError as exc:
                note = f"the host's own addresses could not be kept out of the sandbox's network ({exc})"
            if note is None:
                self.sealed += fresh
                self.resealed_at = time.monotonic()
            return note

    def fence(self, devices: list[str]) -> str | None:
        """pasta made ``devices``: filter everything sealed so far on them (then every later reseal does)."""
        with self._lock:
            if not devices:
                return "the host's own addresses could not be filtered out of the sandbox's interface (none found)"
            try:
                note = netseal.fence(self.held, JOIN_TIMEOUT_S, devices, list(self.sealed), initial=True)
            except OSError as exc:
                note = f"the host's own addresses could not be filtered out of the sandbox's interface ({exc})"
            if note is None:
                self.devices = devices
            return note

    def fail(self) -> None:
        """End the namespace's way out: pasta (and the DNS relay) stop; its loopback stays."""
        with self._lock:
            self.failed = True
            helpers, self.helpers = self.helpers, []
        for helper in helpers:
            stop_helper(helper)


class _Watcher:
    """The one thread: netlink changes reseal every registered namespace; a pidfd each forgets ended ones."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._by_inode: dict[int, Sealed] = {}
        self._wake_read, self._wake_write = os.pipe()
        self._selector.register(self._wake_read, selectors.EVENT_READ, "wake")
        self.listening = False
        try:
            self._netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK, socket.NETLINK_ROUTE)
            self._netlink.bind((0, RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_ROUTE))
            self._netlink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            self._selector.register(self._netlink, selectors.EVENT_READ, "netlink")
            self.listening = True
        except OSError as exc:  # the reseal before each command (runnet) still applies
            log.warning("the host's addresses cannot be watched (%s): new ones are sealed out before each command only", exc)
        threading.Thread(target=self._loop, name="besser-netwatch", daemon=True).start()

    def add(self, sealed: Sealed) -> None:
        with self._lock:
            self._by_inode[sealed.inode] = sealed
            self._selector.register(sealed.held.pidfd, selectors.EVENT_READ, sealed)
        os.write(self._wake_write, b"w")

    def find(self, inode: int) -> Sealed | None:
        with self._lock:
            return self._by_inode.get(inode)

    def _loop(self) -> None:
        while True:
            changed, named = False, list[netseal.Prefix]()
            for key, _ in self._selector.select():
                if key.data == "wake":
                    os.read(self._wake_read, 4096)
                elif key.data == "netlink":
                    changed, named = True, [*named, *self._drain()]
                else:
                    self._forget(key.data)
            if changed:
                with self._lock:
                    live = list(self._by_inode.values())
                for sealed in live:
                    note = sealed.reseal(named)
                    if note is not None and not sealed.failed:
                        log.error("a private network was ended: %s", note)
                        sealed.fail()

    def _drain(self) -> list[netseal.Prefix]:
        """The addresses named by every queued message (all of them re-read anyway when the queue overflowed)."""
        named: list[netseal.Prefix] = []
        while True:
            try:
                data = self._netlink.recv(1 << 16)
            except BlockingIOError:
                return named
            except OSError:  # ENOBUFS: messages were lost; the tables are read in full
                continue
            named += _addresses(data)

    def _forget(self, sealed: Sealed) -> None:
        with self._lock:
            self._selector.unregister(sealed.held.pidfd)
            if self._by_inode.get(sealed.inode) is sealed:  # a later namespace may reuse the inode
                del self._by_inode[sealed.inode]
        sealed.held.close()


def _addresses(data: bytes) -> list[netseal.Prefix]:
    """The local address of each ``RTM_NEWADDR`` in a netlink datagram (``IFA_LOCAL``, else ``IFA_ADDRESS``)."""
    found: list[netseal.Prefix] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind = _HEADER.unpack_from(data, offset)[:2]
        if length < _HEADER.size:
            break
        if kind == RTM_NEWADDR and length >= _HEADER.size + _IFADDR.size:
            family = _IFADDR.unpack_from(data, offset + _HEADER.size)[0]
            attributes: dict[int, bytes] = {}
            at, end = offset + _HEADER.size + _IFADDR.size, offset + length
            while at + 4 <= end:
                size, key = struct.unpack_from("=HH", data, at)
                if size < 4:
                    break
                attributes[key] = data[at + 4:at + size]
                at += (size + 3) & ~3
            raw = attributes.get(IFA_LOCAL) or attributes.get(IFA_ADDRESS)
            if raw and (family, len(raw)) in ((socket.AF_INET, 4), (socket.AF_INET6, 16)):
                found.append(ipaddress.ip_network(ipaddress.ip_address(raw)))
        offset += (length + 3) & ~3
    return found


@cache
def _watcher() -> _Watcher:
    return _Watcher()


def watch(held: Held) -> Sealed:
    """Register ``held``'s namespace (own copies of its descriptors) before its first seal; reseal it from now on."""
    copies = [os.dup(fd) for fd in (held.pidfd, held.user, held.net)]
    sealed = Sealed(Held(*copies))
    _watcher().add(sealed)
    return sealed


def find(held: Held) -> Sealed | None:
    """The registration of ``held``'s namespace (None: not sealed here, or its sandbox ended)."""
    try:
        return _watcher().find(os.fstat(held.net).st_ino)
    except OSError:
        return None


def listening() -> bool:
    """The host's addresses are watched (a netlink socket could be opened)."""
    return _watcher().listening

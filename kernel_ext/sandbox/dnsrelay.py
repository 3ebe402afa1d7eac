"""A private network's way to a resolver on the host's loopback (``127.0.0.53``, systemd-resolved).

A private namespace sees the host's ``/etc/resolv.conf``. When that names a resolver on the host's
loopback, the namespace's own loopback answers instead: nothing there. pasta can only reach the
host's loopback by mapping the gateway to it (for every port; off here), and the seal keeps the
host's addresses out. So this relay opens one socket per such resolver on the host's side, then
joins the sandbox's user and network namespaces and listens on the same address, port 53 UDP,
inside: a query there goes to that resolver and nowhere else, with its id rewritten so queries
from several clients cannot be confused. Nothing else of the host is reachable through it.

UDP only: an answer too large for UDP comes back truncated and a client's retry over TCP finds
nothing (rare for lookups; the result's limits say so). Run as a program by ``netns``
(``python -I -S dnsrelay.py USERNS_FD NETNS_FD ADDRESS[@PORT]...``); it prints ``ready`` once listening and
ends with the sandbox (pasta's watcher stops it) or the server (parent-death signal).
"""

from __future__ import annotations

import ipaddress
import os
import selectors
import socket
import sys
import time

CLONE_NEWUSER, CLONE_NEWNET = 0x10000000, 0x40000000
MAX_PENDING = 1024
PENDING_S = 10.0


def loopback_resolvers(path: str = "/etc/resolv.conf") -> list[str]:
    """The ``nameserver`` lines of ``path`` that are on the host's loopback (127.0.0.0/8, ::1)."""
    found: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as conf:
            for line in conf:
                words = line.split()
                if len(words) >= 2 and words[0] == "nameserver":
                    try:
                        if ipaddress.ip_address(words[1].split("%")[0]).is_loopback and words[1] not in found:
                            found.append(words[1])
                    except ValueError:
                        continue
    except OSError:
        pass
    return found


def _enter(user: int, net: int) -> None:
    """Join the sandbox's network namespace through the descriptors the server passed (owner first)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for fd, flag in ((user, CLONE_NEWUSER), (net, CLONE_NEWNET)):
        try:
            if libc.setns(fd, flag) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)


def _family(address: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


def _split(spec: str) -> tuple[str, int]:
    """``ADDRESS`` or ``ADDRESS@PORT`` (a port other than 53 only for tests)."""
    address, _, port = spec.partition("@")
    return address, int(port or 53)


def main(argv: list[str]) -> int:
    user, net, specs = int(argv[0]), int(argv[1]), [_split(spec) for spec in argv[2:]]
    upstream = []
    for address, port in specs:  # made in the host's namespace, before joining the sandbox's
        sock = socket.socket(_family(address), socket.SOCK_DGRAM)
        sock.connect((address, port))
        upstream.append(sock)
    _enter(user, net)
    selector = selectors.DefaultSelector()
    for (address, _port), up in zip(specs, upstream, strict=True):
        inside = socket.socket(_family(address), socket.SOCK_DGRAM)
        inside.bind((address, 53))
        selector.register(inside, selectors.EVENT_READ, ("in", inside, up))
        selector.register(up, selectors.EVENT_READ, ("up", inside, up))
    print("ready", flush=True)
    pending: dict[tuple[int, int], tuple[object, bytes, float]] = {}  # (upstream fd, new id) -> client, old id, when
    next_id = 0
    while True:
        for key, _ in selector.select():
            side, inside, up = key.data
            try:
                data, peer = (inside.recvfrom(4096) if side == "in" else (up.recv(65535), None))
            except OSError:
                continue
            if len(data) < 12:
                continue
            if side == "in":
                now = time.monotonic()
                if len(pending) >= MAX_PENDING:
                    for stale in [k for k, v in pending.items() if now - v[2] > PENDING_S] or [next(iter(pending))]:
                        pending.pop(stale, None)
                next_id = (next_id + 1) % 65536
                pending[(up.fileno(), next_id)] = (peer, data[:2], now)
                try:
                    up.send(next_id.to_bytes(2, "big") + data[2:])
                except OSError:
                    pending.pop((up.fileno(), next_id), None)
            else:
                found = pending.pop((up.fileno(), int.from_bytes(data[:2], "big")), None)
                if found is not None:
                    client, old_id, _when = found
                    try:
                        inside.sendto(old_id + data[2:], client)
                    except OSError:
                        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

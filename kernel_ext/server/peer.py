"""Who is on the other end of a request: the capability token's route and process binding.

The kernels' capability token is only worth something in the hands of this server's own
processes, so a request presenting it must (1) carry no reverse-proxy headers (it did not come
through the hub's public proxy, or any other) and (2) arrive on a TCP connection whose client
end is held, right now, by this server process or one of its descendants (its kernels and
their children). (2) is read from Linux's ``/proc``: the connection's client socket is found
in this network namespace's TCP table (``/proc/self/net/tcp{,6}``, which a connection from
another host or namespace is never in), and its inode is looked for among the open files of
the server's process tree. Another process of the same OS user that copied the token (from a
kernel's ``/proc/<pid>/environ``, a notebook, a log) is not in that tree, so it is refused,
over the loopback address as through a proxy. What this does not stop is a process that can
take over one of the server's own processes (``ptrace`` by the same user where the kernel
allows it): see docs/jupyterhub.md for what holds when users share an OS user.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
from collections.abc import Iterable, Mapping

# Headers a reverse proxy (configurable-http-proxy, nginx, Traefik...) adds on the way in.
PROXY_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Real-Ip")
_ESTABLISHED = "01"


def _hex_address(host: str, port: int) -> tuple[str, ...]:
    """The ways ``/proc/net/tcp{,6}`` spells ``host:port`` (an IPv4 address also as v4-mapped v6)."""
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    spelled = []
    if isinstance(address, ipaddress.IPv4Address):
        spelled.append(f"{int.from_bytes(address.packed, sys.byteorder):08X}")
        address = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + address.packed)
    packed = address.packed
    spelled.append("".join(f"{int.from_bytes(packed[i:i + 4], sys.byteorder):08X}" for i in range(0, 16, 4)))
    return tuple(f"{text}:{port:04X}" for text in spelled)


def client_socket_inode(client: tuple, server: tuple) -> int | None:
    """The inode of the client end of the TCP connection ``client`` -> ``server`` in this
    network namespace (None when it is not here: another host, another namespace, gone)."""
    clients, servers = set(_hex_address(client[0], client[1])), set(_hex_address(server[0], server[1]))
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            with open(table) as lines:
                next(lines, None)
                for line in lines:
                    fields = line.split()
                    if len(fields) > 9 and fields[1] in clients and fields[2] in servers and fields[3] == _ESTABLISHED:
                        return int(fields[9]) or None
        except OSError:
            continue
    return None


def process_tree(root: int) -> set[int]:
    """``root`` and every live process descended from it (by parent pid, from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


def holder_among(inode: int, pids: Iterable[int]) -> int | None:
    """The first of ``pids`` with ``socket:[inode]`` among its open files."""
    wanted = f"socket:[{inode}]"
    for pid in pids:
        try:
            for fd in os.scandir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(fd.path) == wanted:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


def through_proxy(headers: Mapping[str, str]) -> str | None:
    """Why a request that came through a reverse proxy is refused (None: it came straight in)."""
    header = next((name for name in PROXY_HEADERS if headers.get(name)), None)
    return None if header is None else f"it came through a proxy ({header} is set); kernels reach this server directly"


def not_our_process(sock: socket.socket | None, root: int | None = None) -> str | None:
    """Why the client of ``sock`` is not this server's own (None: a process of its tree holds it)."""
    try:
        client, server = sock.getpeername(), sock.getsockname()  # type: ignore[union-attr]
    except (AttributeError, OSError, TypeError):
        return "its connection cannot be inspected"
    if not isinstance(client, tuple) or not isinstance(server, tuple):
        return "it did not come over TCP"
    inode = client_socket_inode(client, server)
    if inode is None:
        return "its client is not on this machine"
    if holder_among(inode, sorted(process_tree(os.getpid() if root is None else root))) is None:
        return "its client is not a process this server started"
    return None

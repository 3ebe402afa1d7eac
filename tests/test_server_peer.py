"""The pieces of the kernel token's binding (server/peer.py, auth.direct_url) on real sockets.

A real TCP connection over loopback (IPv4, and IPv6 where the machine has it): its client end
is found in /proc and recognised as held by this process's tree, and not as held by the tree
of another live process. Proxy headers are named; the URL exported to kernels is the direct
loopback one whenever the server listens on every address.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from types import SimpleNamespace

import pytest

from kernel_ext.server.auth import direct_url
from kernel_ext.server.peer import (
    PROXY_HEADERS,
    client_socket_inode,
    not_our_process,
    through_proxy,
)


def loopback_pair(family: int, host: str):
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.bind((host, 0))
    listener.listen(1)
    client = socket.create_connection(listener.getsockname()[:2])
    server_side, _ = listener.accept()
    listener.close()
    return client, server_side


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


FAMILIES = [(socket.AF_INET, "127.0.0.1")]
if has_ipv6_loopback():
    FAMILIES.append((socket.AF_INET6, "::1"))


@pytest.mark.parametrize(("family", "host"), FAMILIES, ids=lambda v: str(v))
def test_a_connection_is_traced_to_the_process_tree_holding_its_client_end(family, host):
    client, server_side = loopback_pair(family, host)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert client_socket_inode(server_side.getpeername(), server_side.getsockname()) is not None
        assert not_our_process(server_side) is None  # this process holds the client end
        assert not_our_process(server_side, root=stranger.pid) == "its client is not a process this server started"
        client.close()
        assert not_our_process(server_side) is not None  # the client is gone: nobody holds it
    finally:
        stranger.kill()
        stranger.wait()
        client.close()
        server_side.close()


def test_an_uninspectable_connection_is_refused():
    assert not_our_process(None) == "its connection cannot be inspected"


@pytest.mark.parametrize("header", PROXY_HEADERS)
def test_each_proxy_header_marks_a_proxied_request(header):
    assert header in (through_proxy({header: "10.0.0.1"}) or "")
    assert through_proxy({"Authorization": "token x"}) is None


@pytest.mark.parametrize(
    ("ip", "certfile", "expected"),
    [
        ("", "", "http://127.0.0.1:8888/a%40b/"),
        ("0.0.0.0", "", "http://127.0.0.1:8888/a%40b/"),
        ("localhost", "", "http://127.0.0.1:8888/a%40b/"),
        ("::", "", "http://[::1]:8888/a%40b/"),
        ("127.0.0.1", "", "http://127.0.0.1:8888/a%40b/"),
        ("10.0.0.5", "", "http://10.0.0.5:8888/a%40b/"),
        ("0.0.0.0", "/etc/cert.pem", "https://pod-7:8888/a%40b/"),
    ],
)
def test_kernels_are_given_the_servers_direct_address(ip, certfile, expected):
    listening_on = {"": "localhost", "0.0.0.0": "pod-7", "::": "pod-7", "localhost": "localhost"}.get(ip, ip)
    scheme = "https" if certfile else "http"
    app = SimpleNamespace(ip=ip, port=8888, sock="", certfile=certfile,
                          connection_url=f"{scheme}://{listening_on}:8888/a%40b/")
    assert direct_url(app) == expected

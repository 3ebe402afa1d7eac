"""Big request bodies against a real Jupyter server in its own process (its RSS read from /proc).

Every endpoint of the extension (and any other path under its prefix) reads at most
``BesserAgentApp.max_body_bytes`` (4 MiB) of a body. Four concurrent 50 MB POSTs per case, sent
in 64 KiB pieces from raw sockets, with a ``Content-Length`` or chunked, with and without the
person's credential: a declared length over the cap is answered 413 ``BODY_TOO_LARGE`` before
any authentication (so also for nobody); a chunked body is counted as it arrives (a refused
request's is not kept) and answered 413 as soon as it passes the cap. The
server's peak RSS stays within 64 MiB of where it started (before the cap, one such body alone
was buffered whole), no run is started, and the server answers normally afterwards.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
from urllib.parse import urlsplit

import pytest
from server_process import start_server

TOTAL = 50 * 1024 * 1024
PIECE = 64 * 1024
RSS_BOUND_KIB = 64 * 1024
CONCURRENT = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    process = start_server(tmp_path_factory.mktemp("body-cap"))
    try:
        yield process
    finally:
        process.stop()


def big_post(url: str, path: str, *, chunked: bool, token: str | None) -> tuple[int, dict, int]:
    """POST ``TOTAL`` bytes to ``path``, stopping when the server answers or closes; the status,
    the JSON answer and how many body bytes were sent."""
    where = urlsplit(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=60)
    try:
        head = [f"POST {path} HTTP/1.1", f"Host: {where.netloc}", "Content-Type: application/json"]
        head += [f"Authorization: token {token}"] if token else []
        head += ["Transfer-Encoding: chunked"] if chunked else [f"Content-Length: {TOTAL}"]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sent, piece = 0, b"7" * PIECE
        while sent < TOTAL:
            if select.select([sock], [], [], 0)[0]:
                break  # the server has answered (or closed): stop sending
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        else:
            if chunked:
                sock.sendall(b"0\r\n\r\n")
        return (*read_answer(sock), sent)
    finally:
        sock.close()


def read_answer(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    try:
        while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
            more = sock.recv(65536)
            if not more:
                break
            data += more
    except ConnectionResetError:
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 "), f"no HTTP answer: {data[:200]!r}"
    status = int(head.split()[1])
    try:
        return status, json.loads(body[: _length(data)] or b"{}")
    except ValueError:
        return status, {"unreadable": body[:200].decode(errors="replace")}


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


CASES = [  # (path, chunked, with the person's token, expected status)
    ("/besser-agent/runs", False, False, 413),
    ("/besser-agent/runs", False, True, 413),
    ("/besser-agent/runs", True, True, 413),
    ("/besser-agent/runs", True, False, 413),
    ("/besser-agent/runs/20250101-000000-abcdef/approvals/call-1", False, False, 413),
    ("/besser-agent/runs/20250101-000000-abcdef/cancel", True, True, 413),
    ("/besser-agent/no/such/endpoint", False, False, 413),
    ("/besser-agent/no/such/endpoint", True, True, 413),
]


@pytest.mark.slow
async def test_big_bodies_are_refused_early_and_memory_stays_bounded(server):
    rss_before, _ = server.memory_kib()
    jobs = [
        asyncio.to_thread(big_post, server.url, path, chunked=chunked, token=server.token if authed else None)
        for path, chunked, authed, _ in CASES
        for _ in range(CONCURRENT)
    ]
    answers = await asyncio.gather(*jobs)
    _, peak_after = server.memory_kib()
    assert peak_after - rss_before < RSS_BOUND_KIB, f"the server grew from {rss_before} KiB to a peak of {peak_after} KiB"

    for index, (status, body, sent) in enumerate(answers):
        path, chunked, authed, expected = CASES[index // CONCURRENT]
        case = f"{path} chunked={chunked} authenticated={authed}"
        assert status == expected, f"{case}: {status} {body}"
        if expected == 413:
            assert body["code"] == "BODY_TOO_LARGE" and "\n" not in body["message"], f"{case}: {body}"
        assert sent < TOTAL // 2, f"{case}: the server read {sent} bytes before answering"

    async with server.api() as person:  # still serving; nothing was started
        assert (await person.get("/besser-agent/config")).status_code == 200
        assert (await person.get("/besser-agent/runs")).json()["runs"] == []
        small = await person.post("/besser-agent/runs", content=b"{" * 100)  # under the cap: parsed, named error
        assert small.status_code == 400 and small.json()["code"] == "INVALID_JSON"

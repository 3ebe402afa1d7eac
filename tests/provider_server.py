"""A real HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic streaming protocols.

Tests queue planned responses (status, headers, body chunks); the server sends each chunk as
one HTTP/1.1 chunk (or close-delimited), and can drop the connection mid-stream, stall until
released, or check the key and answer 401 echoing it back (as some endpoints do). Every
request is recorded (path, headers, JSON body). While a test using ``loopback_only`` runs,
an audit hook refuses any socket connection that is not to a loopback address, so a test
can never reach a real provider.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "BESSER_LLM_PROVIDER",
    "BESSER_LLM_MODEL",
    "BESSER_LLM_CASSETTE",
    "BESSER_LLM_SCRIPT",
    "BESSER_LLM_MAX_COST_USD",
    "BESSER_LLM_TIMEOUT_SECONDS",
    "BESSER_LLM_CALL_TIMEOUT_SECONDS",
    "BESSER_LLM_MAX_REPLY_BYTES",
    "BESSER_LLM_MAX_REPLY_CHARS",
    "BESSER_LLM_MAX_TOOL_CALLS",
    "BESSER_LLM_MAX_ARGUMENT_CHARS",
)

# -- the loopback guard ------------------------------------------------------------------------

_guard = {"active": False}


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX and the like
    host = str(address[0]).lower()
    return host.startswith("127.") or host in ("::1", "localhost", "::ffff:127.0.0.1")


def _audit(event: str, args: tuple) -> None:
    if _guard["active"] and event == "socket.connect" and not _is_loopback(args[1]):
        raise PermissionError(f"test tried to connect to a non-loopback address {args[1]!r}")


sys.addaudithook(_audit)


@pytest.fixture(autouse=False)
def loopback_only(monkeypatch: pytest.MonkeyPatch):
    """No provider variables from the outer environment; no connection beyond loopback."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    _guard["active"] = True
    try:
        yield
    finally:
        _guard["active"] = False


# -- planned responses -------------------------------------------------------------------------


@dataclass
class Plan:
    status: int = 200
    chunks: list[bytes] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    chunked: bool = True           # False: no framing, the end of the body is the connection's end
    disconnect_after: int | None = None  # drop the connection after this many chunks
    stall_after: int | None = None       # wait for ``release`` (or the client leaving) after this many
    stall_headers: bool = False          # wait the same way before even the status line


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)  # a bug in the test server shows


class ProviderServer:
    def __init__(self) -> None:
        self.plans: deque[Plan] = deque()
        self.requests: list[Seen] = []
        self.release = threading.Event()
        self.client_gone = threading.Event()
        self.stalled = threading.Event()
        self.required_key: tuple[str, str] | None = None  # (protocol, key)
        self._stop = threading.Event()
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> ProviderServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def plan(self, *plans: Plan) -> None:
        self.plans.extend(plans)

    def require_key(self, protocol: str, key: str) -> None:
        """Answer 401 (echoing the key received, like a careless endpoint) when the key differs."""
        self.required_key = (protocol, key)


def _handler(server: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output clean
            pass

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {k.lower(): v for k, v in self.headers.items()}
            server.requests.append(Seen(self.command, self.path, headers, body))
            plan = self._auth_failure(headers) or (server.plans.popleft() if server.plans else None)
            if plan is None:
                plan = Plan(500, [json.dumps({"error": {"message": "no response planned"}}).encode()])
            self._send(plan)

        def _auth_failure(self, headers: dict[str, str]) -> Plan | None:
            if server.required_key is None:
                return None
            protocol, key = server.required_key
            if protocol == "openai":
                given = headers.get("authorization", "").removeprefix("Bearer ")
                body = {"error": {"message": f"Incorrect API key provided: {given}.", "type": "invalid_request_error", "code": "invalid_api_key"}}
            else:
                given = headers.get("x-api-key", "")
                body = {"type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {given}"}}
            if given == key:
                return None
            return Plan(401, [json.dumps(body).encode()], {"content-type": "application/json"})

        def _send(self, plan: Plan) -> None:
            if plan.stall_headers and not self._stall():
                return
            self.send_response(plan.status)
            streaming = plan.status == 200 and "content-type" not in {k.lower() for k in plan.headers}
            if streaming:
                self.send_header("content-type", "text/event-stream")
            for name, value in plan.headers.items():
                self.send_header(name, value)
            if plan.chunked:
                self.send_header("transfer-encoding", "chunked")
            else:
                self.send_header("connection", "close")
                self.close_connection = True
            self.end_headers()
            try:
                for number, chunk in enumerate(plan.chunks):
                    if plan.disconnect_after is not None and number >= plan.disconnect_after:
                        self._drop()
                        return
                    if plan.stall_after is not None and number == plan.stall_after:
                        if not self._stall():
                            return
                    self._write(chunk, plan.chunked)
                if plan.stall_after is not None and plan.stall_after >= len(plan.chunks):
                    if not self._stall():
                        return
                if plan.disconnect_after is not None:
                    self._drop()
                    return
                if plan.chunked:
                    self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                server.client_gone.set()
                self.close_connection = True

        def _write(self, chunk: bytes, chunked: bool) -> None:
            if chunked:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            else:
                self.wfile.write(chunk)
            self.wfile.flush()

        def _stall(self) -> bool:
            """Wait for release; False (and ``client_gone``) when the client hangs up first."""
            server.stalled.set()
            sock = self.connection
            while not server.release.is_set() and not server._stop.is_set():
                readable, _, _ = select.select([sock], [], [], 0.02)
                if readable:
                    try:
                        data = sock.recv(1, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        server.client_gone.set()
                        self.close_connection = True
                        return False
            return not server._stop.is_set()

        def _drop(self) -> None:
            self.wfile.flush()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler


@pytest.fixture
def server(loopback_only: None):
    instance = ProviderServer().start()
    try:
        yield instance
    finally:
        instance.stop()


# -- wire builders -----------------------------------------------------------------------------


def sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {text}\n\n".encode()


def rechunk(pieces: list[bytes], size: int) -> list[bytes]:
    """The same bytes cut every ``size`` bytes, ignoring event (and UTF-8) boundaries."""
    blob = b"".join(pieces)
    return [blob[i : i + size] for i in range(0, len(blob), size)]


def fragments(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def openai_stream(
    text: list[str] = (),
    calls: list[tuple[str, str, list[str]]] = (),
    finish: str | None = "tool_calls",
    usage: dict[str, Any] | None = None,
    model: str = "gpt-4o-mini-2024-07-18",
    done: bool = True,
) -> list[bytes]:
    """SSE events of a Chat Completions stream: text pieces, then calls as (id, name, argument pieces).

    An id of None leaves the ``id`` field out (servers that never send one)."""
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model}
    events = [sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})]
    for piece in text:
        events.append(sse({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}))
    for index, (call_id, name, pieces) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        if call_id is None:
            del head["id"]
        events.append(sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [head]}, "finish_reason": None}]}))
        for piece in pieces:
            part = {"index": index, "function": {"arguments": piece}}
            events.append(sse({**base, "choices": [{"index": 0, "delta": {"tool_calls": [part]}, "finish_reason": None}]}))
    if finish:
        events.append(sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    if usage is not None:
        events.append(sse({**base, "choices": [], "usage": usage}))
    if done:
        events.append(sse("[DONE]"))
    return events


def anthropic_stream(
    text: list[str] = (),
    calls: list[tuple[str, str, list[str]]] = (),
    stop_reason: str | None = "tool_use",
    usage_in: dict[str, int] | None = None,
    output_tokens: int = 0,
    model: str = "claude-sonnet-4-5-20250929",
    stop: bool = True,
) -> list[bytes]:
    """SSE events of a Messages stream: one text block, then one tool_use block per call (id None: no id)."""
    usage = {"input_tokens": 0, "output_tokens": 1, **(usage_in or {})}
    events = [
        sse({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [], "usage": usage}}, "message_start"),
        sse({"type": "ping"}, "ping"),
    ]
    index = 0
    if text:
        events.append(sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}, "content_block_start"))
        for piece in text:
            events.append(sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}, "content_block_delta"))
        events.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
        index = 1
    for call_id, name, pieces in calls:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        if call_id is None:
            del block["id"]
        events.append(sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start"))
        for piece in ["", *pieces]:
            delta = {"type": "input_json_delta", "partial_json": piece}
            events.append(sse({"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"))
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    if stop_reason:
        delta = {"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None}, "usage": {"output_tokens": output_tokens}}
        events.append(sse(delta, "message_delta"))
    if stop:
        events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


def json_error(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Plan:
    return Plan(status, [json.dumps(body).encode()], {"content-type": "application/json", **(headers or {})})

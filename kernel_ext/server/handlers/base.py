"""What every handler of the extension shares: the body cap, the capability token, JSON replies.

Handlers are ``APIHandler``s whose methods are decorated ``@authenticated`` and
``@authorized`` (resources ``besser-agent:*``). Refusals answer ``{"code", "message"}`` with a
stable code. In ``prepare``, in this order:

1. The body cap (``BesserAgentApp.max_body_bytes``). Every handler streams its body
   (``@stream_request_body``), so Tornado does not buffer it before ``prepare``: a declared
   ``Content-Length`` over the cap is refused with 413 before any authentication work, and a
   body is counted as it arrives (413 as soon as it passes the cap, chunked or not).
2. The per-start capability token, accepted before the server's own identity check (so a
   kernel holding it is authenticated here and only here), and only from this server's own
   process tree over a direct connection (``server/peer.py``); elsewhere 403.
3. The server's own authentication. Its refusal (and the capability's) is answered in place of
   the method, after the (capped, dropped) body: the connection stays open, so a proxy in front
   sees a 403, not a reset connection.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado.httputil import HTTPConnection
from tornado.web import HTTPError, stream_request_body

from kernel_ext import safejson
from kernel_ext.hosting.manager import RunManager
from kernel_ext.hosting.offloop import for_request
from kernel_ext.hosting.options import OperatorSettings
from kernel_ext.hosting.run import Run
from kernel_ext.safejson import MAX_JSON_DEPTH
from kernel_ext.server.auth import (
    RESOURCE_PREFIX,
    Capability,
    capability_user,
    presented_token,
)

STATE_KEY = "besser_agent_state"
MAX_BODY_BYTES = 4 * 1024 * 1024  # the default of ``BesserAgentApp.max_body_bytes``

# Connections whose peer was found to be one of this server's own kernels (a kept-alive
# connection is checked once); weak, so a closed connection is forgotten with it.
_OWN_PROCESS_CONNECTIONS: weakref.WeakSet[HTTPConnection] = weakref.WeakSet()


MAX_EVENT_STREAMS = 512  # the default of ``BesserAgentApp.max_event_streams``
REPLAYS_AT_ONCE = 4


@dataclass
class StreamLimits:
    """Event streams open on this server, and how many finished runs' replays are written at once.

    Each open stream costs the loop a little per event and heartbeat; a replay costs it the join of
    its batches. Hundreds at once (a class reloading a notebook, or one client opening streams in a
    loop) held ``GET config`` for seconds (red team 2, F5): past ``max_open`` a stream is refused
    by name (429), and replays beyond ``REPLAYS_AT_ONCE`` wait their turn instead of interleaving."""

    max_open: int = MAX_EVENT_STREAMS
    open: int = 0
    replays: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(REPLAYS_AT_ONCE))


@dataclass
class ServerState:
    """Everything the handlers need, put in the web app's settings by the ExtensionApp."""

    manager: RunManager
    capability: Capability
    operator: OperatorSettings
    heartbeat_s: float = 15.0
    sandbox: dict[str, Any] | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    bind_capability: bool = True  # the capability only from this server's own process tree
    configuration: dict[str, Any] | None = None  # GET config's answer but for its live counts, built once
    streams: StreamLimits = field(default_factory=lambda: StreamLimits())


class Refusal(HTTPError):
    """A named refusal: HTTP ``status`` with ``{"code": code, "message": message}``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(status, log_message=f"{code}: {message}")
        self.code = code
        self.message = message




def parse_json_body(body: bytes) -> Any:
    """``body`` parsed, or a ``Refusal`` (400): ``INVALID_JSON``, or ``JSON_TOO_DEEP`` past ``MAX_JSON_DEPTH``.

    ``kernel_ext.safejson`` bounds the nesting (a hostile one would raise ``RecursionError`` or
    reach validators and model loaders that recurse): one named line, never a 500.
    """
    if not body:
        return {}
    try:
        return safejson.loads(body, MAX_JSON_DEPTH)
    except safejson.JsonTooDeep as exc:
        raise Refusal(400, "JSON_TOO_DEEP", f"the body's {exc}; at most {MAX_JSON_DEPTH} levels are accepted") from None
    except ValueError as exc:
        raise Refusal(400, "INVALID_JSON", f"the body is not JSON: {str(exc)[:200]}") from None


class _CapabilityIdentity:
    """The server's identity provider for one request that presented the capability token.

    Needed because not every provider honours a user set before ``prepare`` (JupyterHub's
    single-user provider asks the hub about every token, and the hub does not know this one).
    """

    def __init__(self, provider: Any, user: Any):
        self._provider, self._user = provider, user

    def get_user(self, handler: Any) -> Any:
        return self._user

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)


class _CapabilityAuthorizer:
    """The capability token opens this extension's resources and nothing else."""

    def is_authorized(self, handler: Any, user: Any, action: str, resource: str) -> bool:
        return resource.startswith(RESOURCE_PREFIX)


@stream_request_body
class BesserHandler(APIHandler):
    auth_resource = "besser-agent:runs"
    _capability_user: Any = None
    _body: bytearray | None = None
    _received = 0

    @property
    def state(self) -> ServerState:
        return self.settings[STATE_KEY]

    @property
    def identity_provider(self) -> Any:
        provider = super().identity_provider
        return provider if self._capability_user is None else _CapabilityIdentity(provider, self._capability_user)

    @property
    def authorizer(self) -> Any:
        return super().authorizer if self._capability_user is None else _CapabilityAuthorizer()

    async def prepare(self) -> None:  # type: ignore[override]
        self._body, self._received = bytearray(), 0
        self._refuse_declared_body()
        try:
            await self._authenticate()
        except HTTPError as refused:
            # Answered in place of the method, once the (capped, dropped) body is in: a response
            # finished in ``prepare`` makes Tornado close the connection, and a proxy in front
            # (the hub's) that reuses it, or is still sending the body, then answers 503.
            self._body = None
            setattr(self, self.request.method.lower(), partial(self._answer, refused))

    async def _authenticate(self) -> None:
        token = presented_token(self.request.headers)
        if token and self.state.capability.accepts(token):
            await self._check_capability_route()
            # Authenticated and authorized by the capability alone, whatever identity provider
            # and authorizer the server runs (plain, or JupyterHub's); XSRF-exempt like any
            # token request. The server's other handlers never run this code.
            self._capability_user = capability_user()
            self._token_authenticated = True
        await super().prepare()

    def _answer(self, refused: HTTPError, *args: Any, **kwargs: Any) -> None:
        raise refused

    # -- the body cap ---------------------------------------------------------------------------

    def _refuse_declared_body(self) -> None:
        declared = self.request.headers.get("Content-Length")
        if declared is None:
            return
        try:
            size = int(declared)
        except ValueError:
            raise Refusal(400, "INVALID_REQUEST", "the Content-Length header is not a number") from None
        if size > self.state.max_body_bytes:
            raise self._too_large()

    def _too_large(self) -> Refusal:
        return Refusal(413, "BODY_TOO_LARGE", f"a request body may hold at most {self.state.max_body_bytes} bytes")

    def data_received(self, chunk: bytes) -> None:
        """Count the body and keep it up to the cap (a refused request's is dropped); past the
        cap, answer 413 once (the connection is then closed, so the client stops sending)."""
        if self._finished:
            return
        self._received += len(chunk)
        if self._received > self.state.max_body_bytes:
            self._body = None
            self.send_error(413, exc_info=(Refusal, self._too_large(), None))
        elif self._body is not None:
            self._body += chunk

    # -- the capability's route -----------------------------------------------------------------

    async def _check_capability_route(self) -> None:
        if not self.state.bind_capability:
            return
        from kernel_ext.server import peer

        why = peer.through_proxy(self.request.headers)
        connection = self.request.connection
        if why is None and not (connection is not None and connection in _OWN_PROCESS_CONNECTIONS):
            stream = getattr(connection, "stream", None)
            why = await for_request(peer.not_our_process, getattr(stream, "socket", None))
            if why is None and connection is not None:  # the same client holds a kept-alive connection: checked once
                _OWN_PROCESS_CONNECTIONS.add(connection)
        if why is not None:
            self.log.warning("besser-agent: refused the kernels' token from %s: %s", self.request.remote_ip, why)
            raise Refusal(403, "CAPABILITY_REFUSED", f"the kernels' token is accepted only from this server's own kernels: {why}")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        exc = kwargs.get("exc_info", (None, None, None))[1]
        if isinstance(exc, Refusal):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps({"code": exc.code, "message": exc.message}))
            return
        super().write_error(status_code, **kwargs)

    def reply(self, data: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(data))

    async def json_body(self) -> Any:
        """The request body as JSON: the only place a route parses one (400 with a named code otherwise).

        Parsed on a request worker (``offloop.py``): a large body is real work, and the event loop serves everyone.
        """
        body = bytes(self._body or b"")  # the capped body the streaming handler collected
        if not body:
            return {}
        return await for_request(parse_json_body, body)

    async def find_run(self, run_id: str) -> Run:
        """The run, hosted or reloaded from disk (in a worker thread: a finished log can be large)."""
        run = await self.state.manager.find(run_id)
        if run is None:
            raise Refusal(404, "RUN_NOT_FOUND", f"no run {run_id!r} on this server")
        return run


class UnknownRouteHandler(BesserHandler):
    """Any other path under the prefix: 404, after the same body cap (the server's own 404
    page would read a body of up to its ``max_body_size`` first)."""

    def _missing(self, *args: Any) -> None:
        raise Refusal(404, "NOT_FOUND", "no such besser-agent endpoint")

    get = post = put = patch = delete = _missing

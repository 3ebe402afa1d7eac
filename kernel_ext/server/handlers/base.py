"""What every handler of the extension shares: the capability token, JSON replies, refusals.

Handlers are ``APIHandler``s whose methods are decorated ``@authenticated`` and
``@authorized`` (resources ``besser-agent:*``). ``prepare`` accepts the per-start capability
token before the server's own identity check, so a kernel holding it is authenticated here
and only here. Refusals answer ``{"code", "message"}`` with a stable code.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado.web import HTTPError

from kernel_ext.pipeline.options import OperatorSettings
from kernel_ext.pipeline.run import Run
from kernel_ext.server.auth import (
    RESOURCE_PREFIX,
    Capability,
    capability_user,
    presented_token,
)
from kernel_ext.server.manager import RunManager

STATE_KEY = "besser_agent_state"


@dataclass
class ServerState:
    """Everything the handlers need, put in the web app's settings by the ExtensionApp."""

    manager: RunManager
    capability: Capability
    operator: OperatorSettings
    heartbeat_s: float = 15.0
    sandbox: dict[str, Any] | None = None


class Refusal(HTTPError):
    """A named refusal: HTTP ``status`` with ``{"code": code, "message": message}``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(status, log_message=f"{code}: {message}")
        self.code = code
        self.message = message


MAX_JSON_DEPTH = 64  # arrays and objects inside each other; a run request needs a handful


def parse_json_body(body: bytes) -> Any:
    """``body`` parsed, or a ``Refusal`` (400): ``INVALID_JSON``, or ``JSON_TOO_DEEP`` past ``MAX_JSON_DEPTH``.

    ``json.loads`` answers a hostile nesting (100,000 ``[``) with ``RecursionError``, and a
    nesting it does accept would reach validators and model loaders that recurse: both end
    here as one named line, never a 500.
    """
    if not body:
        return {}
    try:
        value = json.loads(body)
    except RecursionError:
        raise Refusal(400, "JSON_TOO_DEEP", f"the body nests arrays or objects too deep; at most {MAX_JSON_DEPTH} levels are accepted") from None
    except ValueError as exc:
        raise Refusal(400, "INVALID_JSON", f"the body is not JSON: {str(exc)[:200]}") from None
    if json_deeper_than(value, MAX_JSON_DEPTH):
        raise Refusal(400, "JSON_TOO_DEEP", f"the body nests arrays or objects more than {MAX_JSON_DEPTH} levels deep")
    return value


def json_deeper_than(value: Any, limit: int) -> bool:
    """True when containers nest more than ``limit`` deep (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


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


class BesserHandler(APIHandler):
    auth_resource = "besser-agent:runs"
    _capability_user: Any = None

    @property
    def state(self) -> ServerState:
        return self.settings[STATE_KEY]

    @property
    def identity_provider(self) -> Any:  # type: ignore[override]
        provider = super().identity_provider
        return provider if self._capability_user is None else _CapabilityIdentity(provider, self._capability_user)

    @property
    def authorizer(self) -> Any:  # type: ignore[override]
        return super().authorizer if self._capability_user is None else _CapabilityAuthorizer()

    async def prepare(self) -> None:  # type: ignore[override]
        token = presented_token(self.request.headers)
        if token and self.state.capability.accepts(token):
            # Authenticated and authorized by the capability alone, whatever identity provider
            # and authorizer the server runs (plain, or JupyterHub's); XSRF-exempt like any
            # token request. The server's other handlers never run this code.
            self._capability_user = capability_user()
            self._token_authenticated = True
        await super().prepare()

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

        Parsed in a worker thread: a large body is real work, and the event loop serves everyone.
        """
        if not self.request.body:
            return {}
        return await asyncio.to_thread(parse_json_body, self.request.body)

    def find_run(self, run_id: str) -> Run:
        run = self.state.manager.get(run_id)
        if run is None:
            raise Refusal(404, "RUN_NOT_FOUND", f"no run {run_id!r} on this server")
        return run

"""The capability token kernels use to reach this extension, and nothing else of the server.

Each server start makes a fresh random token and exports it, with the extension's direct URL
(the server's own listening address, loopback where it listens on every address, never the
hub's public proxy), into the server's environment, which the kernels it starts inherit
(``BESSER_AGENT_URL``, ``BESSER_AGENT_TOKEN``). Only this extension's handlers accept it, and
only from this server's own process tree over a direct connection (``server/peer.py``): the
server's own identity provider never sees it as valid, so it opens no contents, kernels or
terminals. Its name marks it as a secret, so sandboxes scrub it from tool environments and
events redact it.
"""

from __future__ import annotations

import hmac
import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

ENV_URL = "BESSER_AGENT_URL"
ENV_TOKEN = "BESSER_AGENT_TOKEN"
ENV_ROOT = "BESSER_AGENT_ROOT"  # the server's root folder: a run view's links open files by their contents path
API_PREFIX = "besser-agent"
RESOURCE_PREFIX = "besser-agent:"
CAPABILITY_USER = "besser-agent-kernel"

_AUTH_HEADER = re.compile(r"^\s*(?:token|bearer)\s+(\S+)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Capability:
    token: str = field(repr=False)

    @classmethod
    def new(cls) -> Capability:
        return cls(secrets.token_urlsafe(32))

    def accepts(self, presented: str | None) -> bool:
        if not presented:
            return False
        return hmac.compare_digest(presented.encode(), self.token.encode())


def presented_token(headers: Any) -> str | None:
    """The token of an ``Authorization: token <t>`` header (never a URL parameter: URLs get logged)."""
    match = _AUTH_HEADER.match(headers.get("Authorization", "") or "")
    return match.group(1) if match else None


_ANY_ADDRESS = {"", "0.0.0.0", "localhost"}


def direct_url(serverapp: Any) -> str:
    """The server's own URL as its kernels should dial it: loopback where it listens on every
    address (``connection_url`` would name the host, whose address is not loopback), else the
    address it listens on. TLS servers keep ``connection_url`` (a certificate names a host)."""
    ip = str(getattr(serverapp, "ip", "") or "")
    if getattr(serverapp, "sock", "") or getattr(serverapp, "certfile", "") or ip not in _ANY_ADDRESS | {"::"}:
        return serverapp.connection_url
    from urllib.parse import urlsplit

    host = "[::1]" if ip == "::" else "127.0.0.1"
    return urlsplit(serverapp.connection_url)._replace(netloc=f"{host}:{serverapp.port}").geturl()


def api_url(connection_url: str) -> str:
    """The extension's REST root under the server's (already URL-escaped) base URL."""
    return connection_url.rstrip("/") + f"/{API_PREFIX}/"


class KernelExport:
    """Sets the variables (URL, token, the server's root) for kernels started from now on; ``withdraw`` restores what was there."""

    def __init__(self) -> None:
        self._previous: dict[str, str | None] | None = None

    def publish(self, url: str, capability: Capability, root: str = "") -> None:
        if self._previous is None:
            self._previous = {name: os.environ.get(name) for name in (ENV_URL, ENV_TOKEN, ENV_ROOT)}
        os.environ[ENV_URL] = url
        os.environ[ENV_TOKEN] = capability.token
        if root:
            os.environ[ENV_ROOT] = root

    def withdraw(self) -> None:
        if self._previous is None:
            return
        for name, value in self._previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._previous = None


def capability_user() -> Any:
    from jupyter_server.auth import User

    return User(username=CAPABILITY_USER, name="kernel (capability token)", display_name="kernel")

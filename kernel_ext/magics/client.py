"""The kernel's client of the server extension: REST calls and the SSE follower (httpx).

It finds the server from the two variables the extension exports to the kernels it starts
(``BESSER_AGENT_URL``, ``BESSER_AGENT_TOKEN``) and sends the capability token, never the
server's own token. ``follow`` is meant for a background task: it feeds each event to a
callback, resumes with ``Last-Event-ID`` after a dropped connection, reports its state through
``note`` (shown on the view) and never prints.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from kernel_ext.server.auth import ENV_TOKEN, ENV_URL

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 120.0  # heartbeats arrive every 15 s; a silent minute means a dead connection


class ServerUnavailable(Exception):
    """No extension answered at the exported URL (or nothing was exported)."""


class ServerError(Exception):
    """The extension answered with a refusal: ``status`` and its stable ``code``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message


class Refused:
    """A decision the server did not take: false, with the stable ``code`` and a ``reason`` a card shows."""

    def __init__(self, code: str, reason: str):
        self.code, self.reason = code, reason

    def __bool__(self) -> bool:
        return False


def from_environment(environ: Mapping[str, str]) -> ServerClient | None:
    url, token = environ.get(ENV_URL, "").strip(), environ.get(ENV_TOKEN, "").strip()
    return ServerClient(url, token) if url and token else None


class ServerClient:
    def __init__(self, url: str, token: str, *, timeout: float = 30.0):
        self.url = url if url.endswith("/") else url + "/"
        self._headers = {"Authorization": f"token {token}"}
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"ServerClient({self.url!r})"  # the token stays out of reprs and tracebacks

    # -- synchronous calls (from the magic itself) --------------------------------------

    def probe(self) -> dict[str, Any]:
        try:
            return self.request("GET", "config", timeout=PROBE_TIMEOUT_S)
        except (httpx.HTTPError, ServerError) as exc:
            raise ServerUnavailable(f"{type(exc).__name__}: {exc}") from None

    def request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> Any:
        with httpx.Client(headers=self._headers, timeout=timeout or self.timeout) as client:
            response = client.request(method, self.url + path, json=body)
        return _answer(response)

    # -- asynchronous calls (from tasks on the kernel's loop) -----------------------------

    async def decide(
        self, run_id: str, call_id: str, approved: bool, digest: str | None = None, *, rest_of_kind: bool = False,
    ) -> bool | Refused:
        """True when the server took the decision; a false ``Refused`` naming why when it did not
        (decided, closed, stale, a grant on a shell card)."""
        body: dict[str, Any] = {"approved": approved} if digest is None else {"approved": approved, "digest": digest}
        if rest_of_kind:
            body["rest_of_kind"] = True
        async with httpx.AsyncClient(headers=self._headers, timeout=self.timeout) as client:
            response = await client.post(f"{self.url}runs/{run_id}/approvals/{quote(call_id, safe='')}", json=body)
        if response.status_code in (404, 409):
            try:
                _answer(response)
            except ServerError as exc:
                return Refused(exc.code, exc.message)
        _answer(response)
        return True

    async def follow(
        self,
        run_id: str,
        apply: Callable[[dict[str, Any]], object],
        *,
        after: int = 0,
        note: Callable[[str], object] | None = None,
        max_failures: int = 8,
    ) -> int:
        """Feed every event after ``after`` to ``apply`` until ``done``; the last seq seen."""
        last, failures = after, 0
        timeout = httpx.Timeout(self.timeout, read=READ_TIMEOUT_S)
        async with httpx.AsyncClient(headers=self._headers, timeout=timeout) as client:
            while True:
                try:
                    headers = {"Last-Event-ID": str(last), "Accept": "text/event-stream"}
                    async with client.stream("GET", f"{self.url}runs/{run_id}/events", headers=headers) as response:
                        if response.status_code != 200:
                            await response.aread()
                            _answer(response)
                        if failures and note is not None:
                            note("reconnected to the server")
                        failures = 0
                        async for data in sse_data(response.aiter_lines()):
                            event = json.loads(data)
                            last = max(last, int(event.get("seq") or last))
                            apply(event)
                            if event.get("type") == "done":
                                return last
                except (httpx.TransportError, ServerError) as exc:
                    if isinstance(exc, ServerError) and exc.status < 500:
                        _say(note, f"the server refused to stream this run ({exc.code}: {exc.message})")
                        return last
                    failures += 1
                    if failures > max_failures:
                        _say(note, f"lost the server ({type(exc).__name__}); `%besser attach {run_id}` resumes")
                        return last
                    _say(note, f"connection to the server lost; reconnecting ({failures}/{max_failures})")
                    await asyncio.sleep(min(0.2 * 2**failures, 5.0))


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event (comments and heartbeats skipped)."""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value.removeprefix(" "))
    if data:
        yield "\n".join(data)


def _answer(response: httpx.Response) -> Any:
    try:
        body = response.json() if response.content else {}
    except ValueError:
        body = {}
    if response.status_code >= 400:
        body = body if isinstance(body, dict) else {}
        raise ServerError(response.status_code, str(body.get("code") or f"HTTP_{response.status_code}"),
                          str(body.get("message") or response.reason_phrase))
    return body


def _say(note: Callable[[str], object] | None, text: str) -> None:
    log.info(text)
    if note is not None:
        try:
            note(text)
        except Exception:
            log.exception("could not show a follower note")

"""HTTP for live providers: one lazily created httpx client, streamed POSTs, errors to codes.

This is the only module that imports httpx, and nothing imports it until a live provider
sends its first request. Exceptions are always raised outside ``except`` blocks, so no httpx
exception (whose request carries the auth header) rides along as ``__context__``; every
upstream text passes through ``redact`` first. Redirects are not followed: a redirect to
another host would carry the key with it.
"""

from __future__ import annotations

import asyncio
import codecs
from collections.abc import AsyncGenerator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.bounds import ReplyWatch
from kernel_ext.providers.cancel import CancelGuard
from kernel_ext.providers.errorhead import ErrorHead, error_fields
from kernel_ext.providers.events import ProviderError, Retrying
from kernel_ext.providers.overflow import context_overflow
from kernel_ext.providers.quota import budget_figures
from kernel_ext.providers.redact import redact, safe_url
from kernel_ext.providers.retry import (
    RETRY_STATUSES,
    Attempted,
    RetryableError,
    RetryPolicy,
    retry_after_seconds,
    retrying,
)

__all__ = ["HttpTransport", "is_loopback"]

_USER_AGENT = "besser-jupyter-agent (kernel_ext.providers)"


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


class HttpTransport:
    """Streamed JSON POSTs to one endpoint with retries, timeouts and cancellation."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float,
        connect_timeout: float,
        retry: RetryPolicy,
        secrets: tuple[str, ...],
        key_hint: str,
    ):
        self.base_url = base_url.rstrip("/")
        self.endpoint = safe_url(self.base_url)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry
        self.secrets = secrets
        self.key_hint = key_hint  # e.g. "OPENAI_API_KEY", named when a key is missing
        self._client: httpx.AsyncClient | None = None

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout),
                follow_redirects=False,
                # a local server must not be routed through the user's proxy settings
                trust_env=not is_loopback(self.base_url),
                # no compression: every byte read is a byte counted against the reply's limit
                headers={"user-agent": _USER_AGENT, "accept-encoding": "identity"},
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def post_stream(
        self, path: str, headers: Mapping[str, str], content: bytes, guard: CancelGuard, watch: ReplyWatch
    ) -> AsyncGenerator[Retrying | httpx.Response, None]:
        """Retry notices, then the open 2xx response (the caller closes it)."""
        url = self.base_url + path

        async def attempt() -> httpx.Response:
            return await self._send(url, headers, content, watch)

        async for item in retrying(attempt, self.retry, guard, watch):
            yield item.value if isinstance(item, Attempted) else item

    async def _send(self, url: str, headers: Mapping[str, str], content: bytes, watch: ReplyWatch) -> httpx.Response:
        failure: ProviderError | RetryableError | None = None
        response: httpx.Response | None = None
        watch.check_time()
        try:
            client = self._get_client()
            request = client.build_request("POST", url, headers=dict(headers), content=content)
            # httpx's own timeouts bound each read; the call's total and the run's deadline bound
            # a status line and headers dripped in a byte at a time
            response = await asyncio.wait_for(client.send(request, stream=True), watch.time_left(idle=False))
        except TimeoutError:
            failure = watch.expired(idle=False)
        except httpx.TimeoutException:
            failure = RetryableError(
                ProviderError(ErrorCode.TIMEOUT, f"{self.endpoint} did not answer within {self.timeout:g}s")
            )
        except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as exc:
            failure = ProviderError(ErrorCode.NOT_CONFIGURED, f"cannot send to {self.endpoint}: {self._clean(str(exc))}")
        except httpx.TransportError as exc:
            failure = RetryableError(
                ProviderError(
                    ErrorCode.UPSTREAM_LLM,
                    f"could not reach {self.endpoint}: {type(exc).__name__} {self._clean(str(exc))}".rstrip(),
                )
            )
        if failure is not None:
            raise failure
        assert response is not None
        if response.status_code < 300:
            return response
        try:
            failure = await asyncio.wait_for(self._status_failure(response, watch.limits.max_bytes), max(watch.time_left(idle=False), 0.01))
        except TimeoutError:
            failure = watch.expired(idle=False)
        raise failure

    async def _status_failure(self, response: httpx.Response, limit: int) -> ProviderError | RetryableError:
        """The failure a status reply names: its type and message read from the body's head
        (``errorhead``), scanning at most ``limit`` bytes (the reply's byte bound)."""
        status = response.status_code
        head, scanned = ErrorHead(), 0
        try:  # however long the body: its head is scanned as it arrives, nothing past it is kept
            async for chunk in response.aiter_bytes():
                head.feed(chunk)
                scanned += len(chunk)
                if head.done or scanned > limit:
                    break
        except httpx.HTTPError:
            pass
        finally:
            await response.aclose()
        kind, detail = self._upstream_error(head.fields())
        data = {"status": status, "endpoint": self.endpoint, **({"upstream_type": kind} if kind else {})}
        where = f"{self.endpoint} (HTTP {status}{', ' + kind if kind else ''})"
        budget = budget_figures(kind, detail)
        if budget is not None:  # final whatever the status: a retry is refused the same way
            return _budget_exhausted(where, detail, {**data, **budget})
        if context_overflow(status, f"{kind} {detail} {head.head.decode('utf-8', 'replace')}"):  # what the head read
            return _context_too_long(where, detail, data)
        if status in (401, 403):
            if not self.secrets:
                text = f"{where} requires an API key and none is set ({self.key_hint})"
            else:
                text = f"{where} rejected the API key from {self.key_hint}"
            # the upstream text is dropped on purpose: endpoints echo (masked) keys in it
            return ProviderError(ErrorCode.INVALID_KEY, text, data)
        text = f"{where}: {detail}" if detail else where
        if status in RETRY_STATUSES:
            return RetryableError(ProviderError(ErrorCode.UPSTREAM_LLM, text, data), retry_after_seconds(response.headers))
        if 300 <= status < 400:
            text = f"{where} redirected elsewhere; set the base URL to the final address"
            return ProviderError(ErrorCode.BAD_REQUEST, text, data)
        code = ErrorCode.BAD_REQUEST if status < 500 else ErrorCode.UPSTREAM_LLM
        return ProviderError(code, text, data)

    def _upstream_error(self, fields: tuple[str, str]) -> tuple[str, str]:
        """(error type, message) as ``errorhead`` read them, the message redacted and bounded."""
        kind, message = fields
        return kind, self._clean(message)

    def _clean(self, text: str, limit: int = 300) -> str:
        text = redact(" ".join(text.split()), self.secrets)
        return text if len(text) <= limit else text[: limit - 3] + "..."

    async def text(self, response: httpx.Response, guard: CancelGuard, watch: ReplyWatch) -> AsyncGenerator[str, None]:
        """The response body as strictly decoded UTF-8 pieces, read under ``watch``: each read
        waits at most until its first deadline, every byte counts, failures are named errors."""
        failure: ProviderError | None = None
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            failure = ProviderError(ErrorCode.UPSTREAM_LLM, f"{self.endpoint} sent a {encoding[:20]!r}-encoded stream; "
                                    "none was asked for")
        iterator = response.aiter_raw().__aiter__()
        decoder = codecs.getincrementaldecoder("utf-8")()
        first = True
        try:
            while failure is None:
                watch.check_time()
                try:
                    chunk = await guard.run(asyncio.wait_for(iterator.__anext__(), watch.time_left()), "streaming the reply")
                except StopAsyncIteration:
                    chunk = None
                except (TimeoutError, httpx.TimeoutException):
                    failure = watch.expired() if watch.time_left() <= 0.05 else ProviderError(
                        ErrorCode.TIMEOUT, f"the stream from {self.endpoint} stalled: no data for {self.timeout:g}s")
                    break
                except httpx.TransportError as exc:
                    failure = ProviderError(
                        ErrorCode.UPSTREAM_LLM,
                        f"the connection to {self.endpoint} dropped mid-stream ({type(exc).__name__})",
                    )
                    break
                if chunk is not None:
                    watch.on_bytes(len(chunk))
                try:
                    piece = decoder.decode(chunk or b"", final=chunk is None)
                except UnicodeDecodeError:
                    failure = ProviderError(ErrorCode.UPSTREAM_LLM, f"{self.endpoint} sent bytes that are not UTF-8")
                    break
                if first and piece:
                    piece, first = piece.removeprefix("\ufeff"), False
                if piece:
                    yield piece
                if chunk is None:
                    return
            if failure is not None:
                raise failure
        finally:
            await response.aclose()

    def error_in_stream(self, payload: Any) -> ProviderError:
        """An error the endpoint sent inside an otherwise successful stream."""
        kind, message = self._upstream_error(error_fields(payload) if isinstance(payload, dict) else ("", str(payload)))
        where = f"{self.endpoint} reported an error mid-stream" + (f" ({kind})" if kind else "")
        budget = budget_figures(kind, message)
        if budget is not None:
            return _budget_exhausted(where, message, {"endpoint": self.endpoint, **budget})
        if context_overflow(None, f"{kind} {message} {payload if isinstance(payload, str) else ''}"):
            return _context_too_long(where, message, {"endpoint": self.endpoint})
        return ProviderError(ErrorCode.UPSTREAM_LLM, f"{where}: {message}" if message else where)


def _budget_exhausted(where: str, detail: str, data: dict[str, Any]) -> ProviderError:
    """The one wording of a spent budget, with the endpoint's figures when it gave them."""
    figures = ""
    if "spent_usd" in data:
        figures = f" (spent ${data['spent_usd']:g} of ${data['limit_usd']:g})"
    text = f"{where}: the budget of this key is spent{figures}; no retry"
    return ProviderError(ErrorCode.BUDGET_EXHAUSTED, f"{text}: {detail}" if detail else text, data)


def _context_too_long(where: str, detail: str, data: dict[str, Any]) -> ProviderError:
    """The one wording of a conversation past the model's window: final, since a retry is as long."""
    text = (f"{where}: the conversation is longer than the model's context window; no retry "
            "(choose a model with a larger window, or ask for less in one run)")
    return ProviderError(ErrorCode.CONTEXT_TOO_LONG, f"{text}: {detail}" if detail else text, data)

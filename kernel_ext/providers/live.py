"""What the two HTTP providers share: the key, the endpoint, the transport, the stream loop.

A protocol subclass supplies the path, headers, request body and a stream assembler (SSE
events in, provider events out); this class sends with retries, parses SSE and closes the
connection whatever happens. Each call reads under a ``ReplyWatch`` (providers/bounds.py):
the reply's size and pace limits and the run's budget, checked per chunk. httpx is imported
on the first request, not before.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.base import Provider
from kernel_ext.providers.bounds import CHARS_PER_TOKEN, CallBudget, ReplyLimits, ReplyWatch
from kernel_ext.providers.cancel import CancelGuard
from kernel_ext.providers.config import Secret
from kernel_ext.providers.events import Event, ProviderError, Retrying, Usage
from kernel_ext.providers.messages import Request
from kernel_ext.providers.meter import CostMeter
from kernel_ext.providers.retry import RetryPolicy
from kernel_ext.providers.sse import SSEEvent, parse_sse, split_lines

if TYPE_CHECKING:  # httpx loads with the first request
    import httpx

    from kernel_ext.providers.transport import HttpTransport

__all__ = ["Assembler", "LiveProvider", "StreamSource"]

OFF_LOOP_CHARS = 256 * 1024


class StreamSource(Protocol):
    """What an assembler asks of the transport it reads: where it is, and how it words an error."""

    endpoint: str

    def error_in_stream(self, payload: dict[str, Any]) -> ProviderError: ...


class Assembler(Protocol):
    """Turns one protocol's SSE events into provider events for one reply."""

    done: bool

    def feed(self, event: SSEEvent) -> list[Event]: ...

    def finish(self) -> list[Event]: ...


class LiveProvider(Provider):
    kind: ClassVar[str] = "live"
    protocol: ClassVar[str] = ""
    key_env: ClassVar[str] = ""
    path: ClassVar[str] = ""

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key: Secret | str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy | None = None,
        meter: CostMeter | None = None,
        max_tokens: int | None = None,
        limits: ReplyLimits | None = None,
    ):
        super().__init__(model=model, label=f"{self.protocol}:{model}", meter=meter, max_tokens=max_tokens)
        self._key = api_key if isinstance(api_key, Secret) or api_key is None else Secret(str(api_key))
        if self._key is not None and not self._key:
            self._key = None
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry_policy = retry or RetryPolicy()
        # the idle timeout is the ``timeout`` given (BESSER_LLM_TIMEOUT_SECONDS by default)
        self.limits = limits if limits is not None else ReplyLimits.from_env(idle_timeout=timeout)
        self._transport: Any = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(label={self.label!r}, endpoint={self.describe()['endpoint']!r})"

    # -- protocol hooks ----------------------------------------------------------------------

    def _headers(self, key: str | None) -> dict[str, str]:
        raise NotImplementedError

    def _body(self, request: Request) -> dict[str, Any]:
        raise NotImplementedError

    def _assembler(self, transport: StreamSource, watch: ReplyWatch) -> Assembler:
        raise NotImplementedError

    def _path(self) -> str:
        return self.path

    # -- shared ------------------------------------------------------------------------------

    def secrets(self) -> tuple[str, ...]:
        return (self._key.reveal(),) if self._key is not None else ()

    def describe(self) -> dict[str, Any]:
        from kernel_ext.providers.redact import safe_url

        return {
            **super().describe(),
            "protocol": self.protocol,
            "endpoint": safe_url(self.base_url),
            "key": f"set ({self.key_env})" if self._key is not None else f"not set ({self.key_env})",
        }

    def transport(self) -> HttpTransport:
        if self._transport is None:
            from kernel_ext.providers.transport import HttpTransport

            self._transport = HttpTransport(
                self.base_url,
                timeout=self.timeout,
                connect_timeout=self.connect_timeout,
                retry=self.retry_policy,
                secrets=self.secrets(),
                key_hint=self.key_env,
            )
        return self._transport

    async def aclose(self) -> None:
        if self._transport is not None:
            await self._transport.aclose()

    async def _events(
        self, request: Request, cancel: asyncio.Event | None, budget: CallBudget | None = None
    ) -> AsyncGenerator[Event, None]:
        transport = self.transport()
        key = self._key.reveal() if self._key is not None else None
        # ASCII-only: text the endpoint sent (a lone surrogate in its reply) is echoed as the
        # same escape, never a UnicodeEncodeError that ends the run unnamed
        content = json.dumps(self._body(request), ensure_ascii=True).encode("ascii")
        watch = self._watch(budget, len(content), transport.endpoint)
        async with CancelGuard(cancel) as guard:
            response: httpx.Response | None = None
            sent = transport.post_stream(self._path(), self._headers(key), content, guard, watch)
            async for item in sent:
                if isinstance(item, Retrying):
                    yield item
                else:
                    response = item
            if response is None:  # the transport yields a response or raises; never neither
                raise ProviderError(ErrorCode.UPSTREAM_LLM, f"{transport.endpoint} gave no response")
            watch.progress()  # the endpoint answered: the idle clock starts now
            text = transport.text(response, guard, watch)
            lines = split_lines(text)
            events = parse_sse(lines)
            try:
                assembler = self._assembler(transport, watch)
                async for sse in events:
                    if len(sse.data) > OFF_LOOP_CHARS:  # a big chunk is parsed off the event loop
                        fed = await asyncio.to_thread(_feed, assembler, sse, transport.endpoint)
                    else:
                        fed = _feed(assembler, sse, transport.endpoint)
                    for event in fed:
                        yield event
                    if assembler.done:
                        break
                    watch.check_time()
                for event in assembler.finish():
                    yield event
            finally:
                await events.aclose()
                await lines.aclose()
                await text.aclose()
                await response.aclose()

    def _watch(self, budget: CallBudget | None, request_bytes: int, endpoint: str) -> ReplyWatch:
        def price(input_tokens: int, output_tokens: int) -> float | None:
            return self.meter.pricing.cost(self.model, Usage(input_tokens, output_tokens))

        return ReplyWatch(self.limits, budget, endpoint, price=price, input_tokens=request_bytes // CHARS_PER_TOKEN,
                          cost_left_usd=self.meter.remaining_usd)


def _feed(assembler: Assembler, sse: SSEEvent, endpoint: str) -> list[Event]:
    """The assembler's events; a structurally wrong event is the endpoint's fault, named so."""
    problem = ""
    try:
        return assembler.feed(sse)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        problem = type(exc).__name__
    raise ProviderError(ErrorCode.UPSTREAM_LLM, f"{endpoint} sent a malformed stream event ({problem})")

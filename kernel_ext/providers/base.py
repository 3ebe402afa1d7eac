"""The provider interface: a conversation and tool schemas in, an async stream of events out.

Every provider (live over HTTP, replayed from a cassette, scripted for teaching) yields the
same events in the same order: text deltas and retry notices as they happen, each tool call
once it is complete, then usage (priced by the run's cost meter), then exactly one ``Stop``.
Failures are ``ProviderError`` with a stable code and a message that never holds a key.
``kind`` and ``label`` say what answered, so events and the timeline never pass a recording
off as a live model.
"""

from __future__ import annotations

import io
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.providers.messages import AssistantMessage, Conversation, Request, ToolUse
from kernel_ext.safetext import valid_unicode

if TYPE_CHECKING:  # asyncio (and with it ssl) is not needed to import this module
    import asyncio

__all__ = [
    "KINDS",
    "ErrorCode",
    "Event",
    "Provider",
    "ProviderError",
    "Reply",
    "Retrying",
    "Stop",
    "TextDelta",
    "ToolCallDone",
    "Usage",
    "UsageUpdate",
    "event_from_dict",
    "event_to_dict",
]

log = logging.getLogger("kernel_ext.providers")
log.addHandler(logging.NullHandler())  # a library: the host decides where records go

KINDS = ("live", "replay", "scripted")


class ProviderError(ToolFailure):
    """A provider call failed. ``code`` is one of the stable provider codes in ``ErrorCode``."""

    def __repr__(self) -> str:
        return f"ProviderError({self.code!r}, {self.message!r})"

    def __reduce__(self) -> Any:
        return (type(self), (self.code, self.message, self.data))


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. ``input_tokens`` excludes cache reads and writes, counted apart."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True)
class TextDelta:
    text: str
    kind: ClassVar[str] = "text"


@dataclass(frozen=True)
class ToolCallDone:
    """A tool call whose id, name and arguments are complete (arguments exactly as streamed)."""

    call: ToolUse
    kind: ClassVar[str] = "tool_call"


@dataclass(frozen=True)
class UsageUpdate:
    """Usage of this call, its cost (None when the model has no known price) and the run's total.

    ``model`` is the model it was priced at: the configured one (``Provider._price``). What the
    endpoint named in its stream is ``reported_model``, kept only to be shown."""

    usage: Usage
    model: str = ""
    cost_usd: float | None = None
    total_cost_usd: float = 0.0
    problems: tuple[str, ...] = ()  # figures the endpoint sent that were refused (the usage holds an estimate)
    reported_model: str = ""
    kind: ClassVar[str] = "usage"


@dataclass(frozen=True)
class Retrying:
    """The request failed in a retryable way and will be sent again after ``delay`` seconds."""

    attempt: int
    delay: float
    code: str
    reason: str
    kind: ClassVar[str] = "retry"


@dataclass(frozen=True)
class Stop:
    """The reply is complete. ``reason``: end, tool_use, max_tokens, or the provider's own word."""

    reason: str
    raw: str = ""
    kind: ClassVar[str] = "stop"


Event = TextDelta | ToolCallDone | UsageUpdate | Retrying | Stop


def event_to_dict(event: Event) -> dict[str, Any]:
    if isinstance(event, TextDelta):
        return {"kind": "text", "text": event.text}
    if isinstance(event, ToolCallDone):
        c = event.call
        return {"kind": "tool_call", "id": c.id, "name": c.name, "arguments": c.arguments}
    if isinstance(event, UsageUpdate):
        reported = {"reported_model": event.reported_model} if event.reported_model else {}
        return {"kind": "usage", "model": event.model, **reported, **event.usage.to_dict()}
    if isinstance(event, Stop):
        return {"kind": "stop", "reason": event.reason, "raw": event.raw}
    if isinstance(event, Retrying):
        return {"kind": "retry", "attempt": event.attempt, "delay": event.delay, "code": event.code, "reason": event.reason}
    raise TypeError(f"not a provider event: {type(event).__name__}")


def event_from_dict(data: dict[str, Any]) -> Event:
    kind = data.get("kind")
    if kind == "text":
        return TextDelta(str(data["text"]))
    if kind == "tool_call":
        return ToolCallDone(ToolUse(str(data["id"]), str(data["name"]), str(data["arguments"])))
    if kind == "usage":
        from kernel_ext.providers.meter import checked_usage

        usage, problems = checked_usage(data)
        # as a stream would hand it over: the name the endpoint reported (a replay prices it anew)
        return UsageUpdate(usage, str(data.get("reported_model") or data.get("model", "")), problems=problems)
    if kind == "stop":
        return Stop(str(data["reason"]), str(data.get("raw", "")))
    if kind == "retry":
        return Retrying(int(data["attempt"]), float(data["delay"]), str(data["code"]), str(data["reason"]))
    raise ValueError(f"unknown event kind {kind!r}")


@dataclass
class Reply:
    """A whole streamed reply, collected."""

    text: str = ""
    tool_calls: list[ToolUse] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    stop_reason: str = ""
    retries: int = 0

    def to_message(self) -> AssistantMessage:
        return AssistantMessage(self.text, tuple(self.tool_calls))


class Provider(ABC):
    """Base of every provider. Subclasses implement ``_events``; ``stream`` adds the rest.

    ``stream`` checks the cost cap and cancellation before sending, prices usage with the
    meter, counts retries, logs (never a key), and hands complete exchanges to a cassette
    writer when recording.
    """

    kind: ClassVar[str] = "live"

    def __init__(self, *, model: str, label: str, meter: Any = None, max_tokens: int | None = None):
        from kernel_ext.providers.meter import CostMeter

        self.model = model
        self.label = label
        self.meter = meter if meter is not None else CostMeter()
        self.max_tokens = max_tokens
        self.retries = 0
        self.recorder: Any = None

    # -- what subclasses provide -------------------------------------------------------------

    @abstractmethod
    def _events(self, request: Request, cancel: asyncio.Event | None, budget: Any = None) -> AsyncIterator[Event]:
        """The raw events of one call; usage comes unpriced (``cost_usd`` None). ``budget`` is
        the run's ``CallBudget`` (providers/bounds.py), which a live stream checks per chunk."""

    def describe(self) -> dict[str, Any]:
        """What answered, for events and the timeline (never a key)."""
        return {"kind": self.kind, "label": self.label, "model": self.model}

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be written anywhere (keys); live providers override."""
        return ()

    async def aclose(self) -> None:  # noqa: B027 - a no-op default: only clients holding connections override it
        """Release connections; the provider stays usable (it reconnects on demand)."""

    # -- the shared template -----------------------------------------------------------------

    def record(self, path: str | Path) -> None:
        """Write every complete exchange of this provider to the cassette at ``path``."""
        from kernel_ext.providers.recording import CassetteWriter

        self.recorder = CassetteWriter(path, self.describe(), secrets=self.secrets())

    async def stream(
        self,
        conversation: Conversation,
        tools: Iterable[Any] = (),
        *,
        max_tokens: int | None = None,
        cancel: asyncio.Event | None = None,
        budget: Any = None,
    ) -> AsyncIterator[Event]:
        """Send the conversation; yield events until ``Stop``. Raises ``ProviderError``.

        ``budget``: what the run has left (a ``CallBudget``), enforced while the reply arrives."""
        request = Request.of(conversation, tools, max_tokens or self.max_tokens)
        self.meter.check(self.model if self.kind == "live" else None)  # a replay or script spends nothing
        if cancel is not None and cancel.is_set():
            raise ProviderError(ErrorCode.CANCELLED, "cancelled before the request was sent")
        log.debug("%s: request with %d messages, %d tools", self.label, len(request.messages), len(request.tools))
        seen: list[Event] = []
        received = 0  # characters of text and calls so far: what an estimate counts (events are not kept)
        try:
            async with aclosing(self._events(request, cancel, budget)) as events:
                async for event in events:
                    if isinstance(event, Retrying):
                        self.retries += 1
                        log.info("%s: retry %d in %.2fs (%s)", self.label, event.attempt, event.delay, event.reason)
                    elif isinstance(event, UsageUpdate):
                        event = self._price(event, request, received)
                    elif isinstance(event, TextDelta):
                        received += len(event.text)
                    elif isinstance(event, ToolCallDone):
                        received += len(event.call.arguments) + len(event.call.name)
                    if self.recorder is not None and not isinstance(event, Retrying):
                        seen.append(event)  # kept only for a cassette: a reply's pieces are many
                    yield event
        except ProviderError as exc:
            log.warning("%s: %s", self.label, exc)
            if self.recorder is not None and exc.code != ErrorCode.CANCELLED:
                self.recorder.write(request, seen, exc)
            raise
        if self.recorder is not None:
            self.recorder.write(request, seen, None)

    def _price(self, event: UsageUpdate, request: Request, received: int) -> UsageUpdate:
        """Price the call at the configured model (the endpoint's named model is only noted).
        Where the endpoint's figures were refused, its sizes stand in (about four characters a
        token), so a lying endpoint still spends its budget."""
        from kernel_ext.providers.meter import checked_usage

        model = self.model or event.model  # the operator's choice; a provider without one keeps the stream's
        reported = event.model[:256]
        self.meter.note_reported_model(reported, model)
        usage, refused = checked_usage(event.usage.to_dict())  # any provider's figures, checked once more
        problems = event.problems + refused
        if problems:
            estimate = _estimate(request, received)
            usage = replace(usage, input_tokens=max(usage.input_tokens, estimate.input_tokens),
                            output_tokens=max(usage.output_tokens, estimate.output_tokens))
            log.warning("%s: usage refused (%s); counted an estimate", self.label, "; ".join(problems))
        cost, total = self.meter.add(model, usage, problems)
        return replace(event, usage=usage, model=model, cost_usd=cost, total_cost_usd=total, problems=problems,
                       reported_model=reported)

    async def complete(
        self,
        conversation: Conversation,
        tools: Iterable[Any] = (),
        *,
        max_tokens: int | None = None,
        cancel: asyncio.Event | None = None,
        budget: Any = None,
    ) -> Reply:
        """The whole reply at once (the stream, collected)."""
        reply = Reply()
        parts = io.StringIO()  # one buffer, not one object per streamed piece
        stream = self.stream(conversation, tools, max_tokens=max_tokens, cancel=cancel, budget=budget)
        async with aclosing(stream) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    parts.write(event.text)
                elif isinstance(event, ToolCallDone):
                    reply.tool_calls.append(event.call)
                elif isinstance(event, UsageUpdate):
                    reply.usage = reply.usage + event.usage
                    if event.cost_usd is not None:
                        reply.cost_usd = (reply.cost_usd or 0.0) + event.cost_usd
                elif isinstance(event, Retrying):
                    reply.retries += 1
                elif isinstance(event, Stop):
                    reply.stop_reason = event.reason
        reply.text = valid_unicode(parts.getvalue())  # the endpoint's text, as valid Unicode, for every later use
        return reply


def _estimate(request: Request, received: int) -> Usage:
    """Tokens of one call guessed from its size: what was sent, and ``received`` characters back."""
    sent = len(request.system) + sum(len(str(t)) for t in request.tools)
    for message in request.messages:
        sent += len(getattr(message, "text", "") or getattr(message, "content", "") or "")
        sent += sum(len(c.arguments) + len(c.name) for c in getattr(message, "tool_calls", ()))
    return Usage(sent // 4 + 1, received // 4 + 1)

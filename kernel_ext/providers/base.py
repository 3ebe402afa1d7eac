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
from collections.abc import AsyncGenerator, Callable, Iterable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.bounds import CallBudget
from kernel_ext.providers.events import Event, ProviderError, Retrying, Stop, TextDelta, ToolCallDone, Usage, UsageUpdate
from kernel_ext.providers.messages import AssistantMessage, Conversation, Request, ToolOffer, ToolUse
from kernel_ext.providers.meter import CostMeter, checked_usage
from kernel_ext.safetext import valid_unicode

if TYPE_CHECKING:  # asyncio (and with it ssl) is not needed to import this module
    import asyncio

    from kernel_ext.providers.recording import CassetteWriter

__all__ = ["KINDS", "Provider", "Reply"]

log = logging.getLogger("kernel_ext.providers")
log.addHandler(logging.NullHandler())  # a library: the host decides where records go

KINDS = ("live", "replay", "scripted")


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

    def __init__(self, *, model: str, label: str, meter: CostMeter | None = None, max_tokens: int | None = None):
        self.model = model
        self.label = label
        self.meter = meter if meter is not None else CostMeter()
        self.max_tokens = max_tokens
        self.retries = 0
        self.recorder: CassetteWriter | None = None
        # the endpoint's last word that the budget is spent: later calls of the run are refused
        # without a request (a spent budget answers every retry the same way)
        self.exhausted: ProviderError | None = None

    # -- what subclasses provide -------------------------------------------------------------

    @abstractmethod
    def _events(self, request: Request, cancel: asyncio.Event | None, budget: CallBudget | None = None) -> AsyncGenerator[Event, None]:
        """The raw events of one call; usage comes unpriced (``cost_usd`` None). ``budget`` is
        the run's ``CallBudget`` (providers/bounds.py), which a live stream checks per chunk."""

    def describe(self) -> dict[str, Any]:
        """What answered, for events and the timeline (never a key)."""
        return {"kind": self.kind, "label": self.label, "model": self.model}

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never be written anywhere (keys); live providers override."""
        return ()

    def recorded_denial(self, index: int, count: int) -> bool | None:
        """Whether the ``index``-th of the ``count`` calls of the reply just given was denied
        when this reply was recorded; None when nothing was recorded (a live model, a script)."""
        return None

    async def aclose(self) -> None:  # noqa: B027 - a no-op default: only clients holding connections override it
        """Release connections; the provider stays usable (it reconnects on demand)."""

    # -- the shared template -----------------------------------------------------------------

    def record(self, path: str | Path, *, secrets: Iterable[str] = (), best_effort: bool = False) -> None:
        """Write every complete exchange of this provider to the cassette at ``path``; its keys
        and ``secrets`` (a run's) are cut from every line; ``best_effort``: see CassetteWriter."""
        from kernel_ext.providers.recording import CassetteWriter  # only a recording run writes cassettes

        self.recorder = CassetteWriter(path, self.describe(), secrets=(*self.secrets(), *secrets), best_effort=best_effort)

    async def stream(
        self,
        conversation: Conversation,
        tools: Iterable[ToolOffer] = (),
        *,
        max_tokens: int | None = None,
        cancel: asyncio.Event | None = None,
        budget: CallBudget | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Send the conversation; yield events until ``Stop``. Raises ``ProviderError``.

        ``budget``: what the run has left (a ``CallBudget``), enforced while the reply arrives."""
        request = Request.of(conversation, tools, max_tokens or self.max_tokens)
        self.meter.check(self.model if self.kind == "live" else None)  # a replay or script spends nothing
        if cancel is not None and cancel.is_set():
            raise ProviderError(ErrorCode.CANCELLED, "cancelled before the request was sent")
        if self.exhausted is not None:
            spent = self.exhausted
            raise ProviderError(spent.code, f"not sent: {spent.message}", {**spent.data, "sent": False})
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
            if exc.code == ErrorCode.BUDGET_EXHAUSTED:
                self.exhausted = exc
            if self.recorder is not None and exc.code != ErrorCode.CANCELLED:
                self.recorder.write(request, seen, exc)
            raise
        if self.recorder is not None:
            self.recorder.write(request, seen, None)

    def _price(self, event: UsageUpdate, request: Request, received: int) -> UsageUpdate:
        """Price the call at the configured model (the endpoint's named model is only noted).
        Where the endpoint's figures were refused, its sizes stand in (about four characters a
        token), so a lying endpoint still spends its budget."""
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
        tools: Iterable[ToolOffer] = (),
        *,
        max_tokens: int | None = None,
        cancel: asyncio.Event | None = None,
        budget: CallBudget | None = None,
        on_text: Callable[[str], object] | None = None,
    ) -> Reply:
        """The whole reply at once (the stream, collected); ``on_text`` sees each piece of text as it arrives."""
        reply = Reply()
        parts = io.StringIO()  # one buffer, not one object per streamed piece
        stream = self.stream(conversation, tools, max_tokens=max_tokens, cancel=cancel, budget=budget)
        async with aclosing(stream) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    parts.write(event.text)
                    if on_text is not None:
                        on_text(valid_unicode(event.text))
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

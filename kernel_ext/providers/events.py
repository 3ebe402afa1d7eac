"""What a provider's stream is made of: the event types, a call's ``Usage``, ``ProviderError``.

Kept apart from ``providers/base.py`` so the meter, the price table and the cassette writer can
use these types while ``base`` imports them at the top: no import runs in a circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from kernel_ext.errors import ToolFailure
from kernel_ext.providers.messages import ToolUse

__all__ = [
    "Event",
    "ProviderError",
    "Retrying",
    "Stop",
    "TextDelta",
    "ToolCallDone",
    "Usage",
    "UsageUpdate",
    "event_to_dict",
]


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

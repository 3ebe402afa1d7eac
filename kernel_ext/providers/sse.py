"""Server-sent events from a stream of lines (both providers stream SSE).

Follows the WHATWG rules that matter here: ``field: value`` lines, one optional space after
the colon, ``data`` lines joined with newlines, comments start with ``:``, a blank line ends
an event. One leniency: an event still pending when the stream ends is delivered, because
some OpenAI-compatible servers omit the final blank line.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["SSEEvent", "parse_sse"]


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str


async def parse_sse(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    event, data = "", []
    async for line in lines:
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield SSEEvent(event or "message", "\n".join(data))

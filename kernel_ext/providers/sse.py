"""Server-sent events from a stream of lines (both providers stream SSE).

Follows the WHATWG rules that matter here: ``field: value`` lines, one optional space after
the colon, ``data`` lines joined with newlines, comments start with ``:``, a blank line ends
an event. One leniency: an event still pending when the stream ends is delivered, because
some OpenAI-compatible servers omit the final blank line.

Lines end only at CR LF, LF or CR (``split_lines``), never where ``str.splitlines`` or httpx's
``aiter_lines`` would also cut (U+2028, U+2029, U+0085, form feeds...): those are valid
inside a JSON string and servers that do not escape non-ASCII send them raw.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["SSEEvent", "parse_sse", "split_lines"]


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str


async def split_lines(chunks: AsyncIterable[str]) -> AsyncIterator[str]:
    """Decoded text pieces in, SSE lines out (terminators removed); a CR LF split across two
    pieces is one line end. A last line without a terminator is delivered at the end."""
    pending: list[str] = []
    after_cr = False
    async for chunk in chunks:
        if after_cr and chunk.startswith("\n"):
            chunk = chunk[1:]
        after_cr = False
        start = 0
        while True:
            cr, lf = chunk.find("\r", start), chunk.find("\n", start)
            if cr < 0 and lf < 0:
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            pending.append(chunk[start:end])
            yield "".join(pending)
            pending = []
            start = end + 1
            if chunk[end] == "\r":
                if start == len(chunk):
                    after_cr = True
                elif chunk[start] == "\n":
                    start += 1
        if start < len(chunk):
            pending.append(chunk[start:])
    if pending:
        yield "".join(pending)


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

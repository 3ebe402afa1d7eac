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

from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass

__all__ = ["SSEEvent", "parse_sse", "split_lines"]


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str


async def split_lines(chunks: AsyncIterable[str]) -> AsyncGenerator[str, None]:
    """Decoded text pieces in, SSE lines out (terminators removed); a CR LF split across two
    pieces is one line end. A last line without a terminator is delivered at the end.

    Linear in the text: each piece is normalised (CR LF and lone CR to LF) and split once by
    ``str.split``; a line spread over many pieces is joined once, when it ends."""
    pending: list[str] = []
    after_cr = False
    async for chunk in chunks:
        if after_cr and chunk.startswith("\n"):
            chunk = chunk[1:]  # the LF of a CR LF whose CR ended the previous piece
        if not chunk:
            after_cr = False
            continue
        after_cr = chunk.endswith("\r")
        if "\r" in chunk:
            chunk = chunk.replace("\r\n", "\n").replace("\r", "\n")
        parts = chunk.split("\n")
        if len(parts) == 1:
            pending.append(chunk)
            continue
        pending.append(parts[0])
        yield "".join(pending)
        for line in parts[1:-1]:
            yield line
        pending = [parts[-1]] if parts[-1] else []
    if pending:
        yield "".join(pending)


async def parse_sse(lines: AsyncIterable[str]) -> AsyncGenerator[SSEEvent, None]:
    event = ""
    data: list[str] = []
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

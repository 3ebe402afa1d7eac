"""Bounded capture of one output stream: true counts, a head, a tail, a marker between.

A command may print gigabytes; the server keeps at most ``head_keep + tail_keep`` bytes of
it (the beginning says what started, the end says how it finished) and counts everything,
so a result can say exactly how much was dropped. Crossing ``cap`` tells the caller to stop
the command. An optional ``sink`` sees every byte up to ``sink_limit`` (a stored record, for
cursors over the full stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Sink(Protocol):
    """Where a capture copies its bytes: a file, or a background job's tap."""

    def write(self, data: bytes, /) -> object: ...


CAPTURE_CAP = 8 * 1024 * 1024  # past this the command's process tree is killed
KEEP_HEAD = 1024 * 1024  # kept per stream: head + tail <= 2 MB (the spill-file bound)
KEEP_TAIL = 1024 * 1024


@dataclass(frozen=True)
class StreamResult:
    """What is known about a finished stream. ``text`` is whole, or head + marker + tail."""

    text: str
    total_bytes: int
    kept_bytes: int
    lines: int

    @property
    def dropped_bytes(self) -> int:
        return self.total_bytes - self.kept_bytes

    @property
    def complete(self) -> bool:
        return self.dropped_bytes == 0

    @classmethod
    def empty(cls) -> StreamResult:
        return cls("", 0, 0, 0)


class StreamCapture:
    def __init__(
        self,
        cap: int = CAPTURE_CAP,
        head_keep: int = KEEP_HEAD,
        tail_keep: int = KEEP_TAIL,
        sink: Sink | None = None,
        sink_limit: int = CAPTURE_CAP,
    ):
        self.cap = cap
        self.head_keep = head_keep
        self.tail_keep = tail_keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.newlines = 0
        self.last_byte = b""
        self.sink = sink
        self.sink_limit = sink_limit
        self.sink_written = 0
        self.sink_gap = False

    @property
    def over_cap(self) -> bool:
        return self.total >= self.cap

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        self.newlines += data.count(b"\n")
        self.last_byte = data[-1:]
        if self.sink is not None:
            room = self.sink_limit - self.sink_written
            if room > 0:
                self.sink.write(data[:room])
                self.sink_written += min(room, len(data))
            if len(data) > room:
                self.sink_gap = True
        room = self.head_keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_keep:
                del self.tail[: len(self.tail) - self.tail_keep]

    def kept(self) -> tuple[bytes, bytes]:
        """(head, tail) with no byte in both; tail empty when nothing was dropped."""
        tail = bytes(self.tail[-self.tail_keep :]) if self.tail else b""
        if self.total <= len(self.head) + len(tail):
            return bytes(self.head) + tail, b""
        return bytes(self.head), tail

    def result(self) -> StreamResult:
        head, tail = self.kept()
        lines = self.newlines + (1 if self.total and self.last_byte != b"\n" else 0)
        if not tail:
            return StreamResult(head.decode("utf-8", "replace"), self.total, len(head), lines)
        dropped = self.total - len(head) - len(tail)
        marker = f"\n[... {dropped} bytes dropped from the middle of {self.total} ...]\n"
        text = head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")
        return StreamResult(text, self.total, len(head) + len(tail), lines)

"""A run's log read back from ``events.jsonl``: bounded, compact, parsed only when looked at.

After a restart the server serves finished runs from disk, and a log can be tens of MB.
Each line is validated once as it is read (a line that is no event is dropped, as a torn
last line after a crash is) and kept as the bytes of its server-sent-event frame (``id``,
``event``, ``data``: the canonical JSON), with its ``seq`` and ``type`` beside it. So there is
no Python object per event that the garbage collector must walk (a full collection over a
few hundred thousand parsed events held the GIL, and with it the server's loop, for a third
of a second), an event is parsed again only when it is read, and a replay is a join of bytes.

A line over ``MAX_LOADED_LINE_BYTES`` is never parsed nor held: a named stand-in takes its
place (``EVENT_TOO_LARGE``; a ``done`` stays a ``done`` with the status its head names).
"""

from __future__ import annotations

import logging
import os
import re
import stat
import sys
import time
from array import array
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TextIO, overload

from kernel_ext.hosting.events import BaseEvent, make_event, parse_event, to_json

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FOLLOW_NOTHING = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

log = logging.getLogger(__name__)

MAX_LOADED_LINE_BYTES = 4 * 1024 * 1024  # a reloaded event over this is named, not parsed
_YIELD_EVERY = 16  # lines read between two voluntary releases of the GIL (a worker must not starve the loop)
_PARSED_KEPT = 64  # recently read events kept parsed (the last one is read on every status check)
_HEAD = re.compile(rb'"seq":(\d+),.*?"ts":([0-9.eE+-]+),"type":"([a-z_]+)"(?:,"status":"([a-z_]+)")?')
_DONE_STATUSES = ("completed", "blocked", "failed", "cancelled", "interrupted", "budget_exhausted", "timeout")


class StoredEvents(Sequence[BaseEvent]):
    """Events kept as SSE frames; a list of events to every reader, parsed per access."""

    def __init__(self, frames: list[bytes] | None = None, seqs: array | None = None, types: list[str] | None = None):
        self._frames = frames if frames is not None else []
        self._seqs = seqs if seqs is not None else array("q")
        self._types = types if types is not None else []
        self._parsed: dict[int, BaseEvent] = {}

    def append(self, event: BaseEvent) -> None:
        self._frames.append(frame(event).encode("ascii"))
        self._seqs.append(event.seq)
        self._types.append(sys.intern(event.type))

    def __len__(self) -> int:
        return len(self._frames)

    @overload
    def __getitem__(self, index: int) -> BaseEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[BaseEvent]: ...
    def __getitem__(self, index: int | slice) -> BaseEvent | list[BaseEvent]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("event index out of range")
        event = self._parsed.get(index)
        if event is None:
            if len(self._parsed) >= _PARSED_KEPT:
                self._parsed.clear()
            data = self._frames[index].split(b"\ndata: ", 1)[1]
            event = self._parsed[index] = parse_event(data)
        return event

    def __iter__(self) -> Iterator[BaseEvent]:
        for index in range(len(self)):
            yield self[index]

    def tail(self, after: int) -> StoredEvents:
        """The events after the first ``after``, still compact (what a replay reads)."""
        return StoredEvents(self._frames[after:], self._seqs[after:], self._types[after:])

    def of_type(self, *types: str) -> list[BaseEvent]:
        return [self[i] for i, type_ in enumerate(self._types) if type_ in types]

    def frames(self, position: int, budget: int) -> tuple[bytes, int]:
        """The SSE frames from ``position`` on, about ``budget`` bytes of them, and where they stopped."""
        end, size = position, 0
        while end < len(self._frames) and size < budget:
            size += len(self._frames[end])
            end += 1
        return b"".join(self._frames[position:end]), end


def frame(event: BaseEvent) -> str:
    """One SSE frame; ``to_json`` is ASCII-only, so no character in an event can split its data line."""
    return f"id: {event.seq}\nevent: {event.type}\ndata: {to_json(event)}\n\n"


def open_log(path: Path, *, write: bool = False) -> BinaryIO:
    """A run folder's ``events.jsonl`` and nothing else: the folder and the file opened no-follow,
    never blocking, a regular file checked on the descriptor (``OSError`` otherwise). A run folder
    is untrusted: a link there must not make the server read, or append to, another file, and a
    FIFO must not hold the thread reading it."""
    dir_fd = os.open(path.parent, DIR_FLAGS)
    try:
        fd = os.open(path.name, (os.O_RDWR if write else os.O_RDONLY) | FOLLOW_NOTHING, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    os.set_blocking(fd, True)  # a regular file: reads never wait; the handle below reads whole lines
    return os.fdopen(fd, "rb+" if write else "rb")


def append_log(path: Path) -> TextIO:
    """The log opened to append (created when absent), never through a link or into a FIFO."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | FOLLOW_NOTHING, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8")


def log_stat(path: Path) -> os.stat_result | None:
    """The log's own stat, never its link target's; None when it is not a regular file."""
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) else None


def read_log(run_id: str, path: Path, max_line_bytes: int | None = None) -> StoredEvents:
    """The events of ``path``, read one line at a time (the file is never held whole)."""
    cap = MAX_LOADED_LINE_BYTES if max_line_bytes is None else max_line_bytes
    events = StoredEvents()
    try:
        handle = open_log(path)
    except OSError:  # absent, a link, a FIFO, a folder: no events to read
        return events
    with handle:
        number = 0
        while line := handle.readline(cap + 1):
            number += 1
            if number % _YIELD_EVERY == 0:
                time.sleep(0)  # hand the GIL over: the server's loop needs it after each of its system calls
            if len(line) > cap and not line.endswith(b"\n"):
                rest, whole = _skip_line(handle)
                if whole:
                    events.append(_stand_in(run_id, line[:512], len(line) + rest, cap, len(events) + 1))
                    continue
            elif line.strip():
                try:
                    events.append(parse_event(line))
                    continue
                except (ValueError, TypeError):
                    pass
            else:
                continue
            log.warning("%s: line %d is not a complete event; ignored", path, number)
    return events


def _skip_line(handle: Any) -> tuple[int, bool]:
    """Read past the rest of an over-long line, 1 MiB at a time: its size, and whether it ended
    (a last line without its newline is torn, as after a crash mid-write)."""
    skipped = 0
    while chunk := handle.readline(1 << 20):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            return skipped, True
    return skipped, False


def _stand_in(run_id: str, head: bytes, size: int, cap: int, seq: int) -> BaseEvent:
    """What a reloaded log holds in place of an event too large to parse (its head says what it was)."""
    found = _HEAD.search(head)
    type_ = found.group(3).decode() if found else "unknown"
    fields: dict[str, Any] = {"seq": int(found.group(1)) if found else seq}
    if found:
        fields["ts"] = float(found.group(2))
    note = f"event {fields['seq']} ({type_}, {size} bytes) is over the {cap}-byte limit for reloading a log; it stays in events.jsonl"
    if type_ == "done":
        status = found.group(4).decode() if found and found.group(4) else "failed"
        event = make_event("done", run_id, status=status if status in _DONE_STATUSES else "failed", summary=note)
    else:
        event = make_event("error", run_id, code="EVENT_TOO_LARGE", message=note, terminal=False)
    return event.model_copy(update=fields)

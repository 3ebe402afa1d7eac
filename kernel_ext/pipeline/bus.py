"""A run's event log: numbered, appended to ``events.jsonl``, followed live or replayed.

One log per run. ``emit`` numbers the event, writes one JSON line (flushed, so a reader or a
restarted server sees it), keeps it in memory and wakes every follower. ``follow(after)``
replays what a follower missed (``Last-Event-ID``) and then streams live events until the
run ends. A log reloaded from disk after a restart replays the same events.

Nothing an event holds can break the log: its text was made valid when it was built
(``events.py``), an event that cannot be built or serialised is replaced by a named one
(``EVENT_INVALID``), and a file that cannot be written is reported as an ``error`` event
(``EVENT_LOG_UNWRITABLE``) that followers still receive, before the run ends ``failed``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from kernel_ext.pipeline.events import BaseEvent, make_event, parse_event, to_json

log = logging.getLogger(__name__)

TERMINAL_TYPES = frozenset({"done"})


class EventLogUnwritable(RuntimeError):
    """``events.jsonl`` could not be written: the run ends (``failed``), its followers still see why."""


class EventLog:
    def __init__(self, run_id: str, path: Path | None = None, known_secrets: tuple[str, ...] = ()):
        self.run_id = run_id
        self.path = path
        self.known_secrets = known_secrets
        self.events: list[BaseEvent] = []
        self._changed = asyncio.Event()  # binds to a loop only when first awaited
        self._listeners: list[Callable[[BaseEvent], Any]] = []
        self._file = None
        self.persist_error = ""  # set when events.jsonl could not be written

    # -- writing --------------------------------------------------------------------------

    def emit(self, type_: str, **fields: Any) -> BaseEvent:
        """Build (redacted, text made valid), number, persist and publish one event."""
        try:
            event = make_event(type_, self.run_id, self.known_secrets, **fields)
        except Exception as exc:  # noqa: BLE001 - a field no event accepts: named, never a crash
            log.error("run %s: a %s event could not be built: %s", self.run_id, type_, exc)
            event = self._substitute(type_, f"a {type_} event could not be built ({type(exc).__name__})")
        return self.append(event)

    def append(self, event: BaseEvent) -> BaseEvent:
        if self.closed:
            raise RuntimeError(f"run {self.run_id} already ended; no event may follow 'done'")
        event = event.model_copy(update={"seq": len(self.events) + 1, "run_id": self.run_id})
        try:
            line = to_json(event)
        except (ValueError, TypeError) as exc:  # built by hand around the validator: named, and it goes on
            log.error("run %s: event %d (%s) cannot be serialised: %s", self.run_id, event.seq, event.type, exc)
            event = self._substitute(event.type, f"a {event.type} event could not be serialised ({type(exc).__name__})")
            event = event.model_copy(update={"seq": len(self.events) + 1, "run_id": self.run_id})
            line = to_json(event)
        failure = self._persist(event, line)
        if failure is not None:  # said first, so it also precedes a final ``done``
            self._publish(self._add(make_event("error", self.run_id, code="EVENT_LOG_UNWRITABLE", message=failure)))
        event = self._add(event)
        self._publish(event)
        if failure is not None and event.type not in TERMINAL_TYPES:
            raise EventLogUnwritable(failure)
        return event

    def _add(self, event: BaseEvent) -> BaseEvent:
        event = event.model_copy(update={"seq": len(self.events) + 1, "run_id": self.run_id})
        self.events.append(event)
        return event

    def _publish(self, event: BaseEvent) -> None:
        for listener in list(self._listeners):
            listener(event)
        self._wake()

    def _substitute(self, type_: str, message: str) -> BaseEvent:
        """What stands in for an event that cannot exist: a ``done`` stays a (failed) ``done``."""
        if type_ == "done":
            return make_event("done", self.run_id, status="failed", summary=message)
        return make_event("error", self.run_id, code="EVENT_INVALID", message=message, terminal=False)

    def _persist(self, event: BaseEvent, line: str) -> str | None:
        """Append one line; the reason when the file cannot be written (once: after it, events
        stay in memory only, so the run's ``error`` and ``done`` still reach followers)."""
        if self.path is None or self.persist_error:
            return None
        try:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open for the run
            self._file.write(line + "\n")
            self._file.flush()
        except OSError as exc:
            self.persist_error = f"{self.path.name} cannot be written: {exc.strerror or exc}"
            log.error("run %s: %s; later events stay in memory only", self.run_id, self.persist_error)
            self.close_file()
            return self.persist_error
        if event.type in TERMINAL_TYPES:
            self.close_file()
        return None

    def close_file(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            try:
                handle.close()
            except OSError:  # a full disk refuses the final flush too; the log already said so
                pass

    def add_listener(self, listener: Callable[[BaseEvent], Any]) -> None:
        """A synchronous callback for every new event (the in-process widget uses this)."""
        self._listeners.append(listener)

    # -- reading --------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return bool(self.events) and self.events[-1].type in TERMINAL_TYPES

    def since(self, after: int = 0) -> list[BaseEvent]:
        return self.events[max(after, 0) :]

    async def follow(self, after: int = 0) -> AsyncIterator[BaseEvent]:
        """Every event with ``seq > after``, then live ones, until the run's ``done``."""
        position = max(after, 0)
        while True:
            while position < len(self.events):
                event = self.events[position]
                position += 1
                yield event
            if self.closed:
                return
            await self._wait()

    async def _wait(self) -> None:
        self._changed.clear()
        await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()

    @classmethod
    def load(cls, run_id: str, path: Path, max_line_bytes: int | None = None) -> EventLog:
        """Reload a persisted log; a torn last line (a crash mid-write) is dropped.

        Lines are split on ``\\n`` only, read in binary one at a time (the file is never held
        whole), and a line over ``max_line_bytes`` is not parsed: a named stand-in takes its
        place (``EVENT_TOO_LARGE``; a ``done`` stays a ``done``), so one huge event can neither
        hold a worker for long nor fill memory, and the run still ends where it ended.
        """
        cap = MAX_LOADED_LINE_BYTES if max_line_bytes is None else max_line_bytes
        restored = cls(run_id, path)
        if not path.exists():
            return restored
        with open(path, "rb") as handle:
            number = 0
            while line := handle.readline(cap + 1):
                number += 1
                if len(line) > cap and not line.endswith(b"\n"):
                    size = len(line) + _skip_line(handle)
                    restored.events.append(_stand_in(run_id, line[:512], size, cap, len(restored.events) + 1))
                    continue
                if not line.strip():
                    continue
                try:
                    restored.events.append(parse_event(line))
                except (ValueError, TypeError):
                    log.warning("%s: line %d is not a complete event; ignored", path, number)
        return restored


MAX_LOADED_LINE_BYTES = 4 * 1024 * 1024  # a reloaded event over this is named, not parsed
_HEAD = re.compile(rb'"seq":(\d+),.*?"ts":([0-9.eE+-]+),"type":"([a-z_]+)"(?:,"status":"([a-z]+)")?')


def _skip_line(handle: Any) -> int:
    """Read past the rest of an over-long line, 1 MiB at a time; how many bytes it had."""
    skipped = 0
    while chunk := handle.readline(1 << 20):
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            break
    return skipped


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
        if status not in ("completed", "blocked", "failed", "cancelled", "interrupted"):
            status = "failed"
        event = make_event("done", run_id, status=status, summary=note)
    else:
        event = make_event("error", run_id, code="EVENT_TOO_LARGE", message=note, terminal=False)
    return event.model_copy(update=fields)

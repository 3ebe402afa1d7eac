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
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from kernel_ext.hosting.events import BaseEvent, make_event, to_json
from kernel_ext.hosting.stored import MAX_LOADED_LINE_BYTES, StoredEvents, append_log, read_log

__all__ = ["MAX_LOADED_LINE_BYTES", "TERMINAL_TYPES", "EventLog", "EventLogUnwritable"]

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
        self._file: TextIO | None = None
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
        if event.seq != len(self.events) + 1 or event.run_id != self.run_id:  # numbered already by ``append``: no second copy
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
                self._file = append_log(self.path)
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

    def since(self, after: int = 0) -> Sequence[BaseEvent]:
        if isinstance(self.events, StoredEvents):
            return self.events.tail(max(after, 0))  # still compact: parsed one at a time as read
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
        """Reload a persisted log (``stored.read_log``: compact, bounded, torn last line dropped)."""
        restored = cls(run_id, path)
        restored.events = read_log(run_id, path, max_line_bytes)  # type: ignore[assignment]
        return restored

    def of_type(self, *types: str) -> list[BaseEvent]:
        """The events of the given types, in order (a reloaded log parses only those)."""
        if isinstance(self.events, StoredEvents):
            return self.events.of_type(*types)
        return [event for event in self.events if event.type in types]

"""How many runs a server runs at once; the rest wait their turn in a visible queue.

Past what the machine can host at once, more runs do not finish sooner: they share the same
cores and memory (and each holds a warm app host), so a server admits at most ``limit`` runs and
the others wait, in order of arrival, in the ``queued`` state. A waiting run's log says where it
stands (a ``queued`` event with its position, again whenever that changes, and position 0 when
it starts), so the run view, ``%besser runs`` and ``GET runs`` show it. Cancelling a waiting run
ends it ``cancelled`` without it ever starting: nothing of it ran, nothing was generated.

The limit is the operator's (``max_concurrent_runs`` / ``BESSER_MAX_CONCURRENT_RUNS``); by
default it follows the machine (``options.default_run_limit``). All of this runs on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from kernel_ext.hosting.bus import EventLog


@dataclass(eq=False)
class _Waiter:
    events: EventLog
    request: str
    since: float = field(default_factory=time.monotonic)
    admitted: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    told: int = 0  # the position last announced


class Admission:
    """At most ``limit`` runs inside at once (None: no limit); the rest wait, first come first served."""

    def __init__(self, limit: int | None):
        if limit is not None and limit < 1:
            raise ValueError("a run limit is at least 1")
        self.limit = limit
        self.running = 0
        self._waiting: list[_Waiter] = []

    def position(self, events: EventLog) -> int | None:
        """Where a run waits (1 = next), None when it does not."""
        for index, waiter in enumerate(self._waiting):
            if waiter.events is events:
                return index + 1
        return None

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def slot(self, events: EventLog, request: str = "") -> AsyncIterator[None]:
        """Hold one of the ``limit`` places while the body runs (waiting for one first, in the queue)."""
        await self._enter(events, request)
        try:
            yield
        finally:
            self.running -= 1
            self._admit()

    async def _enter(self, events: EventLog, request: str) -> None:
        if self.limit is None or (self.running < self.limit and not self._waiting):
            self.running += 1
            return
        waiter = _Waiter(events, request)
        self._waiting.append(waiter)
        self._announce()
        try:
            await asyncio.shield(waiter.admitted)
        except asyncio.CancelledError:
            if waiter.admitted.done():  # admitted in the same moment: hand the place on
                self.running -= 1
                self._admit()
            else:
                waiter.admitted.cancel()
                self._waiting.remove(waiter)
                self._announce()
                if not events.closed:
                    events.emit("error", code="CANCELLED", message="the run was cancelled while it waited in the queue")
                    events.emit("done", status="cancelled", summary="cancelled while queued; it never started")
            raise
        if not events.closed:
            events.emit("queued", position=0, limit=self.limit, request=request,
                        waited_s=round(time.monotonic() - waiter.since, 3))

    def _admit(self) -> None:
        """Let waiting runs in while there is room, then tell the rest their new places."""
        while self._waiting and (self.limit is None or self.running < self.limit):
            waiter = self._waiting.pop(0)
            self.running += 1
            waiter.admitted.set_result(None)
        self._announce()

    def _announce(self) -> None:
        for index, waiter in enumerate(self._waiting):
            if waiter.told != index + 1 and not waiter.events.closed:
                waiter.told = index + 1
                waiter.events.emit("queued", position=index + 1, limit=self.limit or 0, request=waiter.request)

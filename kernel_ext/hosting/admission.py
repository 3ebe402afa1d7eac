"""How many runs a server runs at once; the rest wait their turn in a visible queue.

Past what the machine can host at once, more runs do not finish sooner: they share the same
cores and memory (and each holds a warm app host), so a server admits at most ``limit`` runs and
the others wait, in order of arrival, in the ``queued`` state. Cancelling a waiting run ends it
``cancelled`` without it ever starting: nothing of it ran, nothing was generated.

What a waiting run's log says costs O(1) per run and per move, whatever the queue's length: the
first ``queued`` event carries the request (once: a run cancelled in the queue never has a
``run_started``), later ones only the position. When one run leaves the queue every run behind
it moves, so telling each of them every move is O(n) events per move and O(n^2) for a queue that
drains (200 waiting runs wrote 389 MB). So a run is told every move within the first
``EXACT_PLACES`` places (where the next moves are minutes away and people watch), and further
back only when its place halves (127, 63, 31, 15): each run gets at most ``EXACT_PLACES`` + log2(n)
+ 2 ``queued`` events over its wait, a queue of n at most O(n log n) in all. The place a run
was told is never below its real place (places only fall), so a far-back run's view errs toward
patience, by less than half. Position 0 says it started.

The limit is the operator's (``max_concurrent_runs`` / ``BESSER_MAX_CONCURRENT_RUNS``); by
default it follows the machine (``options.default_run_limit``). All of this runs on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from kernel_ext.hosting.bus import EventLog

EXACT_PLACES = 10  # within these places every move is told; behind them, only when the place halves


def worth_telling(told: int, place: int) -> bool:
    """Whether a run told ``told`` is told again at ``place`` (``place`` < ``told``: places only fall)."""
    return place != told and (place <= EXACT_PLACES or place.bit_length() != told.bit_length())


@dataclass(eq=False)
class _Waiter:
    events: EventLog
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

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def slot(self, events: EventLog, request: str = "", cancelled_by: Callable[[], str] = str) -> AsyncIterator[None]:
        """Hold one of the ``limit`` places while the body runs (waiting for one first, in the queue);
        ``cancelled_by`` says who, should the run be cancelled while it waits."""
        await self._enter(events, request, cancelled_by)
        try:
            yield
        finally:
            self.running -= 1
            self._admit()

    async def _enter(self, events: EventLog, request: str, cancelled_by: Callable[[], str]) -> None:
        if self.limit is None or (self.running < self.limit and not self._waiting):
            self.running += 1
            return
        waiter = _Waiter(events, told=len(self._waiting) + 1)
        self._waiting.append(waiter)
        if not events.closed:  # the one event that names the request
            events.emit("queued", position=waiter.told, limit=self.limit, request=request)
        try:
            await asyncio.shield(waiter.admitted)
        except asyncio.CancelledError:
            if waiter.admitted.done():  # admitted in the same moment: hand the place on
                self.running -= 1
                self._admit()
            else:
                waiter.admitted.cancel()
                index = self._waiting.index(waiter)
                del self._waiting[index]
                self._announce(index)
                if not events.closed:
                    events.emit("error", code="CANCELLED", message="the run was cancelled while it waited in the queue")
                    events.emit("done", status="cancelled", summary="cancelled while queued; it never started",
                                cancelled_by=cancelled_by())
            raise
        if not events.closed:
            events.emit("queued", position=0, limit=self.limit, waited_s=round(time.monotonic() - waiter.since, 3))

    def _admit(self) -> None:
        """Let waiting runs in while there is room, then tell the rest their new places."""
        admitted = 0
        while admitted < len(self._waiting) and (self.limit is None or self.running < self.limit):
            self.running += 1
            self._waiting[admitted].admitted.set_result(None)
            admitted += 1
        if admitted:
            del self._waiting[:admitted]
            self._announce(0)

    def _announce(self, start: int) -> None:
        """The runs from ``start`` on moved up: an O(1) check each, an event only where ``worth_telling``."""
        for index in range(start, len(self._waiting)):
            waiter = self._waiting[index]
            if worth_telling(waiter.told, index + 1) and not waiter.events.closed:
                waiter.told = index + 1
                waiter.events.emit("queued", position=index + 1, limit=self.limit or 0)

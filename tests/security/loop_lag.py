"""Measuring the Jupyter server's event-loop lag from inside its own loop.

pytest-jupyter serves the extension on the loop the test runs on (``jp_asyncio_loop``), so a
task on that loop is a task of the server: ``LoopLag`` sleeps ``period`` again and again and
records how late each wake-up was. A regex holding the GIL in a worker thread, a FIFO read on
the loop, a model evaluated in the run body: each delays every tick that overlaps it, by as
long as it blocks. Ticks are stamped with ``time.time()``, the clock events carry in ``ts``,
so a window can be cut from a run's own events.

What is bounded is what the loop's own thread did: each tick also records the loop thread's CPU
time across it (``time.thread_time`` on that thread), and ``blocked`` charges a late tick only the
CPU the loop spent in it. Work run on the loop (a regex, a parse, a sync read) is CPU on the loop
thread and is charged in full; a loop that was only descheduled (a busy machine: ``make
test-under-load``) or waiting for the GIL while a worker thread did the work off the loop burns none.
The wall-clock lateness (``worst``) is still recorded and shown beside an idle baseline taken in
the same test (``__aenter__`` ticks idle for ``CALIBRATE_S`` first): on a busy machine it grows
with the load, so it is reported, not bounded; a wait that blocks the loop without CPU and never
ends is the watchdog's.

A stall that never ends would hang the test instead of failing it, so a watchdog thread
interrupts the loop's thread (``SIGUSR1``, handled by raising ``LoopStalled`` there) once no
tick has come for ``stall_s``: a blocking call on the loop then fails loudly. (A C call that
holds the GIL in another thread cannot be interrupted; no input of this suite does that once
regexes run on RE2.)
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Self

BOUND_S = 0.100  # the bound on the time the server's event loop is kept busy at once
CALIBRATE_S = 0.5  # the idle window the wall-clock baseline is taken over (reported beside a failure)


class LoopStalled(Exception):
    """Raised on the loop's thread by the watchdog: the loop did not tick for ``stall_s``."""


@dataclass
class Tick:
    slept: float  # when the tick went to sleep
    start: float  # when it was due to wake up
    end: float  # when it did
    busy: float = 0.0  # CPU seconds the loop's thread spent from ``slept`` to ``end`` (its own work)

    @property
    def lag(self) -> float:
        return self.end - self.start


@dataclass
class LoopLag:
    period: float = 0.005
    stall_s: float = 15.0
    ticks: list[Tick] = field(default_factory=list)
    stalled: bool = False
    baseline: float = 0.0  # the worst lateness while the loop idled before anything was measured

    async def __aenter__(self) -> Self:
        self._stop = asyncio.Event()
        self._last = time.monotonic()
        self._task = asyncio.create_task(self._tick())
        self._main = threading.get_ident()
        self._previous = signal.signal(signal.SIGUSR1, self._interrupt)
        self._done = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name="loop-lag-watchdog", daemon=True)
        self._watchdog.start()
        await asyncio.sleep(self.period * 3)  # the first ticks are in before anything is measured
        calibrated = time.time()
        await asyncio.sleep(CALIBRATE_S)
        self.baseline = self.worst(calibrated, time.time())
        return self

    def check(self, start: float, end: float, what: str) -> None:
        """Fail when the loop's own thread was busy past ``BOUND_S`` inside the window; the wall-clock lag and
        this test's idle baseline are in the message."""
        busy = self.blocked(start, end)
        assert busy <= BOUND_S, (f"{what}: the server's event loop was blocked {busy * 1000:.0f} ms (bound {BOUND_S * 1000:.0f} ms;"
                                 f" wall-clock lag {self.worst(start, end) * 1000:.0f} ms, idle baseline {self.baseline * 1000:.0f} ms)")

    async def __aexit__(self, *exc) -> None:
        self._stop.set()
        self._done.set()
        self._watchdog.join(5)
        signal.signal(signal.SIGUSR1, self._previous)
        await self._task

    async def _tick(self) -> None:
        while not self._stop.is_set():
            start, cpu = time.time(), time.thread_time()
            await asyncio.sleep(self.period)
            end = time.time()
            # lateness beyond the period asked for (a tick is never early)
            self.ticks.append(Tick(start, start + self.period, end, time.thread_time() - cpu))
            self._last = time.monotonic()

    def _watch(self) -> None:
        while not self._done.wait(0.2):
            if not self.stalled and time.monotonic() - self._last > self.stall_s:
                self.stalled = True
                signal.pthread_kill(self._main, signal.SIGUSR1)

    def _interrupt(self, signum, frame) -> None:
        raise LoopStalled(f"the event loop did not tick for {self.stall_s} s")

    def worst(self, start: float, end: float) -> float:
        """The longest the loop was blocked inside ``[start, end]`` (wall-clock seconds).

        A late tick says the loop was blocked from its due time to its wake-up; only the part
        of that span inside the window counts, so a block that ended as the input began is
        not charged to it, and one that began with it is charged in full.
        """
        spans = [min(t.end, end) - max(t.start, start) for t in self.ticks if t.end >= start and t.start <= end]
        if self.stalled:
            spans.append(self.stall_s)
        return max([0.0, *spans])

    def blocked(self, start: float, end: float) -> float:
        """The longest the loop's own thread was busy inside ``[start, end]``: each late tick's span in
        the window, but no more than the CPU the loop spent during that tick (``worst`` is the wall clock)."""
        spans = [min(min(t.end, end) - max(t.start, start), t.busy) for t in self.ticks if t.end >= start and t.start <= end]
        if self.stalled:
            spans.append(self.stall_s)
        return max([0.0, *spans])

    def covered(self, start: float, end: float) -> int:
        """How many ticks were pending at some moment of ``[start, end]`` (at least one, if the probe ran)."""
        return sum(1 for t in self.ticks if t.end >= start and t.slept <= end)

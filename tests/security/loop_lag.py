"""Measuring the Jupyter server's event-loop lag from inside its own loop.

pytest-jupyter serves the extension on the loop the test runs on (``jp_asyncio_loop``), so a
task on that loop is a task of the server: ``LoopLag`` sleeps ``period`` again and again and
records how late each wake-up was. A regex holding the GIL in a worker thread, a FIFO read on
the loop, a model evaluated in the run body: each delays every tick that overlaps it, by as
long as it blocks. Ticks are stamped with ``time.time()``, the clock events carry in ``ts``,
so a window can be cut from a run's own events.

A bound on lag is measured against a baseline taken in the same test: ``__aenter__`` lets the
loop tick idle for ``CALIBRATE_S`` first, and ``baseline`` is the worst lateness seen then (what
the machine's own load costs every tick, a busy CI machine's share); ``bound`` is ``BOUND_S`` on
top of it. On an idle machine the baseline is a millisecond or so: the bound is the issue's.

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

BOUND_S = 0.100  # the bound on the server's event-loop lag, on top of the same test's idle baseline
CALIBRATE_S = 0.5  # the idle window the baseline is taken over


class LoopStalled(Exception):
    """Raised on the loop's thread by the watchdog: the loop did not tick for ``stall_s``."""


@dataclass
class Tick:
    slept: float  # when the tick went to sleep
    start: float  # when it was due to wake up
    end: float  # when it did

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

    @property
    def bound(self) -> float:
        """The lag allowed: the issue's bound on top of this test's idle baseline."""
        return BOUND_S + self.baseline

    async def __aexit__(self, *exc) -> None:
        self._stop.set()
        self._done.set()
        self._watchdog.join(5)
        signal.signal(signal.SIGUSR1, self._previous)
        await self._task

    async def _tick(self) -> None:
        while not self._stop.is_set():
            start = time.time()
            await asyncio.sleep(self.period)
            end = time.time()
            # lateness beyond the period asked for (a tick is never early)
            self.ticks.append(Tick(start, start + self.period, end))
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

    def covered(self, start: float, end: float) -> int:
        """How many ticks were pending at some moment of ``[start, end]`` (at least one, if the probe ran)."""
        return sum(1 for t in self.ticks if t.end >= start and t.slept <= end)

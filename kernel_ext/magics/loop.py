"""Where a kernel's background work runs: its own event loop, or a helper thread's.

ipykernel (6 and 7) runs cells and comm handlers on a running asyncio loop in the main thread:
runs, followers and decisions are tasks there, and the cell returns at once. Plain IPython
(and a ``%run`` script) has no running loop; then one daemon thread hosts a loop for them,
and calls from the kernel thread hop onto it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from typing import TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class LoopRunner:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    @staticmethod
    def _running() -> asyncio.AbstractEventLoop | None:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return None

    def _thread_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="besser-agent-loop", daemon=True).start()
                self._loop = loop
            return self._loop

    def spawn(self, coro: Coroutine[object, None, T]) -> asyncio.Task[T] | concurrent.futures.Future[T]:
        """Start ``coro`` in the background; keep the returned handle (tasks are weakly held)."""
        loop = self._running()
        if loop is not None:
            return loop.create_task(coro)
        return asyncio.run_coroutine_threadsafe(coro, self._thread_loop())

    def call(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """Run ``fn`` where a loop is running (here, or on the helper thread) and return its value."""
        if self._running() is not None:
            return fn(*args)

        async def wrapped() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(wrapped(), self._thread_loop()).result(30)

    def soon(self, fn: Callable[[*Ts], T], *args: *Ts) -> T | concurrent.futures.Future[T]:
        """``fn`` now when a loop runs here, else a Future of its result on the helper thread."""
        if self._running() is not None:
            return fn(*args)

        async def wrapped() -> T:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(wrapped(), self._thread_loop())

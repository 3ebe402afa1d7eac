"""Cooperative cancellation of a provider call by an ``asyncio.Event``.

Cancelling the task that consumes a stream works too (``CancelledError`` propagates and the
connection is closed); the event is for a host that wants a named outcome instead: any wait
inside the call (a backoff sleep, the next chunk of a stalled stream) ends at once and the
call fails with ``CANCELLED``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import suppress
from typing import TypeVar

from kernel_ext.errors import ErrorCode
from kernel_ext.providers.events import ProviderError

__all__ = ["CancelGuard", "cancelled"]

T = TypeVar("T")


def cancelled(while_doing: str) -> ProviderError:
    return ProviderError(ErrorCode.CANCELLED, f"cancelled while {while_doing}")


class CancelGuard:
    """Races awaits against one cancel event; use as an async context manager per call."""

    def __init__(self, event: asyncio.Event | None):
        self.event = event
        self._waiter: asyncio.Future | None = None

    async def __aenter__(self) -> CancelGuard:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._waiter is not None:
            self._waiter.cancel()
            with suppress(asyncio.CancelledError):
                await self._waiter
            self._waiter = None

    async def run(self, awaitable: Awaitable[T], while_doing: str) -> T:
        """Await ``awaitable``, or raise ``CANCELLED`` as soon as the event is set."""
        if self.event is None:
            return await awaitable
        if self.event.is_set():
            _discard(awaitable)
            raise cancelled(while_doing)
        if self._waiter is None:
            self._waiter = asyncio.ensure_future(self.event.wait())
        task = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait({task, self._waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            await _stop(task)
            raise
        if task.done():
            return task.result()
        await _stop(task)
        raise cancelled(while_doing)


async def _stop(task: asyncio.Future) -> None:
    task.cancel()
    with suppress(asyncio.CancelledError, Exception):
        await task


def _discard(awaitable: Awaitable[object]) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()

"""The server's own worker threads, apart from the default executor that runs use.

``off_loop`` (one thread) reads stored logs (loading, listing, replaying). Each of these is
CPU work under the GIL. Run in the default pool, four replays at once are four threads taking
turns with the event loop for the GIL, and every wake-up of the loop waits behind them. Queued
on one thread, only one competes with the loop at any moment; requests still overlap (each
awaits its own batches), they just take turns.

``for_request`` (two threads) does the short, bounded work that answering a request needs
(parsing a JSON body, ``GET config``, the kernels' token peer check). Runs send their blocking
work (model loading, snapshots, tools...) to the default executor; a few hostile runs stuck
there must never leave a request unanswered, so request work never queues behind them.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, TypeVarTuple

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

_pools: dict[str, ThreadPoolExecutor] = {}
_WORKERS = {"besser-logs": 1, "besser-requests": 2}


async def _run(pool: str, function: Callable[[*Ts], T], *args: *Ts) -> T:
    executor = _pools.get(pool)
    if executor is None:
        executor = _pools[pool] = ThreadPoolExecutor(max_workers=_WORKERS[pool], thread_name_prefix=pool)
    return await asyncio.get_running_loop().run_in_executor(executor, functools.partial(function, *args))


async def off_loop(function: Callable[[*Ts], T], *args: *Ts) -> T:
    """``function(*args)`` on the log worker thread, awaited from the loop."""
    return await _run("besser-logs", function, *args)


async def for_request(function: Callable[[*Ts], T], *args: *Ts) -> T:
    """``function(*args)`` on the request workers (bounded work only), awaited from the loop."""
    return await _run("besser-requests", function, *args)

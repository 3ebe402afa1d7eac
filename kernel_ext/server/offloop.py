"""One worker thread for the server's reading of stored logs (loading, listing, replaying).

Each of these is CPU work under the GIL. Run in the default pool, four replays at once are
four threads taking turns with the event loop for the GIL, and every wake-up of the loop waits
behind them. Queued on one thread, only one competes with the loop at any moment; requests
still overlap (each awaits its own batches), they just take turns.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None


async def off_loop(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` on the log worker thread, awaited from the loop."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="besser-logs")
    return await asyncio.get_running_loop().run_in_executor(_pool, functools.partial(function, *args))

"""Per-file locks: one read-check-write sequence on a file at a time in this process.

An edit reads a file, checks it against what the model saw, runs its gates and publishes.
Two such sequences on one file (two runs in one server, or threads) must not interleave, or
the second would publish over a version it never checked. The lock is keyed by the file's
fenced path (root realpath plus no-follow components, so one file has one key) and held in
a weak map: it lives only while someone holds or waits for it.

Other processes are not covered by this lock; for them the identity check in ``publish``
(device, inode, size, mtime right before the rename) is the guard.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace.fence import Location

DEFAULT_WAIT_SECONDS = 30.0

_registry_guard = threading.Lock()
_locks: weakref.WeakValueDictionary[str, threading.RLock] = weakref.WeakValueDictionary()


def lock_key(loc: Location) -> str:
    """The one key of a fenced file: its root's real path joined with its components."""
    return str(loc.root.joinpath(*loc.parts))


def _lock_for(key: str) -> threading.RLock:
    with _registry_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = threading.RLock()
            _locks[key] = lock
        return lock


@contextmanager
def file_lock(loc: Location, wait: float = DEFAULT_WAIT_SECONDS) -> Iterator[None]:
    """Hold the lock of ``loc`` (re-entrant in one thread); ``file_busy`` after ``wait`` seconds."""
    lock = _lock_for(lock_key(loc))
    if not lock.acquire(timeout=wait):
        raise ToolFailure(ErrorCode.FILE_BUSY, f"{loc.display!r} is being changed by another operation; try again")
    try:
        yield
    finally:
        lock.release()

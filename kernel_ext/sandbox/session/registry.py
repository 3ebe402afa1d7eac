"""The server's shell sessions: one per run, at most ``max_sessions`` live, closed when idle.

The server (or a CLI call, or a test) owns one ``SessionRegistry``. A run asks it for its
session by key; the session asks for a live slot each time it starts a shell (past the limit
the command runs in a one-off sandbox instead). A daemon thread closes shells idle for
``idle_seconds`` (their directory and environment are kept for the next command). Closing a
run, closing the registry, or the interpreter exiting kills every process of every session.
A run whose folder is removed (the person deleted it in the file browser) is over too: the same
thread notices the watched workspace is gone or replaced and ends that run's session (``watch``).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from collections.abc import Callable

from kernel_ext.sandbox.session.persistent import ShellSession

IDLE_NOTE = "the shell was closed after {seconds:g} s without commands"
GONE_CHECK_S = 2.0  # how often the watched run folders are looked at (one lstat each)


def _identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class SessionRegistry:
    def __init__(self, max_sessions: int = 10, idle_seconds: float = 900.0, *, clock: Callable[[], float] = time.monotonic):
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.clock = clock
        self._sessions: dict[str, ShellSession] = {}
        self._live: set[int] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None
        self._watched: dict[str, tuple[str, tuple[int, int] | None, Callable[[], object] | None]] = {}
        self.closed = False
        atexit.register(_close_at_exit, weakref.ref(self))

    # -- sessions per run --------------------------------------------------------------------

    def session(self, key: str, factory: Callable[[], ShellSession]) -> ShellSession:
        """The session of run ``key``, created by ``factory`` on first use."""
        with self._lock:
            if self.closed:
                raise RuntimeError("the session registry is closed")
            found = self._sessions.get(key)
            if found is None or found.closed:
                found = factory()
                found.registry = self
                found.key = key
                self._sessions[key] = found
            return found

    def get(self, key: str) -> ShellSession | None:
        return self._sessions.get(key)

    def watch(self, key: str, workspace: str | os.PathLike[str], on_gone: Callable[[], object] | None = None) -> None:
        """End run ``key``'s session (and call ``on_gone``) once ``workspace`` is removed or replaced."""
        ident = _identity(workspace)
        with self._lock:
            if self.closed or ident is None:  # nothing there yet: nothing that could be removed
                return
            self._watched[key] = (os.fspath(workspace), ident, on_gone)
            self._start_reaper()

    def reap_gone(self) -> list[str]:
        """End the runs whose watched folder no longer exists (or is another folder now); their keys."""
        with self._lock:
            gone = [(k, hook) for k, (path, ident, hook) in self._watched.items() if _identity(path) != ident]
            for key, _ in gone:
                del self._watched[key]
        for key, hook in gone:
            self.close_run(key)
            if hook is not None:
                hook()
        return [key for key, _ in gone]

    def close_run(self, key: str) -> None:
        """The run finished, failed or was cancelled: kill its processes, forget its session."""
        with self._lock:
            self._watched.pop(key, None)
            found = self._sessions.pop(key, None)
        if found is not None:
            found.dispose()

    def close(self) -> None:
        """Kill every process of every session (server exit). Idempotent."""
        with self._lock:
            self.closed = True
            sessions = list(self._sessions.values())
            self._sessions.clear()
        self._stop.set()
        for found in sessions:
            found.dispose()

    # -- live slots (called by sessions) -----------------------------------------------------

    def admit(self, found: ShellSession) -> bool:
        """A slot for starting a shell; False when ``max_sessions`` are live (0: never)."""
        with self._lock:
            if self.closed or len(self._live) >= self.max_sessions:
                return False
            self._live.add(id(found))
            self._start_reaper()
            return True

    def release(self, found: ShellSession) -> None:
        with self._lock:
            self._live.discard(id(found))

    def live_count(self) -> int:
        return len(self._live)

    # -- idle closing --------------------------------------------------------------------------

    def reap_idle(self, now: float | None = None) -> list[str]:
        """Close shells idle for ``idle_seconds`` or more; returns their keys (0: never)."""
        if self.idle_seconds <= 0:
            return []
        now = self.clock() if now is None else now
        with self._lock:
            candidates = [(k, s) for k, s in self._sessions.items() if s.alive and now - s.last_used >= self.idle_seconds]
        note = IDLE_NOTE.format(seconds=self.idle_seconds)
        return [key for key, found in candidates if found.close_if_idle(self.idle_seconds, self.clock, note)]

    def _start_reaper(self) -> None:
        if self._reaper is not None:
            return
        ref = weakref.ref(self)
        interval = max(0.05, min(GONE_CHECK_S, self.idle_seconds / 4)) if self.idle_seconds > 0 else GONE_CHECK_S
        stop = self._stop

        def loop() -> None:
            while not stop.wait(interval):
                registry = ref()
                if registry is None:
                    return
                registry.reap_idle()
                registry.reap_gone()
                del registry

        self._reaper = threading.Thread(target=loop, name="besser-shell-idle", daemon=True)
        self._reaper.start()


def _close_at_exit(ref: weakref.ref[SessionRegistry]) -> None:
    """At interpreter exit: close the registry if it is still alive (the weak reference keeps
    atexit from holding it)."""
    registry = ref()
    if registry is not None:
        registry.close()

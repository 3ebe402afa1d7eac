"""Host side: a pristine app host started ahead of need, one per sandbox policy, each taken once.

Starting a host (a fresh sandbox, an interpreter, FastAPI, SQLAlchemy and pydantic imported and
exercised by ``apphost.warmup``) is most of a cold ``test_api``: about a second, where the
scenario itself takes a few hundred milliseconds. So once a host has served its first job, the
server starts the next one in the background and keeps it ready; the next run whose host is
made (``hosting.app_host``) takes it, and its first call finds the libraries imported with only
the app's own modules left.

A ready host is an ordinary ``AppHost`` started the ordinary way: its own sandbox, private
folders, scrubbed environment and unshared network, exactly as one started by a call. Nothing
has run in it (no source staged, no job) and it is handed to one run only, never back, so no
state passes from one run or app to another. At most one per policy, and it is started only
after a host was used (loading the extension or starting the server starts nothing); one idle
past the reaper's bound is closed, and all are closed with the server (``close``: the server's
stop, interpreter exit; the sandbox's parent-death signal if the server is killed). A ready host
found dead (killed, crashed) is closed and the call starts one cold, saying why in its report's
notes; another is started in its place after that host's first job. An app with its own
environment (``kernel_ext.appenv``) restarts its host with that overlay, as before: cold, noted.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from kernel_ext.validation.apphost.host import AppHost

log = logging.getLogger(__name__)

TAKEN_NOTE = "app host taken ready: started by the server before this run asked, libraries imported, nothing run in it"
COLD_NOTE = "app host started cold: {}"
NONE_YET = "no ready host yet (the server starts one once a host has served a job)"


class ReadyHosts:
    """The server's ready hosts, by sandbox policy. Thread-safe; a forked child starts empty."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str | None, tuple[AppHost, threading.Thread]] = {}
        self._pid = os.getpid()

    def _mine(self) -> dict[str | None, tuple[AppHost, threading.Thread]]:
        """The table, emptied in a forked child (its parent's hosts are not its own)."""
        if self._pid != os.getpid():
            self._ready, self._pid = {}, os.getpid()
        return self._ready

    def take(self, policy: str | None = None) -> tuple[AppHost | None, str]:
        """The ready host for ``policy`` (its start may still be finishing: the first job waits for
        it), or None and why there is none."""
        with self._lock:
            entry = self._mine().pop(policy, None)
        if entry is None:
            return None, NONE_YET
        host, starting = entry
        if not starting.is_alive() and not host.alive:
            code = host.process.returncode if host.process is not None else None
            why = host.exit_reason or (f"exit code {code}" if code is not None else "its start failed")
            host.close()
            log.warning("the ready app host had ended (%s); this run's host starts cold", why)
            return None, f"the server's ready host had ended ({why}); another is started after this one's first job"
        host.start_note = TAKEN_NOTE
        return host, ""

    def refill(self, policy: str | None = None) -> AppHost | None:
        """Start a ready host for ``policy`` in the background unless one is there; the new one, else None."""
        with self._lock:
            table = self._mine()
            if policy in table:
                return None
            host = AppHost(policy=policy)
            table[policy] = (host, host.start_in_background())
            return host

    def wait(self, policy: str | None = None, timeout: float | None = None) -> AppHost | None:
        """The ready host for ``policy`` once its start is over (not taken; benches and tests wait
        on it), None when there is none or it is not running."""
        with self._lock:
            entry = self._mine().get(policy)
        if entry is None:
            return None
        entry[1].join(timeout)
        return entry[0] if entry[0].alive and not entry[1].is_alive() else None

    def reap(self, idle_s: float) -> int:
        """Close ready hosts nobody took for ``idle_s``; how many were closed."""
        now = time.monotonic()
        with self._lock:
            table = self._mine()
            stale = [p for p, (h, t) in table.items() if not t.is_alive() and now - h.last_used >= idle_s]
            hosts = [table.pop(p)[0] for p in stale]
        for host in hosts:
            host.close()
        return len(hosts)

    def close(self) -> int:
        """Close every ready host (the server stops); how many were closed."""
        with self._lock:
            hosts = [host for host, _ in self._mine().values()]
            self._ready.clear()
        for host in hosts:
            host.close()
        return len(hosts)


READY = ReadyHosts()

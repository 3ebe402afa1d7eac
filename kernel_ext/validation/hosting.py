"""One warm app host per run, found again by every tool call of that run.

Hosts are kept in a process-wide table keyed by run id, so a tool context rebuilt for each
call (a notebook cell) still finds its warm host. A host keeps nothing between jobs (every job
gets a fresh child and a fresh copy of the source it is given), so one host can serve every
workspace of a run.

Nothing takes a host from a run that uses it: a host is closed only by ``close_app_hosts``,
which a run's end calls with the run's state (the state is then marked ended, so a tool call
of that run still finishing in a worker thread, a cancelled run's validation, is refused
instead of starting a host and a temporary folder that nothing would close any more), and at
interpreter exit. How many hosts exist is bounded by how many runs the server admits at once
(``hosting/admission.py``), not by evicting one. A host nothing used for ``idle_seconds()``
(``BESSER_APP_HOST_IDLE_S``) and with no job in flight has its process stopped by a reaper
thread; the host object stays in its run's hands and its next job starts the process again.

A run's host is the server's ready one when there is one (``apphost.ready``: started ahead of
need, pristine, taken once); else it is made here and started by its first job, cold, with the
reason in its reports. Either way, its first settled job has the next ready host started.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.validation.apphost.host import AppHost
from kernel_ext.validation.apphost.ready import COLD_NOTE, READY

ENDED = "app_host.ended"  # the run state's mark, set by close_app_hosts
IDLE_ENV = "BESSER_APP_HOST_IDLE_S"
DEFAULT_IDLE_S = 600.0
_hosts: dict[str, AppHost] = {}
_lock = threading.Lock()
_reaper: threading.Thread | None = None
_reaper_pid = 0


def idle_seconds(environ: dict[str, str] | None = None) -> float:
    """How long a host may sit unused before its process is stopped (``BESSER_APP_HOST_IDLE_S``)."""
    text = ((environ if environ is not None else os.environ).get(IDLE_ENV) or "").strip()
    try:
        value = float(text) if text else DEFAULT_IDLE_S
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


def app_host(state: Any = None, *, policy: str | None = None) -> AppHost:
    """The run's host (created on first use; not started until a job needs it)."""
    key = str(getattr(state, "run_id", "local"))
    with _lock:
        if getattr(state, "stores", {}).get(ENDED):
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"run {key} has ended; its app host is closed")
        host = _hosts.get(key)
        if host is None or host._closed:
            host = _hosts[key] = _made(policy)
            _ensure_reaper()
    return host


def _made(policy: str | None) -> AppHost:
    """A new run's host: the ready one, else a fresh one that says why it starts cold."""
    host, why = READY.take(policy)
    if host is None:
        host = AppHost(policy=policy)
        host.start_note = COLD_NOTE.format(why)

    def refill() -> None:
        READY.refill(policy)

    host.after_first_job = refill
    return host


def close_ready_hosts() -> int:
    """Close the server's ready hosts (the server stops); how many were closed."""
    return READY.close()


def prestart_app_host(state: Any = None, *, policy: str | None = None) -> AppHost:
    """The run's host, starting in the background now (call when Phase 1 has finished)."""
    host = app_host(state, policy=policy)
    host.start_in_background()
    return host


def close_app_hosts(run_id: str | None = None, state: Any = None) -> int:
    """Close the hosts of ``run_id`` (all hosts when None); returns how many were closed.
    ``state`` (the ended run's) is marked so that no host is made for it again."""
    with _lock:
        if state is not None:
            state.stores[ENDED] = True
        keys = [k for k in _hosts if run_id is None or k == run_id]
        hosts = [_hosts.pop(k) for k in keys]
    for host in hosts:
        host.close()
    return len(hosts)


def open_hosts() -> int:
    """How many hosts the table holds (a run's, until it ends)."""
    with _lock:
        return len(_hosts)


def reap_idle(idle_s: float | None = None) -> int:
    """Stop the process of every host idle past ``idle_s`` with no job in flight; how many were stopped."""
    limit = idle_seconds() if idle_s is None else idle_s
    with _lock:
        hosts = list(_hosts.values())
    return sum(host.stop_if_idle(limit) for host in hosts)


def _ensure_reaper() -> None:
    """The reaper thread, started with the first host (again in a forked child, which lost it)."""
    global _reaper, _reaper_pid
    if _reaper is not None and _reaper_pid == os.getpid() and _reaper.is_alive():
        return
    _reaper = threading.Thread(target=_reap_forever, name="besser-apphost-reaper", daemon=True)
    _reaper_pid = os.getpid()
    _reaper.start()


def _reap_forever() -> None:
    while True:
        time.sleep(max(1.0, idle_seconds() / 4))
        reap_idle()
        READY.reap(idle_seconds())


atexit.register(close_app_hosts)
atexit.register(close_ready_hosts)

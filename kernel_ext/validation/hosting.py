"""One warm app host per run, found again by every tool call of that run.

Hosts are kept in a small process-wide table keyed by run id, so a tool context rebuilt for
each call (a notebook cell) still finds its warm host. A host keeps nothing between jobs
(every job gets a fresh child and a fresh copy of the source it is given), so one host can
serve every workspace of a run. The least recently used host beyond ``MAX_HOSTS`` is closed,
and every host is closed at interpreter exit. ``close_app_hosts(run_id)`` is what a run's
end calls, with the run's state: the state is then marked ended, so a tool call of that run
still finishing in a worker thread (a cancelled run's validation) is refused instead of
starting a host, and a temporary folder, that nothing would close any more.
"""

from __future__ import annotations

import atexit
import threading
from collections import OrderedDict
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.validation.apphost.host import AppHost

MAX_HOSTS = 4
ENDED = "app_host.ended"  # the run state's mark, set by close_app_hosts
_hosts: OrderedDict[str, AppHost] = OrderedDict()
_lock = threading.Lock()


def app_host(state: Any = None, *, policy: str | None = None) -> AppHost:
    """The run's host (created on first use; not started until a job needs it)."""
    key = str(getattr(state, "run_id", "local"))
    retired: list[AppHost] = []
    with _lock:
        if getattr(state, "stores", {}).get(ENDED):
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"run {key} has ended; its app host is closed")
        host = _hosts.get(key)
        if host is None or host._closed:
            host = AppHost(policy=policy)
            _hosts[key] = host
        _hosts.move_to_end(key)
        while len(_hosts) > MAX_HOSTS:
            retired.append(_hosts.popitem(last=False)[1])
    for old in retired:
        old.close()
    return host


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


atexit.register(close_app_hosts)

"""Warm one-off sandboxes: the sandbox is built before a check needs it, used once, replaced.

Building a sandbox (namespaces, a dozen mounts, or the launcher's interpreter for Landlock)
costs more than the check it runs. So ``run_confined`` takes a *prepared* sandbox: one that
was started in advance with a tiny waiter (``bash``) inside, which reads the working folder,
extra variables and argv from its stdin and ``exec``s the command. Nothing has run in it
before: it is as fresh as one built on demand, and it is used exactly once. After each take
the pool starts the next one in the background; a pruner thread kills spares nobody took.

A prepared sandbox is discarded, never used, when its workspace folder was replaced since it
was built (a bind mount keeps the old directory), when it is older than ``SPARE_TTL_S``, or
when its start failed. Spares die with the server (``--die-with-parent`` or the launcher's
parent-death signal) and are killed by ``close`` (also at interpreter exit).
"""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from kernel_ext.sandbox.confined import spawn_confined
from kernel_ext.sandbox.shares import NO_WATCH, MemoryWatch
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.supervisor import release, spawn_later
from kernel_ext.sandbox.tempsweep import make_temp_home
from kernel_ext.sandbox.tiers import Tier

log = logging.getLogger(__name__)
SPARE_TTL_S = 300.0
PRUNE_EVERY_S = 30.0
MAX_HEADER = 60_000  # header + stdin must fit the pipe at once (never blocks the caller)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Reads NUL-separated fields: cwd, variable count, NAME=value..., argument count, arguments...
WAITER = (
    "IFS= read -r -d '' __c || exit 125; IFS= read -r -d '' __n || exit 125; __i=0; "
    'while [ "$__i" -lt "$__n" ]; do IFS= read -r -d \'\' __kv || exit 125; export "$__kv"; __i=$((__i+1)); done; '
    "IFS= read -r -d '' __n || exit 125; set --; __i=0; "
    'while [ "$__i" -lt "$__n" ]; do IFS= read -r -d \'\' __a || exit 125; set -- "$@" "$__a"; __i=$((__i+1)); done; '
    'unset __n __i __kv __a; builtin cd -- "$__c" || exit 126; unset __c; exec "$@"'
)


@dataclass
class Prepared:
    """A started sandbox whose waiter has not been given a command yet."""

    process: subprocess.Popen
    tier: Tier
    conf: Confinement
    secrets_removed: int
    home: Path
    workspace_ident: tuple[int, int]
    created: float = field(default_factory=time.monotonic)
    memory: MemoryWatch = NO_WATCH

    def usable(self) -> bool:
        try:
            st = os.stat(self.conf.workspace)
        except OSError:
            return False
        fresh = time.monotonic() - self.created < SPARE_TTL_S
        return fresh and (st.st_dev, st.st_ino) == self.workspace_ident and self.process.poll() is None

    def hand_over(self, cwd: Path, argv: Sequence[str], env: Mapping[str, str], stdin: bytes | None) -> bool:
        """Give the waiter its command (and stdin, then EOF); False when it does not fit or is gone."""
        fields = [str(cwd), str(len(env)), *(f"{k}={v}" for k, v in env.items()), str(len(argv)), *argv]
        if any("\0" in f for f in fields):
            return False
        data = b"".join(f.encode() + b"\0" for f in fields) + (stdin or b"")
        if len(data) > MAX_HEADER:
            return False
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(data)
            self.process.stdin.close()
        except (BrokenPipeError, OSError):
            return False
        return True

    def discard(self) -> None:
        release(self.process, kill=self.process.poll() is None)
        remove_home(self)


def remove_home(prepared: Prepared) -> None:
    shutil.rmtree(prepared.home, ignore_errors=True)


def prepare(tier: Tier, workspace: Path, network: bool, writable: tuple[Path, ...], hidden: tuple[Path, ...],
            stable: bool = True) -> Prepared:
    """Start a sandbox over ``workspace`` with a fresh temporary home and the waiter inside."""
    home = make_temp_home("besser-oneoff-home-")
    conf = Confinement(workspace=workspace, home=home, network=network, writable=writable, hidden=hidden)
    try:
        st = os.stat(workspace)
        started = spawn_confined(["bash", "--noprofile", "--norc", "-c", WAITER], conf, tier=tier, stdin=subprocess.PIPE,
                                 cwd=workspace, stable=stable, parked=True)
    except OSError:
        shutil.rmtree(home, ignore_errors=True)
        raise
    return Prepared(started.process, tier, conf, started.secrets_removed, home, (st.st_dev, st.st_ino), memory=started.memory)


Key = tuple[Tier, Path, bool, tuple[Path, ...], tuple[Path, ...]]


class SparePool:
    """At most one prepared sandbox per confinement key, refilled after each take."""

    def __init__(self) -> None:
        self._spares: dict[Key, Future[Prepared]] = {}
        self._lock = threading.Lock()
        self._pruner: threading.Thread | None = None
        self.closed = False

    def take(self, tier: Tier, workspace: Path, network: bool, writable: tuple[Path, ...] = (),
             hidden: tuple[Path, ...] = ()) -> Prepared:
        """A prepared sandbox for this key (a warm one when available), and start the next."""
        key: Key = (tier, workspace, network, writable, hidden)
        with self._lock:
            pending = self._spares.pop(key, None)
        prepared = None
        if pending is not None:
            try:
                candidate = pending.result()
            except OSError:
                candidate = None
            if candidate is not None and candidate.usable():
                prepared = candidate
            elif candidate is not None:
                candidate.discard()
        if prepared is None:
            prepared = prepare(*key, stable=False)
        self._refill(key)
        return prepared

    def _refill(self, key: Key) -> None:
        with self._lock:
            if self.closed or key in self._spares:
                return
            self._spares[key] = spawn_later(prepare, *key)
            if self._pruner is None:
                self._pruner = threading.Thread(target=self._prune_loop, name="besser-sandbox-spares", daemon=True)
                self._pruner.start()

    def discard_for(self, workspace: str | os.PathLike[str]) -> int:
        """Kill the prepared sandboxes of ``workspace`` (its run ended); returns how many."""
        target = Path(os.path.realpath(workspace))
        with self._lock:
            chosen = [self._spares.pop(key) for key in list(self._spares) if key[1] == target]
        return sum(_collect(future) for future in chosen)

    def prune(self) -> int:
        """Kill ready spares that are too old or whose workspace changed or vanished."""
        with self._lock:
            chosen = [
                self._spares.pop(key)
                for key, future in list(self._spares.items())
                if future.done() and (future.exception() is not None or not future.result().usable())
            ]
        return sum(_collect(future) for future in chosen)

    def _prune_loop(self) -> None:
        while not self.closed:
            time.sleep(PRUNE_EVERY_S)
            self.prune()

    def close(self) -> None:
        """Kill every waiting sandbox and remove its home."""
        with self._lock:
            self.closed = True
            pending, self._spares = list(self._spares.values()), {}
        for future in pending:
            _collect(future)


def _collect(future: Future[Prepared]) -> int:
    """Wait for a spare's start and discard it; 1 when there was one to discard."""
    try:
        future.result(timeout=30).discard()
    except Exception as exc:  # noqa: BLE001 - a spare that failed to start has nothing to clean
        log.debug("a prepared sandbox could not be collected: %s", exc)
        return 0
    return 1


_pool: SparePool | None = None
_pool_lock = threading.Lock()


def pool() -> SparePool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = SparePool()
            atexit.register(_pool.close)
        return _pool


def valid_env_names(env: Mapping[str, str]) -> bool:
    return all(_NAME.match(name) for name in env)

"""A sandbox's network namespace as the server holds it, and the helpers that serve it from outside.

bubblewrap makes the namespaces of a sandbox in one user namespace and, when it maps a different
uid for the command (unprivileged, with ``/dev`` mounted), moves the command into a second one
below it. The network namespace belongs to the first: joining ``/proc/<pid>/ns/user`` (the
second) gives no right over it (``setns`` says EPERM as a non-root server). So the owner is
asked of the network namespace itself (``NS_GET_USERNS``), both are opened once by the server,
and every helper (the seal's ``nsenter``, pasta, the DNS relay) and every joiner (``runnet``)
enters them through the server's descriptors: never a pid that could have been reused.

Helpers are the server's children, ended by the server's end (``setpriv``'s parent-death signal)
or the sandbox's: one watcher thread stops and reaps them when the sandbox's pidfd says it ended.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import selectors
import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

log = logging.getLogger(__name__)

NS_GET_USERNS = 0xB701  # _IO(0xb7, 0x1): the user namespace owning a namespace
JOIN_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Held:
    """A sandbox's network namespace and the user namespace owning it, open in the server, and a pidfd
    of the sandbox's first process (whose end stops its helpers)."""

    pidfd: int
    user: int
    net: int

    @classmethod
    def of(cls, pid: int) -> Held | None:
        """Open them for the sandbox whose first process is ``pid`` (None: it is gone)."""
        opened: list[int] = []
        try:
            opened.append(os.pidfd_open(pid))
            net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
            opened.append(net)
            owner = fcntl.ioctl(net, NS_GET_USERNS)
            os.set_inheritable(owner, False)
            opened.insert(1, owner)
        except OSError:
            for fd in opened:
                close_fd(fd)
            return None
        return cls(*opened)

    @property
    def alive(self) -> bool:
        """The sandbox's first process still runs (and its helpers with it)."""
        return not select.select([self.pidfd], [], [], 0)[0]

    def paths(self, process: str = "self") -> tuple[str, str]:
        """``(user, net)`` as paths through these descriptors: in a child they were passed to (``self``), or
        in the server's own table (its pid: what a joiner reads, so the descriptors never reach a sandbox)."""
        own = f"/proc/{process}/fd"
        return f"{own}/{self.user}", f"{own}/{self.net}"

    def close(self) -> None:
        for fd in (self.pidfd, self.user, self.net):
            close_fd(fd)


def close_fd(fd: int) -> None:
    """Close ``fd`` when it is one (>= 0), ignoring an already closed one."""
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


@dataclass
class Entry:
    """How one sandbox joins the run's namespace: the command in front of bubblewrap, through descriptors
    duplicated for this start alone (so none the holder's restart closes can be reused under it), and the
    namespace's note."""

    argv: tuple[str, ...]
    note: str | None
    fds: tuple[int, int]
    link: str  # the namespace as /proc shows it (``net:[inode]``)
    closed: bool = False

    def joined(self, process: subprocess.Popen[bytes], timeout: float = JOIN_TIMEOUT_S) -> None:
        """Once ``process`` (nsenter, then bubblewrap: one pid) is in the namespace or gone, close the duplicates."""
        deadline = time.monotonic() + timeout
        try:
            while process.poll() is None and time.monotonic() < deadline:
                try:
                    if os.readlink(f"/proc/{process.pid}/ns/net") == self.link:
                        return
                except OSError:
                    return
                time.sleep(0.001)
        finally:
            self.close()

    def close(self) -> None:
        """Idempotent: a descriptor number is closed once, never again after another file may hold it."""
        if self.closed:
            return
        self.closed = True
        for fd in self.fds:
            close_fd(fd)


class SharedNetwork(Protocol):
    """A network namespace sandboxes join (``runnet.RunNetwork``); None from ``enter``: make your own."""

    def enter(self) -> Entry | None: ...


def start_helper(held: Held, argv: Sequence[str], what: str, *, stdout: int = subprocess.DEVNULL,
                 pass_fds: Sequence[int] = ()) -> subprocess.Popen | str:
    """A helper serving ``held``'s namespace until the sandbox or the server ends; or why it did not start."""
    from kernel_ext.sandbox.supervisor import spawn

    try:
        sandbox = os.dup(held.pidfd)
    except OSError:
        return "the sandbox ended before its network was set up"
    setpriv = shutil.which("setpriv")
    try:
        helper = spawn([*([setpriv, "--pdeathsig", "TERM", "--"] if setpriv else []), *argv], stable=True,
                       stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.DEVNULL, pass_fds=pass_fds)
    except OSError as exc:
        os.close(sandbox)
        log.warning("%s could not start: %s", what, exc)
        return f"{what} could not start"
    _watcher().watch(sandbox, helper)
    return helper


class _Watcher:
    """One thread: when a sandbox ends, the helpers serving its namespace (pasta, the DNS relay) are stopped and
    reaped (a pidfd each: no pid reuse)."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._wake_read, self._wake_write = os.pipe()
        self._selector.register(self._wake_read, selectors.EVENT_READ, None)
        self._lock = threading.Lock()
        threading.Thread(target=self._loop, name="besser-netns-watcher", daemon=True).start()

    def watch(self, sandbox: int, helper: subprocess.Popen) -> None:
        with self._lock:
            self._selector.register(sandbox, selectors.EVENT_READ, helper)
        os.write(self._wake_write, b"w")

    def _loop(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.data is None:
                    os.read(self._wake_read, 4096)
                    continue
                with self._lock:
                    self._selector.unregister(key.fd)
                os.close(key.fd)
                stop_helper(key.data)


def stop_helper(helper: subprocess.Popen) -> None:
    """Stop and reap a helper (idempotent: one already reaped is not signalled)."""
    helper.terminate()
    try:
        helper.wait(timeout=2)
    except subprocess.TimeoutExpired:
        helper.kill()
        helper.wait()


@cache
def _watcher() -> _Watcher:
    return _Watcher()

"""A run's one private network: every sandbox of the run joins the same namespace.

The run's shell session (``run_command``, the runtime probe it runs) and its ``sh_run`` commands,
foreground and background, all live in one network namespace, so a server one of them starts
answers the others on the run's loopback, and never another run's. A holder sandbox makes the
namespace (bubblewrap ``--unshare-net`` running ``sleep infinity``) and gets it ready the way
``netns`` readies any private one: the host's addresses sealed out, pasta attached, the DNS relay
where needed. The namespace and the user namespace owning it are opened by the server while
bubblewrap still holds the holder (``nsjoin.Held``). Every later sandbox of the run starts as
``nsenter`` into those two, through descriptors duplicated for that start in the server's own
table (``/proc/<server>/fd/N``: never a pid that could be reused, nothing passed into the
sandbox), then bubblewrap without ``--unshare-net``, keeping the server's uid and gid, in a user
namespace of its own below the owner, so with no capability over the network it shares.

The holder lives as long as the run's shell service; if it ends, the next sandbox starts a new
one (a new namespace: servers of the old one are gone, as after a restarted session). Where the
holder cannot be made, each sandbox falls back to a private namespace of its own. An address the
host gains (a VPN, a container bridge) is sealed out of the namespace as it appears (``netwatch``,
while commands run), and checked again on every join; where that fails the run's namespace is
given up (fail closed).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
from pathlib import Path

from kernel_ext.sandbox import netwatch
from kernel_ext.sandbox.nsjoin import Entry, Held
from kernel_ext.sandbox.spec import Confinement
from kernel_ext.sandbox.tiers import TierChoice

log = logging.getLogger(__name__)

HOLDER_ARGV = ("sleep", "infinity")


class RunNetwork:
    """The run's namespace, made on first use; ``enter`` for every private sandbox of the run; ``close`` at its end."""

    def __init__(self, choice: TierChoice, conf: Confinement):
        self.choice = choice
        self.conf = conf  # the run's private confinement (workspace, home, hidden): the holder's mounts
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._held: Held | None = None
        self._note: str | None = None
        self.closed = False

    @property
    def held(self) -> Held | None:
        """The namespace as the server holds it now (None: not made, or given up)."""
        return self._held

    def enter(self) -> Entry | None:
        """The way into the run's namespace, (re)made when its holder is gone; None: the caller makes its own."""
        nsenter = shutil.which("nsenter")
        with self._lock:
            if self.closed or nsenter is None or self.choice.tier is None:
                return None
            if self._held is None or not self._held.alive:
                self._stop()
                self._start()
            if self._held is not None and not self._reseal():
                self._stop()  # fail closed: the caller makes (and seals) a namespace of its own
            if self._held is None:
                return None
            fds = (os.dup(self._held.user), os.dup(self._held.net))
            own = f"/proc/{os.getpid()}/fd"  # the server's table: nothing is passed into the sandbox
            argv = (nsenter, f"--user={own}/{fds[0]}", f"--net={own}/{fds[1]}", "--preserve-credentials", "--")
            return Entry(argv, self._note, fds, os.readlink(f"{own}/{fds[1]}"))

    def refresh(self) -> None:
        """Before a command of a sandbox already in the namespace (the session): seal out the host's new
        addresses, or end the namespace's holder (its pasta with it: no way out at all) when that fails."""
        with self._lock:
            if self._held is not None and self._held.alive and not self._reseal():
                self._stop()

    def _reseal(self) -> bool:
        """Addresses the host gained since the namespace was made (a VPN, a container bridge) are sealed out by
        the watcher as they appear (``netwatch``); before each join they are read again, and a namespace
        whose reseal failed (or that is no longer watched) is given up."""
        assert self._held is not None
        guard = netwatch.find(self._held)
        note = "the run's network is not watched" if guard is None else guard.reseal()
        if note is not None:
            log.warning("the run's network could not be kept from the host's new addresses: %s", note)
            return False
        return True

    def _start(self) -> None:
        from kernel_ext.sandbox.confined import spawn_confined

        assert self.choice.tier is not None
        try:
            started = spawn_confined(list(HOLDER_ARGV), self.conf, tier=self.choice.tier, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stable=True, hold=True)
        except OSError as exc:
            log.warning("the run's network could not be made: %s", exc)
            return
        self._process, self._held, self._note = started.process, started.held, started.net_note
        if self._held is not None and _same_as_servers(self._held):
            log.error("the run's network namespace is the server's: not joined")  # never the host's network
            self._stop()

    def _stop(self) -> None:
        from kernel_ext.sandbox.supervisor import release

        held, process, self._held, self._process = self._held, self._process, None, None
        if held is not None:
            held.close()
        if process is not None:
            release(process, kill=True)

    def close(self) -> None:
        """The run ended: the holder, its pasta (the watcher sees it end) and the namespace go."""
        with self._lock:
            self.closed = True
            self._stop()


def _same_as_servers(held: Held) -> bool:
    try:
        return os.fstat(held.net).st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return True


def for_run(choice: TierChoice, workspace: Path, home: Path, hidden: tuple[str, ...]) -> RunNetwork:
    """A run's network over its workspace and home (made when a sandbox first needs it)."""
    conf = Confinement.for_run(workspace, home, network=True, private_net=True, hidden=hidden)
    return RunNetwork(choice, conf)

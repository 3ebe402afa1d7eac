"""Resource caps on every sandbox, whatever the tier: file size, core files, and tasks.

A file a command writes is capped at 4 GiB (``RLIMIT_FSIZE``) and no core file is written
(``RLIMIT_CORE`` 0): the launcher tiers set both themselves; in the bwrap tier a ``/bin/sh``
in front of bubblewrap sets them (and joins the task cap), then becomes bubblewrap.

The number of tasks (processes and threads) one sandbox may hold at once is capped by a
``pids`` cgroup of its own, joined before anything of the command runs. The cgroup exists
where this process may create cgroups below its own ``pids`` cgroup (root on cgroup v1; on
v2, a subtree with ``pids`` delegated). Where it cannot and the server is not root (a Binder
or hub pod), ``RLIMIT_NPROC`` is the fallback: it counts all of the user's processes, so it
is set to the cap plus what the user runs when the sandbox starts. Root is exempt from
``RLIMIT_NPROC``; a root server without pids cgroups has no task cap, the tier's limits say
so, and a runaway command is bounded by its timeout and the process-tree kill alone.

Groups live in ``<own pids cgroup>/besser-agent-<server pid>/``; two are kept ready ahead. Joining
a group is what costs: the kernel moves a task between cgroups under a lock that waits for an
RCU grace period when no move happened for a few milliseconds (5-20 ms here, measured; a group
entered before is no faster). So once a caller asked for them (``want_launchers``), each group
made ahead gets a launcher *parked* in it: a process that already joined the group and set the
limits, waiting for its command line (``tiers.ParkedLauncher``); a sandbox started through it
pays neither the join nor the shell. One nobody took within ``LAUNCHER_TTL_S`` is dismissed (its
group stays, plain), so an idle server keeps no process around. An empty group is removed on a
later launch (after a grace period, so a sandbox still starting keeps its group), at exit, and,
for servers that died, by the next server.

The same groups carry each sandbox's fair share (``shares``): a memory limit and a CPU weight, in
the memory and cpu hierarchies (on v1 a group of the same name in each, joined together; on v2
the one group), written when the group is made, so a parked launcher is in all of them ahead.
Without groups a sandbox gets ``RLIMIT_AS`` and ``nice`` instead. ``BESSER_SANDBOX_CGROUPS=off``
makes no cgroups at all (the task cap falls back as above).
"""

from __future__ import annotations

import atexit
import errno
import functools
import logging
import os
import resource
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kernel_ext.sandbox import shares
from kernel_ext.sandbox.cgroups import Hierarchy, locate, remove, server_group, sweep_dead_servers
from kernel_ext.sandbox.shares import Controls, MemoryWatch
from kernel_ext.sandbox.supervisor import spawn_later

log = logging.getLogger(__name__)

FILE_SIZE_LIMIT = 4 << 30
DEFAULT_MAX_TASKS = 1024
MAX_TASKS_VAR = "BESSER_SANDBOX_MAX_TASKS"
GRACE_S = 60.0
# Run by /bin/sh in front of bwrap; ``$0`` is the group's cgroup.procs. POSIX sh counts
# ``ulimit -f`` in 512-byte blocks (dash, and bash when started as sh).
JOIN_LINE = 'echo $$ > {procs} || {{ echo "sandbox: cannot join its cgroups" >&2; exit 125; }}\n'
LIMITS_LINE = (f"ulimit -c 0 && ulimit -f {FILE_SIZE_LIMIT // 512} "
               '|| { echo "sandbox: cannot set its resource limits" >&2; exit 125; }\n')
# RLIMIT_AS (``ulimit -v``, in KiB); then ``__nice`` is what ``then`` puts before the command it execs.
ADDRESS_LINE = 'ulimit -v {kib} || {{ echo "sandbox: cannot set its memory limit" >&2; exit 125; }}\n'
NICE_LINE = "__nice='nice -n {n}'\n"
# RLIMIT_NPROC is ``ulimit -p`` in dash and busybox, ``-u`` in bash (whose -p is read-only).
PROCESSES_LINE = ('{{ ulimit -p {n} 2>/dev/null || ulimit -u {n}; }} '
                  '|| {{ echo "sandbox: cannot set its process limit" >&2; exit 125; }}\n')

POOL_SIZE = 2  # groups made ahead, so a sandbox's start never waits for a new one
LAUNCHER_TTL_S = 15.0

_lock = threading.Lock()
_created: dict[Path, float] = {}  # groups handed out by this process -> when
_ready: list[Path] = []  # groups made ahead, not handed out yet
_parents: list[Path] = []  # this server's group in each hierarchy it uses, removed at exit
_refilling = False


class Launcher(Protocol):
    """A process parked in a group (``tiers.ParkedLauncher``); one nobody takes is dismissed."""

    def dismiss(self) -> None: ...


_launchers: dict[Path, tuple[Launcher, threading.Timer]] = {}  # ready groups with a launcher parked in them
_park: Callable[[Path], Launcher] | None = None  # set by ``want_launchers``


def _forget_in_child() -> None:
    """A forked child shares none of this: the groups and launchers are its parent's, its threads gone."""
    global _lock, _refilling
    _lock = threading.Lock()
    _created.clear()
    _ready.clear()
    _launchers.clear()
    _refilling = False


os.register_at_fork(after_in_child=_forget_in_child)


@functools.cache
def operator_max_tasks() -> int:
    """The cap every sandbox of this process gets, read from the environment at first use."""
    return max_tasks(os.environ)


def max_tasks(environ: Mapping[str, str]) -> int:
    """The cap on tasks per sandbox in ``environ`` (``BESSER_SANDBOX_MAX_TASKS``, default 1024)."""
    raw = environ.get(MAX_TASKS_VAR, "").strip()
    try:
        value = int(raw) if raw else DEFAULT_MAX_TASKS
    except ValueError:
        raise ValueError(f"{MAX_TASKS_VAR} must be a whole number, not {raw!r}") from None
    if value < 16:
        raise ValueError(f"{MAX_TASKS_VAR} must be at least 16 (a shell and its helpers), not {value}")
    return value


@functools.cache
def pids_hierarchy() -> Hierarchy:
    """Found and proven once per process: a group is made, capped and removed again."""
    if not shares.operator_settings().cgroups:
        return Hierarchy(None, cause=f"cgroups are off ({shares.CGROUPS_VAR}=off)")
    try:
        found = locate("pids")
    except OSError as exc:
        return Hierarchy(None, cause=f"cgroups unreadable: {exc}")
    if found.base is None:
        return found
    try:
        parent = server_group(found, "pids")
        probe = parent / f"probe-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        try:
            (probe / "pids.max").write_text("16")
        finally:
            probe.rmdir()
    except OSError as exc:
        return Hierarchy(None, found.version, f"cannot make a pids cgroup under {found.base}: {exc.strerror or exc}")
    sweep_dead_servers(found.base)
    _parents.append(parent)
    atexit.register(_at_exit)
    return found


@functools.cache
def share_controls() -> Controls:
    """Where sandboxes here get their memory and CPU cgroups (``shares``), found once, beside the task cap's."""
    controls = shares.discover(pids_hierarchy(), shares.operator_settings())
    _parents.extend(p for p in (controls.memory, controls.cpu) if p is not None and p not in _parents)
    return controls


def task_cap_cause() -> str:
    """Empty when every sandbox gets a task cap of its own here, else what is missing."""
    return pids_hierarchy().cause


def rlimit_fallback() -> bool:
    """Whether sandboxes here get ``RLIMIT_NPROC`` instead (no pids cgroups, and not root)."""
    return bool(task_cap_cause()) and os.geteuid() != 0


def share_limits() -> tuple[str, ...]:
    """The memory and CPU lines of every sandbox's limits: which mechanism applies, with its figures."""
    return shares.limits(share_controls(), shares.operator_settings())


@dataclass(frozen=True)
class SandboxCaps:
    """What one sandbox is given: its cgroups (the pids group names them), or else an ``RLIMIT_NPROC``
    value; ``address_space`` (``RLIMIT_AS``) and ``nice`` where it has no memory or cpu cgroup."""

    group: Path | None = None
    process_limit: int | None = None
    address_space: int | None = None
    nice: int | None = None

    def memory_watch(self) -> MemoryWatch:
        """How this sandbox's results learn that its memory limit stopped a command."""
        if self.group is None and self.address_space is None:
            return shares.NO_WATCH
        return shares.watch(share_controls(), self.group, self.address_space)


def sandbox_caps() -> SandboxCaps:
    """The caps for one new sandbox (raises ``OSError`` when a group cannot be set up)."""
    return caps_for(new_group())


def caps_for(group: Path | None) -> SandboxCaps:
    """The caps of a sandbox in ``group`` (None: it has no cgroups): the rlimit and nice fallbacks
    for what the group does not give."""
    controls = share_controls()
    settings = shares.operator_settings()
    address_space = settings.address_space or None if group is None or controls.memory is None else None
    nice = settings.nice or None if group is None or controls.cpu is None else None
    if settings.memory <= 0:
        address_space = None
    nproc = process_limit() if group is None and rlimit_fallback() else None
    return SandboxCaps(group, nproc, address_space, nice)


def want_launchers(park: Callable[[Path], Launcher]) -> None:
    """From now on, each group made ahead gets a launcher parked in it by ``park(group)``."""
    global _park
    _park = park


def take_launcher(group: Path | None) -> Launcher | None:
    """The launcher parked in ``group`` (a group ``new_group`` just handed out), if any."""
    with _lock:
        parked = _launchers.pop(group, None) if group is not None else None
    if parked is None:
        return None
    parked[1].cancel()
    return parked[0]


def _expire(group: Path) -> None:
    with _lock:
        parked = _launchers.pop(group, None)
    if parked is not None:
        parked[0].dismiss()


def process_limit() -> int:
    """The cap plus the processes this user runs now, within the hard limit this process has."""
    uid = os.getuid()
    running = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                running += entry.stat(follow_symlinks=False).st_uid == uid
            except OSError:  # the process ended while we looked
                continue
    _, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    wanted = running + operator_max_tasks()
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def new_group(limit: int | None = None) -> Path | None:
    """A cgroup of its own capped at ``limit`` tasks (None where there are no pids cgroups).

    Taken from a small pool made ahead in the background, where a launcher may be parked in it
    already (``take_launcher``); the limit is written now, so it is the operator's at the start.
    """
    found = pids_hierarchy()
    if found.base is None:
        return None
    sweep(GRACE_S)
    with _lock:
        group = _ready.pop() if _ready else None
    try:
        if group is None:
            group = _make_group(found)
        (group / "pids.max").write_text(str(limit or operator_max_tasks()))
    except OSError as exc:
        log.error("sandbox task cap: cannot set up %s: %s", group, exc)
        if group is not None:
            _remove(group)
        raise OSError(exc.errno or errno.EIO, f"the sandbox's task cap could not be set up: {exc.strerror or exc}") from exc
    with _lock:
        _created[group] = time.monotonic()
    _refill(found)
    return group


def _make_group(found: Hierarchy) -> Path:
    """A new sandbox group: the pids one and, where there are, its memory and cpu companions with
    the operator's limit and weight written (before anything joins them)."""
    group = server_group(found, "pids") / f"sandbox-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    controls = share_controls()
    try:
        for companion in controls.companions(group):
            companion.mkdir()
        controls.apply(group, shares.operator_settings())
    except OSError:
        _remove(group)
        raise
    return group


def _refill(found: Hierarchy) -> None:
    """Top the pool up to ``POOL_SIZE`` on the spawner thread (one refill at a time; no thread is
    started on the caller's way, and launchers are forked where the parent-death signal holds)."""
    global _refilling
    with _lock:
        if _refilling or len(_ready) >= POOL_SIZE:
            return
        _refilling = True

    def work() -> None:
        global _refilling
        try:
            while True:
                with _lock:
                    if len(_ready) >= POOL_SIZE:
                        return
                group = _make_group(found)
                launcher = _parked_in(group)
                expiry = threading.Timer(LAUNCHER_TTL_S, _expire, (group,))
                expiry.daemon = True
                with _lock:
                    _ready.append(group)
                    if launcher is not None:
                        _launchers[group] = (launcher, expiry)
                if launcher is not None:
                    expiry.start()  # a take before this cancels it, and it then never fires
        except OSError as exc:  # the next new_group makes its own and reports the failure
            log.warning("sandbox task cap: could not prepare a group ahead: %s", exc)
        finally:
            with _lock:
                _refilling = False

    spawn_later(work)


def _parked_in(group: Path) -> Launcher | None:
    park = _park
    if park is None:
        return None
    try:
        return park(group)
    except OSError as exc:  # the group serves a sandbox started the usual way
        log.warning("sandbox task cap: could not park a launcher in %s: %s", group, exc)
        return None


def procs_file(group: Path | None) -> str | None:
    return None if group is None else str(group / "cgroup.procs")


def procs_files(group: Path | None) -> list[str]:
    """Every ``cgroup.procs`` a sandbox of ``group`` joins: its pids group's, then its companions'."""
    if group is None:
        return []
    return [str(group / "cgroup.procs"), *(str(c / "cgroup.procs") for c in share_controls().companions(group))]


def bwrap_prefix(caps: SandboxCaps, then: str = 'exec $__nice "$@"') -> list[str]:
    """What goes in front of ``bwrap``: a shell that joins the groups (if any), sets the caps, then
    runs ``then`` (by default: becomes the rest of the command line, under ``nice`` when the
    sandbox has no cpu cgroup; a ``then`` of its own puts ``$__nice`` before what it execs)."""
    joins = ['"$0"', *(shlex.quote(f) for f in procs_files(caps.group)[1:])] if caps.group is not None else []
    script = "".join(JOIN_LINE.format(procs=f) for f in joins) + LIMITS_LINE
    if caps.address_space is not None:
        script += ADDRESS_LINE.format(kib=caps.address_space // 1024)
    if caps.process_limit is not None:
        script += PROCESSES_LINE.format(n=caps.process_limit)
    script += NICE_LINE.format(n=caps.nice) if caps.nice else "__nice=\n"
    return ["/bin/sh", "-c", script + then, procs_file(caps.group) or "sandbox-caps"]


def sweep(grace_s: float = GRACE_S) -> int:
    """Remove this process's empty groups older than ``grace_s``; how many went."""
    now = time.monotonic()
    with _lock:
        old = [g for g, made in _created.items() if now - made >= grace_s]
    removed = 0
    for group in old:
        if _remove(group):
            removed += 1
            with _lock:
                _created.pop(group, None)
    return removed


def drain() -> None:
    """Let go of the groups made ahead and the launchers parked in them (at exit; a test that
    changes the caps, so the next sandbox gets a group made under them)."""
    with _lock:
        spare, _ready[:] = list(_ready), []
        parked = list(_launchers.values())
        _launchers.clear()
    for launcher, expiry in parked:
        expiry.cancel()
        launcher.dismiss()
    for group in spare:
        _remove(group)


def _at_exit() -> None:
    drain()
    sweep(0.0)
    for parent in _parents:
        remove(parent)


def _remove(group: Path) -> bool:
    """Remove a sandbox's groups (pids and companions); False while one still has tasks."""
    gone = [remove(companion) for companion in share_controls().companions(group)]
    return remove(group) and all(gone)

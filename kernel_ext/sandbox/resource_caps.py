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
"""

from __future__ import annotations

import atexit
import errno
import functools
import logging
import os
import resource
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from kernel_ext.sandbox.cgroups import PidsHierarchy, locate
from kernel_ext.sandbox.supervisor import spawn_later

log = logging.getLogger(__name__)

FILE_SIZE_LIMIT = 4 << 30
DEFAULT_MAX_TASKS = 1024
MAX_TASKS_VAR = "BESSER_SANDBOX_MAX_TASKS"
GROUP_PREFIX = "besser-agent-"
GRACE_S = 60.0
# Run by /bin/sh in front of bwrap; ``$0`` is the group's cgroup.procs. POSIX sh counts
# ``ulimit -f`` in 512-byte blocks (dash, and bash when started as sh).
JOIN_LINE = 'echo $$ > "$0" || { echo "sandbox: cannot join its task cap" >&2; exit 125; }\n'
LIMITS_LINE = (f"ulimit -c 0 && ulimit -f {FILE_SIZE_LIMIT // 512} "
               '|| { echo "sandbox: cannot set its resource limits" >&2; exit 125; }\n')
# RLIMIT_NPROC is ``ulimit -p`` in dash and busybox, ``-u`` in bash (whose -p is read-only).
PROCESSES_LINE = ('{{ ulimit -p {n} 2>/dev/null || ulimit -u {n}; }} '
                  '|| {{ echo "sandbox: cannot set its process limit" >&2; exit 125; }}\n')

POOL_SIZE = 2  # groups made ahead, so a sandbox's start never waits for a new one
LAUNCHER_TTL_S = 15.0

_lock = threading.Lock()
_created: dict[Path, float] = {}  # groups handed out by this process -> when
_ready: list[Path] = []  # groups made ahead, not handed out yet
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
def pids_hierarchy() -> PidsHierarchy:
    """Found and proven once per process: a group is made, capped and removed again."""
    try:
        found = locate()
    except OSError as exc:
        return PidsHierarchy(None, cause=f"cgroups unreadable: {exc}")
    if found.base is None:
        return found
    try:
        parent = _server_group(found)
        probe = parent / f"probe-{uuid.uuid4().hex[:8]}"
        probe.mkdir()
        try:
            (probe / "pids.max").write_text("16")
        finally:
            probe.rmdir()
    except OSError as exc:
        return PidsHierarchy(None, found.version, f"cannot make a pids cgroup under {found.base}: {exc.strerror or exc}")
    _sweep_dead_servers(found.base)
    atexit.register(_at_exit, parent)
    return found


def task_cap_cause() -> str:
    """Empty when every sandbox gets a task cap of its own here, else what is missing."""
    return pids_hierarchy().cause


def rlimit_fallback() -> bool:
    """Whether sandboxes here get ``RLIMIT_NPROC`` instead (no pids cgroups, and not root)."""
    return bool(task_cap_cause()) and os.geteuid() != 0


@dataclass(frozen=True)
class SandboxCaps:
    """What one sandbox is given: its pids cgroup, or else an ``RLIMIT_NPROC`` value, or neither."""

    group: Path | None = None
    process_limit: int | None = None


def sandbox_caps() -> SandboxCaps:
    """The task cap for one new sandbox (raises ``OSError`` when a group cannot be set up)."""
    group = new_group()
    if group is not None or not rlimit_fallback():
        return SandboxCaps(group)
    return SandboxCaps(None, process_limit())


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


def _make_group(found: PidsHierarchy) -> Path:
    group = _server_group(found) / f"sandbox-{uuid.uuid4().hex[:12]}"
    group.mkdir()
    return group


def _refill(found: PidsHierarchy) -> None:
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


def bwrap_prefix(caps: SandboxCaps, then: str = 'exec "$@"') -> list[str]:
    """What goes in front of ``bwrap``: a shell that joins the group (if any), sets the caps, then
    runs ``then`` (by default: becomes the rest of the command line)."""
    script = JOIN_LINE if caps.group is not None else ""
    script += LIMITS_LINE
    if caps.process_limit is not None:
        script += PROCESSES_LINE.format(n=caps.process_limit)
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


def _at_exit(parent: Path) -> None:
    with _lock:
        spare, _ready[:] = list(_ready), []
        parked = list(_launchers.values())
        _launchers.clear()
    for launcher, expiry in parked:
        expiry.cancel()
        launcher.dismiss()
    for group in spare:
        _remove(group)
    sweep(0.0)
    _remove(parent)


def _remove(group: Path) -> bool:
    try:
        group.rmdir()
        return True
    except FileNotFoundError:
        return True
    except OSError:  # still has tasks (EBUSY): a later sweep takes it
        return False


def _server_group(found: PidsHierarchy) -> Path:
    if found.base is None:  # callers only come here with a hierarchy that was found
        raise OSError(errno.ENOENT, found.cause or "no pids cgroup")
    parent = found.base / f"{GROUP_PREFIX}{os.getpid()}"
    if not parent.is_dir():
        parent.mkdir(exist_ok=True)
        if found.version == 2:  # children get pids.max only once the parent hands the controller down
            (parent / "cgroup.subtree_control").write_text("+pids")
    return parent


def _sweep_dead_servers(base: Path) -> None:
    """Groups left by servers that were killed (their pid is gone): removed when empty."""
    for parent in base.glob(f"{GROUP_PREFIX}*"):
        pid = parent.name[len(GROUP_PREFIX):]
        if not pid.isdigit() or int(pid) == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        for group in parent.iterdir():
            if group.is_dir():
                _remove(group)
        _remove(parent)

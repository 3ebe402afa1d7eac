"""Temporary homes left behind: swept once a day old, only this user's, never through a link.

Sandboxes get throwaway folders under the temp dir (``besser-home-*`` for a run's shell,
``besser-oneoff-home-*`` for a one-off, ``besser-apphost-*`` for the app host), made by
``make_temp_home``, whose name records the owning process (``o<pid>.<start ticks>-`` after the
prefix: a pid alone could be reused). Their owners remove them on close, but a server killed
with SIGKILL or a crashed kernel leaves them. The server sweeps at start-up and then
periodically (``TempSweeper``): a folder is removed when its name has one of those prefixes, it
is a real directory (not a link) owned by this user, its owner process is gone (another live
server's homes are never touched), no owner in this process holds it (``hold``), and nothing in
its tree changed in ``max_age_s`` (24 h: the newest modification time of every entry, a walk of
at most ``MAX_WALK_ENTRIES``; a tree larger than that is kept, never judged by its top). Removal
walks descriptors and never follows a link (``workspace.treecopy.remove_entry``), so a link
planted inside cannot point the sweep elsewhere.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import tempfile
import threading
import time
from pathlib import Path

from kernel_ext.workspace import treewalk
from kernel_ext.workspace.treecopy import remove_entry

log = logging.getLogger(__name__)

PREFIXES = ("besser-home-", "besser-oneoff-home-", "besser-apphost-")
MAX_AGE_S = 24 * 3600.0
INTERVAL_S = 3600.0
MAX_WALK_ENTRIES = 50_000  # entries looked at per home before it is kept as "not known to be stale"
_OWNER = re.compile(r"o(\d{1,10})\.(\d{1,20})-")

_held: set[str] = set()
_held_lock = threading.Lock()


def hold_temp_home(path: str | os.PathLike[str]) -> None:
    """``path`` is in use by this process: never swept, however old."""
    with _held_lock:
        _held.add(os.path.realpath(path))


def release_temp_home(path: str | os.PathLike[str]) -> None:
    with _held_lock:
        _held.discard(os.path.realpath(path))


def _start_ticks(pid: int) -> str:
    """When ``pid`` started (clock ticks since boot, /proc); "" when it is gone or not known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return ""
    if fields[0] in (b"Z", b"X"):  # a zombie has ended: its homes are no one's
        return ""
    return fields[19].decode() if len(fields) > 19 else ""


def owner_tag(pid: int | None = None) -> str:
    """The name part that records the owning process: ``o<pid>.<start ticks>-``."""
    pid = os.getpid() if pid is None else pid
    return f"o{pid}.{_start_ticks(pid) or 0}-"


def make_temp_home(prefix: str, label: str = "", *, root: str | os.PathLike[str] | None = None) -> Path:
    """A new temporary home named ``<prefix>o<pid>.<start>-<label>XXXX`` (``prefix`` one of ``PREFIXES``)."""
    if prefix not in PREFIXES:
        raise ValueError(f"a temporary home's prefix is one of {PREFIXES}, not {prefix!r}")
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner_tag()}{label}", dir=root))


def owner_alive(name: str) -> bool | None:
    """Whether the process recorded in a home's name still runs (None: the name records none)."""
    prefix = next((p for p in PREFIXES if name.startswith(p)), "")
    match = _OWNER.match(name, len(prefix)) if prefix else None
    if match is None:
        return None
    pid, ticks = int(match.group(1)), match.group(2)
    if os.path.isdir("/proc/self"):
        now = _start_ticks(pid)
        return bool(now) and (ticks == "0" or now == ticks)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _changed_since(parent: int, name: str, st: os.stat_result, cutoff: float, limit: int) -> bool:
    """Did anything in the tree change after ``cutoff``? True as well when that is not known
    (the walk met more than ``limit`` entries or could not be done): a home is removed only when
    every entry of it is known to be old. Links are looked at, never followed."""
    if st.st_mtime > cutoff:
        return True
    try:
        with treewalk.opened_dir(name, parent) as fd:
            for seen, (_, child) in enumerate(treewalk.walk(fd), start=1):
                if child.st_mtime > cutoff or seen > limit:
                    return True
    except OSError:
        return True
    return False


def sweep(root: str | os.PathLike[str] | None = None, *, max_age_s: float = MAX_AGE_S, now: float | None = None,
          max_entries: int = MAX_WALK_ENTRIES) -> list[str]:
    """Remove stale temporary homes under ``root`` (default: the temp dir); the names removed."""
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
    cutoff = (time.time() if now is None else now) - max_age_s
    uid = os.getuid()
    removed: list[str] = []
    try:
        with treewalk.opened_dir(base) as parent:
            for name, st in treewalk.entries(parent, lambda n: not n.startswith(PREFIXES)):
                if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
                    continue  # links, files, other users' folders: never ours to remove
                with _held_lock:
                    if os.path.realpath(base / name) in _held:
                        continue
                if owner_alive(name) or _changed_since(parent, name, st, cutoff, max_entries):
                    continue  # another live server's (or this one's), or used within the day
                try:
                    again = os.stat(name, dir_fd=parent, follow_symlinks=False)
                    if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino):
                        continue  # replaced since it was looked at
                    remove_entry(parent, name, again)
                    removed.append(name)
                except OSError as exc:
                    log.warning("could not remove stale temporary folder %s: %s", name, exc.strerror)
    except OSError as exc:
        log.warning("temporary folder sweep of %s skipped: %s", base, exc.strerror)
    return removed


class TempSweeper:
    """Sweep now and then every ``interval_s`` on a daemon thread, until ``stop``."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *, interval_s: float = INTERVAL_S, max_age_s: float = MAX_AGE_S):
        self.root = root
        self.interval_s = interval_s
        self.max_age_s = max_age_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="besser-temp-sweep", daemon=True)

    def start(self) -> TempSweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while True:
            found = sweep(self.root, max_age_s=self.max_age_s)
            if found:
                log.info("removed %d stale temporary folder(s): %s", len(found), ", ".join(found))
            if self._stop.wait(self.interval_s):
                return

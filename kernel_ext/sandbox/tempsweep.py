"""Temporary homes left behind: swept once a day old, only this user's, never through a link.

Sandboxes get throwaway folders under the temp dir (``besser-home-*`` for a run's shell,
``besser-oneoff-home-*`` for a one-off, ``besser-apphost-*`` for the app host). Their owners
remove them on close, but a server killed with SIGKILL or a crashed kernel leaves them. The
server sweeps at start-up and then periodically (``TempSweeper``): a folder is removed when its
name has one of those prefixes, it is a real directory (not a link) owned by this user, no
owner in this process holds it (``hold``), and neither it nor any entry directly in it changed
in ``max_age_s`` (24 h). Removal walks descriptors and never follows a link
(``workspace.treecopy.remove_entry``), so a link planted inside cannot point the sweep elsewhere.
"""

from __future__ import annotations

import logging
import os
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

_held: set[str] = set()
_held_lock = threading.Lock()


def hold_temp_home(path: str | os.PathLike[str]) -> None:
    """``path`` is in use by this process: never swept, however old."""
    with _held_lock:
        _held.add(os.path.realpath(path))


def release_temp_home(path: str | os.PathLike[str]) -> None:
    with _held_lock:
        _held.discard(os.path.realpath(path))


def _newest_change(parent: int, name: str, st: os.stat_result) -> float:
    """The latest modification time of the folder and of each entry directly in it (no link followed)."""
    newest = st.st_mtime
    try:
        with treewalk.opened_dir(name, parent) as fd:
            for _, child in treewalk.entries(fd):
                newest = max(newest, child.st_mtime)
    except OSError:
        pass
    return newest


def sweep(root: str | os.PathLike[str] | None = None, *, max_age_s: float = MAX_AGE_S, now: float | None = None) -> list[str]:
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
                if _newest_change(parent, name, st) > cutoff:
                    continue
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

"""``files_changed``: what a command did to the tree, from metadata taken before and after it.

The host never runs ``git`` in a tree a sandboxed command controls (a repository's own config
can make ``git status`` execute programs), so changes come from a descriptor walk comparing
each entry's type, mode, size, modification and change times and inode. Bulky tool folders
(``.git``, ``node_modules``, virtualenvs, caches) are not entered; the walk is capped.

Two commands over the same tree would otherwise each see the other's changes, so the whole
before -> run -> after window holds a lock per tree root: windows on one tree take turns.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kernel_ext.workspace import treewalk
from kernel_ext.workspace.internal import INTERNAL_NAMES

SKIP = frozenset(
    INTERNAL_NAMES | {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".tox", ".ipynb_checkpoints"}
)
SCAN_CAP = 20_000
SHOWN = 50

Signature = tuple[int, int, int, int, int]

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


@dataclass
class TreeState:
    entries: dict[str, Signature] = field(default_factory=dict)
    complete: bool = True


def tree_state(root: Path, skip: frozenset[str] = SKIP, cap: int = SCAN_CAP) -> TreeState:
    """Metadata of every entry under ``root`` (directories by type only: their times change with content)."""
    state = TreeState()
    try:
        fd = treewalk.open_dir(root)
    except OSError:
        return TreeState(complete=False)
    try:
        for rel, st in treewalk.walk(fd, skip):
            if len(state.entries) >= cap:
                state.complete = False
                break
            if stat.S_ISDIR(st.st_mode):
                state.entries[rel + "/"] = (stat.S_IFDIR, 0, 0, 0, 0)
            else:
                state.entries[rel] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    finally:
        os.close(fd)
    return state


def diff(before: TreeState, after: TreeState) -> list[str]:
    """``+ path`` (created), ``M path`` (modified), ``- path`` (deleted), sorted by path."""
    changes = []
    for path in sorted(set(before.entries) | set(after.entries)):
        old, new = before.entries.get(path), after.entries.get(path)
        if old is None:
            changes.append(f"+ {path}")
        elif new is None:
            changes.append(f"- {path}")
        elif old != new:
            changes.append(f"M {path}")
    return changes


def changed_paths(changes: list[str]) -> set[str]:
    return {change[2:].rstrip("/") for change in changes}


def _lock_for(root: Path) -> threading.Lock:
    key = os.path.realpath(root)
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


@dataclass
class Window:
    """The changes seen between entering and leaving ``change_window`` (set on exit)."""

    changes: list[str] = field(default_factory=list)
    complete: bool = True

    def shown(self) -> list[str]:
        return self.changes[:SHOWN]


@contextmanager
def change_window(root: Path, skip: frozenset[str] = SKIP) -> Iterator[Window]:
    """Snapshot ``root``, run the body, snapshot again: serialised per root."""
    window = Window()
    with _lock_for(root):
        before = tree_state(root, skip)
        yield window
        after = tree_state(root, skip)
    window.changes = diff(before, after)
    window.complete = before.complete and after.complete

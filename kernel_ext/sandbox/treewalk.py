"""Walking a directory tree through descriptors, never following a link.

``files_changed`` snapshots and checkpoints both walk trees that a sandboxed command (a
background job, say) may be changing at that very moment. Every directory is opened relative
to its parent's descriptor with ``O_NOFOLLOW``, so a directory swapped for a link mid-walk is
skipped, never entered, and nothing outside the tree is ever read or copied into it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
MAX_DEPTH = 64


def open_dir(name: str | os.PathLike[str], parent_fd: int | None = None) -> int:
    """A descriptor of directory ``name`` (relative to ``parent_fd``); a link raises ``OSError``."""
    return os.open(name, DIR_FLAGS, dir_fd=parent_fd)


@contextmanager
def opened_dir(name: str | os.PathLike[str], parent_fd: int | None = None) -> Iterator[int]:
    fd = open_dir(name, parent_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def entries(fd: int, skip: frozenset[str] = frozenset()) -> list[tuple[str, os.stat_result]]:
    """``(name, lstat)`` of the directory's entries, sorted, minus ``skip`` names and vanished ones."""
    with os.scandir(fd) as listing:
        names = sorted(entry.name for entry in listing if entry.name not in skip)
    out = []
    for name in names:
        try:
            out.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except OSError:
            continue
    return out


def walk(fd: int, skip: frozenset[str] = frozenset(), prefix: str = "", depth: int = 0) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below ``fd`` as ``(relative path, lstat)``; directories before their content."""
    if depth >= MAX_DEPTH:
        return
    for name, st in entries(fd, skip):
        rel = f"{prefix}{name}"
        yield rel, st
        if stat.S_ISDIR(st.st_mode):
            try:
                child = open_dir(name, fd)
            except OSError:
                continue  # replaced by a link or removed since the listing
            try:
                yield from walk(child, skip, rel + "/", depth + 1)
            finally:
                os.close(child)

"""Walking a directory tree through descriptors, never following a link, never opening a special file.

Checkpoints, ``files_changed`` snapshots, Phase 3's snapshots and digests, the generation
ledger and the run archive all walk trees that a sandboxed command (a background job, say) may
be changing at that very moment. Every directory is opened relative to its parent's descriptor
with ``O_NOFOLLOW``, so a directory swapped for a link mid-walk is skipped, never entered; every
file is opened with the fence's ``open_regular_at`` (no-follow, non-blocking, checked on the
descriptor), so a link or FIFO swapped in for a file is skipped, never read and never waited on.
What a walk leaves out is counted under a named reason (``Notes``), never raised.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kernel_ext.errors import ToolFailure
from kernel_ext.workspace.fence import DIR_FLAGS, open_regular_at

MAX_DEPTH = 64
CHUNK = 1 << 20

# The named reasons a walk of files leaves an entry out (keys of a ``Notes`` counter).
SKIPPED_LINK = "symbolic links (never followed)"
SKIPPED_SPECIAL = "FIFOs, sockets and devices (never opened)"
SKIPPED_RACED = "replaced by a link or special file, or removed, while walking"

Notes = Counter


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


Skip = frozenset[str] | Callable[[str], bool]


def entries(fd: int, skip: Skip = frozenset()) -> list[tuple[str, os.stat_result]]:
    """``(name, lstat)`` of the directory's entries, sorted, minus skipped names and vanished ones.

    ``skip`` is a set of names or a predicate on a name.
    """
    excluded = skip if callable(skip) else skip.__contains__
    with os.scandir(fd) as listing:
        names = sorted(entry.name for entry in listing if not excluded(entry.name))
    out = []
    for name in names:
        try:
            out.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except OSError:
            continue
    return out


def walk_at(fd: int, skip: Skip = frozenset(), prefix: str = "", depth: int = 0) -> Iterator[tuple[str, int, str, os.stat_result]]:
    """Every entry below ``fd`` as ``(relative path, parent descriptor, name, lstat)``; directories first.

    The parent descriptor is valid only until the generator is advanced.
    """
    if depth >= MAX_DEPTH:
        return
    for name, st in entries(fd, skip):
        rel = f"{prefix}{name}"
        yield rel, fd, name, st
        if stat.S_ISDIR(st.st_mode):
            try:
                child = open_dir(name, fd)
            except OSError:
                continue  # replaced by a link or removed since the listing
            try:
                yield from walk_at(child, skip, rel + "/", depth + 1)
            finally:
                os.close(child)


def walk(fd: int, skip: Skip = frozenset(), prefix: str = "", depth: int = 0) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below ``fd`` as ``(relative path, lstat)``; directories before their content."""
    for rel, _parent, _name, st in walk_at(fd, skip, prefix, depth):
        yield rel, st


def open_entry(parent: int, name: str, st: os.stat_result, notes: Notes) -> tuple[int, os.stat_result] | None:
    """Open a listed file for reading, or count why not (link, special, raced) and return None."""
    if stat.S_ISLNK(st.st_mode):
        notes[SKIPPED_LINK] += 1
        return None
    if not stat.S_ISREG(st.st_mode):
        notes[SKIPPED_SPECIAL] += 1
        return None
    try:
        return open_regular_at(parent, name)
    except ToolFailure:
        notes[SKIPPED_RACED] += 1
        return None


def regular_files(fd: int, skip: Skip = frozenset(), notes: Notes | None = None) -> Iterator[tuple[str, int, os.stat_result]]:
    """Every regular file below ``fd`` as ``(relative path, open descriptor, fstat)``, sorted by walk order.

    The descriptor is closed when the generator is advanced. Links, FIFOs, sockets and devices
    are counted in ``notes`` and left out.
    """
    notes = Notes() if notes is None else notes
    for rel, parent, name, st in walk_at(fd, skip):
        if stat.S_ISDIR(st.st_mode):
            continue
        opened = open_entry(parent, name, st, notes)
        if opened is None:
            continue
        file_fd, fst = opened
        try:
            yield rel, file_fd, fst
        finally:
            os.close(file_fd)


def read_chunks(fd: int, limit: int | None = None) -> Iterator[bytes]:
    """The descriptor's bytes from its current offset, in chunks; at most ``limit`` bytes when given.

    A budgeted reader passes the size it charged, so a file that keeps growing cannot outrun it.
    """
    left = limit
    while left is None or left > 0:
        chunk = os.read(fd, CHUNK if left is None else min(CHUNK, left))
        if not chunk:
            return
        if left is not None:
            left -= len(chunk)
        yield chunk


def sha256_fd(fd: int, limit: int | None = None) -> str:
    digest = hashlib.sha256()
    for chunk in read_chunks(fd, limit):
        digest.update(chunk)
    return digest.hexdigest()


def describe(notes: Notes) -> str:
    """``notes`` in words (empty when nothing was left out), for events and findings."""
    return "; ".join(f"{count} {reason}" for reason, count in sorted(notes.items()) if count)

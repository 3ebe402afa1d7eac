"""A host-owned cache folder, held as the server's alone: nothing in it is opened through a link.

The one implementation behind the app-environment cache (``appenv/cachedir.py``) and Phase 1's
output cache (``generation/outputcache.py``). What such a cache holds decides what the server
hands on, so the folder must be the server user's and writable by no one else: it is made
private (0700) and refused (the caller's ``Refusal``) when it is a link, not a folder, another
user's, or open to group or others in any way (0755 too). Inside it every name is opened relative to the cache's
descriptor with ``O_NOFOLLOW`` and judged on the open descriptor (owner, mode, kind), like the
workspace fence: a lock file planted as a link is never created through, an entry that is a link
or another user's counts as damaged (rebuilt), and a damaged name is renamed aside before it is
removed, so nothing a planted name points to is touched.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kernel_ext.errors import ToolFailure

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
LOCK_ATTEMPTS = 3

Refusal = Callable[[Path, str], ToolFailure]  # (cache folder, why) -> the caller's named refusal


def foreign(st: os.stat_result, *, private: bool = False) -> str | None:
    """Why a file or folder is not the server's alone (None: it is): another owner, or writable by
    others; ``private``: any permission bit for group or others (a cache folder and its entries)."""
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not the server's user ({os.geteuid()})"
    if private and st.st_mode & 0o077:
        return f"is not private (mode {stat.S_IMODE(st.st_mode):o}, group or others have access)"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


@contextmanager
def open_cache(cache: Path, refuse: Refusal, *, create: bool) -> Iterator[int | None]:
    """The cache folder's descriptor, checked (None when it does not exist and ``create`` is off)."""
    if create:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(cache, 0o700)  # an existing name is judged below, never changed
    try:
        fd = os.open(cache, DIR_FLAGS)
    except FileNotFoundError:
        if create:
            raise refuse(cache, "disappeared while it was being made") from None
        yield None
        return
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = "a symbolic link" if os.path.islink(cache) else "not a folder"
            raise refuse(cache, f"is {kind}") from None
        raise refuse(cache, f"cannot be opened ({exc.strerror})") from None
    try:
        reason = foreign(os.fstat(fd), private=True)
        if reason:
            raise refuse(cache, reason)
        yield fd
    finally:
        os.close(fd)


def open_dir_at(dir_fd: int, name: str, *, private: bool = False) -> int | None:
    """Folder ``name`` under ``dir_fd``, no-follow and the server's alone; None otherwise (missing,
    a link, not a folder, another user's, writable by others; ``private``: open to them at all).
    The caller closes it."""
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    if foreign(os.fstat(fd), private=private):
        os.close(fd)
        return None
    return fd


def read_file_at(dir_fd: int, name: str, limit: int) -> bytes | None:
    """Regular file ``name`` under ``dir_fd``, read no-follow and non-blocking, when it is the
    server's alone and at most ``limit`` bytes; None otherwise."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or foreign(st) or st.st_size > limit:
            return None
        data = os.read(fd, limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


@contextmanager
def locked(cache_fd: int, name: str, refuse: Refusal, cache: Path) -> Iterator[None]:
    """An exclusive lock on file ``name`` in the cache. A name that is not the server's own regular
    file (a link, a FIFO, a folder, another user's file) is discarded and made again: its target is
    never opened, created or changed."""
    for _attempt in range(LOCK_ATTEMPTS):
        try:
            fd = os.open(name, LOCK_FLAGS, 0o600, dir_fd=cache_fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EACCES, errno.ENOTDIR):
                raise
            discard(cache_fd, name)
            continue
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and not foreign(st):
            break
        os.close(fd)
        discard(cache_fd, name)
    else:
        raise refuse(cache, f"has a lock {name!r} that keeps being replaced by something that is not the server's own file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def discard(cache_fd: int, name: str) -> None:
    """Remove ``name`` from the cache without following it: renamed aside first (so a name planted
    again meanwhile is not what is removed), then unlinked, or removed as a tree when a real folder."""
    aside = f".discard-{secrets.token_hex(8)}"
    try:
        os.rename(name, aside, src_dir_fd=cache_fd, dst_dir_fd=cache_fd)
    except FileNotFoundError:
        return
    st = os.stat(aside, dir_fd=cache_fd, follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(aside, dir_fd=cache_fd, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(aside, dir_fd=cache_fd)

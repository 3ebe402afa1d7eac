"""Atomic publish: write a same-directory temporary file, fsync it, rename it over the target.

The rename happens only if the target's identity is still the one the caller checked; any
other state is ``stale_input`` and the temporary file is removed. A reader therefore sees the
old bytes or the new bytes, never half a file, and a crash between the temporary write and
the rename leaves the old file untouched (plus a hidden ``.*.besser-tmp-*`` file that listing
skips).

Where atomic publish is not possible we refuse instead of degrading: a target with more than
one hard link would either be split by the rename (the other names keep the old bytes) or,
written in place, change a file whose other names may lie outside the fence. So hard-linked
targets are refused with ``hard_link_refused``; the person can copy the file to break the link.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace.fence import Identity, Location, Workspace

TEMP_MARKER = ".besser-tmp-"
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _Missing:
    """Sentinel: the caller did not check the target, so any current state is accepted."""


ANY_VERSION = _Missing()


@dataclass(frozen=True)
class Published:
    path: str
    identity: Identity
    created: bool


def publish(
    workspace: Workspace,
    path: str | Location,
    data: bytes,
    *,
    expected: Identity | None | _Missing = ANY_VERSION,
) -> Published:
    """Atomically replace (or create) ``path`` with ``data``.

    ``expected`` is the identity the caller checked: ``None`` means "must not exist yet",
    an ``Identity`` means "must still be exactly that file".
    """
    loc = path if isinstance(path, Location) else workspace.locate(path)
    workspace.check_writable(loc)
    with workspace.parent_dir(loc, create=True) as parent:
        current = _current(parent, loc)
        _check_expected(loc, current, expected)
        mode = stat.S_IMODE(current.st_mode) if current is not None else 0o644
        tmp_name = f".{loc.name[:80]}{TEMP_MARKER}{secrets.token_hex(6)}"
        fd = os.open(tmp_name, _WRITE_FLAGS, mode, dir_fd=parent)
        renamed = False
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
            new_identity = Identity.of(os.fstat(fd))
            # Narrow the window: the target must still be what was checked right before rename.
            latest = _current(parent, loc)
            if _identity_or_none(latest) != _identity_or_none(current):
                raise ToolFailure(ErrorCode.STALE_INPUT, f"{loc.display!r} changed while it was being written")
            os.rename(tmp_name, loc.name, src_dir_fd=parent, dst_dir_fd=parent)
            renamed = True
            os.fsync(parent)
        finally:
            os.close(fd)
            if not renamed:
                _unlink_quietly(tmp_name, parent)
    return Published(loc.display, new_identity, created=current is None)


def remove(workspace: Workspace, path: str | Location, *, expected: Identity | _Missing = ANY_VERSION) -> None:
    """Delete a regular file (never a link target, never a directory) if still as checked."""
    loc = path if isinstance(path, Location) else workspace.locate(path)
    workspace.check_writable(loc)
    with workspace.parent_dir(loc) as parent:
        current = _current(parent, loc)
        if current is None:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"{loc.display!r} does not exist")
        _check_expected(loc, current, expected)
        os.unlink(loc.name, dir_fd=parent)
        os.fsync(parent)


def _current(parent: int, loc: Location) -> os.stat_result | None:
    try:
        st = os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise ToolFailure(ErrorCode.SYMLINK_REFUSED, f"{loc.display!r} is a symbolic link; links are never written through")
    if not stat.S_ISREG(st.st_mode):
        raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, f"{loc.display!r} is not a regular file")
    if st.st_nlink > 1:
        raise ToolFailure(
            "hard_link_refused",
            f"{loc.display!r} has {st.st_nlink} hard links; writing it would change or split the other names",
        )
    return st


def _check_expected(loc: Location, current: os.stat_result | None, expected: Identity | None | _Missing) -> None:
    if isinstance(expected, _Missing):
        return
    if expected is None:
        if current is not None:
            raise ToolFailure(ErrorCode.ALREADY_EXISTS, f"{loc.display!r} appeared since it was checked")
        return
    if current is None:
        raise ToolFailure(ErrorCode.STALE_INPUT, f"{loc.display!r} was deleted since it was read")
    if Identity.of(current) != expected:
        raise ToolFailure(ErrorCode.STALE_INPUT, f"{loc.display!r} changed since it was read; read it again")


def _identity_or_none(st: os.stat_result | None) -> Identity | None:
    return Identity.of(st) if st is not None else None


def _unlink_quietly(name: str, parent: int) -> None:
    try:
        os.unlink(name, dir_fd=parent)
    except OSError:
        pass

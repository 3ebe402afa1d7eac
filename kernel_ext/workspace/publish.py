"""Atomic publish: write a same-directory temporary file, fsync it, rename it over the target.

The rename happens only if the target's identity is still the one the caller checked; any
other state is ``stale_input`` and the temporary file is removed. A reader therefore sees the
old bytes or the new bytes, never half a file, and a crash between the temporary write and
the rename leaves the old file untouched (plus a hidden ``.*.besser-tmp-*`` file that listing
skips). A create-only publish (``expected=None``) links the temporary file into place, so a
file that appears at the last moment is never clobbered (``already_exists``). The target's
permission bits are copied exactly (``fchmod``: the process umask does not narrow them).

Where atomic publish is not possible we refuse instead of degrading: a target with more than
one hard link would either be split by the rename (the other names keep the old bytes) or,
written in place, change a file whose other names may lie outside the fence. So hard-linked
targets are refused with ``hard_link_refused``; the person can copy the file to break the link.
Deleting one name of a hard-linked file changes no other name, so ``remove`` allows it.

Residual window, documented rather than hidden: between the last identity check and the
rename (microseconds) another process could still replace the target; the per-file lock
(``locks``) closes it for writers in this process, identity checks narrow it for others.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import ExitStack
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import treewalk
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


def is_temp_name(name: str) -> bool:
    """True for the hidden temporary files ``publish`` and ``remove`` use."""
    return name.startswith(".") and TEMP_MARKER in name


def sweep_temporaries(root: str | os.PathLike[str]) -> list[str]:
    """Remove temporaries a killed process left under ``root`` (through descriptors, links never followed); their paths.

    Only safe when no publish is in flight there: the server calls it for runs it recovers.
    """
    removed: list[str] = []
    try:
        fd = treewalk.open_dir(root)
    except OSError:
        return removed
    try:
        for rel, parent, name, st in treewalk.walk_at(fd):
            if is_temp_name(name) and stat.S_ISREG(st.st_mode):
                os.unlink(name, dir_fd=parent)
                removed.append(rel)
    finally:
        os.close(fd)
    return removed


def publish(
    workspace: Workspace,
    path: str | Location,
    data: bytes,
    *,
    expected: Identity | _Missing | None = ANY_VERSION,
) -> Published:
    """Atomically replace (or create) ``path`` with ``data``.

    ``expected`` is the identity the caller checked: ``None`` means "must not exist yet",
    an ``Identity`` means "must still be exactly that file".
    """
    loc = path if isinstance(path, Location) else workspace.locate(path)
    workspace.check_writable(loc)
    with ExitStack() as held:
        parent = _open_parent(held, workspace, loc, expected)
        current = _current(parent, loc)
        _check_expected(loc, current, expected)
        # A new file gets 0644 less the umask; a replaced one keeps its exact bits (fchmod).
        mode = stat.S_IMODE(current.st_mode) if current is not None else None
        tmp_name = _temp_name(loc)
        fd = _os_call(loc, lambda: os.open(tmp_name, _WRITE_FLAGS, 0o600 if mode is not None else 0o644, dir_fd=parent))
        placed = False
        try:
            _os_call(loc, lambda: _write_all(fd, data, mode))
            new_identity = Identity.of(os.fstat(fd))
            # Narrow the window: the target must still be what was checked right before rename.
            latest = _current(parent, loc)
            if _identity_or_none(latest) != _identity_or_none(current):
                raise ToolFailure(ErrorCode.STALE_INPUT, f"{loc.display!r} changed while it was being written")
            if current is None:
                _link_new(parent, tmp_name, loc)
            else:
                _os_call(loc, lambda: os.rename(tmp_name, loc.name, src_dir_fd=parent, dst_dir_fd=parent))
                placed = True
            os.fsync(parent)
        finally:
            os.close(fd)
            if not placed:
                _unlink_quietly(tmp_name, parent)
    return Published(loc.display, new_identity, created=current is None)


def remove(workspace: Workspace, path: str | Location, *, expected: Identity | _Missing = ANY_VERSION) -> None:
    """Delete a regular file (never a link target, never a directory) if still as checked.

    The name is first renamed aside, then the moved entry is checked: whatever sat there at
    the moment of the rename is what gets examined, so a file swapped in after the check is
    put back instead of deleted.
    """
    loc = path if isinstance(path, Location) else workspace.locate(path)
    workspace.check_writable(loc)
    with workspace.parent_dir(loc) as parent:
        current = _current(parent, loc, allow_hard_links=True)
        if current is None:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"{loc.display!r} does not exist")
        _check_expected(loc, current, expected)
        aside = _temp_name(loc)
        _os_call(loc, lambda: os.rename(loc.name, aside, src_dir_fd=parent, dst_dir_fd=parent))
        moved = os.stat(aside, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISREG(moved.st_mode) or Identity.of(moved) != Identity.of(current):
            _put_back(parent, aside, loc)
            raise ToolFailure(ErrorCode.STALE_INPUT, f"{loc.display!r} was replaced while it was being deleted; nothing deleted")
        os.unlink(aside, dir_fd=parent)
        os.fsync(parent)


def _temp_name(loc: Location) -> str:
    return f".{loc.name[:80]}{TEMP_MARKER}{secrets.token_hex(6)}"


def _write_all(fd: int, data: bytes, mode: int | None) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    if mode is not None:
        os.fchmod(fd, mode)
    os.fsync(fd)


def _link_new(parent: int, tmp_name: str, loc: Location) -> None:
    """Create-only placement: ``link`` fails if the name exists, so nothing is clobbered."""
    try:
        os.link(tmp_name, loc.name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
    except FileExistsError:
        raise ToolFailure(ErrorCode.ALREADY_EXISTS, f"{loc.display!r} appeared while it was being written") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise _os_failure(loc, exc) from None
        # A filesystem without hard links: re-check and rename (a narrower guarantee).
        if _current(parent, loc) is not None:
            raise ToolFailure(ErrorCode.ALREADY_EXISTS, f"{loc.display!r} appeared while it was being written") from None
        _os_call(loc, lambda: os.rename(tmp_name, loc.name, src_dir_fd=parent, dst_dir_fd=parent))


def _put_back(parent: int, aside: str, loc: Location) -> None:
    try:
        os.link(aside, loc.name, src_dir_fd=parent, dst_dir_fd=parent, follow_symlinks=False)
    except OSError:
        raise ToolFailure(
            ErrorCode.STALE_INPUT,
            f"{loc.display!r} was replaced while it was being deleted; the entry found is kept as {aside!r}",
        ) from None
    os.unlink(aside, dir_fd=parent)


def _current(parent: int, loc: Location, *, allow_hard_links: bool = False) -> os.stat_result | None:
    try:
        st = os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise ToolFailure(ErrorCode.SYMLINK_REFUSED, f"{loc.display!r} is a symbolic link; links are never written through")
    if not stat.S_ISREG(st.st_mode):
        raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, f"{loc.display!r} is not a regular file")
    if st.st_nlink > 1 and not allow_hard_links:
        raise ToolFailure(
            ErrorCode.HARD_LINK_REFUSED,
            f"{loc.display!r} has {st.st_nlink} hard links; writing it would change or split the other names",
        )
    return st


def _open_parent(held: ExitStack, workspace: Workspace, loc: Location, expected: Identity | _Missing | None) -> int:
    """The parent folder's descriptor; only a write that may create the file may create folders.

    A write that must replace a checked file finds a missing folder stale, and so leaves no
    empty folder behind its refusal (a folder renamed away mid-edit is not made again).
    """
    if not isinstance(expected, Identity):
        return held.enter_context(workspace.parent_dir(loc, create=True))
    try:
        return held.enter_context(workspace.parent_dir(loc))
    except ToolFailure as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            _check_expected(loc, None, expected)  # gone with its folder: stale, as a missing file is
        raise


def _check_expected(loc: Location, current: os.stat_result | None, expected: Identity | _Missing | None) -> None:
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


def _os_call(loc: Location, fn):
    """Run one system call; a disk-level error (full, read-only, denied) becomes a named refusal."""
    try:
        return fn()
    except OSError as exc:
        raise _os_failure(loc, exc) from None


def _os_failure(loc: Location, exc: OSError) -> ToolFailure:
    return ToolFailure(ErrorCode.EXECUTION_FAILED, f"writing {loc.display!r} failed: {exc.strerror or exc}")


def _unlink_quietly(name: str, parent: int) -> None:
    try:
        os.unlink(name, dir_fd=parent)
    except OSError:
        pass

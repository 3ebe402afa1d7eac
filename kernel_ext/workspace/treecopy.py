"""Copying and syncing directory trees between descriptors, never through a link.

The one implementation behind checkpoints (``sandbox/shtools/checkpoints.py``) and Phase 3's snapshots
(``pipeline/snapshots.py``). Both sides are directory descriptors the caller opened through the
fence; every entry below them is listed with ``lstat`` and opened relative to its parent's
descriptor (``treewalk``), files with ``open_regular_at`` (no-follow, non-blocking). Links are
copied as links (their text; never followed); FIFOs, sockets and devices are counted, never
opened. Files are cloned copy-on-write where the filesystem offers it (``FICLONE``) and copied
with ``copy_file_range`` otherwise, holes kept as holes and never past the size they were
charged at. A copy into host state runs under a ``treebudget.TreeBudget`` (apparent bytes and
entries; ``TREE_TOO_LARGE`` past it), and copies a hard-linked file once, linking its other names.
``sync_tree`` can also only count what it would do (``apply=False``), which is what a restore's approval card shows.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from kernel_ext.errors import ToolFailure
from kernel_ext.workspace import treewalk
from kernel_ext.workspace.fence import open_regular_at
from kernel_ext.workspace.treebudget import TreeBudget

_FICLONE = 0x40049409
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class CopyStats:
    files: int = 0
    dirs: int = 0
    links: int = 0
    bytes: int = 0
    specials: int = 0
    reflinked: int = 0
    hardlinked: int = 0
    written: int = 0
    removed: int = 0
    unchanged: int = 0

    @property
    def method(self) -> str:
        copied = self.files - self.hardlinked
        if not copied:
            return "copy"
        return "reflink" if self.reflinked == copied else "copy" if not self.reflinked else "reflink+copy"


def clone_file(src: int, dst: int, size: int | None = None) -> bool:
    """Copy the first ``size`` bytes of ``src`` (default: all) into the empty ``dst``; True for a clone.

    Never more than ``size``: a file a background job keeps growing cannot outrun what was
    charged for it. Holes stay holes (``SEEK_DATA``/``SEEK_HOLE``), so a sparse file costs the
    host what it occupies, not what it claims.
    """
    size = os.fstat(src).st_size if size is None else size
    try:
        fcntl.ioctl(dst, _FICLONE, src)
        if os.fstat(dst).st_size > size:
            os.ftruncate(dst, size)
        return True
    except OSError:
        pass
    for start, end in _data_spans(src, size):
        _copy_span(src, dst, start, end)
    os.ftruncate(dst, size)
    return False


def _data_spans(fd: int, size: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` ranges below ``size`` that hold data (all of it where holes are not reported)."""
    spans: list[tuple[int, int]] = []
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
            end = os.lseek(fd, start, os.SEEK_HOLE)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole from here on
                break
            return [*spans, (offset, size)]  # holes not reported here: copy the rest whole
        if start >= size:
            break
        spans.append((start, min(end, size)))
        offset = end
    return spans


def _copy_span(src: int, dst: int, start: int, end: int) -> None:
    offset = start
    try:
        while offset < end:
            done = os.copy_file_range(src, dst, end - offset, offset, offset)
            if not done:
                return  # the file shrank since it was charged
            offset += done
        return
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
            raise
    while offset < end:
        chunk = os.pread(src, min(treewalk.CHUNK, end - offset), offset)
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            written = os.pwrite(dst, view, offset)
            view, offset = view[written:], offset + written


def copy_tree(src: int, dst: int, skip: frozenset[str], stats: CopyStats, depth: int = 0, *,
              budget: TreeBudget | None = None, root: int | None = None, prefix: str = "") -> None:
    """Copy the directory ``src`` into the empty directory ``dst`` (modes and times kept).

    Under ``budget`` every entry is charged before it is written (``TREE_TOO_LARGE`` past it; the
    caller removes the partial copy), and a hard-linked file is copied once: its later names
    become hard links to the first copy.
    """
    if depth >= treewalk.MAX_DEPTH:
        return
    root = dst if root is None else root
    for name, st in treewalk.entries(src, skip):
        if stat.S_ISDIR(st.st_mode):
            try:
                child = treewalk.open_dir(name, src)
            except OSError:
                continue
            try:
                if budget is not None:
                    budget.charge(st)
                os.mkdir(name, 0o700, dir_fd=dst)
                with treewalk.opened_dir(name, dst) as out:
                    copy_tree(child, out, skip, stats, depth + 1, budget=budget, root=root, prefix=f"{prefix}{name}/")
                    os.fchmod(out, stat.S_IMODE(st.st_mode))
                    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
                stats.dirs += 1
            finally:
                os.close(child)
        elif stat.S_ISREG(st.st_mode):
            _copy_file(src, name, dst, name, stats, budget, (root, f"{prefix}{name}"))
        elif stat.S_ISLNK(st.st_mode):
            if budget is not None:
                budget.charge(st)
            os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
            stats.links += 1
        else:
            stats.specials += 1  # FIFOs, sockets, devices: never opened, not copied


def _copy_file(src_dir: int, name: str, dst_dir: int, dst_name: str, stats: CopyStats,
               budget: TreeBudget | None = None, place: tuple[int, str] | None = None) -> bool:
    """Copy one regular file by descriptor; False (and counted) when it is no longer one.

    ``place`` is (destination root, path below it): with a budget, a second name of an inode
    already copied there becomes a hard link to that copy instead of a second copy.
    """
    try:
        fd, st = open_regular_at(src_dir, name)
    except ToolFailure:
        stats.specials += 1  # replaced by a link or special file, or removed, since the listing
        return False
    try:
        if budget is not None:
            budget.charge(st)
            first = budget.first_name(st)
            if place is not None and first is not None and _link_copy(place[0], first, dst_dir, dst_name):
                stats.files += 1
                stats.hardlinked += 1
                stats.bytes += st.st_size
                return True
        out = os.open(dst_name, _NEW_FILE, 0o600, dir_fd=dst_dir)
        try:
            stats.reflinked += clone_file(fd, out, st.st_size)
            os.fchmod(out, stat.S_IMODE(st.st_mode))
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
        if budget is not None and place is not None:
            budget.remember(st, place[1])
        stats.files += 1
        stats.bytes += st.st_size
        return True
    finally:
        os.close(fd)


def _link_copy(root: int, first: str, dst_dir: int, dst_name: str) -> bool:
    """Hard-link the copy at ``first`` (below ``root``, reached no-follow) as ``dst_name``; False if it cannot."""
    *folders, base = first.split("/")
    fds: list[int] = []
    try:
        parent = root
        for folder in folders:
            parent = treewalk.open_dir(folder, parent)
            fds.append(parent)
        os.link(base, dst_name, src_dir_fd=parent, dst_dir_fd=dst_dir, follow_symlinks=False)
        return True
    except OSError:
        return False  # e.g. too many links on this filesystem: copy it instead (already charged)
    finally:
        for fd in fds:
            os.close(fd)


def sync_tree(src: int, dst: int | None, skip: frozenset[str], stats: CopyStats, depth: int = 0, *, apply: bool = True) -> None:
    """Make directory ``dst`` hold exactly what ``src`` holds (``skip`` names in ``dst`` untouched).

    With ``apply=False`` nothing changes: ``stats`` only counts what would be written, removed
    and left alone (``dst`` may then be None: a folder that does not exist yet).
    """
    if depth >= treewalk.MAX_DEPTH:
        return
    want = dict(treewalk.entries(src, skip))
    have = dict(treewalk.entries(dst, skip)) if dst is not None else {}
    out = dst if apply else None  # the folder changes are made in; None: only count
    if apply:
        assert out is not None
    if out is not None:
        os.fchmod(out, stat.S_IMODE(os.fstat(out).st_mode) | stat.S_IRWXU)
    for name, st in list(have.items()):
        if name not in want or stat.S_IFMT(st.st_mode) != stat.S_IFMT(want[name].st_mode):
            if out is not None:
                remove_entry(out, name, st)
            del have[name]
            stats.removed += 1
    if out is not None:
        have = dict(treewalk.entries(out, skip))
    for name, st in want.items():
        current = have.get(name)
        if stat.S_ISDIR(st.st_mode):
            _sync_dir(src, dst, name, st, current, skip, stats, depth, apply)
        elif stat.S_ISREG(st.st_mode):
            if current is not None and current.st_size == st.st_size and _same_bytes(src, dst, name):
                stats.unchanged += 1
                if out is not None and stat.S_IMODE(current.st_mode) != stat.S_IMODE(st.st_mode):
                    _fix_mode(out, name, st)
                continue
            stats.written += 1
            if out is not None:
                temp = f".besser-restore-{secrets.token_hex(6)}"
                if _copy_file(src, name, out, temp, CopyStats()):
                    os.replace(temp, name, src_dir_fd=out, dst_dir_fd=out)
        elif stat.S_ISLNK(st.st_mode):
            target = os.readlink(name, dir_fd=src)
            if current is not None and os.readlink(name, dir_fd=dst) == target:
                stats.unchanged += 1
                continue
            stats.written += 1
            if out is not None:
                temp = f".besser-restore-{secrets.token_hex(6)}"
                os.symlink(target, temp, dir_fd=out)
                os.replace(temp, name, src_dir_fd=out, dst_dir_fd=out)


def _sync_dir(src: int, dst: int | None, name: str, st: os.stat_result, current: os.stat_result | None,
              skip: frozenset[str], stats: CopyStats, depth: int, apply: bool) -> None:
    with treewalk.opened_dir(name, src) as child:
        if not apply:
            if current is None or dst is None:
                sync_tree(child, None, skip, stats, depth + 1, apply=False)
            else:
                with treewalk.opened_dir(name, dst) as out:
                    sync_tree(child, out, skip, stats, depth + 1, apply=False)
            return
        assert dst is not None
        if current is None:
            os.mkdir(name, 0o700, dir_fd=dst)
        with treewalk.opened_dir(name, dst) as out:
            sync_tree(child, out, skip, stats, depth + 1)
            os.fchmod(out, stat.S_IMODE(st.st_mode))
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))


def _same_bytes(src_dir: int, dst_dir: int | None, name: str) -> bool:
    if dst_dir is None:
        return False
    try:
        a, _ = open_regular_at(src_dir, name)
    except ToolFailure:
        return False
    try:
        b, _ = open_regular_at(dst_dir, name)
    except ToolFailure:
        os.close(a)
        return False
    try:
        while True:
            x, y = os.read(a, treewalk.CHUNK), os.read(b, treewalk.CHUNK)
            if x != y:
                return False
            if not x:
                return True
    finally:
        os.close(a)
        os.close(b)


def _fix_mode(dst_dir: int, name: str, st: os.stat_result) -> None:
    fd, _ = open_regular_at(dst_dir, name)
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
    finally:
        os.close(fd)


def remove_entry(parent: int, name: str, st: os.stat_result) -> None:
    """Remove ``name`` under ``parent``: a directory with everything in it, never through a link."""
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    with treewalk.opened_dir(name, parent) as fd:
        os.fchmod(fd, stat.S_IRWXU)
        for child, child_st in treewalk.entries(fd):
            remove_entry(fd, child, child_st)
    os.rmdir(name, dir_fd=parent)


def remove_path(path: Path) -> None:
    """Remove ``path`` (host-owned state, e.g. a checkpoint or snapshot folder) if it is there."""
    try:
        with treewalk.opened_dir(path.parent) as parent:
            remove_entry(parent, path.name, os.stat(path.name, dir_fd=parent, follow_symlinks=False))
    except OSError:
        pass

"""Checkpoints: a labelled copy of a directory, published atomically, restored exactly.

A checkpoint lives in the host's state folder, never in the tree it copies, under a namespace
per project (a hash of the project's real path), so one label in two projects never collides.
Files are cloned copy-on-write where the filesystem offers it (``FICLONE``) and copied with
``copy_file_range`` otherwise. The copy is built under a private name and published by
atomically replacing the label's link, so a reader sees the old checkpoint or the new one,
never half of one. Restoring makes the origin equal to the checkpoint again (added entries
removed, changed ones rewritten through a temporary name and ``rename``, unchanged ones left
alone) and refuses any target that is not the checkpoint's origin. Both walks go through
descriptors without following links (``treewalk``). Phase 3 can reuse ``CheckpointStore``
for its snapshots (with its own ``skip`` set).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox import treewalk

LABEL_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_SKIP = frozenset({".besser", ".besser_command_output"})
_FICLONE = 0x40049409
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


def project_key(project: str | os.PathLike[str]) -> str:
    return hashlib.sha256(os.path.realpath(project).encode()).hexdigest()[:16]


def check_label(label: str) -> str:
    if not isinstance(label, str) or not LABEL_PATTERN.match(label) or label in (".", ".."):
        raise ToolFailure(
            ErrorCode.INVALID_LABEL,
            f"checkpoint label {label!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-' (no '/'), starting with a letter or digit",
        )
    return label


@dataclass
class CopyStats:
    files: int = 0
    dirs: int = 0
    links: int = 0
    bytes: int = 0
    specials: int = 0
    reflinked: int = 0
    written: int = 0
    removed: int = 0
    unchanged: int = 0

    @property
    def method(self) -> str:
        if not self.files:
            return "copy"
        return "reflink" if self.reflinked == self.files else "copy" if not self.reflinked else "reflink+copy"


class CheckpointStore:
    """The checkpoints of one project, under ``state_dir/checkpoints/<project hash>/``."""

    def __init__(self, state_dir: str | os.PathLike[str], project: str | os.PathLike[str]):
        self.project = Path(os.path.realpath(project))
        self.root = Path(state_dir) / "checkpoints" / project_key(self.project)

    def create(self, label: str, origin: str | os.PathLike[str] | None = None, skip: frozenset[str] = DEFAULT_SKIP) -> dict[str, Any]:
        label = check_label(label)
        source = Path(os.path.realpath(origin if origin is not None else self.project))
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        generation = f".gen-{label}-{secrets.token_hex(4)}"
        (self.root / generation / "tree").mkdir(parents=True, mode=0o700)
        stats = CopyStats()
        try:
            with treewalk.opened_dir(source) as src, treewalk.opened_dir(self.root / generation / "tree") as dst:
                copy_tree(src, dst, skip, stats)
                os.fchmod(dst, stat.S_IMODE(os.fstat(src).st_mode))
            meta = {
                "label": label, "origin": str(source), "project": str(self.project), "created_at": time.time(),
                "files": stats.files, "dirs": stats.dirs, "links": stats.links, "bytes": stats.bytes,
                "method": stats.method, "skipped": sorted(skip), "specials_skipped": stats.specials,
            }
            (self.root / generation / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            link = self.root / f".link-{secrets.token_hex(4)}"
            os.symlink(generation, link)
            previous = self._generation(label)
            os.replace(link, self.root / label)
        except FileNotFoundError:
            _remove_path(self.root / generation)
            raise ToolFailure(ErrorCode.NOT_FOUND, f"{str(source)!r} is not a directory") from None
        except NotADirectoryError:
            _remove_path(self.root / generation)
            raise ToolFailure(ErrorCode.NOT_FOUND, f"{str(source)!r} is not a directory") from None
        except OSError as exc:
            _remove_path(self.root / generation)
            if exc.errno == errno.ELOOP:
                raise ToolFailure(ErrorCode.SYMLINK_REFUSED, f"{str(source)!r} is a link; checkpoints never follow links") from None
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"could not write the checkpoint: {exc.strerror}") from None
        if previous is not None:
            _remove_path(self.root / previous)
        return meta

    def get(self, label: str) -> dict[str, Any]:
        label = check_label(label)
        generation = self._generation(label)
        if generation is None:
            known = ", ".join(m["label"] for m in self.list()) or "none"
            raise ToolFailure(ErrorCode.UNKNOWN_CHECKPOINT, f"no checkpoint {label!r} in this project (known: {known})")
        return json.loads((self.root / generation / "meta.json").read_text(encoding="utf-8"))

    def target_for(self, label: str, target: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], Path]:
        """The checkpoint's metadata and where it may be restored (its origin, nowhere else)."""
        meta = self.get(label)
        origin = Path(meta["origin"])
        where = Path(os.path.realpath(target)) if target is not None else origin
        if where != origin:
            raise ToolFailure(
                ErrorCode.CHECKPOINT_ORIGIN_MISMATCH,
                f"checkpoint {label!r} was taken of {str(origin)!r}; it can only be restored there, not into {str(where)!r}",
            )
        return meta, where

    def restore(self, label: str, target: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        meta, where = self.target_for(label, target)
        generation = self._generation(label)
        assert generation is not None
        where.mkdir(parents=True, exist_ok=True)
        stats = CopyStats()
        try:
            with treewalk.opened_dir(self.root / generation / "tree") as src, treewalk.opened_dir(where) as dst:
                sync_tree(src, dst, frozenset(meta.get("skipped", DEFAULT_SKIP)), stats)
                os.fchmod(dst, stat.S_IMODE(os.fstat(src).st_mode))
        except OSError as exc:
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"restore stopped part-way: {exc.strerror} ({exc.filename or 'a file'})") from None
        return {"label": label, "dir": str(where), "written": stats.written, "removed": stats.removed,
                "unchanged": stats.unchanged, "files": meta["files"]}

    def list(self) -> list[dict[str, Any]]:
        if not self.root.is_dir():
            return []
        found = []
        for entry in os.scandir(self.root):
            if entry.is_symlink() and LABEL_PATTERN.match(entry.name):
                try:
                    meta = json.loads((self.root / os.readlink(entry.path) / "meta.json").read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                found.append({k: meta[k] for k in ("label", "origin", "created_at", "files", "bytes", "method")})
        return sorted(found, key=lambda m: m["created_at"])

    def _generation(self, label: str) -> str | None:
        try:
            return os.readlink(self.root / label)
        except OSError:
            return None


# -- copying ------------------------------------------------------------------------------------


def clone_file(src: int, dst: int) -> bool:
    """Copy ``src`` into the empty ``dst``; True when it was a copy-on-write clone."""
    try:
        fcntl.ioctl(dst, _FICLONE, src)
        return True
    except OSError:
        pass
    try:
        while os.copy_file_range(src, dst, 1 << 30):
            pass
        return False
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
            raise
    os.lseek(src, 0, os.SEEK_SET)
    os.lseek(dst, 0, os.SEEK_SET)
    os.ftruncate(dst, 0)
    while chunk := os.read(src, _CHUNK):
        view = memoryview(chunk)
        while view:
            view = view[os.write(dst, view) :]
    return False


def copy_tree(src: int, dst: int, skip: frozenset[str], stats: CopyStats, depth: int = 0) -> None:
    """Copy the directory ``src`` into the empty directory ``dst`` (modes and times kept)."""
    if depth >= treewalk.MAX_DEPTH:
        return
    for name, st in treewalk.entries(src, skip):
        if stat.S_ISDIR(st.st_mode):
            try:
                child = treewalk.open_dir(name, src)
            except OSError:
                continue
            try:
                os.mkdir(name, 0o700, dir_fd=dst)
                with treewalk.opened_dir(name, dst) as out:
                    copy_tree(child, out, skip, stats, depth + 1)
                    os.fchmod(out, stat.S_IMODE(st.st_mode))
                    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
                stats.dirs += 1
            finally:
                os.close(child)
        elif stat.S_ISREG(st.st_mode):
            _copy_file(src, name, dst, name, st, stats)
        elif stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
            stats.links += 1
        else:
            stats.specials += 1  # FIFOs, sockets, devices: not copied


def _copy_file(src_dir: int, name: str, dst_dir: int, dst_name: str, st: os.stat_result, stats: CopyStats) -> None:
    try:
        fd = os.open(name, treewalk.FILE_FLAGS, dir_fd=src_dir)
    except OSError:
        return  # replaced by a link or removed meanwhile
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return
        out = os.open(dst_name, _NEW_FILE, 0o600, dir_fd=dst_dir)
        try:
            stats.reflinked += clone_file(fd, out)
            os.fchmod(out, stat.S_IMODE(st.st_mode))
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        finally:
            os.close(out)
        stats.files += 1
        stats.bytes += st.st_size
    finally:
        os.close(fd)


def sync_tree(src: int, dst: int, skip: frozenset[str], stats: CopyStats, depth: int = 0) -> None:
    """Make directory ``dst`` hold exactly what ``src`` holds (``skip`` names in ``dst`` untouched)."""
    if depth >= treewalk.MAX_DEPTH:
        return
    want = dict(treewalk.entries(src, skip))
    have = dict(treewalk.entries(dst, skip))
    os.fchmod(dst, stat.S_IMODE(os.fstat(dst).st_mode) | stat.S_IRWXU)
    for name, st in have.items():
        if name not in want or stat.S_IFMT(st.st_mode) != stat.S_IFMT(want[name].st_mode):
            _remove_entry(dst, name, st)
            stats.removed += 1
    have = dict(treewalk.entries(dst, skip))
    for name, st in want.items():
        current = have.get(name)
        if stat.S_ISDIR(st.st_mode):
            if current is None:
                os.mkdir(name, 0o700, dir_fd=dst)
            with treewalk.opened_dir(name, src) as child, treewalk.opened_dir(name, dst) as out:
                sync_tree(child, out, skip, stats, depth + 1)
                os.fchmod(out, stat.S_IMODE(st.st_mode))
                os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
        elif stat.S_ISREG(st.st_mode):
            if current is not None and current.st_size == st.st_size and _same_bytes(src, dst, name):
                stats.unchanged += 1
                if stat.S_IMODE(current.st_mode) != stat.S_IMODE(st.st_mode):
                    _fix_mode(dst, name, st)
                continue
            temp = f".besser-restore-{secrets.token_hex(6)}"
            _copy_file(src, name, dst, temp, st, CopyStats())
            os.replace(temp, name, src_dir_fd=dst, dst_dir_fd=dst)
            stats.written += 1
        elif stat.S_ISLNK(st.st_mode):
            target = os.readlink(name, dir_fd=src)
            if current is not None and os.readlink(name, dir_fd=dst) == target:
                stats.unchanged += 1
                continue
            temp = f".besser-restore-{secrets.token_hex(6)}"
            os.symlink(target, temp, dir_fd=dst)
            os.replace(temp, name, src_dir_fd=dst, dst_dir_fd=dst)
            stats.written += 1


def _same_bytes(src_dir: int, dst_dir: int, name: str) -> bool:
    try:
        a = os.open(name, treewalk.FILE_FLAGS, dir_fd=src_dir)
    except OSError:
        return False
    try:
        b = os.open(name, treewalk.FILE_FLAGS, dir_fd=dst_dir)
    except OSError:
        os.close(a)
        return False
    try:
        if not stat.S_ISREG(os.fstat(b).st_mode):
            return False
        while True:
            x, y = os.read(a, _CHUNK), os.read(b, _CHUNK)
            if x != y:
                return False
            if not x:
                return True
    finally:
        os.close(a)
        os.close(b)


def _fix_mode(dst_dir: int, name: str, st: os.stat_result) -> None:
    fd = os.open(name, treewalk.FILE_FLAGS, dir_fd=dst_dir)
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
    finally:
        os.close(fd)


def _remove_entry(parent: int, name: str, st: os.stat_result) -> None:
    """Remove ``name`` under ``parent``: a directory with everything in it, never through a link."""
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    with treewalk.opened_dir(name, parent) as fd:
        os.fchmod(fd, stat.S_IRWXU)
        for child, child_st in treewalk.entries(fd):
            _remove_entry(fd, child, child_st)
    os.rmdir(name, dir_fd=parent)


def _remove_path(path: Path) -> None:
    try:
        with treewalk.opened_dir(path.parent) as parent:
            _remove_entry(parent, path.name, os.stat(path.name, dir_fd=parent, follow_symlinks=False))
    except OSError:
        pass

"""Version checks: a snapshot says what a file was, so a later look can say "it changed".

Snapshots compare existence, identity (device, inode, size, mtime) and a sha256 of the bytes:
equal contents alone do not prove the same file, and equal identity alone misses an in-place
rewrite within one mtime tick.
"""

from __future__ import annotations

import hashlib
import stat
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace.fence import Identity, Location, Workspace

SNAPSHOT_TEXT_LIMIT = 256 * 1024


@dataclass(frozen=True)
class FileSnapshot:
    """What one file was when looked at. ``text`` is kept for display only (bounded)."""

    path: str
    exists: bool
    sha256: str = ""
    identity: Identity | None = None
    text: str | None = None
    problem: str = ""  # a named reason the file could not be read (link, special file)

    def same_version(self, other: FileSnapshot) -> bool:
        return (self.exists, self.sha256, self.identity, self.problem) == (
            other.exists,
            other.sha256,
            other.identity,
            other.problem,
        )

    def describe_change(self, other: FileSnapshot) -> str:
        if self.exists != other.exists:
            return "was created" if other.exists else "was deleted"
        if self.problem != other.problem:
            return other.problem or "is readable again"
        if self.sha256 != other.sha256:
            return "content changed"
        return "was replaced (same content, different file identity)"


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def snapshot(workspace: Workspace, path: str | Location, max_bytes: int = 64 * 1024 * 1024) -> FileSnapshot:
    """Look at one file without following links. Missing files and refusals are recorded."""
    loc = path if isinstance(path, Location) else workspace.locate(path)
    try:
        st = workspace.lstat(loc)
    except ToolFailure as exc:
        return FileSnapshot(loc.display, exists=True, problem=f"{exc.code}: {exc.message}")
    if st is None:
        return FileSnapshot(loc.display, exists=False)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISREG(st.st_mode):
        kind = "symlink" if stat.S_ISLNK(st.st_mode) else f"mode {stat.filemode(st.st_mode)}"
        return FileSnapshot(loc.display, exists=True, identity=Identity.of(st), problem=f"not a regular file ({kind})")
    try:
        data, st = workspace.read_bytes(loc, max_bytes)
    except ToolFailure as exc:
        return FileSnapshot(loc.display, exists=True, identity=Identity.of(st), problem=f"{exc.code}: {exc.message}")
    text = None
    if len(data) <= SNAPSHOT_TEXT_LIMIT:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
    return FileSnapshot(loc.display, True, sha256_hex(data), Identity.of(st), text)


def require_unchanged(workspace: Workspace, before: FileSnapshot) -> FileSnapshot:
    """Snapshot again and raise ``stale_input`` naming the change if the file moved on."""
    after = snapshot(workspace, before.path)
    if not before.same_version(after):
        raise ToolFailure(
            ErrorCode.STALE_INPUT,
            f"{before.path!r} {before.describe_change(after)} since it was checked; read it again and make a new request",
        )
    return after

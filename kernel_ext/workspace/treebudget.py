"""Budgets for what the host does to a tree a sandbox can shape: copy, snapshot, checkpoint, digest, zip.

A sandboxed command can make a tiny tree look enormous: ``truncate -s 4G big`` costs a few KB of
disk, and 200 hard links to it show 800 GB. Whatever the host then does name by name (copy the
tree into its own state folder, zip it, hash it) would turn those claims into real bytes and
real CPU outside the workspace, where no sandbox quota applies. So every such operation runs
under a ``TreeBudget``:

- bytes are counted by **apparent size** (``st_size``) of **every name**: a hard link is counted
  again for each name (a restore, an extractor or a digest reads every name), and a sparse
  file counts what it claims, not what it occupies; so a tree within budget stays within budget
  for every reader, and holes can never inflate past it;
- entries (files, folders, links) are counted against a cap, so a million empty names cannot
  exhaust the host's inodes or time either;
- a file is copied or read up to the size it was charged at, never further, so a file a
  background job keeps growing cannot outrun its charge.

Limits are operator settings, read from the environment when the operation starts (the sandbox
cannot set the server's environment): ``BESSER_<KIND>_MAX_BYTES`` and ``BESSER_<KIND>_MAX_FILES``
for the kinds ``CHECKPOINT``, ``SNAPSHOT`` (Phase 3, also its digests) and ``ARCHIVE``; 0 means no
limit. Exceeding one is ``ErrorCode.TREE_TOO_LARGE``, naming the limit and its variable.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import treewalk

HASHED_BY_METADATA = "hashed by size and time only (past the budget)"
MIB = 1024 * 1024
DEFAULTS: dict[str, tuple[int, int]] = {
    # kind: (max bytes by apparent size, max entries)
    "checkpoint": (512 * MIB, 50_000),
    "snapshot": (512 * MIB, 50_000),
    "archive": (512 * MIB, 50_000),
    # all checkpoints of one project together: labels are cheap to make, so their sum is bounded too
    "checkpoint_store": (2048 * MIB, 200_000),
}


def bytes_var(kind: str) -> str:
    return f"BESSER_{kind.upper()}_MAX_BYTES"


def files_var(kind: str) -> str:
    return f"BESSER_{kind.upper()}_MAX_FILES"


def _number(env: Mapping[str, str], name: str, default: int) -> int:
    text = (env.get(name) or "").strip().replace("_", "")
    try:
        value = int(text) if text else default
    except ValueError:
        return default  # a malformed setting keeps the safe default rather than lifting the limit
    return max(value, 0)


@dataclass(frozen=True)
class TreeLimits:
    """The operator's bounds for one kind of tree operation (0: unlimited)."""

    kind: str
    max_bytes: int
    max_files: int

    @classmethod
    def for_kind(cls, kind: str, environ: Mapping[str, str] | None = None) -> TreeLimits:
        env = os.environ if environ is None else environ
        default_bytes, default_files = DEFAULTS[kind]
        return cls(kind, _number(env, bytes_var(kind), default_bytes), _number(env, files_var(kind), default_files))

    def within(self, outer: TreeLimits, used_bytes: int, used_files: int) -> TreeLimits:
        """These limits, tightened to what ``outer`` has left after ``used_*``; named after the
        binding one, so a refusal names the setting to change."""
        def left(limit: int, used: int) -> int:
            return max(limit - used, 0) if limit else 0

        room_bytes, room_files = left(outer.max_bytes, used_bytes), left(outer.max_files, used_files)
        tighter = (outer.max_bytes and (not self.max_bytes or room_bytes < self.max_bytes)) or \
                  (outer.max_files and (not self.max_files or room_files < self.max_files))
        if not tighter:
            return self
        return TreeLimits(outer.kind, room_bytes if outer.max_bytes else self.max_bytes,
                          room_files if outer.max_files else self.max_files)

    @classmethod
    def unlimited(cls, kind: str = "restore") -> TreeLimits:
        return cls(kind, 0, 0)


class TreeBudget:
    """What one operation has spent so far; ``charge_*`` refuse (or ``fits`` says no) past the limits."""

    def __init__(self, limits: TreeLimits):
        self.limits = limits
        self.bytes = 0
        self.entries = 0
        self._inodes: dict[tuple[int, int], str] = {}

    def fits(self, st: os.stat_result) -> str | None:
        """None when one more entry of ``st``'s size fits; else the reason, in words."""
        lim = self.limits
        if lim.max_files and self.entries + 1 > lim.max_files:
            return (f"the {lim.kind} would hold more than {lim.max_files} files, folders and links "
                    f"(the limit is {files_var(lim.kind)})")
        size = st.st_size if stat.S_ISREG(st.st_mode) else 0
        if lim.max_bytes and self.bytes + size > lim.max_bytes:
            return (f"the {lim.kind} would exceed {lim.max_bytes} bytes counted by apparent size "
                    f"(sparse files by the size they claim, every hard-linked name again; "
                    f"{self.bytes} counted so far, this file claims {size}; the limit is {bytes_var(lim.kind)})")
        return None

    def charge(self, st: os.stat_result) -> None:
        """Count one entry (a regular file by its apparent size); ``TREE_TOO_LARGE`` past a limit."""
        reason = self.fits(st)
        if reason is not None:
            raise ToolFailure(ErrorCode.TREE_TOO_LARGE, reason)
        self.add(st)

    def add(self, st: os.stat_result) -> None:
        self.entries += 1
        if stat.S_ISREG(st.st_mode):
            self.bytes += st.st_size

    def first_name(self, st: os.stat_result) -> str | None:
        """For a hard-linked file: the name its inode was first copied under in this operation, if any."""
        return self._inodes.get((st.st_dev, st.st_ino)) if st.st_nlink > 1 else None

    def remember(self, st: os.stat_result, name: str) -> None:
        """Record where a hard-linked file was copied (bounded: every remembered inode was charged)."""
        if st.st_nlink > 1:
            self._inodes.setdefault((st.st_dev, st.st_ino), name)


def file_digest(budget: TreeBudget, fd: int, st: os.stat_result, notes: treewalk.Notes) -> str:
    """The sha256 of the open file ``fd`` (read no further than ``st.st_size``) while it fits ``budget``;
    past it ``meta:<size>:<mtime_ns>:<inode>`` (counted in ``notes``), which still changes when the file does.

    Digests (Phase 3's change detection, the generation ledger) never refuse: a tree past the
    budget is still compared, by metadata where its bytes would cost too much to read.
    """
    if budget.fits(st) is None:
        budget.add(st)
        return treewalk.sha256_fd(fd, st.st_size)
    notes[HASHED_BY_METADATA] += 1
    return f"meta:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"

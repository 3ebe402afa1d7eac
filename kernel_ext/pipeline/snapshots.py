"""Whole-tree snapshots of a run's app, so Phase 3 can always go back to its best tree.

A snapshot is a copy of ``app/`` under ``.besser/snapshots/<id>/`` (links copied as links,
never followed; bulky or internal folders skipped; FIFOs, sockets and devices never opened and
counted in ``skipped``). Restoring makes ``app/`` equal to the snapshot again: files the repair
added are removed, changed ones put back. All of it goes through descriptors
(``workspace/treecopy``, ``workspace/treewalk``), so a link or FIFO the repair planted is never
followed or read. These calls block on disk: Phase 3 runs them with ``asyncio.to_thread``.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import treewalk
from kernel_ext.workspace.internal import INTERNAL_NAMES
from kernel_ext.workspace.treebudget import (
    HASHED_BY_METADATA,
    TreeBudget,
    TreeLimits,
    file_digest,
)
from kernel_ext.workspace.treecopy import CopyStats, copy_tree, remove_path, sync_tree

__all__ = ["HASHED_BY_METADATA", "SKIPPED", "TreeSnapshot", "restore", "take", "tree_digest"]

SKIPPED = INTERNAL_NAMES | {"node_modules", "__pycache__", ".venv", ".pytest_cache", ".ruff_cache"}


@dataclass(frozen=True)
class TreeSnapshot:
    snapshot_id: str
    path: Path
    digest: str
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def note(self) -> str:
        """What the snapshot left out, in words ("" when nothing)."""
        return treewalk.describe(treewalk.Notes(self.skipped))


def tree_digest(root: Path, notes: treewalk.Notes | None = None, limits: TreeLimits | None = None) -> str:
    """A digest of every file's relative path and bytes (links by their target text).

    FIFOs, sockets and devices enter by path and kind only (never opened); ``notes`` counts them.
    Bytes are read under the snapshot budget (apparent size, every name): past it a file enters
    by size and modification time instead (``HASHED_BY_METADATA``), so a sparse file or a
    thousand hard links cannot cost the server hours of hashing per repair round.
    """
    notes = treewalk.Notes() if notes is None else notes
    budget = TreeBudget(limits or TreeLimits.for_kind("snapshot"))
    h = hashlib.sha256()
    with _opened(root) as fd:
        for rel, parent, name, st in treewalk.walk_at(fd, SKIPPED):
            if stat.S_ISDIR(st.st_mode):
                continue
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            if stat.S_ISLNK(st.st_mode):
                try:
                    h.update(b"link:" + os.fsencode(os.readlink(name, dir_fd=parent)))
                except OSError:
                    h.update(b"gone")
                continue
            opened = treewalk.open_entry(parent, name, st, notes)
            if opened is None:
                h.update(b"special:%o" % stat.S_IFMT(st.st_mode))
                continue
            file_fd, fst = opened
            try:
                h.update(file_digest(budget, file_fd, fst, notes).encode() + b"\0")
            finally:
                os.close(file_fd)
    return h.hexdigest()


def take(app_dir: Path, snapshots_dir: Path, snapshot_id: str, limits: TreeLimits | None = None) -> TreeSnapshot:
    """Copy ``app_dir`` under ``snapshots_dir/snapshot_id`` within the snapshot budget.

    Past the budget (``BESSER_SNAPSHOT_MAX_BYTES`` / ``_MAX_FILES``) it is refused
    (``tree_too_large``) and nothing of it is kept; Phase 3 goes on without that snapshot.
    """
    limits = limits or TreeLimits.for_kind("snapshot")
    target = snapshots_dir / snapshot_id
    remove_path(target)
    target.mkdir(parents=True, mode=0o700)
    stats = CopyStats()
    try:
        with _opened(app_dir) as src, treewalk.opened_dir(target) as dst:
            copy_tree(src, dst, SKIPPED, stats, budget=TreeBudget(limits))
    except BaseException:
        remove_path(target)
        raise
    skipped = {treewalk.SKIPPED_SPECIAL: stats.specials} if stats.specials else {}
    return TreeSnapshot(snapshot_id, target, tree_digest(target, limits=limits), skipped)


def restore(snapshot: TreeSnapshot, app_dir: Path) -> None:
    """Make ``app_dir`` hold exactly the snapshot's files again (skipped folders untouched)."""
    with treewalk.opened_dir(snapshot.path) as src, _opened(app_dir) as dst:
        sync_tree(src, dst, SKIPPED, CopyStats())


@contextmanager
def _opened(path: Path) -> Iterator[int]:
    """The run-owned folder ``path`` (``app/``, a snapshot) opened no-follow; a named refusal if it is not one."""
    try:
        fd = treewalk.open_dir(path)
    except OSError as exc:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"{str(path)!r} is not a folder a snapshot can use ({exc.strerror})") from None
    try:
        yield fd
    finally:
        os.close(fd)

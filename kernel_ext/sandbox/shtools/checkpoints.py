"""Checkpoints: a labelled copy of a directory, published atomically, restored exactly.

A checkpoint lives in the host's state folder, never in the tree it copies, under a namespace
per project (a hash of the project's real path), so one label in two projects never collides.
The copy is built under a private name and published by atomically replacing the label's link,
so a reader sees the old checkpoint or the new one, never half of one. Restoring makes the
origin equal to the checkpoint again (added entries removed, changed ones rewritten through a
temporary name and ``rename``, unchanged ones left alone) and refuses any target that is not
the checkpoint's origin.

The origin is kept as components below the project, and both taking and restoring reach it
through the fence: every component opened no-follow from the project's descriptor (created the
same way on restore), so a folder the sandbox swapped for a link is refused by name
(``symlink_refused``), never followed out of the project. The copying itself is
``workspace/treecopy`` (descriptors only; links kept as links; FIFOs and devices never opened),
under the operator's checkpoint budget (``workspace/treebudget``: apparent bytes, entries), so a
sparse file or a thousand hard links cannot fill the host's disk; past it the checkpoint is
refused (``tree_too_large``) and its partial copy removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace import treewalk
from kernel_ext.workspace.fence import Location, Workspace
from kernel_ext.workspace.internal import INTERNAL_NAMES
from kernel_ext.workspace.treebudget import TreeBudget, TreeLimits
from kernel_ext.workspace.treecopy import CopyStats, copy_tree, remove_path, sync_tree

LABEL_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # whole labels only: fullmatch (``$`` allows a final newline)
DEFAULT_SKIP = INTERNAL_NAMES

__all__ = ["DEFAULT_SKIP", "CheckpointStore", "CopyStats", "check_label", "project_key"]


def project_key(project: str | os.PathLike[str]) -> str:
    return hashlib.sha256(os.path.realpath(project).encode()).hexdigest()[:16]


def check_label(label: str) -> str:
    if not isinstance(label, str) or not LABEL_PATTERN.fullmatch(label) or label in (".", ".."):
        raise ToolFailure(
            ErrorCode.INVALID_LABEL,
            f"checkpoint label {label!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-' (no '/'), starting with a "
            "letter or digit",
        )
    return label


class CheckpointStore:
    """The checkpoints of one project, under ``state_dir/checkpoints/<project hash>/``."""

    def __init__(self, state_dir: str | os.PathLike[str], project: str | os.PathLike[str], limits: TreeLimits | None = None):
        self.project = Path(os.path.realpath(project))
        self.limits = limits  # None: the operator's BESSER_CHECKPOINT_MAX_BYTES / _MAX_FILES, read per checkpoint
        self.root = Path(state_dir) / "checkpoints" / project_key(self.project)
        self.fence = Workspace(self.project, internal=(), protected=())

    def locate(self, where: str | os.PathLike[str] | None) -> Location:
        """The folder ``where`` (relative to the project, or absolute under it) as fence components.

        Purely lexical: links are judged by the no-follow walk that opens it, never resolved here.
        """
        return self.fence.locate(os.fspath(where) if where is not None else ".")

    @contextmanager
    def _opened(self, loc: Location, create: bool = False) -> Iterator[int]:
        """A descriptor of ``loc`` reached no-follow from the project; named refusals."""
        try:
            with self.fence.directory(loc, create=create) as fd:
                yield fd
        except ToolFailure as exc:
            if exc.code == ErrorCode.NOT_REGULAR_FILE:  # a component is a file, FIFO or device
                raise ToolFailure(ErrorCode.NOT_FOUND, f"{loc.display!r} is not a directory ({exc.message})") from None
            raise

    def create(self, label: str, origin: str | os.PathLike[str] | None = None,
               skip: frozenset[str] = DEFAULT_SKIP) -> dict[str, Any]:
        label = check_label(label)
        loc = self.locate(origin)
        source = self.project.joinpath(*loc.parts)
        budget = TreeBudget(self._limits_for(label))  # may refuse before anything is written
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        generation = f".gen-{label}-{secrets.token_hex(4)}"
        (self.root / generation / "tree").mkdir(parents=True, mode=0o700)
        stats = CopyStats()
        try:
            with self._opened(loc) as src, treewalk.opened_dir(self.root / generation / "tree") as dst:
                try:
                    copy_tree(src, dst, skip, stats, budget=budget)
                except ToolFailure as exc:
                    if exc.code != ErrorCode.TREE_TOO_LARGE:
                        raise
                    raise ToolFailure(exc.code,
                                      f"checkpoint {label!r} of {loc.display!r} refused, nothing kept: {exc.message}") from None
                os.fchmod(dst, stat.S_IMODE(os.fstat(src).st_mode))
            meta = {
                "label": label, "origin": str(source), "origin_parts": list(loc.parts), "project": str(self.project),
                "created_at": time.time(), "files": stats.files, "dirs": stats.dirs, "links": stats.links,
                "bytes": stats.bytes, "hardlinked": stats.hardlinked, "method": stats.method, "skipped": sorted(skip),
                "specials_skipped": stats.specials,
            }
            (self.root / generation / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
            link = self.root / f".link-{secrets.token_hex(4)}"
            os.symlink(generation, link)
            previous = self._generation(label)
            os.replace(link, self.root / label)
        except ToolFailure:
            remove_path(self.root / generation)
            raise
        except OSError as exc:
            remove_path(self.root / generation)
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"could not write the checkpoint: {exc.strerror}") from None
        if previous is not None:
            remove_path(self.root / previous)
        return meta

    def _limits_for(self, label: str) -> TreeLimits:
        """One checkpoint's limits, within what the project's store has left (the label being
        replaced does not count: its old copy is removed once the new one is kept)."""
        limits = self.limits or TreeLimits.for_kind("checkpoint")
        if self.limits is not None:
            return limits  # explicit limits (tests, callers that own the store) are taken as they are
        others = [m for m in self.list() if m["label"] != label]
        store = TreeLimits.for_kind("checkpoint_store")
        limited = limits.within(store, sum(int(m["bytes"]) for m in others), sum(int(m["entries"]) for m in others))
        exhausted = (limited.max_bytes == 0 and store.max_bytes) or (limited.max_files == 0 and store.max_files)
        if limited is not limits and exhausted:
            raise ToolFailure(ErrorCode.TREE_TOO_LARGE, f"checkpoint {label!r} refused, nothing kept: this project's "
                              f"{len(others)} checkpoint(s) already fill the store (BESSER_CHECKPOINT_STORE_MAX_BYTES / "
                              "_MAX_FILES); replace an existing label instead")
        return limited

    def get(self, label: str) -> dict[str, Any]:
        label = check_label(label)
        generation = self._generation(label)
        if generation is None:
            known = ", ".join(m["label"] for m in self.list()) or "none"
            raise ToolFailure(ErrorCode.UNKNOWN_CHECKPOINT, f"no checkpoint {label!r} in this project (known: {known})")
        return json.loads((self.root / generation / "meta.json").read_text(encoding="utf-8"))

    def target_for(self, label: str, target: str | os.PathLike[str] | None = None) -> tuple[dict[str, Any], Location]:
        """The checkpoint's metadata and where it may be restored (its origin, nowhere else)."""
        meta = self.get(label)
        origin = self._origin(meta)
        if target is None:
            return meta, origin
        text = os.fspath(target)
        where = Path(os.path.normpath(text if os.path.isabs(text) else self.project / text))
        if where != self.project.joinpath(*origin.parts):
            raise ToolFailure(
                ErrorCode.CHECKPOINT_ORIGIN_MISMATCH,
                f"checkpoint {label!r} was taken of {meta['origin']!r}; it can only be restored there, not into {str(where)!r}",
            )
        return meta, origin

    def preview(self, label: str, target: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """What ``restore`` would do, counted and not done: files written, entries removed, left alone.

        It walks the target the same no-follow way, so a link in the way is refused here already.
        """
        meta, loc = self.target_for(label, target)
        stats = CopyStats()
        with self._tree(label) as src:
            try:
                with self._opened(loc) as dst:
                    sync_tree(src, dst, self._skip(meta), stats, apply=False)
            except ToolFailure as exc:
                if exc.code != ErrorCode.NOT_FOUND or self._blocked(loc):
                    raise
                sync_tree(src, None, self._skip(meta), stats, apply=False)  # the folder is gone: all written
        return {"label": label, "dir": loc.display, "written": stats.written, "removed": stats.removed,
                "unchanged": stats.unchanged, "files": meta["files"], "created_at": meta["created_at"]}

    def restore(self, label: str, target: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        meta, loc = self.target_for(label, target)
        stats = CopyStats()
        try:
            with self._tree(label) as src, self._opened(loc, create=True) as dst:
                sync_tree(src, dst, self._skip(meta), stats)
                os.fchmod(dst, stat.S_IMODE(os.fstat(src).st_mode))
        except OSError as exc:
            raise ToolFailure(ErrorCode.EXECUTION_FAILED,
                              f"restore stopped part-way: {exc.strerror} ({exc.filename or 'a file'})") from None
        return {"label": label, "dir": str(self.project.joinpath(*loc.parts)), "written": stats.written, "removed": stats.removed,
                "unchanged": stats.unchanged, "files": meta["files"]}

    def _origin(self, meta: dict[str, Any]) -> Location:
        parts = meta.get("origin_parts")
        if parts is None:  # taken before components were recorded: the origin's text, lexically
            try:
                parts = Path(os.path.normpath(meta["origin"])).relative_to(self.project).parts
            except ValueError:
                raise ToolFailure(ErrorCode.OUTSIDE_WORKSPACE,
                                  f"checkpoint origin {meta['origin']!r} is outside this project") from None
        return self.fence.locate("/".join(parts) or ".")

    def _blocked(self, loc: Location) -> bool:
        """True when a component of ``loc`` exists but is not a plain folder (restore would refuse)."""
        for n in range(1, len(loc.parts) + 1):
            try:
                st = self.fence.lstat(Location(loc.root, loc.parts[:n], "/".join(loc.parts[:n])))
            except ToolFailure:
                return True
            if st is None:
                return False
            if not stat.S_ISDIR(st.st_mode):
                return True
        return False

    @contextmanager
    def _tree(self, label: str) -> Iterator[int]:
        generation = self._generation(label)
        if generation is None:
            raise ToolFailure(ErrorCode.UNKNOWN_CHECKPOINT, f"no checkpoint {label!r} in this project")
        with treewalk.opened_dir(self.root / generation / "tree") as fd:
            yield fd

    @staticmethod
    def _skip(meta: dict[str, Any]) -> frozenset[str]:
        return frozenset(meta.get("skipped", DEFAULT_SKIP))

    def list(self, origin: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
        """Every checkpoint of the project, oldest first; with ``origin``, those taken of that folder."""
        wanted = str(self.project.joinpath(*self.locate(origin).parts)) if origin is not None else None
        if not self.root.is_dir():
            return []
        found = []
        for entry in os.scandir(self.root):
            if entry.is_symlink() and LABEL_PATTERN.fullmatch(entry.name):
                try:
                    meta = json.loads((self.root / os.readlink(entry.path) / "meta.json").read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                if wanted is not None and meta.get("origin") != wanted:
                    continue
                found.append({k: meta[k] for k in ("label", "origin", "created_at", "files", "bytes", "method")}
                             | {"entries": meta.get("files", 0) + meta.get("dirs", 0) + meta.get("links", 0)})
        return sorted(found, key=lambda m: m["created_at"])

    def _generation(self, label: str) -> str | None:
        try:
            return os.readlink(self.root / label)
        except OSError:
            return None


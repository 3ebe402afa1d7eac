"""Whole-tree snapshots of a run's app, so Phase 3 can always go back to its best tree.

A snapshot is a copy of ``app/`` under ``.besser/snapshots/<id>/`` (links copied as links,
never followed; bulky or internal folders skipped). Restoring makes ``app/`` equal to the
snapshot again: files the repair added are removed, changed ones put back.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

SKIPPED = frozenset({".besser", ".besser_command_output", "node_modules", "__pycache__", ".venv", ".pytest_cache", ".ruff_cache"})


@dataclass(frozen=True)
class TreeSnapshot:
    snapshot_id: str
    path: Path
    digest: str


def tree_digest(root: Path) -> str:
    """A digest of every file's relative path and bytes (links by their target text)."""
    h = hashlib.sha256()
    for rel in sorted(_files(root)):
        full = root / rel
        h.update(rel.encode() + b"\0")
        if full.is_symlink():
            h.update(b"link:" + os.readlink(full).encode())
        else:
            h.update(hashlib.sha256(full.read_bytes()).digest())
    return h.hexdigest()


def take(app_dir: Path, snapshots_dir: Path, snapshot_id: str) -> TreeSnapshot:
    target = snapshots_dir / snapshot_id
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(app_dir, target, symlinks=True, ignore=_ignore)
    return TreeSnapshot(snapshot_id, target, tree_digest(target))


def restore(snapshot: TreeSnapshot, app_dir: Path) -> None:
    """Make ``app_dir`` hold exactly the snapshot's files again (skipped folders untouched)."""
    for entry in list(app_dir.iterdir()):
        if entry.name in SKIPPED:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in snapshot.path.iterdir():
        destination = app_dir / entry.name
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, destination, symlinks=True)
        else:
            shutil.copy2(entry, destination, follow_symlinks=False)


def _ignore(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if name in SKIPPED}


def _files(root: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        keep = []
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if os.path.islink(full):
                out.append(os.path.relpath(full, root))  # a link is an entry, never a way in
            elif name not in SKIPPED:
                keep.append(name)
        dirnames[:] = keep
        out.extend(os.path.relpath(os.path.join(dirpath, name), root) for name in filenames)
    return out

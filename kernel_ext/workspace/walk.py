"""Walking the fence: directory listings that never follow a link and say what they left out.

The walk opens each directory relative to its parent's descriptor with ``O_NOFOLLOW`` (the
same rule as every other access), so a link swapped in for a directory mid-walk is refused,
not entered. Links are never descended: one that resolves inside a root is reported as a link
(its target text shown); one that resolves outside, or nowhere, is skipped and counted.

Skipped and counted: the run's internal folders, the spill folder of command output
(``.besser_command_output``), publish temporaries (``.*.besser-tmp-*``), FIFOs, sockets and
devices. Bulky tool folders (``.git``, ``node_modules``, virtualenvs, caches) are shown but
not entered. Any of these is walked normally when the walk starts inside it on purpose.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace.fence import DIR_FLAGS, Location, Workspace
from kernel_ext.workspace.internal import COMMAND_OUTPUT_DIR
from kernel_ext.workspace.publish import is_temp_name

NOISE_DIRS = frozenset(
    {".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".ipynb_checkpoints"}
)
MAX_DEPTH = 64


@dataclass(frozen=True)
class Entry:
    """One listed item. ``kind`` is ``file``, ``dir`` or ``link`` (listed, never followed)."""

    root: Path
    parts: tuple[str, ...]
    path: str
    kind: str
    size: int = 0
    target: str = ""

    @property
    def location(self) -> Location:
        return Location(self.root, self.parts, self.path)


@dataclass
class Walker:
    """Iterate the entries under ``start``; afterwards ``skipped``/``not_descended`` say what was left out.

    ``scan_cap`` bounds the work: past it the walk stops and ``complete`` turns False.
    """

    workspace: Workspace
    start: str | Location = "."
    scan_cap: int = 50_000
    skipped: Counter = field(default_factory=Counter)
    not_descended: list[str] = field(default_factory=list)
    scanned: int = 0
    complete: bool = True

    def __iter__(self) -> Iterator[Entry]:
        ws = self.workspace
        loc = self.start if isinstance(self.start, Location) else ws.locate(self.start)
        st = ws.lstat(loc)
        if st is None:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"{loc.display!r} does not exist")
        if not stat.S_ISDIR(st.st_mode):
            entry = self._classify_leaf(loc.root, loc.parts, st, None)
            if entry is not None:
                yield entry
            return
        rel = "/".join(loc.parts)
        explicit = {name for name in (*NOISE_DIRS, COMMAND_OUTPUT_DIR) if name in loc.parts}
        with ws.directory(loc) as fd:
            yield from self._walk_dir(loc.root, loc.parts, os.dup(fd), explicit, rel, 0)

    def _walk_dir(self, root: Path, parts: tuple[str, ...], fd: int, explicit: set[str], rel: str, depth: int) -> Iterator[Entry]:
        try:
            with os.scandir(fd) as it:
                names = sorted(e.name for e in it)
            for name in names:
                if self.scanned >= self.scan_cap:
                    self.complete = False
                    return
                self.scanned += 1
                child_parts = (*parts, name)
                child_rel = f"{rel}/{name}" if rel else name
                if is_temp_name(name):
                    self.skipped["publish temporaries"] += 1
                    continue
                if self.workspace.is_internal(child_rel):
                    self.skipped["internal folders"] += 1
                    continue
                if name == COMMAND_OUTPUT_DIR and name not in explicit:
                    self.skipped["command output folder"] += 1
                    continue
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    self.skipped["vanished or unreadable"] += 1
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    entry = self._classify_leaf(root, child_parts, st, fd)
                    if entry is not None:
                        yield entry
                    continue
                display = self.workspace.display(root, child_parts)
                yield Entry(root, child_parts, display, "dir")
                if name in NOISE_DIRS and name not in explicit:
                    self.not_descended.append(display)
                    continue
                if depth + 1 >= MAX_DEPTH:
                    self.skipped["too deep"] += 1
                    continue
                try:
                    child_fd = os.open(name, DIR_FLAGS, dir_fd=fd)
                except OSError:
                    self.skipped["vanished, replaced by a link, or unreadable"] += 1
                    continue
                yield from self._walk_dir(root, child_parts, child_fd, explicit, child_rel, depth + 1)
        finally:
            os.close(fd)

    def _classify_leaf(self, root: Path, parts: tuple[str, ...], st: os.stat_result, fd: int | None) -> Entry | None:
        display = self.workspace.display(root, parts)
        if stat.S_ISREG(st.st_mode):
            return Entry(root, parts, display, "file", st.st_size)
        if stat.S_ISLNK(st.st_mode):
            target = _link_inside(self.workspace, root, parts, fd)
            if target is None:
                self.skipped["links resolving outside the workspace"] += 1
                return None
            return Entry(root, parts, display, "link", 0, target)
        self.skipped["FIFOs, sockets and devices"] += 1
        return None


def _link_inside(ws: Workspace, root: Path, parts: tuple[str, ...], fd: int | None) -> str | None:
    """The link's target text when it resolves to an existing path inside a root, else None.

    Resolution only reads link texts (never file contents); the link itself is never opened.
    """
    try:
        text = os.readlink(parts[-1], dir_fd=fd) if fd is not None else os.readlink(root.joinpath(*parts))
        resolved = os.path.realpath(root.joinpath(*parts))
    except OSError:
        return None
    if not os.path.lexists(resolved):
        return None
    for candidate in ws.roots:
        base = str(candidate)
        if resolved == base or resolved.startswith(base.rstrip(os.sep) + os.sep):
            inner = os.path.relpath(resolved, base).replace(os.sep, "/")
            if inner != "." and ws.is_internal(inner):
                return None
            return text
    return None


def similar_paths(ws: Workspace, requested: str, limit: int = 5) -> list[str]:
    """Existing file paths that look like ``requested`` (suggestions only, never substituted)."""
    walker = Walker(ws, ".", scan_cap=5_000)
    try:
        files = [e.path for e in walker if e.kind == "file"]
    except ToolFailure:
        return []
    wanted = requested.strip().lstrip("./")
    base = wanted.rsplit("/", 1)[-1]
    same_name = [p for p in files if p.rsplit("/", 1)[-1] == base]
    close = difflib.get_close_matches(wanted, files, n=limit, cutoff=0.85)
    stem, suffix = os.path.splitext(base)
    close_names = [
        p
        for p in files
        if os.path.splitext(p)[1] == suffix
        and difflib.SequenceMatcher(None, stem, os.path.splitext(p.rsplit("/", 1)[-1])[0]).ratio() >= 0.75
    ]
    out: list[str] = []
    for path in (*same_name, *close_names, *close):
        if path not in out and path != wanted:
            out.append(path)
    return out[:limit]

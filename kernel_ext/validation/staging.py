"""Which folder is the backend, which module is its entry, and its source as it is now.

The backend's files are read through the workspace fence (no link followed, internal
folders skipped), without databases, caches or virtualenvs, and identified by a digest of
their content: the digest says whether the source changed since a scenario last ran, and
names the read-only copy the app host's children start from.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace.internal import INTERNAL_NAMES

SKIP_DIRS = frozenset({"__pycache__", "data", "node_modules", ".venv", "venv", ".git", ".pytest_cache", ".ruff_cache",
                       ".mypy_cache", "tests", "test"}) | INTERNAL_NAMES
SKIP_SUFFIXES = (".pyc", ".pyo", ".db", ".sqlite", ".sqlite3", ".db-journal", ".db-wal", ".db-shm", ".log")
ENTRY_NAMES = ("main_api.py", "main.py", "app.py", "api.py", "server.py", "asgi.py")
CANDIDATE_DIRS = ("backend", ".", "app", "api", "server")
MAX_FILES = 2000
MAX_BYTES = 20 * 1024 * 1024
_APP_OBJECT = re.compile(r"^(\w+)\s*(?::[^=]+)?=\s*(?:fastapi\.)?(FastAPI|Starlette)\(", re.MULTILINE)


@dataclass(frozen=True)
class Backend:
    """A backend folder (workspace-relative, ``"."`` for the root) and its entry ``module:attr``."""

    folder: str
    entry: str
    attr: str = "app"

    def describe(self) -> str:
        if self.folder == ".":
            return f"{self.entry}.py:{self.attr}"
        return f"{self.folder}/{self.entry.replace('.', '/')}.py:{self.attr}"


@dataclass
class Source:
    """The backend's files (paths relative to its folder) and their digest."""

    backend: Backend
    files: dict[str, bytes]
    digest: str
    skipped: list[str] = field(default_factory=list)


def entry_in(ws, folder: str) -> tuple[str, str] | None:
    """``(module, attr)`` of the ASGI app defined at the top of ``folder``, if any."""
    names = _listing(ws, folder)
    ordered = [n for n in ENTRY_NAMES if n in names] + sorted(n for n in names if n.endswith(".py") and n not in ENTRY_NAMES)
    for name in ordered:
        path = name if folder == "." else f"{folder}/{name}"
        try:
            text = ws.read_text(path, max_bytes=2 * 1024 * 1024)
        except ToolFailure:
            continue
        match = _APP_OBJECT.search(text)
        if match:
            return name[:-3], match.group(1)
    return None


def locate(ws, folder: str | None = None) -> Backend:
    """The backend ``folder`` names (or the first candidate folder holding a FastAPI app)."""
    if folder:
        clean = str(PurePosixPath(folder.strip().strip("/") or "."))
        st = ws.lstat(clean)
        if st is None:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"backend folder {folder!r} does not exist")
        found = entry_in(ws, clean)
        if found is None:
            raise ToolFailure(ErrorCode.NOT_FOUND, f"{folder!r} has no Python module defining a FastAPI app (app = FastAPI(...))")
        return Backend(clean, *found)
    for candidate in CANDIDATE_DIRS:
        if candidate != "." and ws.lstat(candidate) is None:
            continue
        found = entry_in(ws, candidate)
        if found is not None:
            return Backend(candidate, *found)
    raise ToolFailure(ErrorCode.NOT_FOUND,
                      "no FastAPI backend found in the workspace (looked in backend/, the root, app/, api/, server/); "
                                           "pass backend='folder'")


def _listing(ws, folder: str) -> set[str]:
    import os

    try:
        with ws.directory(ws.locate(folder)) as fd:
            return set(os.listdir(fd))
    except (ToolFailure, OSError):
        return set()


def read_source(ws, backend: Backend) -> Source:
    """The backend's files now, through the fence; refuses trees past the size limits."""
    from kernel_ext.workspace import Walker

    walker = Walker(ws, backend.folder)
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    total = 0
    prefix = "" if backend.folder == "." else backend.folder.rstrip("/") + "/"
    for entry in walker:
        rel = entry.path[len(prefix):] if prefix and entry.path.startswith(prefix) else entry.path
        parts = PurePosixPath(rel).parts
        if any(p in SKIP_DIRS for p in parts[:-1]) or (entry.kind == "dir" and parts and parts[-1] in SKIP_DIRS):
            continue
        if entry.kind == "link":
            skipped.append(f"{rel} (a link: not copied)")
            continue
        if entry.kind != "file" or rel.endswith(SKIP_SUFFIXES):
            continue
        if len(files) >= MAX_FILES:
            raise ToolFailure(ErrorCode.TOO_LARGE, f"the backend has more than {MAX_FILES} files")
        data, _ = ws.read_bytes(entry.location)
        total += len(data)
        if total > MAX_BYTES:
            raise ToolFailure(ErrorCode.TOO_LARGE, f"the backend is larger than {MAX_BYTES // (1024 * 1024)} MB")
        files[rel] = data
    return Source(backend, files, digest_of(files, backend), skipped)


def digest_of(files: dict[str, bytes], backend: Backend) -> str:
    h = hashlib.sha256(f"{backend.entry}:{backend.attr}\n".encode())
    for path in sorted(files):
        h.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    return h.hexdigest()

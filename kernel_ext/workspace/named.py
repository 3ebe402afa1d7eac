"""A file a request names (a model, a cassette, a script): held to a root, never waited on, bounded.

One rule for every path a request carries. With a ``root`` (the server's root folder: a REST
body, or a magic whose run the server hosts) the path must lie under it by its text alone
(absolute, or relative with no ``..`` leaving it), and it is opened through the fence: every
component no-follow from the root's descriptor (``fence.open_regular_at``), so a link anywhere is
refused. A path outside is refused by its text, so the answer is the same whether a file is
there or not. Without a root (a library caller, the CLI, an in-process magic: the person's own
files) any path is the caller's choice, links included. Either way the file must be regular
(a FIFO, a device, a folder refused before it is opened), is opened non-blocking (so a FIFO
swapped in is never waited on), and its size is checked on the descriptor before a byte is
read (a huge sparse file is refused unread).

``check`` opens and stats, never reads: what a request is refused on before a run exists (a few
non-blocking calls). ``read`` returns the bytes: call it off the event loop.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace.fence import FILE_FLAGS, Location, Workspace, open_regular_at, read_upto

__all__ = ["check", "locate", "read"]

Root = str | os.PathLike[str] | None


def locate(path: str | os.PathLike[str], root: str | os.PathLike[str], what: str) -> tuple[Workspace, Location]:
    """Where ``path`` lies under ``root``, by its text alone; ``outside_workspace`` when it does not."""
    ws = Workspace(root, internal=(), protected=())
    try:
        return ws, ws.locate(os.fspath(path))
    except ToolFailure as exc:
        if exc.code != ErrorCode.OUTSIDE_WORKSPACE:
            raise ToolFailure(exc.code, f"{what} {os.fspath(path)!r}: {exc.message}") from None
        raise ToolFailure(
            ErrorCode.OUTSIDE_WORKSPACE,
            f"{what} {os.fspath(path)!r} is outside the server's root folder; put it under {str(ws.root)!r}",
        ) from None


def check(path: str | os.PathLike[str], root: Root, *, what: str, max_bytes: int) -> None:
    """Refuse, by name, a path that ``read`` would refuse, without reading it."""
    with _opened(path, root, what, max_bytes):
        pass


def read(path: str | os.PathLike[str], root: Root, *, what: str, max_bytes: int) -> bytes:
    """The file's bytes, at most ``max_bytes`` (``too_large`` past them)."""
    with _opened(path, root, what, max_bytes) as fd:
        data = read_upto(fd, max_bytes + 1)
    if len(data) > max_bytes:
        raise ToolFailure(ErrorCode.TOO_LARGE, f"{what} {os.fspath(path)!r} grew past {max_bytes} bytes while it was read")
    return data


@contextmanager
def _opened(path: str | os.PathLike[str], root: Root, what: str, max_bytes: int) -> Iterator[int]:
    fd, st = _open(path, root, what)
    try:
        _fits(st, path, what, max_bytes)
        yield fd
    finally:
        os.close(fd)


def _open(path: str | os.PathLike[str], root: Root, what: str) -> tuple[int, os.stat_result]:
    if root is None:
        return _open_own(Path(path), what)
    ws, loc = locate(path, root, what)
    try:
        if not loc.parts:
            raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, f"{loc.display!r} is the root folder")
        with ws.parent_dir(loc) as parent:
            return open_regular_at(parent, loc.name, loc.display)
    except ToolFailure as exc:
        raise ToolFailure(exc.code, f"{what} {exc.message}", exc.data) from None


def _open_own(path: Path, what: str) -> tuple[int, os.stat_result]:
    """A caller's own path: links followed, but only a regular file opened (non-blocking)."""
    shown = f"{what} {str(path)!r}"
    try:
        before = os.stat(path)
    except FileNotFoundError:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"{shown} does not exist") from None
    except OSError as exc:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"{shown} cannot be opened: {exc.strerror}") from None
    _regular(before, shown)
    try:
        fd = os.open(path, FILE_FLAGS & ~os.O_NOFOLLOW)
    except OSError as exc:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"{shown} cannot be opened: {exc.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
        os.close(fd)
        raise ToolFailure(ErrorCode.STALE_INPUT, f"{shown} was replaced while opening it")
    return fd, st


def _regular(st: os.stat_result, shown: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (FIFO, device or socket)"
        raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, f"{shown} is {kind}")


def _fits(st: os.stat_result, path: str | os.PathLike[str], what: str, max_bytes: int) -> None:
    if st.st_size > max_bytes:
        raise ToolFailure(ErrorCode.TOO_LARGE, f"{what} {os.fspath(path)!r} is {st.st_size} bytes (limit {max_bytes})")

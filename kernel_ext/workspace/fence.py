"""The workspace fence: every file access walks from a root's directory descriptor, no-follow.

Path strings are only checked lexically (no ``..`` escape, absolute paths must sit under a
root); the real guarantee comes from the walk itself: each component is opened relative to
its parent's descriptor with ``O_NOFOLLOW``, so a symlink anywhere in the path (even one
swapped in after a check) is refused, and FIFOs, devices and sockets are refused before
anything opens them. Nothing is ever read or written through a link.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.workspace.internal import HIDDEN, READ_ONLY

# The two ways anything under a root is opened: directories and files, never through a link,
# and a file never waited on (a FIFO opened O_NONBLOCK returns at once; fstat then refuses it).
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

DEFAULT_INTERNAL = HIDDEN
DEFAULT_PROTECTED = (".git", *READ_ONLY)  # the run's spilled output and probe are readable, never a tool's to change


@dataclass(frozen=True)
class Location:
    """A path inside the fence: which root, and the components below it."""

    root: Path
    parts: tuple[str, ...]
    display: str

    @property
    def name(self) -> str:
        return self.parts[-1] if self.parts else ""


@dataclass(frozen=True)
class Identity:
    """What says "the same file": device, inode, size and modification time."""

    dev: int
    ino: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, st: os.stat_result) -> Identity:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class Workspace:
    """A primary root plus optional extra roots, with internal and protected paths.

    ``internal`` folders (the run's own bookkeeping) are neither listed nor accessible;
    ``protected`` paths can be read but never written or deleted.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        extra_roots: Iterable[str | os.PathLike[str]] = (),
        *,
        internal: Iterable[str] = DEFAULT_INTERNAL,
        protected: Iterable[str] = DEFAULT_PROTECTED,
    ):
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise ToolFailure(ErrorCode.NOT_FOUND, f"workspace root {str(root)!r} is not a directory")
        self.extra_roots = tuple(Path(os.path.realpath(p)) for p in extra_roots)
        self.internal = tuple(_clean_prefix(p) for p in internal)
        self.protected = tuple(_clean_prefix(p) for p in protected)

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.root, *self.extra_roots)

    # -- locating ---------------------------------------------------------------------------

    def locate(self, path: str | os.PathLike[str]) -> Location:
        """Map a user path to a root and components; refuse anything lexically outside."""
        text = os.fspath(path)
        if not isinstance(text, str) or not text.strip():
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "path is empty")
        check_path_text(text)
        candidate = PurePosixPath(text)
        if candidate.is_absolute():
            for root in sorted(self.roots, key=lambda r: len(r.parts), reverse=True):
                parts = _normal_parts(candidate.parts[1:], text)
                if tuple(parts[: len(root.parts) - 1]) == root.parts[1:]:
                    return self._location(root, tuple(parts[len(root.parts) - 1 :]))
            raise ToolFailure(ErrorCode.OUTSIDE_WORKSPACE, f"{text!r} is outside the workspace roots")
        return self._location(self.root, tuple(_normal_parts(candidate.parts, text)))

    def display(self, root: Path, parts: tuple[str, ...]) -> str:
        """How a path is shown: relative under the primary root, absolute under an extra root."""
        if root == self.root:
            return "/".join(parts) or "."
        return str(root.joinpath(*parts))

    def _location(self, root: Path, parts: tuple[str, ...]) -> Location:
        rel = "/".join(parts)
        display = self.display(root, parts)
        if any(_under(rel, prefix) for prefix in self.internal):
            raise ToolFailure(ErrorCode.PROTECTED_PATH, f"{display!r} is an internal folder of the run")
        return Location(root, parts, display)

    def is_protected(self, loc: Location) -> bool:
        rel = "/".join(loc.parts)
        return any(_under(rel, prefix) for prefix in self.protected)

    def check_writable(self, loc: Location) -> None:
        if not loc.parts:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "cannot write the workspace root itself")
        if self.is_protected(loc):
            raise ToolFailure(ErrorCode.PROTECTED_PATH, f"{loc.display!r} is protected and cannot be changed")

    def is_internal(self, rel: str) -> bool:
        return any(_under(rel, prefix) for prefix in self.internal)

    # -- descriptor walk --------------------------------------------------------------------

    @contextmanager
    def parent_dir(self, loc: Location, *, create: bool = False) -> Iterator[int]:
        """A descriptor of ``loc``'s parent directory, reached without following any link."""
        fd = _open_root(loc.root)
        try:
            walked: list[str] = []
            for part in loc.parts[:-1]:
                walked.append(part)
                current, fd = fd, -1  # _step always closes the descriptor it is given
                fd = self._step(current, part, loc, "/".join(walked), create)
            yield fd
        finally:
            if fd >= 0:
                os.close(fd)

    @contextmanager
    def directory(self, loc: Location, *, create: bool = False) -> Iterator[int]:
        """A descriptor of the directory ``loc`` itself (the root when ``parts`` is empty).

        Every component is opened no-follow from the root's descriptor; ``create`` makes missing
        ones (``mkdir`` relative to the parent's descriptor, so never through a link).
        """
        if not loc.parts:
            fd = _open_root(loc.root)
            try:
                yield fd
            finally:
                os.close(fd)
            return
        with self.parent_dir(loc, create=create) as parent:
            fd = self._step(os.dup(parent), loc.name, loc, loc.display, create)
            try:
                yield fd
            finally:
                os.close(fd)

    def _step(self, fd: int, part: str, loc: Location, shown: str, create: bool) -> int:
        """Open directory ``part`` under ``fd`` (closing ``fd``); refuse links and non-dirs."""
        try:
            try:
                return os.open(part, DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                self.check_writable(loc)
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass  # created concurrently: the no-follow open below decides what it is
                return os.open(part, DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise _walk_error(exc, fd, part, shown) from None
        finally:
            os.close(fd)

    # -- inspecting and reading -------------------------------------------------------------

    def lstat(self, path: str | Location) -> os.stat_result | None:
        """``lstat`` of the final component (None when missing); intermediate links refused."""
        loc = path if isinstance(path, Location) else self.locate(path)
        if not loc.parts:
            return os.stat(loc.root)
        try:
            with self.parent_dir(loc) as parent:
                return os.stat(loc.name, dir_fd=parent, follow_symlinks=False)
        except ToolFailure as exc:
            if exc.code == ErrorCode.NOT_FOUND:
                return None
            raise
        except FileNotFoundError:
            return None

    @contextmanager
    def open_regular(self, path: str | Location) -> Iterator[tuple[int, os.stat_result]]:
        """An open descriptor of a regular file and its ``fstat``; links and specials refused."""
        loc = path if isinstance(path, Location) else self.locate(path)
        if not loc.parts:
            raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, "the workspace root is a directory")
        with self.parent_dir(loc) as parent:
            fd, st = open_regular_at(parent, loc.name, loc.display)
            try:
                yield fd, st
            finally:
                os.close(fd)

    def read_bytes(self, path: str | Location, max_bytes: int = 8 * 1024 * 1024) -> tuple[bytes, os.stat_result]:
        with self.open_regular(path) as (fd, st):
            if st.st_size > max_bytes:
                shown = path.display if isinstance(path, Location) else path
                raise ToolFailure(ErrorCode.TOO_LARGE, f"{shown!r} is {st.st_size} bytes (limit {max_bytes})")
            data = read_upto(fd, max_bytes + 1)
            if len(data) > max_bytes:
                raise ToolFailure(ErrorCode.TOO_LARGE, "file grew past the read limit while reading")
            return data, st

    def read_text(self, path: str | Location, max_bytes: int = 8 * 1024 * 1024) -> str:
        data, _ = self.read_bytes(path, max_bytes)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            shown = path.display if isinstance(path, Location) else path
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{shown!r} is not UTF-8 text") from None


def open_regular_at(dir_fd: int, name: str, shown: str | None = None) -> tuple[int, os.stat_result]:
    """Open the regular file ``name`` under ``dir_fd``: no-follow, non-blocking, checked on the descriptor.

    The one way a tree operation opens a file. ``lstat`` refuses links and specials before any
    open; ``O_NOFOLLOW | O_NONBLOCK`` makes a link or FIFO swapped in afterwards fail or return at
    once (never hang); ``fstat`` of the descriptor, the same inode as the ``lstat``, decides. The
    caller owns (closes) the returned descriptor. Refusals are ``ToolFailure`` with a named code.
    """
    shown = name if shown is None else shown
    try:
        before = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"{shown!r} does not exist") from None
    _require_regular(before, shown)
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _walk_error(exc, None, name, shown) from None
    try:
        st = os.fstat(fd)
        _require_regular(st, shown)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise ToolFailure(ErrorCode.STALE_INPUT, f"{shown!r} was replaced while opening it")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def read_upto(fd: int, limit: int) -> bytes:
    """At most ``limit`` bytes of ``fd`` from where it stands, in bounded pieces (a file that grows
    while it is read is caught by the caller asking for one byte more than it allows)."""
    chunks, remaining = [], limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


NAME_MAX_BYTES = 255
PATH_MAX_BYTES = 4096


def check_path_text(text: str) -> None:
    """Refuse, by name, path text the operating system would reject unnamed (NUL, bad Unicode, too long)."""
    if "\x00" in text:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "path contains a NUL byte")
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "path is not valid Unicode text (a lone surrogate)") from None
    if len(encoded) > PATH_MAX_BYTES:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"path is longer than {PATH_MAX_BYTES} bytes")
    if any(len(part.encode("utf-8")) > NAME_MAX_BYTES for part in text.split("/")):
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"a path component is longer than {NAME_MAX_BYTES} bytes")


def _normal_parts(parts: Iterable[str], original: str) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not out:
                raise ToolFailure(ErrorCode.OUTSIDE_WORKSPACE, f"{original!r} escapes the workspace")
            out.pop()
            continue
        out.append(part)
    return out


def _clean_prefix(prefix: str) -> str:
    return "/".join(p for p in PurePosixPath(prefix).parts if p not in ("", ".", "/"))


def _under(rel: str, prefix: str) -> bool:
    return bool(prefix) and (rel == prefix or rel.startswith(prefix + "/"))


def _require_regular(st: os.stat_result, shown: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise ToolFailure(ErrorCode.SYMLINK_REFUSED, f"{shown!r} is a symbolic link; links are never followed")
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (FIFO, device or socket)"
        raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, f"{shown!r} is {kind}")


def _walk_error(exc: OSError, fd: int | None, part: str, shown: str) -> ToolFailure:
    if exc.errno == errno.ENOENT:
        return ToolFailure(ErrorCode.NOT_FOUND, f"{shown!r} does not exist")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return ToolFailure(ErrorCode.SYMLINK_REFUSED, f"{shown!r} is a symbolic link; links are never followed")
    if exc.errno == errno.ENOTDIR:
        kind = "a symbolic link" if fd is not None and _is_link(fd, part) else "not a directory"
        code = ErrorCode.SYMLINK_REFUSED if kind == "a symbolic link" else ErrorCode.NOT_REGULAR_FILE
        return ToolFailure(code, f"{shown!r} is {kind}")
    return ToolFailure(ErrorCode.EXECUTION_FAILED, f"{shown!r}: {exc.strerror}")


def _is_link(fd: int, part: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_root(root: Path) -> int:
    """The root's descriptor; a root that is gone or was replaced by a link or a file is a named
    refusal (the run's folder no longer exists as the fence knew it), never an ``OSError``."""
    try:
        return os.open(root, DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise ToolFailure(ErrorCode.NOT_FOUND, f"the workspace folder {str(root)!r} is gone or is no longer a "
                                                   "folder (removed, or replaced by a link)") from None
        raise

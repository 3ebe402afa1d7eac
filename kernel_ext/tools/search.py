"""Searching file contents inside the fence, with ripgrep as an optional accelerator.

The contract is a regular expression on RE2 (``kernel_ext.safe_regex``: linear time, so no
pattern can stall the process; Python's ``re`` holds the GIL while it backtracks) applied line by
line to the UTF-8 text files the fence walk yields (links never followed, internal folders and temporaries skipped, binary files counted
and skipped). Every reported line comes from a file read through the fence, so no content is
ever read through a link, even if one is swapped in mid-search.

ripgrep, when installed and the tree is large, only narrows which files are read: it lists
files with a match (``--`` before the pattern, so a pattern starting with a dash is a pattern,
not an option), and the same Python matcher then runs on those files. Its answer is therefore
the pure-Python answer; if ripgrep rejects a pattern RE2 accepts, the search runs without it.

ripgrep opens paths itself, so it must never see anything but the fenced tree, or its choice
of files would say whether a host file matches (an oracle, one regex at a time). Hence: it
starts in the start folder opened through the fence (``cwd=/proc/self/fd/N``, which resolves to
the open descriptor, not to whatever the path names by then), gets only relative paths, never
follows links, and its answer is used only when no folder of the tree changed while it ran
(each folder's inode, mtime and ctime, taken before and after; a rename or swap anywhere below
changes a folder's ctime, which no process can set). Otherwise every walked file is read through
the fence, as without ripgrep. Either way what is counted or shown depends only on the fenced
tree, never on what ripgrep may have read elsewhere.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.safe_regex import Matcher, compile_untrusted
from kernel_ext.tools.files_common import shown, split_lines
from kernel_ext.workspace import Entry, Location, Walker, Workspace
from kernel_ext.workspace.fence import open_regular_at, read_upto
from kernel_ext.workspace.treewalk import open_dir

RG_MIN_FILES = 200
RG_TIMEOUT = 20.0
RG_MAX_DEPTH = 64  # ripgrep descends no deeper than the folders stamped (depth below the start)
RG_MAX_DIRS = 20_000  # past this many folders the stamps cost more than ripgrep saves
MAX_FILE_BYTES = 8 * 1024 * 1024
RG_FALLBACK = "python (rg unavailable, rejected the pattern, or the tree changed while it ran)"


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    text: str


@dataclass
class SearchResult:
    hits: list[Hit] = field(default_factory=list)
    total: int = 0  # matching lines found (hits holds at most the limit)
    files_matched: int = 0
    files_searched: int = 0
    skipped: Counter = field(default_factory=Counter)
    engine: str = "python"
    complete: bool = True  # False when the walk hit its scan cap


def compile_pattern(pattern: str) -> Matcher:
    if not pattern:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "pattern is empty")
    if "\n" in pattern:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "pattern matches within one line; it cannot contain a newline")
    return compile_untrusted(pattern)


def glob_matches(entry: Entry, file_glob: str, start_parts: tuple[str, ...]) -> bool:
    """A glob without ``/`` matches the file name; with ``/`` it matches the path below the start."""
    if file_glob in ("", "*"):
        return True
    if "/" in file_glob:
        return fnmatch.fnmatchcase("/".join(entry.parts[len(start_parts) :]), file_glob)
    return fnmatch.fnmatchcase(entry.parts[-1], file_glob)


def search(
    ws: Workspace,
    pattern: str,
    *,
    file_glob: str = "*",
    start: str = ".",
    limit: int = 200,
    engine: str = "auto",
) -> SearchResult:
    """Matching lines under ``start``; ``engine`` is ``auto``, ``python`` or ``rg``."""
    regex = compile_pattern(pattern)
    loc = ws.locate(start)
    walker = Walker(ws, loc)
    walked = [e for e in walker if e.kind == "file" and glob_matches(e, file_glob, loc.parts)]
    files = [e for e in walked if e.size <= MAX_FILE_BYTES]
    is_dir = not walked or walked[0].parts != loc.parts
    use_rg = is_dir and (engine == "rg" or (engine == "auto" and len(files) >= RG_MIN_FILES))
    found = _rg_candidates(ws, loc, pattern) if use_rg else None
    result = SearchResult(skipped=Counter(walker.skipped), complete=walker.complete, files_searched=len(walked))
    # Decided from the walk alone (never from which files ripgrep flags), so the count says
    # nothing about content.
    if len(files) < len(walked):
        result.skipped["files over 8 MB"] += len(walked) - len(files)
    candidates: list[tuple[Entry, list[int] | None]] = [(e, None) for e in files]
    if found is not None:
        result.engine = "rg"
        depth, safe = len(loc.parts), line_safe(pattern)
        candidates = []
        for entry in files:
            offsets = found.get("/".join(entry.parts[depth:]))
            if offsets is not None:
                candidates.append((entry, offsets if safe else None))
    elif engine == "rg" and use_rg:
        result.engine = RG_FALLBACK
    with FolderReader(ws) as reader:
        for entry, offsets in candidates:
            _search_file(reader, entry, offsets, regex, result, limit)
    return result


# Where ripgrep's engine (Rust ``regex``, Unicode classes, lines ending at ``\n``) may match
# fewer lines than RE2 on the shown line (ASCII ``\b \W \D \S``, ``$`` before a ``\r``
# the shown line has lost, ``\A``/``\z`` at each line's edges, inline flags): such a pattern
# uses ripgrep to pick files only, and RE2 reads every line of them.
_LINE_UNSAFE = re.compile(r"\\[bBAzZWDS]|\$|\(\?(?!:|P<)")


def line_safe(pattern: str) -> bool:
    """Whether every line RE2 matches is also one ripgrep reports, so its line list may be used."""
    return _LINE_UNSAFE.search(pattern) is None


class FolderReader:
    """Reads files through the fence folder by folder: one no-follow walk to each folder, then
    one ``open_regular_at`` per file in it (the same checks as ``Workspace.read_bytes``)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.folder: tuple[object, tuple[str, ...]] | None = None
        self.stack = ExitStack()
        self.fd = -1

    def __enter__(self) -> FolderReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stack.close()

    def read(self, entry: Entry) -> bytes:
        """The file's bytes (at most ``MAX_FILE_BYTES``), or ``ToolFailure``."""
        folder = (entry.root, entry.parts[:-1])
        if folder != self.folder:
            self.stack.close()
            self.folder, self.fd = None, -1
            self.fd = self.stack.enter_context(self.ws.parent_dir(entry.location))
            self.folder = folder
        fd, st = open_regular_at(self.fd, entry.parts[-1], entry.path)
        try:
            if st.st_size > MAX_FILE_BYTES:
                raise ToolFailure(ErrorCode.TOO_LARGE, f"{entry.path!r} is over the read limit")
            # One read sized by fstat (a 1 MB buffer per small file costs more than the read);
            # anything but exactly the size reads on to the end, as ``read_upto`` does.
            data = os.read(fd, st.st_size + 1)
            if len(data) != st.st_size:
                data += read_upto(fd, MAX_FILE_BYTES + 1 - len(data))
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_BYTES:
            raise ToolFailure(ErrorCode.TOO_LARGE, "file grew past the read limit while reading")
        return data


def _search_file(reader: FolderReader, entry: Entry, offsets: list[int] | None, regex: Matcher, result: SearchResult, limit: int) -> None:
    """Count and keep ``entry``'s matching lines, read through the fence and matched on RE2.

    ``offsets`` (ripgrep's line starts) limits RE2 to those lines; None (or offsets that no
    longer fall on line starts: the file changed) means every line.
    """
    try:
        data = reader.read(entry)
    except (ToolFailure, OSError):
        result.skipped["files that changed or became links while searching"] += 1
        return
    reason = "binary files" if b"\x00" in data else ""
    try:
        text = data.decode("utf-8") if not reason else ""
    except UnicodeDecodeError:
        reason = "files that are not UTF-8"
    if reason:
        # Not shown, but said: counted when the pattern matches their lossily decoded text
        # (the same files ripgrep's byte-level search would flag).
        lossy = data.decode("utf-8", "replace")
        if any(regex.search(shown(line)) for line in split_lines(lossy)):
            result.skipped[f"{reason} with a possible match (not shown)"] += 1
        return
    listed = _listed_lines(data, offsets) if offsets is not None else None
    lines = listed if listed is not None else enumerate((shown(raw).encode() for raw in split_lines(text)), start=1)
    matched = False
    for number, line in lines:
        if regex.search(line):  # RE2 on the line's UTF-8 bytes: the same answer as on its text
            matched = True
            result.total += 1
            if len(result.hits) < limit:
                result.hits.append(Hit(entry.path, number, line.decode("utf-8")))
    if matched:
        result.files_matched += 1


def _listed_lines(data: bytes, offsets: list[int]) -> list[tuple[int, bytes]] | None:
    """``(number, shown line)`` at each byte offset, numbered from the data itself; None when an
    offset is not a line start (the file changed since ripgrep read it)."""
    out: list[tuple[int, bytes]] = []
    number, counted_to = 1, 0
    for off in offsets if len(offsets) == 1 else sorted(set(offsets)):
        if off >= len(data) or (off and data[off - 1] != 0x0A):
            return None
        number += data.count(b"\n", counted_to, off)
        counted_to = off
        end = data.find(b"\n", off)
        out.append((number, (data[off:] if end < 0 else data[off:end]).removesuffix(b"\r")))
    return out


def rg_path() -> str | None:
    return shutil.which("rg")


def _rg_candidates(ws: Workspace, loc: Location, pattern: str) -> dict[str, list[int]] | None:
    """``{path below the start: byte offsets of its matching lines}`` as ripgrep reports them, or
    None to go without it.

    None also when the start folder can no longer be opened through the fence, or when any
    folder below it changed while ripgrep ran: then every walked file is read instead. Only
    walked files are ever looked up in the answer.
    """
    rg = rg_path()
    if rg is None:
        return None
    argv = [
        rg, "--null", "--line-number", "--byte-offset", "--no-heading", "--with-filename", "--color", "never",
        "--max-columns", "1", "--no-config", "--hidden", "--no-ignore", "--no-follow", "--no-messages", "--text",
        "--max-depth", str(RG_MAX_DEPTH), "--", pattern, ".",
    ]  # fmt: skip
    try:
        with ws.directory(loc) as fd:
            before = settled_stamps(fd)
            if before is None:
                return None
            proc = run_rg(argv, fd)
            if proc is None or folder_stamps(fd) != before:
                return None
    except (ToolFailure, OSError):
        return None  # the start folder became a link or vanished: the fenced reads decide
    if proc.returncode not in (0, 1):
        return None  # e.g. a pattern Rust's regex rejects: the pure-Python search answers
    return parse_rg_lines(proc.stdout)


def parse_rg_lines(out: bytes) -> dict[str, list[int]] | None:
    """``{relative path: [line start offsets]}`` from ``path NUL number:offset:...`` records, or
    None when any record does not parse (a file name holding a newline splits its record)."""
    if out and not out.endswith(b"\n"):
        return None
    found: dict[str, list[int]] = {}
    for record in out.split(b"\n")[:-1]:
        name, nul, rest = record.partition(b"\x00")
        fields = rest.split(b":", 2)
        if not nul or len(fields) < 3 or not (fields[0].isdigit() and fields[1].isdigit()):
            return None
        found.setdefault(os.fsdecode(name).removeprefix("./"), []).append(int(fields[1]))
    return found


def run_rg(argv: list[str], dir_fd: int) -> subprocess.CompletedProcess[bytes] | None:
    """Run ripgrep inside the folder open as ``dir_fd`` (never a path the OS resolves again).

    The child keeps the descriptor (``pass_fds``) and changes into ``/proc/self/fd/N``, a link
    the kernel resolves to the open folder itself, wherever it has been renamed or swapped since.
    """
    try:
        return subprocess.run(
            argv,
            check=False,
            cwd=f"/proc/self/fd/{dir_fd}",
            pass_fds=(dir_fd,),
            env={"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"},
            capture_output=True,
            timeout=RG_TIMEOUT,
        )
    except (OSError, subprocess.SubprocessError):
        return None


Stamp = tuple[int, int, int, int]
SETTLE_NS = 20_000_000  # past the coarsest timestamp tick (10 ms at HZ=100)


def settled_stamps(fd: int) -> dict[str, Stamp] | None:
    """``folder_stamps`` whose ctimes are all older than one timestamp tick, or None.

    File times advance in ticks, so a change made in the same tick as the last one before the
    stamps would leave a ctime equal; a tree changed that recently is stamped once more after a
    short wait, and not used with ripgrep at all if it is still changing.
    """
    for attempt in range(2):
        taken = time.time_ns()
        stamps = folder_stamps(fd)
        if stamps is None:
            return None
        if all(ctime < taken - SETTLE_NS for _d, _i, _m, ctime in stamps.values()):
            return stamps
        if attempt == 0:
            time.sleep(2 * SETTLE_NS / 1e9)
    return None


def folder_stamps(fd: int) -> dict[str, Stamp] | None:
    """``(device, inode, mtime, ctime)`` of the folder open as ``fd`` and of every folder below it.

    Any entry created, removed, renamed or swapped in a folder changes that folder's ctime (and
    setting times back changes it too), so equal stamps before and after ripgrep mean it walked
    the tree the fence sees. None when there are more than ``RG_MAX_DIRS`` folders.
    """
    stamps: dict[str, Stamp] = {}

    def visit(dir_fd: int, rel: str, depth: int) -> bool:
        st = os.fstat(dir_fd)
        stamps[rel] = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)
        if len(stamps) > RG_MAX_DIRS:
            return False
        if depth >= RG_MAX_DEPTH:
            return True
        for name in subfolders(dir_fd):
            try:
                child = open_dir(name, dir_fd)
            except OSError:
                stamps[f"{rel}/{name}"] = (-1, -1, -1, -1)  # swapped for a link: never equal to a later open
                continue
            try:
                if not visit(child, f"{rel}/{name}", depth + 1):
                    return False
            finally:
                os.close(child)
        return True

    return stamps if visit(fd, ".", 0) else None


def subfolders(fd: int) -> list[str]:
    """Names of the folders (never links) in the folder open as ``fd``, sorted: from the listing's
    file types, so without a ``stat`` per entry (``DirEntry`` stats only when the type is unknown)."""
    with os.scandir(fd) as listing:
        return sorted(e.name for e in listing if e.is_dir(follow_symlinks=False))

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
import shutil
import stat
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.safe_regex import Matcher, compile_untrusted
from kernel_ext.tools.files_common import shown, split_lines
from kernel_ext.workspace import Entry, Location, Walker, Workspace
from kernel_ext.workspace.treewalk import entries, open_dir

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
    result = SearchResult(skipped=Counter(walker.skipped), complete=walker.complete, files_searched=len(walked))
    # Decided from the walk alone (never from which files ripgrep flags), so the count says
    # nothing about content.
    files = [e for e in walked if e.size <= MAX_FILE_BYTES]
    if len(files) < len(walked):
        result.skipped["files over 8 MB"] += len(walked) - len(files)
    candidates = files
    is_dir = not walked or walked[0].parts != loc.parts
    use_rg = is_dir and (engine == "rg" or (engine == "auto" and len(files) >= RG_MIN_FILES))
    if use_rg:
        narrowed = _rg_candidates(ws, loc, pattern, files)
        if narrowed is not None:
            candidates, result.engine = narrowed, "rg"
        elif engine == "rg":
            result.engine = RG_FALLBACK
    for entry in candidates:
        _search_file(ws, entry, regex, result, limit)
    return result


def _search_file(ws: Workspace, entry: Entry, regex: Matcher, result: SearchResult, limit: int) -> None:
    try:
        data, _ = ws.read_bytes(entry.location, MAX_FILE_BYTES)
    except ToolFailure:
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
    matched = False
    for number, raw in enumerate(split_lines(text), start=1):
        line = shown(raw)
        if regex.search(line):
            matched = True
            result.total += 1
            if len(result.hits) < limit:
                result.hits.append(Hit(entry.path, number, line))
    if matched:
        result.files_matched += 1


def rg_path() -> str | None:
    return shutil.which("rg")


def _rg_candidates(ws: Workspace, loc: Location, pattern: str, files: list[Entry]) -> list[Entry] | None:
    """Files ripgrep reports a match in (as walk entries, in walk order), or None to go without it.

    None also when the start folder can no longer be opened through the fence, or when any
    folder below it changed while ripgrep ran: then every walked file is read instead.
    """
    rg = rg_path()
    if rg is None:
        return None
    argv = [
        rg, "--files-with-matches", "--null", "--no-config", "--hidden", "--no-ignore",
        "--no-follow", "--no-messages", "--text", "--max-depth", str(RG_MAX_DEPTH), "--", pattern, ".",
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
    found = set()
    for raw in proc.stdout.split(b"\x00"):
        if raw:
            name = os.fsdecode(raw)
            found.add(name.removeprefix("./"))
    depth = len(loc.parts)
    return [e for e in files if "/".join(e.parts[depth:]) in found]


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
        for name, child_st in entries(dir_fd):
            if not stat.S_ISDIR(child_st.st_mode):
                continue
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

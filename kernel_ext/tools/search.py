"""Searching file contents inside the fence, with ripgrep as an optional accelerator.

The contract is a regular expression on RE2 (``kernel_ext.safe_regex``: linear time, so no
pattern can stall the process; Python's ``re`` holds the GIL while it backtracks) applied line by line to the UTF-8 text files the fence walk
yields (links never followed, internal folders and temporaries skipped, binary files counted
and skipped). Every reported line comes from a file read through the fence, so no content is
ever read through a link, even if one is swapped in mid-search.

ripgrep, when installed and the tree is large, only narrows which files are read: it lists
files with a match (``--`` before the pattern, so a pattern starting with a dash is a pattern,
not an option), and the same Python matcher then runs on those files. Its answer is therefore
the pure-Python answer; if ripgrep rejects a pattern RE2 accepts, the search runs without it.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.safe_regex import Matcher, compile_untrusted
from kernel_ext.tools.files_common import shown, split_lines
from kernel_ext.workspace import Entry, Walker, Workspace

RG_MIN_FILES = 200
RG_TIMEOUT = 20.0
MAX_FILE_BYTES = 8 * 1024 * 1024


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
    files = [e for e in walker if e.kind == "file" and glob_matches(e, file_glob, loc.parts)]
    result = SearchResult(skipped=Counter(walker.skipped), complete=walker.complete)
    candidates = files
    is_dir = not files or files[0].parts != loc.parts
    use_rg = is_dir and (engine == "rg" or (engine == "auto" and len(files) >= RG_MIN_FILES))
    if use_rg:
        narrowed = _rg_candidates(ws, loc.root.joinpath(*loc.parts), loc.parts, pattern, files)
        if narrowed is not None:
            candidates, result.engine = narrowed, "rg"
        elif engine == "rg":
            result.engine = "python (rg unavailable or rejected the pattern)"
    result.files_searched = len(files)
    for entry in candidates:
        _search_file(ws, entry, regex, result, limit)
    return result


def _search_file(ws: Workspace, entry: Entry, regex: Matcher, result: SearchResult, limit: int) -> None:
    if entry.size > MAX_FILE_BYTES:
        result.skipped["files over 8 MB"] += 1
        return
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


def _rg_candidates(ws: Workspace, directory, start_parts: tuple[str, ...], pattern: str, files: list[Entry]) -> list[Entry] | None:
    """Files ripgrep reports a match in (as walk entries, in walk order), or None to go without it."""
    rg = rg_path()
    if rg is None:
        return None
    argv = [
        rg, "--files-with-matches", "--null", "--no-config", "--hidden", "--no-ignore",
        "--no-follow", "--no-messages", "--text", "--", pattern, ".",
    ]  # fmt: skip
    try:
        proc = subprocess.run(
            argv,
            check=False,
            cwd=directory,
            env={"PATH": os.environ.get("PATH", os.defpath), "LANG": "C.UTF-8"},
            capture_output=True,
            timeout=RG_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode not in (0, 1):
        return None  # e.g. a pattern Rust's regex rejects: the pure-Python search answers
    found = set()
    for raw in proc.stdout.split(b"\x00"):
        if raw:
            name = os.fsdecode(raw)
            found.add(name.removeprefix("./"))
    depth = len(start_parts)
    return [e for e in files if "/".join(e.parts[depth:]) in found]

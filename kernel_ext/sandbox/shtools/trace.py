"""``trace``: a best-effort file and process trace of one command through ``strace``.

The command runs under ``strace -f`` inside the same sandbox (tracing one's own children
needs no privilege); the trace is written to a host folder the sandbox may write, read back
when the command ends, summarised for the result (programs run, files written, deleted,
renamed, directories made) and stored whole for ``sh_detail``. A command can tamper with
its own trace, so this is a debugging aid, never evidence. Without ``strace`` on the host the
result says ``trace_unavailable``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TRACE_CLASSES = "trace=file,process"
SHOWN = 20
_LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+|\?)")
_UNFINISHED = re.compile(r"^(\d+)\s+(\w+)\((.*)\s+<unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>(.*)\)\s+=\s+(-?\d+|\?)")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_WRITE_FLAGS = ("O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND")
_NOISE = ("/proc/", "/dev/", "/sys/", "/etc/ld.so", "/usr/lib/locale")


def strace_path() -> str | None:
    """The host's strace, or None (tests point this at nothing to check the fallback)."""
    return shutil.which("strace")


def wrap(argv: Sequence[str], trace_file: str | os.PathLike[str], strace: str) -> list[str]:
    return [strace, "-f", "-qq", "-o", str(trace_file), "-e", TRACE_CLASSES, "--", *argv]


def _calls(text: str) -> list[tuple[str, str, str, str]]:
    """``(pid, syscall, arguments, result)`` with unfinished/resumed pairs joined."""
    pending: dict[tuple[str, str], str] = {}
    out = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            pid, name, arguments, result = match.groups()
            out.append((pid, name, arguments, result))
            continue
        match = _UNFINISHED.match(line)
        if match:
            pending[(match.group(1), match.group(2))] = match.group(3)
            continue
        match = _RESUMED.match(line)
        if match:
            pid, name, tail, result = match.groups()
            out.append((pid, name, pending.pop((pid, name), "") + tail, result))
    return out


def summarize(text: str, workspace: Path) -> dict[str, Any]:
    """Counts and bounded lists from a trace: what ran, what was written, deleted, renamed."""
    pids: set[str] = set()
    execs: list[str] = []
    written: list[str] = []
    deleted: list[str] = []
    renamed: list[str] = []
    made: list[str] = []
    reads = failed = 0
    for pid, name, args, result in _calls(text):
        pids.add(pid)
        ok = result != "?" and not result.startswith("-")
        paths = [_shown(p, workspace) for p in _STRING.findall(args)]
        if not ok:
            failed += 1
            continue
        if name in ("execve", "execveat") and paths:
            _add(execs, os.path.basename(paths[0]))
        elif name in ("open", "openat", "creat", "openat2") and paths:
            if name == "creat" or any(flag in args for flag in _WRITE_FLAGS):
                if not paths[0].startswith(_NOISE):
                    _add(written, paths[0])
            else:
                reads += 1
        elif name in ("unlink", "unlinkat", "rmdir") and paths:
            _add(deleted, paths[0])
        elif name in ("rename", "renameat", "renameat2") and len(paths) >= 2:
            _add(renamed, f"{paths[0]} -> {paths[1]}")
        elif name in ("mkdir", "mkdirat") and paths:
            _add(made, paths[0])
    summary: dict[str, Any] = {"processes": len(pids), "programs": execs[:SHOWN], "files_read": reads}
    for key, items in (("files_written", written), ("files_deleted", deleted), ("renamed", renamed), ("dirs_created", made)):
        if items:
            summary[key] = items[:SHOWN]
            if len(items) > SHOWN:
                summary[f"{key}_total"] = len(items)
    if failed:
        summary["failed_calls"] = failed
    return summary


def _shown(path: str, workspace: Path) -> str:
    prefix = str(workspace).rstrip("/") + "/"
    return path.removeprefix(prefix)


def _add(items: list[str], value: str) -> None:
    if value not in items:
        items.append(value)

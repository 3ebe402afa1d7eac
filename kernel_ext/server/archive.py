"""The run archive: a zip of a run's folder, written from descriptors, with portable entry names.

The zip holds ``app/`` (the generated project), ``events.jsonl`` and ``run.json``, under a
``<run-id>/`` prefix. Left out: ``.besser/`` (sandbox home, snapshots, state), the shell's
spilled output (``.besser_command_output/``), caches and dependency trees, publish temporaries.

A background job may be changing ``app/`` while the zip is written, so every entry is reached
the fence's way (``workspace/treewalk``): folders opened no-follow from their parent's
descriptor, files opened no-follow and non-blocking and checked with ``fstat``, and the entry
written from that very descriptor. A link, FIFO, socket or device (even one swapped in after the
listing) is never followed, opened or waited on; it is left out and counted.

Entry names must extract safely everywhere: a name with ``\\``, ``:``, a drive letter, a reserved
Windows device name (``CON``, ``PRN``, ``AUX``, ``NUL``, ``COM1``-``9``, ``LPT1``-``9``, with any
extension), characters Windows refuses, or a trailing dot or space is renamed; ``..``, empty and
absolute names never occur. What was renamed or left out is listed in ``ARCHIVE-NOTES.txt``.

The zip is bounded by the archive budget (``workspace/treebudget``): every file is charged its
apparent size (a sparse file what it claims, each hard-linked name again) before a byte is
read, and read no further than that. A file that does not fit is left out and named in the
notes, and the walk goes on, so ``events.jsonl`` and ``run.json`` still make it in: a download
with a clear list of what is missing is worth more than a refusal, and the server's CPU and
spool stay bounded either way.
"""

from __future__ import annotations

import os
import re
import stat
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import IO

from kernel_ext.workspace import treewalk
from kernel_ext.workspace.internal import INTERNAL_NAMES
from kernel_ext.workspace.publish import is_temp_name
from kernel_ext.workspace.treebudget import TreeBudget, TreeLimits

EXCLUDED_NAMES = INTERNAL_NAMES | frozenset({"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                            "node_modules", ".venv"})
NOTES_NAME = "ARCHIVE-NOTES.txt"
_RESERVED = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{dev}{n}" for dev in ("COM", "LPT") for n in (*"123456789", "\u00b9", "\u00b2", "\u00b3")}
)
_UNPORTABLE = re.compile(r'[\\:*?"<>|\x00-\x1f\x7f]')
RENAMED = "renamed to a portable name"
COLLIDED = "left out: its portable name was already taken"
OVER_BUDGET = "left out: past the archive budget (apparent size; BESSER_ARCHIVE_MAX_BYTES / BESSER_ARCHIVE_MAX_FILES)"
LISTED = 200  # names listed in the notes; the rest are counted


def is_internal(name: str) -> bool:
    return name in EXCLUDED_NAMES or is_temp_name(name)


def portable_part(part: str) -> str | None:
    """``part`` as a name every system extracts as one plain component (None: no such name)."""
    if part in ("", ".", ".."):
        return None
    fixed = _UNPORTABLE.sub("_", part)
    if fixed.endswith((".", " ")):  # Windows drops trailing dots and spaces
        fixed = fixed.rstrip(". ") + "_"
    if fixed.split(".", 1)[0].rstrip(" ").upper() in _RESERVED:
        fixed = "_" + fixed
    return fixed if fixed not in ("", ".", "..") else None


def portable_name(parts: list[str] | tuple[str, ...]) -> str | None:
    """A relative, ``/``-joined entry name of portable components, or None when there is none."""
    fixed = [portable_part(p) for p in parts]
    if not fixed or any(p is None for p in fixed):
        return None
    return "/".join(p for p in fixed if p is not None)


def write_archive(run_dir: Path, out: IO[bytes], notes: Counter | None = None, limits: TreeLimits | None = None) -> int:
    """Write the zip of ``run_dir`` to ``out``; the number of files it holds.

    ``notes`` counts what was left out or renamed, by reason (also written to the notes entry).
    ``limits``: the archive budget (default: the operator's, from the environment).
    """
    notes = treewalk.Notes() if notes is None else notes
    budget = TreeBudget(limits or TreeLimits.for_kind("archive"))
    prefix = portable_part(run_dir.name) or "run"
    listed: list[str] = []
    used: set[str] = set()
    count = 0
    fd = treewalk.open_dir(run_dir)
    try:
        with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for rel, file_fd, st in treewalk.regular_files(fd, is_internal, notes):
                name = portable_name(rel.split("/"))
                if name is None:
                    notes["left out: no portable name"] += 1
                    continue
                if name in used or name == NOTES_NAME:
                    notes[COLLIDED] += 1
                    listed.append(f"{rel!a} (left out: {name!r} is taken)")
                    continue
                if budget.fits(st) is not None:
                    notes[OVER_BUDGET] += 1
                    listed.append(f"{rel!a} (left out: claims {st.st_size} bytes, past the archive budget)")
                    continue
                budget.add(st)
                if name != rel:
                    notes[RENAMED] += 1
                    listed.append(f"{rel!a} -> {name}")
                used.add(name)
                _write_entry(archive, f"{prefix}/{name}", file_fd, st)
                count += 1
            if notes:
                more = [f"... and {len(listed) - LISTED} more"] if len(listed) > LISTED else []
                lines = [f"{n} {reason}" for reason, n in sorted(notes.items())] + ["", *listed[:LISTED], *more]
                archive.writestr(f"{prefix}/{NOTES_NAME}", "\n".join(lines) + "\n")
    finally:
        os.close(fd)
    return count


def _write_entry(archive: zipfile.ZipFile, name: str, fd: int, st: os.stat_result) -> None:
    """One zip entry written from the descriptor that was checked (never reopened by path)."""
    year, *rest = time.localtime(st.st_mtime)[:6]
    info = zipfile.ZipInfo(name, date_time=(min(max(year, 1980), 2107), *rest))  # type: ignore[arg-type]
    info.external_attr = (stat.S_IFREG | stat.S_IMODE(st.st_mode)) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    with archive.open(info, "w", force_zip64=st.st_size > (1 << 30)) as entry:
        for chunk in treewalk.read_chunks(fd, st.st_size):  # never past what was charged
            entry.write(chunk)

"""What every file tool shares: loading a fenced text file, line arithmetic, short diffs.

Lines are split on ``\\n`` only (never on form feeds or Unicode separators, which Python
source may contain), each keeping its ending, so ``"".join(lines)`` is the file again and
line numbers mean the same thing in ``read_file``, the edit tools and the syntax gate.
"""

from __future__ import annotations

import difflib
import re
import stat
from dataclasses import dataclass
from functools import cached_property

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.textdiff import diff_lines
from kernel_ext.tools.base import ToolContext
from kernel_ext.workspace import (
    Identity,
    Location,
    Workspace,
    sha256_hex,
    similar_paths,
)

FILE_SERVICES = frozenset({"workspace"})
MAX_TEXT_BYTES = 8 * 1024 * 1024
_HUNK_START = re.compile(r"([-+])(\d+)")


@dataclass(frozen=True)
class Loaded:
    """A text file as read through the fence: bytes, decoded text, identity and digest."""

    loc: Location
    data: bytes
    text: str
    identity: Identity
    sha256: str

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.text)

    @cached_property
    def newline(self) -> str:
        return newline_of(self.lines) if "\r\n" in self.text else "\n"


def workspace_of(ctx: ToolContext) -> Workspace:
    return ctx.service("workspace")


def locate(ctx: ToolContext, path: str) -> Location:
    return workspace_of(ctx).locate(path)


def load_text(ctx: ToolContext, loc: Location) -> Loaded:
    """Read ``loc`` as UTF-8 text; a missing file answers with look-alike paths (never substituted)."""
    ws = workspace_of(ctx)
    try:
        data, st = ws.read_bytes(loc, MAX_TEXT_BYTES)
    except ToolFailure as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            raise not_found(ws, loc) from None
        raise
    if b"\x00" in data:
        raise ToolFailure(ErrorCode.NOT_TEXT, f"{loc.display!r} is a binary file ({len(data)} bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure(ErrorCode.NOT_TEXT, f"{loc.display!r} is not UTF-8 text ({len(data)} bytes)") from None
    return Loaded(loc, data, text, Identity.of(st), sha256_hex(data))


def existing(ctx: ToolContext, loc: Location) -> bool:
    """True when ``loc`` exists (a link or special file there is refused, not reported missing)."""
    st = workspace_of(ctx).lstat(loc)
    if st is None:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise ToolFailure(ErrorCode.SYMLINK_REFUSED, f"{loc.display!r} is a symbolic link; links are never followed")
    if not stat.S_ISREG(st.st_mode):
        raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, f"{loc.display!r} is not a regular file")
    return True


def not_found(ws: Workspace, loc: Location) -> ToolFailure:
    suggestions = similar_paths(ws, loc.display)
    hint = f"; existing paths that look close: {', '.join(suggestions)}" if suggestions else ""
    return ToolFailure(
        ErrorCode.NOT_FOUND,
        f"{loc.display!r} does not exist{hint}. Nothing was substituted; use the exact path you mean",
        {"did_you_mean": suggestions},
    )


# -- lines --------------------------------------------------------------------------------


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; no empty phantom line after a final newline."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def newline_of(lines: list[str]) -> str:
    """``\\r\\n`` when every terminated line uses it, else ``\\n``."""
    ended = [line for line in lines if line.endswith("\n")]
    if ended and all(line.endswith("\r\n") for line in ended):
        return "\r\n"
    return "\n"


def to_newline(text: str, newline: str) -> str:
    """``text`` with its line endings made ``newline`` (edit text arrives with ``\\n``)."""
    unified = text.replace("\r\n", "\n")
    return unified if newline == "\n" else unified.replace("\n", newline)


def shown(line: str) -> str:
    """A line as displayed: without its ending."""
    line = line.removesuffix("\n")
    line = line.removesuffix("\r")
    return line


def count_lines(text: str) -> int:
    return len(split_lines(text))


# -- diffs ----------------------------------------------------------------------------------


def window_diff(path: str, old: list[str], new: list[str], first: int, old_end: int, new_end: int, context: int = 3) -> str:
    """A unified diff of one changed region (1-based ``first``..``old_end`` became ..``new_end``).

    Only the region plus ``context`` lines is diffed, so a one-line edit of a long file costs
    what the region costs.
    """
    lo = max(first - 1 - context, 0)
    old_hi = min(old_end + context, len(old))
    new_hi = min(new_end + context, len(new))
    lines = diff_lines(old[lo:old_hi], new[lo:new_hi], f"a/{path}", f"b/{path}", context=context)
    return "".join(_shift_hunk(line, lo) if line.startswith("@@") else line for line in lines)


def full_diff(path: str, old: list[str], new: list[str]) -> str:
    return "".join(diff_lines(old, new, f"a/{path}", f"b/{path}"))


def changed_ranges(old: list[str], new: list[str]) -> tuple[tuple[int, int], ...]:
    """1-based inclusive line ranges of ``new`` that differ from ``old`` (deletions mark the next line)."""
    ranges: list[tuple[int, int]] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, _i1, _i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if j2 > j1:
            ranges.append((j1 + 1, j2))
        else:
            ranges.append((j1 + 1, j1))  # pure deletion: an empty range before line j1 + 1
    return tuple(ranges)


def _shift_hunk(header: str, offset: int) -> str:
    """``@@ -a,b +c,d @@`` computed on a window: move both starts by the window's offset."""
    return _HUNK_START.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + offset}", header, count=2)

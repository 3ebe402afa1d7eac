"""A quiet view of a stream for a result: head and tail lines, true counts, and what the middle hid.

A build log's verdict is usually at its end and its first error somewhere in the middle, so a
long stream keeps its first and last lines and, from the omitted middle, the lines that look
like failures (``Traceback``, ``error:``, ``FAILED``, ``! [rejected]``...), each with its line
number. Binary output is never inlined. The full stream stays in the record store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernel_ext.safe_regex import Matcher

INLINE_LINES = 45
HEAD_LINES = 20
TAIL_LINES = 20
LINE_CHARS = 400
STREAM_CHARS = 6000
FULL_CHARS = 12_000
NOTABLE_MAX = 6
_NOTABLE = re.compile(
    r"Traceback|\bError\b|\bERROR\b|error:|\bFAIL(?:ED|URE)?\b|Exception\b|panic:|fatal:|SIGSEGV|Segmentation fault"
    r"|\bCONFLICT\b|! \[rejected\]|npm ERR!|AssertionError|Killed|Permission denied|No such file|command not found"
)


@dataclass(frozen=True)
class View:
    text: str
    lines: int
    truncated: bool
    binary: bool


def count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def is_binary(data: bytes) -> bool:
    """NUL bytes, or mostly undecodable: not text a model should read inline."""
    sample = data[:65536]
    if b"\x00" in sample:
        return True
    text = sample.decode("utf-8", "replace")
    return text.count("\ufffd") > max(8, len(text) // 20)


def view(data: bytes, *, full: bool = False, total_lines: int | None = None) -> View:
    """The inline view of ``data``: whole when short (or ``full``, up to a bound), else condensed."""
    lines_total = total_lines if total_lines is not None else count_lines(data)
    if not data:
        return View("", 0, False, False)
    if is_binary(data):
        return View(f"[binary output: {len(data)} bytes; fetch it with sh_detail]", lines_total, True, True)
    text = data.decode("utf-8", "replace")
    if full:
        if len(text) <= FULL_CHARS:
            return View(text, lines_total, False, False)
        return View(text[:FULL_CHARS] + f"\n[... {len(text) - FULL_CHARS} more characters; sh_detail has them ...]", lines_total,
                    True, False)
    lines = text.splitlines()
    cut = False
    if len(lines) > INLINE_LINES:
        middle = lines[HEAD_LINES:-TAIL_LINES]
        notable = [(HEAD_LINES + i + 1, line) for i, line in enumerate(middle) if _NOTABLE.search(line)][:NOTABLE_MAX]
        marker = [f"[... {len(middle)} lines omitted (lines {HEAD_LINES + 1}-{len(lines) - TAIL_LINES}) ...]"]
        marker += [f"[line {number}] {_clip(line)}" for number, line in notable]
        lines = lines[:HEAD_LINES] + marker + lines[-TAIL_LINES:]
        cut = True
    clipped = [_clip(line) for line in lines]
    cut = cut or any(a != b for a, b in zip(clipped, lines, strict=True))
    out = "\n".join(clipped)
    if len(out) > STREAM_CHARS:
        half = STREAM_CHARS // 2
        out = out[:half] + f"\n[... {len(out) - 2 * half} characters omitted ...]\n" + out[-half:]
        cut = True
    return View(out, lines_total, cut, False)


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + f" [... {len(line) - LINE_CHARS} more characters]"


def matching_lines(data: bytes, pattern: Matcher, start: int = 1, limit: int = 200) -> tuple[list[str], int, int | None]:
    """``"N: line"`` for lines matching ``pattern`` from line ``start``; also the match count and where to continue."""
    out: list[str] = []
    matches = 0
    next_line = None
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if number < start or not pattern.search(line):
            continue
        matches += 1
        if len(out) < limit:
            out.append(f"{number}: {_clip(line)}")
        elif next_line is None:
            next_line = number
    return out, matches, next_line


def line_page(data: bytes, start: int = 1, limit: int = 400, max_chars: int = FULL_CHARS) -> tuple[str, int | None]:
    """Lines ``start``.. of ``data`` (at most ``limit`` lines and ``max_chars``); where to continue."""
    lines = data.decode("utf-8", "replace").splitlines()
    chosen: list[str] = []
    size = 0
    index = start - 1
    while index < len(lines) and len(chosen) < limit:
        line = _clip(lines[index])
        if size + len(line) > max_chars and chosen:
            break
        chosen.append(line)
        size += len(line) + 1
        index += 1
    return "\n".join(chosen), (index + 1 if index < len(lines) else None)

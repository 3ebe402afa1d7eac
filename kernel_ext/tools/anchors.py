"""Anchor matching for ``modify_file``: a short ladder of tiers, each required to be unambiguous.

Tiers, tried in order, the first with any match wins:

1. ``exact``: the text as given;
2. ``line-ends``: whole lines equal once trailing whitespace is ignored (and blank lines at
   the anchor's edges dropped);
3. ``indentation``: whole lines equal once leading whitespace is ignored, provided every line
   is off by the same indentation shift; the new text is shifted the same way.

A tier with more than one match is an ``ambiguous_match`` refusal listing the lines: choosing
one would be an edit in a place the model did not mean and a success it did not earn. No
similarity-based tier exists on purpose; a near miss gets the closest lines as a hint.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode, ToolFailure


@dataclass(frozen=True)
class Match:
    start: int  # character offsets into the file text
    end: int
    tier: str
    first_line: int  # 1-based, inclusive
    last_line: int
    replacement: str  # the new text as it goes into this span


def find(text: str, lines: list[str], old_text: str, new_text: str, *, replace_all: bool = False) -> list[Match]:
    """The matches of ``old_text`` at the first tier that has any; refusals are named."""
    exact = _exact(text, old_text, new_text)
    if exact:
        if len(exact) > 1 and not replace_all:
            raise _ambiguous("exact", exact)
        return exact
    for tier in ("line-ends", "indentation"):
        found = _by_lines(lines, old_text, new_text, tier)
        if len(found) > 1:
            raise _ambiguous(tier, found)
        if found:
            return found
    return []


def _exact(text: str, old_text: str, new_text: str) -> list[Match]:
    out: list[Match] = []
    pos = text.find(old_text)
    while pos >= 0:
        end = pos + len(old_text)
        first = text.count("\n", 0, pos) + 1
        last = first + old_text.count("\n", 0, len(old_text) - 1 if old_text.endswith("\n") else len(old_text))
        out.append(Match(pos, end, "exact", first, last, new_text))
        pos = text.find(old_text, end)
    return out


def _trim_blank_edges(lines: list[str]) -> tuple[list[str], int, int]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end], start, len(lines) - end


def _by_lines(lines: list[str], old_text: str, new_text: str, tier: str) -> list[Match]:
    wanted, lead, trail = _trim_blank_edges(old_text.replace("\r\n", "\n").split("\n"))
    if not wanted:
        return []
    key = str.rstrip if tier == "line-ends" else str.strip
    wanted_keys = [key(w) for w in wanted]
    file_keys = [key(line.rstrip("\r\n")) for line in lines]
    offsets = _line_offsets(lines)
    out: list[Match] = []
    n = len(wanted)
    for i in range(len(lines) - n + 1):
        if file_keys[i] != wanted_keys[0] or file_keys[i : i + n] != wanted_keys:
            continue
        replacement = _new_block(new_text, lead, trail)
        if tier == "indentation":
            shift = _indent_shift(wanted, [line.rstrip("\r\n") for line in lines[i : i + n]])
            if shift is None:
                continue
            replacement = _apply_shift(replacement, shift)
        end_offset = offsets[i + n]
        if not lines[i + n - 1].endswith("\n") and replacement.endswith("\n"):
            replacement = replacement[:-1]
        elif lines[i + n - 1].endswith("\n") and not replacement.endswith("\n") and replacement:
            replacement += "\n"
        out.append(Match(offsets[i], end_offset, tier, i + 1, i + n, replacement))
    return out


def _line_offsets(lines: list[str]) -> list[int]:
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    return offsets


def _new_block(new_text: str, lead: int, trail: int) -> str:
    """The new text with as many edge blank lines dropped as the anchor had (symmetric edges)."""
    parts = new_text.replace("\r\n", "\n").split("\n")
    body, new_lead, new_trail = _trim_blank_edges(parts)
    keep_lead = max(new_lead - lead, 0)
    keep_trail = max(new_trail - trail, 0)
    block = [""] * keep_lead + body + [""] * keep_trail
    return "\n".join(block) + ("\n" if block else "")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _indent_shift(model: list[str], actual: list[str]) -> tuple[str, str] | None:
    """(remove, add): the one prefix change turning every model line's indent into the file's."""
    shift: tuple[str, str] | None = None
    for m, a in zip(model, actual, strict=False):
        if not m.strip():
            continue
        mi, ai = _indent(m), _indent(a)
        if ai.endswith(mi):
            candidate = ("", ai[: len(ai) - len(mi)])
        elif mi.endswith(ai):
            candidate = (mi[: len(mi) - len(ai)], "")
        else:
            return None
        if shift is None:
            shift = candidate
        elif shift != candidate:
            return None
    return shift


def _apply_shift(block: str, shift: tuple[str, str]) -> str:
    remove, add = shift
    out = []
    for line in block.split("\n"):
        if not line.strip():
            out.append(line)
            continue
        if remove and line.startswith(remove):
            line = line[len(remove) :]
        out.append(add + line)
    return "\n".join(out)


def _ambiguous(tier: str, matches: list[Match]) -> ToolFailure:
    where = ", ".join(f"lines {m.first_line}-{m.last_line}" for m in matches[:10])
    return ToolFailure(
        ErrorCode.AMBIGUOUS_MATCH,
        f"old_text matches {len(matches)} places ({tier} tier): {where}. Nothing was changed. Include more "
        "surrounding lines so it matches once, set replace_all for identical exact occurrences, or use "
        "read_file + replace_file_lines",
        {"matches": [[m.first_line, m.last_line] for m in matches]},
    )


def closest_lines(lines: list[str], old_text: str, limit: int = 3) -> list[int]:
    """Line numbers whose text is closest to the anchor's first non-blank line (a hint only)."""
    first = next((line.strip() for line in old_text.split("\n") if line.strip()), "")
    if not first:
        return []
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(first, stripped, n=limit, cutoff=0.6)
    return sorted({i + 1 for i, line in enumerate(stripped) if line in close})[:limit]


def duplicate_insertion(lines: list[str], match: Match, old_text: str, new_text: str) -> str:
    """Why an insertion looks like a duplicate of adjacent code ('' when it does not)."""
    if new_text.startswith(old_text):
        added, side = new_text[len(old_text) :], "after"
    elif new_text.endswith(old_text):
        added, side = new_text[: len(new_text) - len(old_text)], "before"
    else:
        return ""
    block = [line.strip() for line in added.split("\n") if line.strip()]
    if not block or max(len(line) for line in block) < 4:
        return ""
    span = len(block) + 2
    if side == "after":
        neighbours = [line.strip() for line in lines[match.last_line :] if line.strip()][:span]
    else:
        neighbours = [line.strip() for line in lines[: match.first_line - 1] if line.strip()][-span:]
    anchor = [line.strip() for line in old_text.split("\n") if line.strip()]
    for region, label in ((neighbours, f"the lines {side} the anchor"), (anchor, "the anchor itself")):
        if _contains(region, block):
            return f"the inserted lines repeat {label}"
    return ""


def _contains(haystack: list[str], needle: list[str]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))

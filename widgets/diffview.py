"""Code a person reads on a card: a unified diff as a highlighted table (unified, and side by side
where the diff's own box is wide enough for its longest line on both sides: a CSS container query
on a width class, ``split_width``, picks one), and a new file's content with line numbers.

Highlighting is pygments' lexer (already there with IPython) mapped onto JupyterLab's editor
colours by ``theme.SYNTAX``; each side of a diff is lexed as one text so a string spanning lines
stays a string. Every line is escaped (``render.esc``); text past ``MAX_LINES`` is shown plain.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass
from typing import Any

from widgets.render import esc
from widgets.theme import SPLIT_WIDTHS

MAX_LINES = 2000  # past this a listing is not highlighted (plain, still escaped)
SPLIT_LINES = 600  # past this a diff has no side-by-side copy (it would double a large card)
_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass
class DiffLine:
    kind: str  # "ctx" | "add" | "del" | "hunk"
    old: int | None
    new: int | None
    text: str
    html: str = ""


def parse_unified(diff: str) -> tuple[str, list[DiffLine]]:
    """(the new path, the lines) of a unified diff; file headers are dropped, hunks kept."""
    path, lines = "", []
    old = new = 0
    for raw in diff.splitlines():
        if raw.startswith("+++ "):
            path = raw[4:].removeprefix("b/")
            continue
        if raw.startswith("--- ") or raw.startswith("\\"):
            continue
        match = _HUNK.match(raw)
        if match:
            old, new = int(match.group(1)), int(match.group(2))
            lines.append(DiffLine("hunk", None, None, raw))
        elif raw.startswith("+"):
            lines.append(DiffLine("add", None, new, raw[1:]))
            new += 1
        elif raw.startswith("-"):
            lines.append(DiffLine("del", old, None, raw[1:]))
            old += 1
        else:
            lines.append(DiffLine("ctx", old, new, raw[1:] if raw.startswith(" ") else raw))
            old, new = old + 1, new + 1
    return path, lines


def highlight(lines: list[str], path: str, colour: bool = True) -> list[str]:
    """Each line as escaped HTML with syntax classes (plain escaped when no lexer fits, or not ``colour``)."""
    lexer = _lexer(os.path.splitext(path)[1].lower() or os.path.basename(path)) if colour and lines and len(lines) <= MAX_LINES else None
    if lexer is None:
        return [esc(line) for line in lines]
    from pygments.token import STANDARD_TYPES

    out: list[str] = []
    current: list[str] = []
    for token, value in lexer.get_tokens("\n".join(lines)):
        css = STANDARD_TYPES.get(token) or STANDARD_TYPES.get(token.parent, "")
        for number, piece in enumerate(value.split("\n")):
            if number:
                out.append("".join(current))
                current = []
            if piece:
                current.append(f'<span class="{css}">{esc(piece)}</span>' if css else esc(piece))
    out.append("".join(current))
    out = out[: len(lines)]
    return out + [esc(line) for line in lines[len(out):]]


@functools.lru_cache(maxsize=64)
def _lexer(suffix: str) -> Any:
    """The pygments lexer for a file name's suffix (finding one scans every lexer: done once each)."""
    try:
        from pygments.lexers import get_lexer_for_filename
        from pygments.util import ClassNotFound
    except ImportError:  # pragma: no cover - pygments comes with IPython
        return None
    try:
        return get_lexer_for_filename(f"x{suffix}" if suffix.startswith(".") else suffix, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None


def _highlight_sides(path: str, lines: list[DiffLine], colour: bool) -> None:
    """Lex the old side (context + removed) and the new side (context + added), each as one text."""
    for kinds in (("ctx", "del"), ("add",)):
        side = [line for line in lines if line.kind in kinds]
        for line, shown in zip(side, highlight([line.text for line in side], path, colour), strict=True):
            line.html = shown


MARK = {"add": "+", "del": "−", "ctx": " "}


def _number(value: int | None) -> str:
    return f'<td class="besser-lineno">{value}</td>' if value is not None else '<td class="besser-lineno"></td>'


def _unified(lines: list[DiffLine]) -> str:
    rows = []
    for line in lines:
        if line.kind == "hunk":
            rows.append(f'<tr class="besser-hunk"><td colspan="4">{esc(line.text)}</td></tr>')
            continue
        rows.append(f'<tr class="besser-{line.kind}">{_number(line.old)}{_number(line.new)}'
                    f'<td class="besser-mark">{MARK[line.kind]}</td><td>{line.html}</td></tr>')
    return f'<table class="besser-diff-unified">{"".join(rows)}</table>'


def _split(lines: list[DiffLine]) -> str:
    rows: list[str] = []
    removed: list[DiffLine] = []
    added: list[DiffLine] = []

    def flush() -> None:
        for index in range(max(len(removed), len(added))):
            left = removed[index] if index < len(removed) else None
            right = added[index] if index < len(added) else None
            rows.append(
                "<tr>"
                + (f'{_number(left.old)}<td class="besser-del">{left.html}</td>' if left else '<td></td><td></td>')
                + (f'{_number(right.new)}<td class="besser-add">{right.html}</td>' if right else '<td></td><td></td>')
                + "</tr>"
            )
        removed.clear()
        added.clear()

    for line in lines:
        if line.kind == "del":
            if added:
                flush()
            removed.append(line)
        elif line.kind == "add":
            added.append(line)
        else:
            flush()
            if line.kind == "hunk":
                rows.append(f'<tr class="besser-hunk"><td colspan="4">{esc(line.text)}</td></tr>')
            else:
                rows.append(f"<tr>{_number(line.old)}<td>{line.html}</td>{_number(line.new)}<td>{line.html}</td></tr>")
    flush()
    return f'<table class="besser-diff-split">{"".join(rows)}</table>'


def diff_view(diff: str, colour: bool = True) -> str:
    """A unified diff as HTML: unified always, side by side too when it is not large."""
    path, lines = parse_unified(diff)
    if not lines:
        return f'<pre class="besser-code">{esc(diff)}</pre>'
    _highlight_sides(path, lines, colour)
    width = split_width(lines) if len(lines) <= SPLIT_LINES else None
    split = _split(lines) if width is not None else ""
    fits = f" besser-diff-w{width}" if width is not None else ""
    return f'<div class="besser-diff besser-code{fits}">{_unified(lines)}{split}</div>'


def split_width(lines: list[DiffLine]) -> int | None:
    """The smallest ``theme.SPLIT_WIDTHS`` (in ``ch``) the side-by-side table fits in without
    scrolling: two sides of the longest line, each with its line number and cell padding; None
    when even the widest is too narrow (the diff then stays unified)."""
    longest = max((len(line.text.expandtabs(4)) for line in lines if line.kind != "hunk"), default=0)
    numbers = len(str(max((n for line in lines for n in (line.old, line.new) if n is not None), default=1)))
    needed = 2 * (longest + numbers + 4) + 2  # per side: number, code, about 2ch of padding each
    return next((width for width in SPLIT_WIDTHS if width >= needed), None)


def code_view(text: str, path: str, first: int = 1, colour: bool = True) -> str:
    """A file's content with line numbers, highlighted by its name."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    shown = highlight(lines, path, colour)
    rows = "".join(f'<tr>{_number(first + n)}<td>{html}</td></tr>' for n, html in enumerate(shown))
    return f'<div class="besser-code besser-listing"><table>{rows}</table></div>'

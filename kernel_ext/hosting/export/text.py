"""Text that goes into an exported notebook's markdown: fenced, escaped, never rendered as markup.

Everything a run stored may come from a model or a person (a request, a diff, a finding), so it
is shown inside a code fence longer than any run of backticks it holds: a reader's notebook
renders it as text, never as HTML, links or headings. Table cells escape ``|`` and newlines.
"""

from __future__ import annotations

import re
from typing import Any

from kernel_ext.textdiff import unified_diff

_TICKS = re.compile(r"`+")


def fence(text: str, language: str = "") -> str:
    """``text`` in a fenced code block no line of it can close."""
    longest = max((len(m.group(0)) for m in _TICKS.finditer(text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{language}\n{text.rstrip(chr(10))}\n{ticks}"


def cell(value: Any) -> str:
    """One markdown table cell (host values: statuses, labels, names)."""
    text = str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("`", "\\`").replace("<", "&lt;").replace("*", "\\*").replace("_", "\\_").replace("[", "\\[")


def new_file_diff(path: str, content: str) -> str:
    """A created file as a unified diff from nothing (what a write_file card proposes)."""
    return unified_diff(path, "", content)


def bullets(items: list[str], empty: str = "none") -> str:
    """A list of host names (file paths) as markdown bullets, each one as inline code."""
    if not items:
        return f"*{empty}*"
    return "\n".join(f"- {inline(item)}" for item in items)


def inline(text: str) -> str:
    """``text`` as inline code (a path, a name), with a fence no backtick inside can close."""
    longest = max((len(m.group(0)) for m in _TICKS.finditer(text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text.replace(chr(10), ' ')}{pad}{ticks}"

"""Unified diffs the host shows (cards, reports, exports), from one producer.

Every diff marks a last line that has no newline the way git does (``\\ No newline at end of
file``), instead of gluing it to the next line of the diff: a card proposing ``requirements.txt``
without its final newline would otherwise show two lines as one.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence

NO_NEWLINE = "\\ No newline at end of file\n"


def diff_lines(old: Sequence[str], new: Sequence[str], a: str, b: str, *, context: int = 3) -> Iterator[str]:
    """The lines of a unified diff of two line lists (each line keeps its own ending)."""
    for line in difflib.unified_diff(old, new, a, b, n=context, lineterm="\n"):
        yield line if line.endswith("\n") else line + "\n" + NO_NEWLINE


def unified_diff(path: str, before: str, after: str, *, context: int = 3) -> str:
    """``before`` -> ``after`` of one file; an empty ``before`` is shown as created (``/dev/null``)."""
    a = "/dev/null" if before == "" else f"a/{path}"
    return "".join(diff_lines(before.splitlines(True), after.splitlines(True), a, f"b/{path}", context=context))

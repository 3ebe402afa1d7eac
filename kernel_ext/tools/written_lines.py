"""Which lines of a file this run wrote: the ground a ``task_list`` citation must stand on.

Every committed edit carries the file's lines before and after and the changed ranges of the
new file. ``WrittenLines`` keeps, per file, one flag per current line (written by this run or
not), carried through each later edit: unchanged lines keep their flag, changed lines are set.
The flags belong to one version of the file (its sha256); a file changed since by anything but
the file tools has no known written lines, and a citation of it is refused by name.

``quote_span_written`` answers whether a quote, compared with whitespace collapsed as the
checklist does, occurs somewhere in the file over lines that this run all wrote.
"""

from __future__ import annotations

import bisect
import difflib
from dataclasses import dataclass, field

from kernel_ext.tools.base import RunState

WRITTEN_KEY = "written_lines"
MAX_OCCURRENCES = 10_000  # a short quote in a large file: the search stops here (then: not found written)


@dataclass
class FileLines:
    sha256: str
    flags: list[bool]


@dataclass
class WrittenLines:
    files: dict[str, FileLines] = field(default_factory=dict)

    def track(self, path: str, old: list[str], new: list[str], changed: tuple[tuple[int, int], ...], sha256: str,
              *, old_sha: str = "") -> None:
        """Carry the flags of ``path`` through one edit (``old`` -> ``new``)."""
        previous = self.files.get(path)
        prior = previous.flags if previous is not None and previous.sha256 == old_sha and len(previous.flags) == len(old) \
            else [False] * len(old)
        flags = [False] * len(new)
        ranges = list(changed)  # an empty range (n, n - 1) marks a removal: nothing to flag, but it places the tail
        for first, last in ranges:
            for index in range(first - 1, min(last, len(new))):
                flags[index] = True
        _carry(prior, flags, ranges, old, new)
        self.files[path] = FileLines(sha256, flags)

    def forget(self, path: str) -> None:
        self.files.pop(path, None)

    def current(self, path: str, sha256: str) -> list[bool] | None:
        """The flags of ``path`` when its content is still the last version the file tools wrote."""
        entry = self.files.get(path)
        return entry.flags if entry is not None and entry.sha256 == sha256 else None


def _carry(prior: list[bool], flags: list[bool], ranges: list[tuple[int, int]], old: list[str], new: list[str]) -> None:
    """Give each unchanged new line the flag of its old line.

    With at most one changed range the mapping is arithmetic (lines before it map one to one,
    lines after it from the end); with several, the old and new lines are aligned (as
    ``changed_ranges`` does) only when some old line was written, so a first edit costs nothing.
    """
    if not any(prior):
        return
    old_len, new_len = len(old), len(flags)
    if len(ranges) > 1:
        matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
        for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
            if tag == "equal":
                for k in range(i2 - i1):
                    flags[j1 + k] = flags[j1 + k] or prior[i1 + k]
        return
    head = ranges[0][0] - 1 if ranges else min(new_len, old_len)
    for index in range(min(head, old_len, new_len)):
        flags[index] = flags[index] or prior[index]
    tail = new_len - ranges[-1][1] if ranges else 0
    for back in range(1, min(tail, old_len) + 1):
        flags[new_len - back] = flags[new_len - back] or prior[old_len - back]


def written_lines(state: RunState) -> WrittenLines:
    return state.store(WRITTEN_KEY, WrittenLines)


def quote_span_written(text: str, quote: str, flags: list[bool]) -> bool:
    """Does ``quote`` (whitespace collapsed) occur over lines whose non-blank ones were all written?"""
    needle = " ".join(quote.split())
    if not needle:
        return False
    spans: list[tuple[int, int, int]] = []  # (start, end, line index) of each non-blank line in the collapsed text
    parts: list[str] = []
    offset = 0
    for index, line in enumerate(text.split("\n")):  # the indices of ``split_lines``
        words = " ".join(line.split())
        if words:
            spans.append((offset, offset + len(words), index))
            parts.append(words)
            offset += len(words) + 1
    haystack = " ".join(parts)
    starts = [start for start, _end, _index in spans]
    position, seen = haystack.find(needle), 0
    while position >= 0 and seen < MAX_OCCURRENCES:
        end = position + len(needle)
        first = max(bisect.bisect_right(starts, position) - 1, 0)
        covered = [index for start, stop, index in spans[first:bisect.bisect_left(starts, end)] if stop > position]
        if covered and all(index < len(flags) and flags[index] for index in covered):
            return True
        position, seen = haystack.find(needle, position + 1), seen + 1
    return False

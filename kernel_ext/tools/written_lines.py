"""What this run changed in a file, by content: the ground a ``task_list`` citation must stand on.

For each file the file tools touch, ``WrittenLines`` keeps its *baseline*: its text before the
run's first write of it (``""`` when the run created it), kept through deletes and re-creations,
and the digest of the last version the file tools left. Which lines this run wrote is never
taken from an edit's span; it is a comparison of the baseline's lines with the current ones by
content, on code (``code_text``: comments dropped, whitespace collapsed): a line is new when its
code occurs more often now than in the baseline. So rewriting a line unchanged, adding a
trailing space or a comment, re-creating a deleted file with the same text, or moving an
untouched line elsewhere changes nothing.

The baseline is trusted only when it is the file as the run began: when the host recorded the
tree's digests at the start of customisation (``record_start``), a first write that finds the
file changed since (by a shell command, say) leaves the baseline unknown, unless what it finds is
a generator's output (the run's generation ledger holds its digest: a ``generate_*`` call wrote
it, not the model). Citations of such a file are refused by name, as are citations of a file
changed outside the file tools since their last write.
"""

from __future__ import annotations

import bisect
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from kernel_ext.tools.base import RunState
from kernel_ext.tools.code_text import code_lines

WRITTEN_KEY = "written_lines"
MAX_OCCURRENCES = 10_000  # a short quote in a large file: the search stops here (then: not found written)


@dataclass
class FileHistory:
    baseline: str | None  # the text before this run's first write; None: not known (changed before it)
    sha256: str  # the version the file tools last left ("" after a delete)


@dataclass
class WrittenLines:
    files: dict[str, FileHistory] = field(default_factory=dict)
    start: dict[str, str] | None = None  # path -> sha256 of the tree when customisation began
    _cache: dict[str, tuple[str, frozenset[int]]] = field(default_factory=dict)

    def record_start(self, digests: Mapping[str, str]) -> None:
        """The host's digests of the workspace tree before the model could change it."""
        self.start = dict(digests)

    def track(self, path: str, before_sha: str, before: str | None, sha256: str, *, generated: str = "") -> None:
        """One write or delete by the file tools: ``before_sha`` ("": the file did not exist) -> ``sha256``.

        ``before`` is the text the write replaced (None: not readable as text, so not known);
        ``generated`` the digest a generator last published at ``path`` this run ("" if none).
        """
        entry = self.files.get(path)
        if entry is None:
            baseline = before if before_sha and before_sha == generated else self._first_baseline(path, before_sha, before)
            entry = self.files[path] = FileHistory(baseline, sha256)
        entry.sha256 = sha256
        self._cache.pop(path, None)

    def _first_baseline(self, path: str, before_sha: str, before: str | None) -> str | None:
        if self.start is None or path.startswith("/"):  # no digests, or an extra root (absolute) they do not cover
            return "" if not before_sha else before
        known = self.start.get(path)
        if not before_sha:  # created now: new unless it existed when the run began
            return "" if known is None else None
        if known != before_sha:
            return None  # not the file the run began with: what changed it is not known
        return before

    def current(self, path: str, text: str, sha256: str) -> frozenset[int] | None:
        """Indices of the lines of ``text`` this run wrote or changed; None when that is not known."""
        entry = self.files.get(path)
        if entry is None or entry.baseline is None or entry.sha256 != sha256:
            return None
        cached = self._cache.get(path)
        if cached is not None and cached[0] == sha256:
            return cached[1]
        changed = changed_lines(code_lines(path, entry.baseline), code_lines(path, text))
        self._cache[path] = (sha256, changed)
        return changed


def changed_lines(old: list[str], new: list[str]) -> frozenset[int]:
    """Indices of ``new`` whose code is new: it occurs more often in ``new`` than in ``old``.

    Compared as a multiset of code lines (linear, whatever repeats), so a line rewritten as it
    was, moved elsewhere, or deleted and written again adds nothing, while a line added or
    changed counts (each of its occurrences, since a quote of that code is a quote of new code).
    Blank (code-less) lines take no part.
    """
    before = Counter(line for line in old if line)
    after = Counter(line for line in new if line)
    grown = {line for line, count in after.items() if count > before[line]}
    return frozenset(i for i, line in enumerate(new) if line in grown)


def written_lines(state: RunState) -> WrittenLines:
    return state.store(WRITTEN_KEY, WrittenLines)


def record_start(state: RunState, root: str | os.PathLike[str]) -> None:
    """The host's digests of ``root`` (the app) before the model may change it: reads every file, so
    call it off the event loop."""
    from kernel_ext.generation.manifest import tree_hashes

    written_lines(state).record_start(tree_hashes(root))


def generated_digest(state: RunState, path: str) -> str:
    """The digest a generator of this run last published at ``path`` ("" when none did)."""
    from kernel_ext.generation.manifest import LEDGER_KEY  # light: the ledger's key, nothing heavy

    ledger = state.stores.get(LEDGER_KEY)
    return str(ledger.files.get(path, "")) if ledger is not None else ""


def quote_on_changed(code: list[str], needle: str, changed: frozenset[int]) -> bool:
    """Does ``needle`` (code, whitespace collapsed) occur over code lines that are all ``changed``?"""
    if not needle:
        return False
    spans: list[tuple[int, int, int]] = []  # (start, end, line index) of each code line in the joined text
    offset = 0
    for index, line in enumerate(code):
        if line:
            spans.append((offset, offset + len(line), index))
            offset += len(line) + 1
    haystack = " ".join(line for line in code if line)
    starts = [start for start, _end, _index in spans]
    position, seen = haystack.find(needle), 0
    while position >= 0 and seen < MAX_OCCURRENCES:
        end = position + len(needle)
        first = max(bisect.bisect_right(starts, position) - 1, 0)
        covered = [index for start, stop, index in spans[first:bisect.bisect_left(starts, end)] if stop > position]
        if covered and all(index in changed for index in covered):
            return True
        position, seen = haystack.find(needle, position + 1), seen + 1
    return False

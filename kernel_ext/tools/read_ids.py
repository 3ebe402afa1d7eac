"""Read ids: a record of what the model was actually shown, so edits can be checked against it.

``read_file`` mints a ``read_id`` bound to the file's fenced path, the whole-file sha256 and
the lines it displayed (minus lines it had to cut). ``replace_file_lines`` accepts only a
range inside such a view, of a file whose digest has not moved, and spends the id when it
succeeds: the numbering changed, so the model reads again before the next range edit.

The store also remembers which file versions were seen *whole* (all lines displayed, possibly
across several windowed reads): ``write_file`` may replace an existing file only then, so a
rewrite from memory cannot silently drop code. A file's own successful edit keeps it known
(old content plus the edit is the new content).

Ids live in ``RunState`` under ``"read_ids"``; they are per run. Each store draws a random
epoch, and ``expire()`` (called when a run resumes) starts a new one, so an id from before
a restart is never honoured.
"""

from __future__ import annotations

import itertools
import secrets
from collections import OrderedDict
from dataclasses import dataclass

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools.base import RunState
from kernel_ext.workspace.fence import Location
from kernel_ext.workspace.locks import lock_key

STORE_KEY = "read_ids"
MAX_VIEWS = 256


@dataclass(frozen=True)
class ReadView:
    """One read: which file (``key``), which version (``sha256``), which lines were shown."""

    read_id: str
    key: str
    path: str
    sha256: str
    first: int  # first displayed line, 1-based
    last: int  # last displayed line, inclusive (first - 1 when nothing was shown)
    cut: frozenset[int]  # displayed only in part (too long): not editable through this id
    total: int

    def uncovered(self, start: int, end: int) -> list[int]:
        """Lines of ``start..end`` this read did not show in full."""
        return [n for n in range(start, end + 1) if n < self.first or n > self.last or n in self.cut]


class ReadStore:
    """Per-run read views, spent ids and whole-file knowledge."""

    def __init__(self) -> None:
        self.epoch = secrets.token_hex(3)
        self._sequence = itertools.count(1)
        self._views: OrderedDict[str, ReadView] = OrderedDict()
        self._spent: set[str] = set()
        self._seen: dict[str, tuple[str, list[tuple[int, int]]]] = {}  # key -> (sha, shown ranges)
        self._known: dict[str, str] = {}  # key -> sha of the version seen whole
        self._read: set[str] = set()  # keys read at least once in this run (any version)

    # -- views ------------------------------------------------------------------------------

    def mint(self, key: str, path: str, sha256: str, first: int, last: int, cut: frozenset[int], total: int) -> ReadView:
        read_id = f"r{self.epoch}-{next(self._sequence)}"
        view = ReadView(read_id, key, path, sha256, first, last, cut, total)
        self._views[read_id] = view
        while len(self._views) > MAX_VIEWS:
            self._views.popitem(last=False)
        self._read.add(key)
        self._note_shown(view)
        return view

    def was_read(self, file: Location | str) -> bool:
        """True when ``file`` (a fenced location or its key) was read in this run, any version."""
        return (lock_key(file) if isinstance(file, Location) else file) in self._read

    def view(self, read_id: str) -> ReadView:
        """The view of ``read_id``; unknown, expired and spent ids are named refusals."""
        if read_id in self._spent:
            raise ToolFailure(
                ErrorCode.READ_ID_SPENT,
                f"read_id {read_id!r} was already used for a successful edit; line numbers may have moved. "
                "Call read_file again and use the new read_id",
            )
        view = self._views.get(read_id)
        if view is None:
            raise ToolFailure(
                ErrorCode.UNKNOWN_READ_ID,
                f"read_id {read_id!r} is unknown or expired (ids are per run and end when a run resumes). "
                "Call read_file on the file and use the read_id it returns",
            )
        return view

    def spend(self, read_id: str) -> None:
        self._spent.add(read_id)
        self._views.pop(read_id, None)

    def expire(self) -> None:
        """Forget every id and all knowledge: called when a run resumes."""
        self.epoch = secrets.token_hex(3)
        self._views.clear()
        self._spent.clear()
        self._seen.clear()
        self._known.clear()
        self._read.clear()

    # -- whole-file knowledge -----------------------------------------------------------------

    def known_version(self, key: str) -> str | None:
        """The digest of the last version of ``key`` that was seen whole, if any."""
        return self._known.get(key)

    def learn(self, key: str, sha256: str) -> None:
        """The model knows this version whole (it wrote it, or edited a version it knew)."""
        self._known[key] = sha256
        self._seen.pop(key, None)

    def forget(self, key: str) -> None:
        self._known.pop(key, None)
        self._seen.pop(key, None)

    def _note_shown(self, view: ReadView) -> None:
        sha, ranges = self._seen.get(view.key, (view.sha256, []))
        if sha != view.sha256:
            ranges = []
        if view.last >= view.first:
            start = view.first
            for line in sorted(view.cut):  # a cut line splits the shown range
                if start <= line - 1:
                    ranges.append((start, line - 1))
                start = line + 1
            if start <= view.last:
                ranges.append((start, view.last))
        ranges = _merge(ranges)
        self._seen[view.key] = (view.sha256, ranges)
        if view.total == 0 or ranges == [(1, view.total)]:
            self._known[view.key] = view.sha256


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def read_store(state: RunState) -> ReadStore:
    return state.store(STORE_KEY, ReadStore)

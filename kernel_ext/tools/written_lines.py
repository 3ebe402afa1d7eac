"""What this run changed in a file, by content: the ground a ``task_list`` citation must stand on.

For each file the file tools touch, ``WrittenLines`` keeps its *baseline*: its text before the
run's first write of it (``""`` when the run created it), kept through deletes and re-creations,
and the digest of the last version the file tools left. Which lines this run wrote is never
taken from an edit's span; it is a comparison of the baseline's lines with the current ones by
content, on code (``code_text``: comments dropped, whitespace collapsed), tree-wide: a line is
new when its code occurs nowhere in the tree's baseline, the code lines of every file when
customisation began (``record_start``), of every generator output of the run, and of each
written file's own baseline. So rewriting a line unchanged, adding a trailing space or a
comment, re-creating a deleted file with the same text, moving code to another file, or copying
a file (the model's or a generator's) makes nothing citable; neither does repeating a line the
tree already held (a second ``db.commit()``): a citation must stand on code the run brought.

The baseline is trusted only when it is the file as the run began: when the host recorded the
tree's digests at the start of customisation (``record_start``), a first write that finds the
file changed since (by a shell command, say) leaves the baseline unknown, unless what it finds is
a generator's output (the run's generation ledger holds its digest: a ``generate_*`` call wrote
it, not the model). Citations of such a file are refused by name, as are citations of a file
changed outside the file tools since their last write.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from kernel_ext.tools.base import RunState
from kernel_ext.tools.code_text import code_lines

WRITTEN_KEY = "written_lines"
BASELINE_FILE_BYTES = 2 << 20  # a larger start file's lines are not read into the baseline
BASELINE_TOTAL_BYTES = 64 << 20  # nor any past this much in all (bounded memory; noted in the docstring)


@dataclass
class FileHistory:
    baseline: str | None  # the text before this run's first write; None: not known (changed before it)
    sha256: str  # the version the file tools last left ("" after a delete)


@dataclass
class WrittenLines:
    files: dict[str, FileHistory] = field(default_factory=dict)
    start: dict[str, str] | None = None  # path -> sha256 of the tree when customisation began
    baseline_code: set[str] = field(default_factory=set)  # every code line the tree held before the model
    _cache: dict[str, tuple[str, int, frozenset[int]]] = field(default_factory=dict)

    def record_start(self, digests: Mapping[str, str], texts: Mapping[str, str] | None = None) -> None:
        """The host's digests (and texts) of the workspace tree before the model could change it."""
        self.start = dict(digests)
        for path, text in (texts or {}).items():
            self.add_baseline(path, text)

    def add_baseline(self, path: str, text: str) -> None:
        """Code that is not this run's work (the tree as it began, a generator's output)."""
        self.baseline_code.update(line for line in code_lines(path, text) if line)

    def track(self, path: str, before_sha: str, before: str | None, sha256: str, *, generated: str = "") -> None:
        """One write or delete by the file tools: ``before_sha`` ("": the file did not exist) -> ``sha256``.

        ``before`` is the text the write replaced (None: not readable as text, so not known);
        ``generated`` the digest a generator last published at ``path`` this run ("" if none).
        """
        entry = self.files.get(path)
        if entry is None:
            baseline = before if before_sha and before_sha == generated else self._first_baseline(path, before_sha, before)
            entry = self.files[path] = FileHistory(baseline, sha256)
            if baseline:
                self.add_baseline(path, baseline)
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
        if cached is not None and cached[:2] == (sha256, len(self.baseline_code)):
            return cached[2]
        changed = frozenset(i for i, line in enumerate(code_lines(path, text)) if line and line not in self.baseline_code)
        self._cache[path] = (sha256, len(self.baseline_code), changed)
        return changed


def written_lines(state: RunState) -> WrittenLines:
    return state.store(WRITTEN_KEY, WrittenLines)


def record_start(state: RunState, root: str | os.PathLike[str]) -> None:
    """The host's digests and code lines of ``root`` (the app) before the model may change it: one
    walk reads every file, so call it off the event loop."""
    from kernel_ext.generation.manifest import tree_hashes

    texts: dict[str, str] = {}
    budget = [BASELINE_TOTAL_BYTES]

    def visit(rel: str, fd: int, st: os.stat_result) -> None:
        if st.st_size > BASELINE_FILE_BYTES or st.st_size > budget[0]:
            return
        budget[0] -= st.st_size
        texts[rel] = os.pread(fd, st.st_size, 0).decode("utf-8", "replace")

    digests = tree_hashes(root, visit=visit)
    written_lines(state).record_start(digests, texts)


def record_generated(state: RunState, files: Mapping[str, bytes]) -> None:
    """A generator's output of this run: its code is baseline, so a copy of it proves nothing."""
    lines = written_lines(state)
    for path, data in files.items():
        if len(data) <= BASELINE_FILE_BYTES:
            lines.add_baseline(path, data.decode("utf-8", "replace"))


def generated_digest(state: RunState, path: str) -> str:
    """The digest a generator of this run last published at ``path`` ("" when none did)."""
    from kernel_ext.generation.manifest import LEDGER_KEY  # light: the ledger's key, nothing heavy

    ledger = state.stores.get(LEDGER_KEY)
    return str(ledger.files.get(path, "")) if ledger is not None else ""

"""The listing's index of run folders: what ``GET runs`` shows of each, read once per log version.

``GET runs`` read the ends of every folder's ``events.jsonl`` (and counted its lines) on each
request: about 1 s with 600 runs on disk. The index keeps each folder's ``LogEnds`` keyed on
the stat of the log it read (device, inode, size, mtime), so a listing costs one ``stat`` per
folder and re-reads only a log that changed: a run added since appears, a removed one
disappears (every listing walks the folder), a rewritten one is read again. It trusts nothing
in a folder (a run writes there): names must be run ids, the folder is opened no-follow, the
log must be a regular file (``fence.open_regular_at``: no link, no FIFO) and is read bounded
(``summaries``). What is cached is what was read, never what a file claims about itself; with a
finished run's summary its JSON text, so a listing of 1,000 runs joins text instead of encoding it.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

from kernel_ext.errors import ToolFailure
from kernel_ext.hosting.layout import RUN_ID_PATTERN
from kernel_ext.hosting.summaries import LogEnds, RunSummary, read_ends, summary_of
from kernel_ext.workspace.fence import DIR_FLAGS

Stamp = tuple[int, int, int, int]  # device, inode, size, mtime (ns) of the log read
Listed = tuple[RunSummary, str]  # a summary and its JSON text (what ``GET runs`` sends of it)


def _stamp(info: os.stat_result) -> Stamp:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


class RunIndex:
    """Summaries of the finished (or unhosted) runs under ``runs_dir``, healed on every listing."""

    def __init__(self, runs_dir: Path):
        self.runs_dir = Path(runs_dir)
        self._entries: dict[str, tuple[Stamp, LogEnds, Listed | None]] = {}
        self._lock = threading.Lock()  # listings run on worker threads (and the magics' own)
        self.reads = 0  # logs read since the index was made (what a test sees heal)

    def summaries(self, skip: set[str]) -> dict[str, RunSummary]:
        """Every run folder's summary but those in ``skip`` (hosted here: their own events say more)."""
        return {name: listed[0] for name, listed in self.listed(skip).items()}

    def fragments(self, skip: set[str]) -> dict[str, str]:
        """``summaries`` as the JSON text of each (kept with the entry: a finished run's never changes)."""
        return {name: listed[1] for name, listed in self.listed(skip).items()}

    def listed(self, skip: set[str]) -> dict[str, Listed]:
        with self._lock:
            try:
                runs_fd = os.open(self.runs_dir, DIR_FLAGS)
            except OSError:
                self._entries.clear()
                return {}
            try:
                found = self._walk(runs_fd, skip)
            finally:
                os.close(runs_fd)
            for gone in self._entries.keys() - found.keys() - skip:
                del self._entries[gone]
            return found

    def _walk(self, runs_fd: int, skip: set[str]) -> dict[str, Listed]:
        found: dict[str, Listed] = {}
        with os.scandir(runs_fd) as entries:
            for entry in entries:
                name = entry.name
                if name in skip or not RUN_ID_PATTERN.fullmatch(name) or not entry.is_dir(follow_symlinks=False):
                    continue
                summary = self._summary(runs_fd, name)
                if summary is not None:
                    found[name] = summary
        return found

    def _summary(self, runs_fd: int, name: str) -> Listed | None:
        try:  # one stat when the log is unchanged (a link at the folder is caught when it is read)
            info = os.stat(f"{name}/events.jsonl", dir_fd=runs_fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode):
            return None
        cached = self._entries.get(name)
        if cached is not None and cached[0] == _stamp(info) and cached[2] is not None:
            return cached[2]  # a finished log: nothing in its summary changes until the file does
        try:
            dir_fd = os.open(name, DIR_FLAGS, dir_fd=runs_fd)
        except OSError:
            return None
        try:
            if cached is not None and cached[0] == _stamp(info):
                read, ends = info, cached[1]
            else:
                read, ends = read_ends(dir_fd)
                self.reads += 1
            summary = summary_of(self.runs_dir / name, ends, dir_fd)
            listed = (summary, json.dumps(summary.as_json()))
        except (OSError, ValueError, ToolFailure):
            self._entries.pop(name, None)
            return None
        finally:
            os.close(dir_fd)
        self._entries[name] = (_stamp(read), ends, listed if ends.done is not None else None)
        return listed

"""What a run list or ``GET runs/{id}`` shows of a run: one model for a hosted run and a folder.

``summarize`` reads a run this process hosts (or has loaded); ``disk_summary`` reads only the
first and last lines of a folder's ``events.jsonl``, so listing many large logs stays cheap.
Both build the same ``RunSummary``, and ``as_json`` is the REST reply's shape: no arguments, no
file contents, ``kind`` only where the request is known.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict

from kernel_ext.errors import ToolFailure
from kernel_ext.hosting.options import RunRequest, ScenarioRequest
from kernel_ext.hosting.requests import kind_of
from kernel_ext.hosting.run import Run
from kernel_ext.workspace.fence import DIR_FLAGS, FILE_FLAGS, open_regular_at
from kernel_ext.workspace.internal import RUN_STATE_DIR

HOST_FILE = "host"  # in .besser/: "<hostname> <pid>" of the process hosting the run
SUMMARY_LINE_BYTES = 256 * 1024  # a first or last line longer than this is summarised from its type only


class RunSummary(BaseModel):
    """One run as a listing shows it (the REST contract's keys)."""

    model_config = ConfigDict(frozen=True)

    id: str
    status: str
    live: bool
    request: str = ""
    model_name: str = ""
    provider_label: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    events: int = 0
    pending_approvals: list[str] = []
    summary: str = ""
    run_dir: str
    kind: str | None = None  # "generate" | "scenario" where the hosting process knows the request
    queue_position: int | None = None  # while the run waits to be admitted (status "queued"): 1 = next
    fingerprint: str | None = None  # sha256 of the request's body, where known: a re-run cell finds its waiting twin

    def as_json(self) -> dict[str, Any]:
        """The reply's object: every key above; ``kind``, ``queue_position`` and ``fingerprint`` only when known."""
        unknown = {name for name in ("kind", "queue_position", "fingerprint") if getattr(self, name) is None}
        return self.model_dump(mode="json", exclude=unknown)


def summarize(run: Run) -> RunSummary:
    """A hosted (or loaded) run, from its events in memory."""
    events = run.events.events
    # a run that waited in the queue names its request there first (and only there if cancelled while queued)
    started = next(iter(run.events.of_type("run_started")), None) or next(iter(run.events.of_type("queued")), None)
    done = events[-1] if run.events.closed else None
    options = run.context.options
    return RunSummary(
        id=run.id,
        status=run.status,
        live=run.task is not None and not run.task.done(),
        request=getattr(started, "request", ""),
        model_name=getattr(started, "model_name", ""),
        provider_label=getattr(started, "provider_label", ""),
        started_at=events[0].ts if events else None,
        ended_at=done.ts if done is not None else None,
        events=len(events),
        pending_approvals=list(run.pending_approvals()),
        summary=getattr(done, "summary", ""),
        run_dir=str(run.context.layout.run_dir),
        kind=kind_of(options) if isinstance(options, (RunRequest, ScenarioRequest)) else None,
        queue_position=run.queue_position,
        fingerprint=run.context.request_fingerprint(),
    )


@dataclass(frozen=True)
class LogEnds:
    """What a listing reads of a log: its head record, its ``done`` (None: none yet), its line count."""

    first: dict[str, Any]
    done: dict[str, Any] | None
    count: int


def disk_summary(run_dir: Path) -> RunSummary | None:
    """A run folder, from the first and last lines of ``events.jsonl`` (a listing reads no more).
    The folder is a run's, so untrusted: opened no-follow, the log a regular file read bounded."""
    try:
        dir_fd = os.open(run_dir, DIR_FLAGS)
    except OSError:
        return None
    try:
        return summary_of(run_dir, read_ends(dir_fd)[1], dir_fd)
    except (OSError, ValueError, ToolFailure):
        return None
    finally:
        os.close(dir_fd)


def read_ends(dir_fd: int) -> tuple[os.stat_result, LogEnds]:
    """The ends of ``events.jsonl`` under the run folder ``dir_fd``, and the stat of what was read
    (no link, no FIFO: ``fence.open_regular_at``); ``ToolFailure`` or ``OSError`` when there is none."""
    fd, info = open_regular_at(dir_fd, "events.jsonl")
    with os.fdopen(fd, "rb") as handle:
        first = _head_record(handle)
        last = small_json(*_last_line(handle))
        count = _count_lines(handle)
    return info, LogEnds(first, last if last.get("type") == "done" else None, count)


def summary_of(run_dir: Path, ends: LogEnds, dir_fd: int) -> RunSummary:
    """The summary of a folder's log ends (whether a live process hosts it is read now, when unfinished)."""
    first, done = ends.first, ends.done
    return RunSummary(
        id=run_dir.name,
        status=_text(done.get("status", "failed")) if done else ("running" if hosted_elsewhere(run_dir, dir_fd) else "interrupted"),
        live=False,
        request=_text(first.get("request")),
        model_name=_text(first.get("model_name")),
        provider_label=_text(first.get("provider_label")),
        started_at=_time(first.get("ts")),
        ended_at=_time(done.get("ts")) if done else None,
        events=ends.count,
        pending_approvals=[],
        summary=_text(done.get("summary")) if done else "",
        run_dir=str(run_dir),
    )


QUEUED_LINES_READ = 256  # a listing reads past at most this many leading ``queued`` lines
COUNTED_BYTES = 256 * 1024 * 1024  # a listing counts the lines of at most this much of a log


def _head_record(handle: BinaryIO) -> dict[str, Any]:
    """The first line's object; past a run's leading ``queued`` lines (its wait in the queue), the
    ``run_started`` that follows them (with the first line's time: the run's, as ``summarize`` has it),
    else the first of them (a run cancelled while queued)."""
    first: dict[str, Any] = {}
    for _ in range(QUEUED_LINES_READ):
        line = handle.readline(SUMMARY_LINE_BYTES + 1)
        record = small_json(line, len(line) <= SUMMARY_LINE_BYTES)
        first = first or record
        if record.get("type") != "queued" or not line.endswith(b"\n"):
            return {**record, "ts": first.get("ts")} if record.get("type") == "run_started" else first
    return first


def _text(value: Any) -> str:
    """A log's string field; anything else (a hand-edited log) shows as empty."""
    return value if isinstance(value, str) else ""


def _time(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def last_record(path: Path) -> dict[str, Any]:
    """The last line's JSON object ({} if torn); of a line too long to hold, what its head names."""
    fd = os.open(path, FILE_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        return small_json(*_last_line(handle))


def _last_line(handle: BinaryIO) -> tuple[bytes, bool]:
    """The last line of a file, read from its end, and True; of a line over ``SUMMARY_LINE_BYTES``,
    its head and False."""
    end = handle.seek(0, os.SEEK_END)
    while end > 0:  # trailing newlines are not a line
        handle.seek(end - 1)
        if handle.read(1) != b"\n":
            break
        end -= 1
    start = end
    while start > 0:
        step = min(start, 1 << 20)
        handle.seek(start - step)
        cut = handle.read(step).rfind(b"\n")
        if cut >= 0:
            start = start - step + cut + 1
            break
        start -= step
    handle.seek(start)
    whole = end - start <= SUMMARY_LINE_BYTES
    return handle.read(end - start if whole else 4096), whole


def small_json(line: bytes, whole: bool = True) -> dict[str, Any]:
    """A whole line's JSON object ({} if torn); of a line too long to hold, the fields its head names."""
    if not whole:
        return {key.decode(): value.decode() for key, value in _HEAD_FIELDS.findall(line[:4096])}
    try:
        data = json.loads(line) if line.strip() else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


_HEAD_FIELDS = re.compile(rb'"(type|status|request|model_name|provider_label)":"([^"\\]{0,200})"')


def _count_lines(handle: BinaryIO) -> int:
    """Lines (a torn last one included), counted in 1 MiB reads over the first ``COUNTED_BYTES``."""
    count, last, read = 0, b"\n", 0
    handle.seek(0)
    while read < COUNTED_BYTES and (chunk := handle.read(1 << 20)):
        count += chunk.count(b"\n")
        last, read = chunk[-1:], read + len(chunk)
    return count + (last != b"\n")


def host_id() -> str:
    """What ``HOST_FILE`` holds for a run this process hosts."""
    return f"{socket.gethostname()} {os.getpid()}"


def hosted_elsewhere(run_dir: Path, dir_fd: int | None = None) -> bool:
    """True while another live process on this machine hosts the run (a kernel's in-process run
    in the same folder, a second server): recovery must not close its log under it. ``HOST_FILE``
    is read no-follow and bounded (under ``dir_fd``, the run folder, when given)."""
    try:
        host, pid = _read_host(run_dir, dir_fd).split()
        pid_number = int(pid)
    except (OSError, ValueError, ToolFailure):
        return False
    if host != socket.gethostname() or pid_number == os.getpid():
        return False
    try:
        os.kill(pid_number, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_host(run_dir: Path, dir_fd: int | None) -> str:
    own = dir_fd is None
    run_fd = os.open(run_dir, DIR_FLAGS) if dir_fd is None else dir_fd
    try:
        state_fd = os.open(RUN_STATE_DIR, DIR_FLAGS, dir_fd=run_fd)
        try:
            fd, _ = open_regular_at(state_fd, HOST_FILE)
        finally:
            os.close(state_fd)
        with os.fdopen(fd, "rb") as handle:
            return handle.read(256).decode("utf-8")
    finally:
        if own:
            os.close(run_fd)

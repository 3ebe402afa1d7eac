"""``sh_detail`` and ``sh_logs``: reading a command's stored output without running it again.

``sh_detail`` pages through a whole stream (or only the lines matching a pattern, with their
numbers), the metadata, or the trace. ``sh_logs`` returns only what a background command
printed since the byte cursors the caller passes back, plus its status; a poll never repeats
output and says ``gap`` when bytes were dropped between two polls. Both work on a live job
(from memory) and on a finished record (from the store, after a restart too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.safe_regex import compile_untrusted
from kernel_ext.sandbox.shtools import condense
from kernel_ext.sandbox.shtools.records import check_id

if TYPE_CHECKING:
    from kernel_ext.sandbox.shtools.jobs import BackgroundJobs
    from kernel_ext.sandbox.shtools.records import RecordStore

SELECTORS = ("stdout", "stderr", "meta", "trace")
POLL_BYTES = 1 << 20
FULL_POLL_BYTES = 64 * 1024
MAX_LINES = 2000


def detail(jobs: BackgroundJobs, records: RecordStore, record_id: str, selector: str, match: str | None, start_line: int,
           max_lines: int) -> dict[str, Any]:
    check_id(record_id)
    if selector not in SELECTORS:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"selector {selector!r} is not one of {', '.join(SELECTORS)}")
    if start_line < 1 or not 1 <= max_lines <= MAX_LINES:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"start_line must be 1 or more and max_lines 1..{MAX_LINES}")
    job = jobs.get(record_id)
    meta = records.meta(record_id)
    if job is not None:
        meta = {**meta, **job.state()}
    if selector == "meta":
        return {"id": record_id, "selector": "meta", "meta": meta}
    if selector == "trace" and "trace_summary" not in meta:
        raise ToolFailure(ErrorCode.NOT_FOUND, f"{record_id} was not traced (run it with trace: true)")
    if job is not None and not job.done.is_set():
        tap = job.out if selector == "stdout" else job.err
        data = tap.read(0, tap.stored)[0]
    else:
        data = records.stream(record_id, selector)
    total = condense.count_lines(data)
    if total and start_line > total:
        raise ToolFailure(ErrorCode.CURSOR_OUT_OF_RANGE, f"start_line {start_line} is past the end ({total} lines)")
    out: dict[str, Any] = {"id": record_id, "selector": selector, "total_lines": total}
    if condense.is_binary(data):
        out["binary"] = True
    if match is not None:
        pattern = compile_untrusted(match, what="match")
        lines, count, next_line = condense.matching_lines(data, pattern, start_line, max_lines)
        out.update(match=match, matches=count, lines=lines)
    else:
        text, next_line = condense.line_page(data, start_line, max_lines)
        out.update(start_line=start_line, text=text)
    if next_line is not None:
        out["next_line"] = next_line
    return out


def logs(jobs: BackgroundJobs, records: RecordStore, record_id: str, stream: str, stdout_cursor: int, stderr_cursor: int,
         full: bool) -> dict[str, Any]:
    check_id(record_id)
    if stream not in ("stdout", "stderr", "both"):
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"stream {stream!r} is not stdout, stderr or both")
    names = ("stdout", "stderr") if stream == "both" else (stream,)
    cursors = {"stdout": stdout_cursor, "stderr": stderr_cursor}
    limit = FULL_POLL_BYTES if full else POLL_BYTES
    job = jobs.get(record_id)
    result: dict[str, Any] = {"id": record_id}
    chunks: dict[str, tuple[bytes, int, int, bool]] = {}
    if job is not None:
        running = not job.done.is_set()
        for name in names:
            tap = job.out if name == "stdout" else job.err
            data, offset, gap = tap.read(cursors[name], limit)
            if running and offset + len(data) == tap.total:
                data = _complete_utf8(data)
            chunks[name] = (data, offset, tap.total, gap)
        state = job.state()  # after the reads: its line counts cover what they returned
    else:
        meta = records.meta(record_id)
        state = {k: meta[k] for k in ("status", "exit", "signal", "running_ms", "stdout_lines", "stderr_lines") if k in meta}
        state.setdefault("status", "exited")
        state.setdefault("running_ms", meta.get("ms"))
        for name in names:
            total = int(meta.get(f"{name}_bytes", records.stream_size(record_id, name)))
            stored = records.stream_size(record_id, name)
            cursor = cursors[name]
            if cursor < 0 or cursor > total:
                raise ToolFailure(ErrorCode.CURSOR_OUT_OF_RANGE,
                                  f"{name}_cursor {cursor} is outside the stream (0..{total} bytes)")
            if cursor >= stored:
                chunks[name] = (b"", total, total, cursor < total)
            else:
                chunks[name] = (records.stream(record_id, name, cursor, limit), cursor, total, False)
    result.update(state)
    for name, (data, offset, total, gap) in chunks.items():
        text = condense.view(data, full=full).text
        if text:
            result[name] = text
        result[f"{name}_cursor"] = offset + len(data)
        if offset + len(data) < total:
            result[f"{name}_more"] = True
        if gap:
            result["gap"] = True
    return result


def _complete_utf8(data: bytes) -> bytes:
    """``data`` without a trailing, not yet complete UTF-8 sequence (the next poll returns it whole)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: keep looking for its lead
        if byte & 0x80 == 0:
            return data
        needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4
        return data if back >= needed else data[:-back]
    return data

"""One line of text per event worth reading: the command line's timeline and an export's.

Shown, never obeyed: callers escape what they print (``safetext.shown_text``) or fence it.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.safetext import shorten


def describe(event: Any) -> str:
    """One line per event worth reading (cost events are folded into the summary)."""
    t = event.type
    if t == "run_started":
        return f"run started: {event.request!r} with provider {event.provider_label} ({event.provider_kind})"
    if t == "phase":
        extra = f" - {event.message}" if event.message else ""
        took = f" in {event.duration_s:.2f}s" if event.duration_s is not None else ""
        return f"[{event.phase}] {event.status}{took}{extra}"
    if t == "tool_call":
        return f"  -> {event.name} {event.summary}"
    if t == "tool_result":
        return f"  <- {event.name} {'ok' if event.ok else event.error_code}: {_first_line(event.summary)[:120]}"
    if t == "approval_resolved":
        note = f": {event.note}" if event.note else ""
        who = {"card": "you, on its card", "terminal": "you, at the terminal"}.get(event.by, event.by)
        return f"  approval {'granted' if event.approved else 'denied'} for {event.name} {event.call_id} ({who}{note})"
    if t == "task_list":
        return "  tasks: " + "; ".join(f"{x['id']} [{x['status']}] {shorten(x['text'], 60)}" for x in event.tasks)
    if t == "finding":
        if event.source == "app-environment":  # which interpreter and packages the app ran with
            return f"  {event.message}"
        return f"  finding [{event.severity}] {event.source}: {event.message}" if event.severity != "info" else ""
    if t == "snapshot":
        return f"  snapshot {event.action}: {event.snapshot_id} ({event.reason})"
    if t == "text":
        if getattr(event, "partial", False):  # the reply while it streams: the final text follows
            return ""
        return "  model: " + _first_line(event.text.strip())[:160] if event.text.strip() else ""
    if t == "error":
        return f"error {event.code}: {event.message}"
    if t == "done":
        lines = [f"done: {event.status} - {event.summary}"]
        lines += [f"  blocker: {b}" for b in event.blockers]
        split = event.authorship
        if split:
            lines.append("  authorship: " + ", ".join(f"{k}={len(v)}" for k, v in split.items()))
        if event.phase_durations:
            lines.append("  phases: " + ", ".join(f"{k} {v:.2f}s" for k, v in event.phase_durations.items()))
        return "\n".join(lines)
    return ""


def _first_line(text: str) -> str:
    """Up to the first newline only: ``splitlines`` also ends a line at U+2028, U+0085 or a form
    feed, which a name can hold, so the rest of a file name was hidden ("created u" for a name
    going on after U+2028); the caller's escaping shows those characters instead."""
    return (text or "").replace("\r\n", "\n").split("\n", 1)[0].split("\r", 1)[0]

"""Turning boundary activity into run events: one mapping used by every run body.

The Executor reports ``approval_requested`` / ``approval_resolved`` / ``dispatch`` to its
observer; ``boundary_observer`` turns those into events (the card's payload is the frozen
request with a diff per file). ``report_call`` and ``report_result`` bracket each call.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kernel_ext.boundary.approval import ApprovalRequest, BoundaryEvent
from kernel_ext.boundary.calls import ToolCall, ToolResult
from kernel_ext.hosting.bus import EventLog
from kernel_ext.safejson import MAX_JSON_DEPTH, deeper_than
from kernel_ext.safetext import clip

SUMMARY_CHARS = 400
DATA_CHARS = 4000


def boundary_observer(events: EventLog, approver: Any = None, decided_by: str = "host"):
    """An Executor observer that records approvals as events (dispatch is implied by the result).

    Who decided comes from the approver when it knows (an ``AsyncApprover`` says "card" or
    "timeout"), else ``decided_by`` (e.g. "scripted" for an authored approver).
    """

    def observe(event: BoundaryEvent) -> None:
        if event.kind == "approval_requested" and event.request is not None:
            card_wait = getattr(approver, "card_wait", None)  # the card's timeout or the run's deadline, the earlier
            timeout = card_wait() if callable(card_wait) else getattr(approver, "timeout", None)
            events.emit(
                "approval_requested",
                call_id=event.call_id,
                name=event.name,
                category=event.request.category,
                request=card_payload(event.request),
                digest=event.request.digest,
                expires_at=None if timeout is None else round(time.time() + timeout, 3),
            )
        elif event.kind == "approval_resolved":
            events.emit(
                "approval_resolved",
                call_id=event.call_id,
                name=event.name,
                approved=bool(event.approved),
                by=getattr(approver, "decided_by", {}).get(event.call_id, decided_by),
                note=getattr(approver, "notes", {}).get(event.call_id, ""),
            )

    return observe


def card_payload(request: ApprovalRequest) -> dict[str, Any]:
    """The frozen request as a card shows it: arguments, file hashes, and the proposal."""
    payload = request.as_dict()
    payload["snapshots"] = [
        {"path": f.path, "exists": f.exists, "sha256": f.sha256, "lines": (f.text or "").count("\n")} for f in request.files
    ]
    return payload


def report_call(events: EventLog, call: ToolCall) -> None:
    raw = call.arguments
    arguments: object = raw
    if isinstance(raw, str):
        try:
            arguments = json.loads(raw) if raw.strip() else {}
        except RecursionError:  # nested past what a parser follows
            arguments = {"_omitted": f"arguments nested more than {MAX_JSON_DEPTH} levels deep"}
        except ValueError:  # not JSON
            arguments = {"_raw": raw[:SUMMARY_CHARS]}
    if not isinstance(arguments, dict):
        arguments = {"_raw": str(arguments)[:SUMMARY_CHARS]}
    elif deeper_than(arguments, MAX_JSON_DEPTH):  # the boundary refuses these; the event shows a summary
        arguments = {"_omitted": f"arguments nested more than {MAX_JSON_DEPTH} levels deep ({len(arguments)} top-level keys: "
                     f"{', '.join(clip(str(k), 40) for k in list(arguments)[:10])})"}
    events.emit("tool_call", call_id=call.id, name=clip(str(call.name)), summary=_summary(arguments), arguments=_bounded(arguments))


def report_result(events: EventLog, result: ToolResult) -> None:
    events.emit(
        "tool_result",
        call_id=result.call_id,
        name=result.name,
        ok=result.ok,
        error_code=result.error.code if result.error else None,
        summary=result.observation[:SUMMARY_CHARS],
        data=_bounded(result.data),
    )




def _summary(arguments: dict[str, Any]) -> str:
    for key in ("path", "command", "action", "name", "pattern", "class_name"):
        if key in arguments and isinstance(arguments[key], str):
            return f"{key}={arguments[key][:200]}"
    return ""


def _bounded(value: Any) -> Any:
    """Long strings, lists and objects are cut so one event stays small; structure is kept."""
    if isinstance(value, dict):
        items = list(value.items())
        out = {str(k)[:SUMMARY_CHARS]: _bounded(v) for k, v in items[:200]}
        if len(items) > 200:
            out["..."] = f"[{len(items) - 200} more keys cut]"
        return out
    if isinstance(value, list):
        return [_bounded(v) for v in value[:200]]
    if isinstance(value, str) and len(value) > DATA_CHARS:
        return value[:DATA_CHARS] + f"... [{len(value) - DATA_CHARS} characters cut]"
    return value

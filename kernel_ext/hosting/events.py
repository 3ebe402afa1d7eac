"""The one event schema of a run: what the timeline, cards, SSE and ``events.jsonl`` carry.

Every event has a per-run ``seq`` (1, 2, ...; the SSE id used for ``Last-Event-ID``), the
``run_id``, a timestamp and a ``type``. Events are built only through ``make_event``, which
redacts secrets first, so no event object ever holds one. Every event, however built (here, by
hand, parsed from a line), has its strings made valid first (``safetext``: no lone surrogate,
no control character but ``\n`` and ``\t``), and ``to_json`` writes ASCII-only JSON, so no
field can break ``events.jsonl``, an SSE frame or a terminal.
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from kernel_ext.safetext import safe_value
from kernel_ext.secrets import redact

Phase = Literal["select", "generate", "gap", "customize", "validate"]
PHASES: tuple[str, ...] = ("select", "generate", "gap", "customize", "validate")
PhaseStatus = Literal["started", "done", "skipped", "failed"]
ProviderKind = Literal["live", "replay", "scripted", "none"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    seq: int = 0
    run_id: str
    ts: float = Field(default_factory=time.time)
    type: str  # each event type fixes it to its own name (the discriminator)

    @model_validator(mode="before")
    @classmethod
    def _valid_text(cls, data: Any) -> Any:
        """The one place text is made valid: every field of every event, before it exists."""
        return safe_value(data) if isinstance(data, dict) else data


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    request: str
    model_name: str = ""
    provider_label: str = "none"
    provider_kind: ProviderKind = "none"
    sandbox_tier: str = ""
    shell_tools_enabled: bool = False
    run_dir: str = ""


class PhaseEvent(_Event):
    type: Literal["phase"] = "phase"
    phase: Phase
    status: PhaseStatus
    message: str = ""
    duration_s: float | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class TextEvent(_Event):
    type: Literal["text"] = "text"
    text: str
    partial: bool = False  # the reply's text so far, while it streams (the final event has the same ``stream``)
    stream: str = ""  # which reply a partial or final text belongs to ("" for a text that never streamed)


class ToolCallEvent(_Event):
    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    summary: str = ""
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolResultEvent(_Event):
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    ok: bool
    error_code: str | None = None
    summary: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class ApprovalRequested(_Event):
    type: Literal["approval_requested"] = "approval_requested"
    call_id: str
    name: str
    category: str
    request: dict[str, Any]
    digest: str = ""  # sha256 of the frozen request; a decision may name it (optional: older logs lack it)
    expires_at: float | None = None  # when an unanswered card counts as denied (epoch seconds; None: it waits)


class ApprovalResolved(_Event):
    type: Literal["approval_resolved"] = "approval_resolved"
    call_id: str
    name: str
    approved: bool
    by: str = "host"  # who decided: "card", "scripted", "policy", "timeout", "cancelled", "auto", "grant"
    note: str = ""  # how, when a rest-of-kind grant decided it ("approved by the rest-of-kind grant made at ...")


class TaskListEvent(_Event):
    type: Literal["task_list"] = "task_list"
    tasks: list[dict[str, Any]]


class FindingEvent(_Event):
    type: Literal["finding"] = "finding"
    severity: Literal["blocker", "warning", "info"]
    source: str
    message: str
    path: str | None = None
    line: int | None = None


class SnapshotEvent(_Event):
    type: Literal["snapshot"] = "snapshot"
    snapshot_id: str
    reason: str
    rank: list[float] = Field(default_factory=list)
    action: Literal["taken", "restored"] = "taken"
    skipped: dict[str, int] = Field(default_factory=dict)  # what the copy left out (FIFOs, devices...), by reason


class CostEvent(_Event):
    type: Literal["cost"] = "cost"
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    turns: int = 0
    elapsed_s: float = 0.0


class QueuedEvent(_Event):
    """The run waits for the server to admit it (``hosting/admission.py``): its place in the queue
    (1 = next), re-sent as the place falls (every move near the head, as it halves further back),
    then once with ``position`` 0 when it starts."""

    type: Literal["queued"] = "queued"
    position: int = Field(ge=0)
    limit: int = 0  # how many runs the server runs at once
    request: str = ""  # what was asked, on the first only (a run cancelled in the queue never has a ``run_started``)
    waited_s: float | None = None  # on the admission (position 0): how long the run waited


class DoneEvent(_Event):
    type: Literal["done"] = "done"
    # budget_exhausted: the endpoint refused because the key's budget is spent (providers/quota.py)
    # timeout: the run's runtime budget was spent while an approval card waited (the card is withdrawn)
    status: Literal["completed", "blocked", "failed", "cancelled", "interrupted", "budget_exhausted", "timeout"]
    authorship: dict[str, list[str]] = Field(default_factory=dict)
    blockers: list[str] = Field(default_factory=list)
    verification: dict[str, Any] = Field(default_factory=dict)
    phase_durations: dict[str, float] = Field(default_factory=dict)
    summary: str = ""
    # who ended a cancelled run: "person" (a Cancel button, the REST cancel), "server" (it stopped),
    # "host" (the host's own reason); "" when not known (older logs, other statuses)
    cancelled_by: str = ""


class ErrorEvent(_Event):
    type: Literal["error"] = "error"
    code: str
    message: str
    terminal: bool = True
    # BUDGET_EXHAUSTED: the figures the endpoint gave (USD), when it gave them
    spent_usd: float | None = None
    limit_usd: float | None = None


Event = Annotated[
    RunStarted
    | PhaseEvent
    | TextEvent
    | ToolCallEvent
    | ToolResultEvent
    | ApprovalRequested
    | ApprovalResolved
    | TaskListEvent
    | FindingEvent
    | SnapshotEvent
    | CostEvent
    | QueuedEvent
    | DoneEvent
    | ErrorEvent,
    Field(discriminator="type"),
]

EVENT_TYPES: dict[str, type[_Event]] = {
    cls.model_fields["type"].default: cls
    for cls in (
        RunStarted,
        PhaseEvent,
        TextEvent,
        ToolCallEvent,
        ToolResultEvent,
        ApprovalRequested,
        ApprovalResolved,
        TaskListEvent,
        FindingEvent,
        SnapshotEvent,
        CostEvent,
        QueuedEvent,
        DoneEvent,
        ErrorEvent,
    )
}
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


def make_event(type_: str, run_id: str, known_secrets: tuple[str, ...] = (), **fields: Any) -> _Event:
    """Build an event of ``type_`` after redacting every field (the only way events are made)."""
    cls = EVENT_TYPES[type_]
    return cls(run_id=run_id, **redact(fields, known_secrets))


def parse_event(data: str | bytes | dict[str, Any]) -> _Event:
    """An event from its JSON form (a line of ``events.jsonl`` or an SSE ``data`` field)."""
    if isinstance(data, dict):
        return _ADAPTER.validate_python(data)
    return _ADAPTER.validate_json(data)


def to_json(event: _Event) -> str:
    """One line of JSON, ASCII only (U+2028 and friends escaped), the form every writer uses."""
    return json.dumps(event.model_dump(mode="json"), ensure_ascii=True, separators=(",", ":"), allow_nan=False)


BaseEvent = _Event

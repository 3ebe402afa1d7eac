"""The view state of a run, reduced from its events: what every widget renders.

Pure (no ipywidgets, no I/O), so the state after a replayed ``events.jsonl`` is testable without
a kernel and the same reducer serves live SSE, in-process listeners and re-attach. ``apply``
accepts event objects or their JSON dicts, ignores duplicates (a resumed stream may repeat
one) and returns the names of the parts that changed, so a view re-renders only those.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

PHASES = ("select", "generate", "gap", "customize", "validate")
TERMINAL = frozenset({"completed", "blocked", "failed", "cancelled", "interrupted", "budget_exhausted", "timeout"})

# What a card says once its call is over, from the tool_result's error code.
OUTCOME_BY_CODE = {
    None: "executed",
    "approval_denied": "denied",
    "stale_input": "stale input",
    "policy_denied": "denied by policy",
    "cancelled": "cancelled",
}


# Deciders that never wait for anyone: their cards add no waiting time.
NOT_A_PERSON = frozenset({"auto", "policy"})


class EventModel(Protocol):
    """A run event as the host holds it (``kernel_ext.hosting.events``): dumped to its JSON form."""

    def model_dump(self) -> dict[str, Any]: ...


RunEvent = dict[str, Any] | EventModel  # an SSE event's JSON, or the host's event object


@dataclass
class PhaseView:
    name: str
    status: str = "pending"  # pending | started | done | skipped | failed | stopped (the run ended in it)
    started_at: float | None = None
    duration_s: float | None = None
    message: str = ""
    waiting_s: float = 0.0  # time this phase spent waiting for a person (shown apart from its duration)


@dataclass
class CallView:
    call_id: str
    name: str
    summary: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    ok: bool | None = None  # None while it runs
    error_code: str | None = None
    result: str = ""
    data: dict[str, Any] = field(default_factory=dict)  # the tool_result's data (report, exit code, lines)


@dataclass
class ApprovalView:
    call_id: str
    name: str
    category: str
    request: dict[str, Any]
    approved: bool | None = None  # None while pending
    decided_by: str = ""
    outcome: str = "pending"  # pending | approved | denied | executed | stale input | expired | cancelled | ...
    digest: str = ""  # the frozen request's digest, sent back with the decision
    key: str = ""  # this card's own key: the call id, made unique should a log repeat one
    phase: str = ""  # the phase it was asked in (its waiting time is that phase's)
    requested_at: float | None = None
    decided_at: float | None = None
    ok: bool | None = None  # the call's result, once it ran (None: not yet, or never)
    error_code: str | None = None
    result: str = ""  # the tool_result's summary
    result_data: dict[str, Any] = field(default_factory=dict)
    expires_at: float | None = None  # when an unanswered card counts as denied (None: it waits)
    note: str = ""  # how it was decided, when a rest-of-kind grant decided it

    @property
    def open(self) -> bool:
        return self.approved is None and self.outcome == "pending"


@dataclass
class RunViewState:
    run_id: str = ""
    request: str = ""
    model_name: str = ""
    provider_label: str = "none"
    provider_kind: str = "none"
    sandbox_tier: str = ""
    shell_tools_enabled: bool = False
    run_dir: str = ""
    status: str = "starting"
    queue_position: int | None = None  # while the server keeps the run waiting to start (status "queued")
    phases: dict[str, PhaseView] = field(default_factory=lambda: {p: PhaseView(p) for p in PHASES})
    calls: dict[str, CallView] = field(default_factory=dict)
    current_call: str | None = None
    approvals: dict[str, ApprovalView] = field(default_factory=dict)  # by card key (``ApprovalView.key``)
    card_of_call: dict[str, str] = field(default_factory=dict)  # call id -> key of its latest card
    tasks: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    live_stream: str = ""  # the reply whose text is streaming into ``texts[-1]``
    errors: list[dict[str, str]] = field(default_factory=list)
    cost: dict[str, float] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "turns": 0})
    started_at: float | None = None
    last_at: float | None = None
    done: dict[str, Any] | None = None
    last_seq: int = 0
    event_count: int = 0
    current_phase: str = ""
    rows: list[str] = field(default_factory=list)  # the run's calls in order: a card key, or "call:<id>" without a card

    # -- reducing -------------------------------------------------------------------------

    @classmethod
    def replay(cls, events) -> RunViewState:
        state = cls()
        for event in events:
            state.apply(event)
        return state

    def apply(self, event: RunEvent) -> set[str]:
        """Fold one event in; the names of the parts that changed (empty for a duplicate)."""
        data = event if isinstance(event, dict) else event.model_dump()
        seq = int(data.get("seq") or 0)
        if seq and seq <= self.last_seq:
            return set()
        self.last_seq = max(self.last_seq, seq)
        self.event_count += 1
        ts = data.get("ts")
        if ts is not None:
            self.started_at = ts if self.started_at is None else self.started_at
            self.last_at = ts
        handler = getattr(self, "_on_" + str(data.get("type")), None)
        changed = handler(data) if handler is not None else set()
        return changed | {"meter"}

    def _on_run_started(self, e: dict) -> set[str]:
        for name in ("run_id", "request", "model_name", "provider_label", "provider_kind", "sandbox_tier",
                     "shell_tools_enabled", "run_dir"):
            if name in e:
                setattr(self, name, e[name])
        self.status = "running"
        return {"header", "timeline"}

    def _on_phase(self, e: dict) -> set[str]:
        phase = self.phases.setdefault(e["phase"], PhaseView(e["phase"]))
        phase.status = e["status"]
        phase.message = e.get("message", "") or phase.message
        if e["status"] == "started":
            phase.started_at = e.get("ts")
            self.current_phase = phase.name
        elif e.get("duration_s") is not None:
            phase.duration_s = e["duration_s"]
        elif phase.started_at is not None and e.get("ts") is not None:
            phase.duration_s = max(e["ts"] - phase.started_at, 0.0)
        return {"timeline"} | self._phase_findings(e)

    def _on_text(self, e: dict) -> set[str]:
        """A streaming reply (``stream``) keeps one line, replaced by each partial and by its final text."""
        stream = e.get("stream") or ""
        if stream and stream == self.live_stream and self.texts:
            self.texts[-1] = e["text"]
        else:
            self.texts.append(e["text"])
        self.live_stream = stream if e.get("partial") else ""
        del self.texts[:-20]
        return {"texts"}

    def _on_tool_call(self, e: dict) -> set[str]:
        self.calls[e["call_id"]] = CallView(e["call_id"], e["name"], e.get("summary", ""), e.get("arguments", {}))
        self.current_call = e["call_id"]
        return {"timeline", "calls"} | self._add_row("call:" + e["call_id"])

    def _on_tool_result(self, e: dict) -> set[str]:
        call = self.calls.setdefault(e["call_id"], CallView(e["call_id"], e["name"]))
        call.ok, call.error_code, call.result = e["ok"], e.get("error_code"), e.get("summary", "")
        call.data = dict(e.get("data") or {})
        if self.current_call == e["call_id"]:
            self.current_call = None
        changed = {"timeline", "calls"}
        card = self.card_for(e["call_id"])
        if card is not None:
            card.outcome = _outcome(card, call)
            card.ok, card.error_code, card.result, card.result_data = call.ok, call.error_code, call.result, call.data
            changed.add(f"card:{card.key}")
        else:
            changed.add(f"row:call:{e['call_id']}")
        return changed

    def _on_approval_requested(self, e: dict) -> set[str]:
        """A new card, under a key of its own: a repeated call id (a log written before call ids
        were the host's) gets a second card instead of taking over the first one's widget."""
        call_id = e["call_id"]
        key = call_id if call_id not in self.approvals else f"{call_id}#{e.get('seq') or len(self.approvals) + 1}"
        self.approvals[key] = ApprovalView(call_id, e["name"], e["category"], e.get("request", {}),
                                           digest=str(e.get("digest") or ""), key=key,
                                           phase=self.current_phase, requested_at=e.get("ts"), expires_at=e.get("expires_at"))
        self.card_of_call[call_id] = key
        return {"cards", f"card:{key}", "header"} | self._add_row(key, replaces="call:" + call_id)

    def card_for(self, call_id: str) -> ApprovalView | None:
        """The latest card of ``call_id``."""
        key = self.card_of_call.get(call_id)
        return None if key is None else self.approvals.get(key)

    def _on_approval_resolved(self, e: dict) -> set[str]:
        card = self.card_for(e["call_id"])
        if card is None:
            return set()
        card.approved, card.decided_by, card.note = bool(e["approved"]), e.get("by", ""), e.get("note", "")
        if card.decided_by == "timeout":
            card.outcome = "expired"
        elif card.decided_by == "cancelled":
            card.outcome = "cancelled"
        else:
            card.outcome = "approved" if card.approved else "denied"
        self._waited(card, e.get("ts"))
        return {f"card:{card.key}", "header", "timeline"}

    def _on_task_list(self, e: dict) -> set[str]:
        self.tasks = list(e.get("tasks", []))
        return {"tasks"}

    def _on_finding(self, e: dict) -> set[str]:
        found = {k: e.get(k) for k in ("severity", "source", "message", "path", "line")}
        for earlier in self.findings:  # a later sweep reporting the same finding again: still one, open again
            if all(earlier.get(k) == v for k, v in found.items()):
                earlier["resolved"] = False
                return {"findings"}
        self.findings.append({**found, "resolved": False})
        return {"findings"}

    def _on_snapshot(self, e: dict) -> set[str]:
        return set()

    def _on_cost(self, e: dict) -> set[str]:
        self.cost = {k: e.get(k, 0) for k in ("input_tokens", "output_tokens", "cost_usd", "turns", "elapsed_s")}
        return {"meter"}

    def _on_queued(self, e: dict) -> set[str]:
        """The server keeps the run waiting (position 1 = next), or lets it start (position 0)."""
        position = int(e.get("position") or 0)
        self.request = self.request or str(e.get("request") or "")
        if self.finished:
            return set()
        if position > 0:
            self.status, self.queue_position = "queued", position
            return {"header"}
        self.status, self.queue_position = "running", None
        waited = e.get("waited_s")
        self.texts.append(f"started after {float(waited):.1f} s in the queue" if waited is not None else "started")
        del self.texts[:-20]
        return {"header", "texts"}

    def _on_error(self, e: dict) -> set[str]:
        self.errors.append({"code": e["code"], "message": e["message"]})
        return {"header"}

    def _on_done(self, e: dict) -> set[str]:
        self.status, self.queue_position = e["status"], None
        self.done = {k: e.get(k) for k in ("status", "authorship", "blockers", "verification", "phase_durations", "summary",
                                           "cancelled_by")}
        for name, seconds in (e.get("phase_durations") or {}).items():
            if name in self.phases:
                self.phases[name].duration_s = seconds
        changed = {"header", "timeline", "done"}
        for phase in self.phases.values():  # a run that ended leaves no phase in progress
            if phase.status == "started":
                phase.status = "done" if self.status == "completed" else "stopped"
        self.current_call = None
        for card in self.approvals.values():
            if card.open:  # nobody answered before the run ended
                card.outcome = "cancelled" if self.status == "cancelled" else self.status
                if self.status == "cancelled" and e.get("cancelled_by"):
                    card.decided_by = f"cancelled:{e['cancelled_by']}"  # who ended it (``wording.DECIDERS``)
                self._waited(card, e.get("ts"))
                changed.add(f"card:{card.key}")
        return changed | self._done_findings()

    # -- rows, waiting time and resolved findings (the run view's own bookkeeping) ----------

    def _add_row(self, key: str, replaces: str = "") -> set[str]:
        """A call's row, in call order; a card takes over the row its call already had."""
        if replaces and replaces in self.rows and key not in self.rows:
            self.rows[self.rows.index(replaces)] = key
            return {"rows"}
        if key not in self.rows and (not key.startswith("call:") or key[5:] not in self.card_of_call):
            self.rows.append(key)
            return {"rows"}
        return set()

    def _waited(self, card: ApprovalView, ts: float | None) -> None:
        """Count the time a card stood open against its phase (once)."""
        if card.decided_at is not None or ts is None or card.requested_at is None:
            return
        card.decided_at = ts
        if card.decided_by in NOT_A_PERSON:
            return
        phase = self.phases.get(card.phase)
        if phase is not None:
            phase.waiting_s += max(ts - card.requested_at, 0.0)

    def _phase_findings(self, e: dict) -> set[str]:
        """Validation ending with no blockers left: every blocker found before is resolved."""
        details = e.get("details") or {}
        if e.get("phase") == "validate" and e.get("status") == "done" and details.get("blockers") == 0:
            return self._resolve(lambda finding: True)
        return set()

    def _done_findings(self) -> set[str]:
        """The final report names the blockers left (``[source] message``); the others were resolved."""
        if not self.done or self.status not in ("completed", "blocked"):
            return set()
        left = set(self.done.get("blockers") or [])
        return self._resolve(lambda finding: f"[{finding.get('source')}] {finding.get('message')}" not in left)

    def _resolve(self, rule) -> set[str]:
        changed = False
        for finding in self.findings:
            if finding.get("severity") == "blocker" and not finding.get("resolved") and rule(finding):
                finding["resolved"] = changed = True
        return {"findings"} if changed else set()

    def row(self, key: str) -> tuple[ApprovalView | None, CallView | None]:
        """A row's card (if the call asked for one) and its call (if a tool_call was seen)."""
        if key.startswith("call:"):
            return None, self.calls.get(key[5:])
        card = self.approvals.get(key)
        return card, (self.calls.get(card.call_id) if card is not None else None)

    def phase_work_s(self, name: str) -> float | None:
        """A phase's duration without the time it waited for a person."""
        phase = self.phases.get(name)
        if phase is None or phase.duration_s is None:
            return None
        return max(phase.duration_s - phase.waiting_s, 0.0)

    @property
    def waiting_s(self) -> float:
        return sum(p.waiting_s for p in self.phases.values())

    # -- reading --------------------------------------------------------------------------

    @property
    def status_text(self) -> str:
        """The status as a person reads it: a waiting run says its place in the queue."""
        return f"queued, position {self.queue_position}" if self.status == "queued" and self.queue_position else self.status

    @property
    def finished(self) -> bool:
        return self.status in TERMINAL

    @property
    def elapsed_s(self) -> float:
        if self.started_at is None or self.last_at is None:
            return 0.0
        return max(self.last_at - self.started_at, float(self.cost.get("elapsed_s") or 0.0))

    def open_approvals(self) -> list[ApprovalView]:
        return [card for card in self.approvals.values() if card.open]


def _outcome(card: ApprovalView, call: CallView) -> str:
    if call.ok:
        return "executed"
    if call.error_code == "approval_denied" and card.outcome in ("expired", "cancelled"):
        return card.outcome
    return OUTCOME_BY_CODE.get(call.error_code, f"failed ({call.error_code})")

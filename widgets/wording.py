"""What a decided call says in one line: tool, target, outcome, and who decided.

One source for the folded row (HTML), the static text fallback and the card's result line, so
they cannot disagree. A denial names what was denied and that it did not run; a result names
what happened ("applied, lines 46-48", "4/4 requests passed", "exit 1"), never only "executed".
"""

from __future__ import annotations

import re
from typing import Any

from kernel_ext.safetext import line_range, plural, shorten
from widgets.state import ApprovalView, CallView

TARGET_CHARS = 80
_READ_ID = re.compile(r"\s*\(read_id [^)\s]*\)")  # a read's handle for the model, not for a person

# ``approval_resolved.by`` -> who decided, as a person reads it.
DECIDERS = {
    "card": "you",
    "grant": "you (approve the rest of this kind)",  # the card's note says which card and when
    "auto": "the run's --approve setting",
    "scripted": "the scripted host approver",
    "policy": "policy",
    "timeout": "nobody (the approval timed out)",
    "cancelled": "nobody (the run was cancelled)",
    # an open card when its run was cancelled: ``done.cancelled_by`` says who (``state._on_done``)
    "cancelled:person": "you cancelled the run",
    "cancelled:server": "nobody (the Jupyter server stopped)",
    "cancelled:host": "nobody (the host cancelled the run)",
    "host": "the host",
    "duplicate id": "the host (a repeated call id)",
}


def decider(card: ApprovalView | None, call: CallView | None) -> str:
    """Who decided this call: a person, the run's ``--approve`` setting, or policy."""
    if card is None:
        if call is not None and call.error_code == "policy_denied":
            return "policy"
        return "no approval needed"
    if card.open:
        return ""
    if not card.decided_by:  # the run ended before anyone answered
        return "nobody"
    return DECIDERS.get(card.decided_by, card.decided_by)


def target(name: str, arguments: Any, request: dict[str, Any] | None = None) -> str:
    """The thing a call acts on: a path, a command, a scenario, a generator's folder."""
    args = arguments if isinstance(arguments, dict) else {}
    for key in ("path", "command", "scenario_id", "name", "pattern", "class_name", "label", "id"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return shorten(" ".join(value.split()), TARGET_CHARS)
    if name.startswith("generate_"):
        return name.removeprefix("generate_")
    proposal = (request or {}).get("proposal") or ""
    return shorten(proposal.splitlines()[0], TARGET_CHARS) if proposal else ""


def ranges(changed: Any) -> str:
    """``[[46, 48]]`` -> ``lines 46-48``; ``[[9, 9]]`` -> ``line 9``; several joined."""
    spans = [(int(a), int(b)) for a, b in changed if isinstance(a, int) and isinstance(b, int)] if isinstance(changed, list) else []
    if not spans:
        return ""
    if len(spans) == 1:
        return line_range(*spans[0])
    return "lines " + ", ".join(str(a) if b <= a else f"{a}-{b}" for a, b in spans)


def result_line(name: str, ok: bool | None, error_code: str | None, summary: str, data: dict[str, Any]) -> str:
    """What the call did, in a few words, from its tool_result."""
    report = data.get("report") if isinstance(data.get("report"), dict) else None
    if report is not None:
        rows = [r for r in report.get("requests") or [] if isinstance(r, dict)]
        passed = sum(1 for r in rows if r.get("passed"))
        if rows:
            return f"{passed}/{plural(len(rows), 'request')} passed"
    exit_code = data.get("exit_code", data.get("exit"))
    if isinstance(exit_code, int) and not isinstance(exit_code, bool):
        timed_out = " (timed out)" if data.get("timed_out") else ""
        return f"exit {exit_code}{timed_out}"
    status, changed = data.get("status"), data.get("changed")
    if ok and status == "created" and isinstance(changed, list) and changed:
        return f"created, {plural(int(changed[-1][1]), 'line')}"
    if ok and status == "applied" and changed:
        return f"applied, {ranges(changed)}"
    first = _READ_ID.sub("", summary.strip().splitlines()[0]) if summary.strip() else ""  # ids: in the folded details only
    if ok:
        return shorten(first, 120) or "done"
    return f"failed ({error_code}): {shorten(first, 100)}" if first else f"failed ({error_code})"


def outcome(card: ApprovalView | None, call: CallView | None) -> str:
    """The call's outcome: its result once it ran, else the decision (a denial says it did not run)."""
    if card is not None and card.open:
        return "waiting for your approval"
    code = call.error_code if call is not None else (card.error_code if card is not None else None)
    if code == "policy_denied":
        return "denied by policy: not run"
    if card is not None and card.outcome in ("denied", "expired", "cancelled", "interrupted", "failed", "blocked") and not card.ok:
        if card.outcome == "denied":
            return "denied: not run"
        return f"{card.outcome}: not run" if card.ok is None or code == "approval_denied" else card.outcome
    if card is not None and card.outcome == "stale input":
        return "not run: the file changed after the card was shown"
    if call is not None and call.ok is not None:
        return result_line(call.name, call.ok, call.error_code, call.result, call.data)
    if card is not None and card.ok is not None:
        return result_line(card.name, card.ok, card.error_code, card.result, card.result_data)
    if card is not None and card.approved:
        return "approved: running"
    return "running"


def call_word(call: CallView | None) -> str:
    """The badge word of a call that asked no one: running, executed, denied by policy, failed."""
    if call is None or call.ok is None:
        return "running"
    return "executed" if call.ok else ("denied by policy" if call.error_code == "policy_denied" else "failed")


def row_words(card: ApprovalView | None, call: CallView | None) -> tuple[str, str, str]:
    """(badge word, outcome, who decided) of a row, each thing said once: a badge "denied by
    policy" is followed by "not run", never "denied by policy: not run · policy"."""
    word = card.outcome if card is not None else call_word(call)
    said = outcome(card, call)
    by = by_line(card, call)
    if said.startswith(word + ": "):
        said = said[len(word) + 2:]
    if by and by in word:
        by = ""
    return word, said, by


def heading(card: ApprovalView | None, call: CallView | None) -> str:
    """``write_file backend/deps.py``: the tool and what it acts on."""
    name = card.name if card is not None else (call.name if call is not None else "?")
    arguments = (card.request or {}).get("arguments") if card is not None else (call.arguments if call else {})
    return f"{name} {target(name, arguments, card.request if card is not None else None)}".strip()


def row_text(card: ApprovalView | None, call: CallView | None, badge: bool = False) -> str:
    """``write_file backend/deps.py · created, 48 lines · decided by the run's --approve setting``;
    ``badge``: led by the badge's word in brackets (``[denied by policy] write_file a.py · not run``)."""
    if badge:
        word, said, by = row_words(card, call)
        return f"[{word}] " + " · ".join(part for part in (heading(card, call), said, by) if part)
    said, by = outcome(card, call), by_line(card, call)
    if by and by in said:
        by = ""
    return " · ".join(part for part in (heading(card, call), said, by) if part)


def by_line(card: ApprovalView | None, call: CallView | None) -> str:
    """``decided by you``, ``policy``, ``no approval needed``; empty while a card waits."""
    return _by(decider(card, call))


def _by(who: str) -> str:
    return who if not who or who.startswith(("policy", "no approval", "nobody", "you cancelled")) else f"decided by {who}"


def ids_line(call_id: str, category: str = "") -> str:
    """The call's own id, for the folded details only (``call id: c10 (test)``)."""
    return f"call id: {call_id}" + (f" ({category})" if category else "")

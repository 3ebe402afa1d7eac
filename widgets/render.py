"""HTML and plain text for the pieces of a run view, from ``RunViewState`` alone.

Shared by the live widgets (HTML) and their ``_repr_mimebundle_`` fallbacks for static viewers
(text), so both always say the same thing. Every value is escaped; nothing here holds state.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.safetext import plural, shorten
from widgets.escape import esc
from widgets.links import file_link
from widgets.state import ApprovalView, RunViewState
from widgets.theme import badge_class

STATUS_MARK = {"pending": "○", "started": "◐", "done": "●", "skipped": "–", "failed": "✕", "stopped": "■"}


def badge(text: str) -> str:
    """A status word in a badge whose edge carries its tone (``theme.STATUS_TONE``)."""
    return f'<span class="{badge_class(text)}">{esc(text)}</span>'


def seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


# -- header and meter ---------------------------------------------------------------------


def meter_text(state: RunViewState) -> str:
    cost = state.cost
    return (
        f"{seconds(state.elapsed_s) or '0 ms'} · ${float(cost.get('cost_usd') or 0):.4f} · "
        f"{int(cost.get('input_tokens') or 0):,}+{int(cost.get('output_tokens') or 0):,} tokens · "
        f"{plural(int(cost.get('turns') or 0), 'turn')}"
    )


def waiting_status(state: RunViewState) -> str:
    waiting = len(state.open_approvals())
    return f"waiting for {plural(waiting, 'approval')}" if waiting and not state.finished else state.status_text


def banner_html(state: RunViewState, awaited: bool = False) -> str:
    """One line over the pinned cards: how many wait for a person (nothing when none do, and
    nothing once the run ended); ``awaited``: a cell waits on the run (``lesson.answer_cards``)."""
    waiting = len(state.open_approvals())
    if not waiting or state.finished:
        return ""
    names = ", ".join(sorted({card.name for card in state.open_approvals()}))
    verb = "waits" if waiting == 1 else "wait"
    cell = "; this cell waits until the run ends" if awaited else ""
    return (f'<div class="besser-banner besser-live" role="status">{esc(plural(waiting, "approval"))} {verb} for you '
            f"({esc(names)}): answer below with Approve or Deny{cell}</div>")


def detached_banner_html(state: RunViewState, cancellable: bool = False) -> str:
    """What a live view says once its kernel is gone (shown by CSS alone: ``theme``). Its dead
    buttons are named only where there are some: open cards, or a Cancel button (``cancellable``)."""
    run = esc(state.run_id or "RUN")
    if state.finished:
        return (f'<div class="besser-banner besser-detached">detached: the kernel that showed this run has stopped; '
                f"<code>%besser attach {run}</code> in a cell shows the run again</div>")
    waiting = len(state.open_approvals())
    dead = " and its buttons do nothing" if waiting else (" and its Cancel button does nothing" if cancellable else "")
    asked = f"{esc(plural(waiting, 'approval'))} still {'waits' if waiting == 1 else 'wait'} for you, but not here: " if waiting else ""
    return (f'<div class="besser-banner besser-detached">detached: the kernel that showed this run stopped or restarted, '
            f"so this view no longer follows it{dead}. {asked}"
            f"<code>%besser attach {run}</code> in a cell brings the run back, live</div>")


def header_html(state: RunViewState, note: str = "", live: bool = False, *, awaited: bool = False,
                cancellable: bool = False) -> str:
    """The run's name, status pill, request, note, errors and banner; ``live`` (the widget's header)
    adds what shows once the view is detached from its kernel."""
    pill = badge(waiting_status(state))
    if live and not state.finished:
        pill = f'<span class="besser-live">{pill}</span><span class="besser-detached">{badge("detached")}</span>'
    parts = [f"<b>run {esc(state.run_id or '…')}</b> {pill}"]
    if state.request:
        parts.append(f"<div><i>{esc(shorten(state.request, 300))}</i></div>")
    if note:
        parts.append(f'<div class="besser-meta">{esc(note)}</div>')
    for error in state.errors[-3:]:
        parts.append(f'<div class="besser-error">{esc(error["code"])}: {esc(error["message"])}</div>')
    parts.append(banner_html(state, awaited))
    if live:
        parts.append(detached_banner_html(state, cancellable))
    return "".join(parts)


# -- timeline -----------------------------------------------------------------------------


def timeline_html(state: RunViewState) -> str:
    provider = f"provider: {esc(state.provider_label)} ({esc(state.provider_kind)})"
    sandbox = f"sandbox: {esc(state.sandbox_tier or 'n/a')}"
    now = now_text(state)
    return (
        _phase_cells(state)
        + f'<div class="besser-meta besser-provider">{provider} · {sandbox} · {esc(meter_text(state))}</div>'
        + (f'<div class="besser-now">{now}</div>' if now else "")
    )


_cells: tuple[tuple, str] = ((), "")  # the last phase table and what it was drawn from (it changes far less than the meter)


def _phase_cells(state: RunViewState) -> str:
    global _cells
    key = tuple((p.name, p.status, p.message, p.duration_s, p.waiting_s) for p in state.phases.values())
    if key != _cells[0]:
        _cells = (key, _draw_phases(state))
    return _cells[1]


def _draw_phases(state: RunViewState) -> str:
    cells = []
    for phase in state.phases.values():
        mark = STATUS_MARK.get(phase.status, "?")
        title = esc(phase.message) if phase.message else ""
        waited = (f'<br><small class="besser-meta">+{esc(seconds(phase.waiting_s))} waiting for you</small>'
                  if phase.waiting_s >= 0.5 else "")
        cells.append(f'<td title="{title}" style="padding:2px 10px;vertical-align:top">{mark} {esc(phase.name)}'
                     f"<br><small>{esc(seconds(state.phase_work_s(phase.name)))}{' · stopped' * (phase.status == 'stopped')}"
                     f"</small>{waited}</td>")
    return f'<table class="besser-phases"><tr>{"".join(cells)}</tr></table>'


def now_text(state: RunViewState) -> str:
    """What the run is doing: a call that waits for a person says so (never "running" it)."""
    current = state.calls.get(state.current_call) if state.current_call else None
    if current is None or state.finished:
        return ""
    card = state.card_for(current.call_id)
    if card is not None and card.open:
        return f"waiting for your approval of <code>{esc(current.name)}</code> {esc(current.summary)}"
    return f"running <code>{esc(current.name)}</code> {esc(current.summary)}"


def _phase_text(state: RunViewState, name: str) -> str:
    phase = state.phases[name]
    waited = f" (+{seconds(phase.waiting_s)} waiting)" if phase.waiting_s >= 0.5 else ""
    return f"{STATUS_MARK.get(phase.status, '?')} {name} {seconds(state.phase_work_s(name))}{waited}".rstrip()


def timeline_text(state: RunViewState) -> str:
    phases = "  ".join(_phase_text(state, name) for name in state.phases)
    return (f"{phases}\nprovider: {state.provider_label} ({state.provider_kind}) · "
            f"sandbox: {state.sandbox_tier or 'n/a'} · {meter_text(state)}")


# -- approval cards (bodies per tool: widgets/cards.py) --------------------------------------


def card_text(card: ApprovalView) -> str:
    from widgets.wording import row_text

    return row_text(card, None, badge=True)


# -- tasks, findings, done ----------------------------------------------------------------


def texts_html(state: RunViewState) -> str:
    """The model's last words, at the notebook's own text size (``theme``: read from the back row)."""
    return "".join(f'<div class="besser-text">{esc(shorten(t, 500))}</div>' for t in state.texts[-3:])


TASK_LOOK = {  # status -> (mark, what it means): implemented is claimed, verified is checked
    "verified": ("✔", "verified"),
    "existing": ("✔", "already there"),
    "implemented": ("◑", "implemented, not verified"),
    "blocked": ("✕", "blocked"),
    "dropped": ("–", "dropped"),
}


def tasks_html(state: RunViewState) -> str:
    if not state.tasks:
        return ""
    rows = []
    for task in state.tasks:
        status = str(task.get("status", "")).lower()
        mark, meaning = TASK_LOOK.get(status, ("☐", status or "open"))
        rows.append(f'<li class="besser-task besser-task-{esc(status or "open")}"><span class="besser-task-mark">{mark}</span> '
                    f'{esc(task.get("id", ""))} {esc(task.get("text", ""))} <small class="besser-meta">{esc(meaning)}</small></li>')
    unverified = any(str(task.get("status", "")).lower() == "implemented" for task in state.tasks)
    why = ('<div class="besser-meta besser-tasks-why">implemented, not verified: the model cited the code it wrote for the task; '
           "a task is verified only by a check attached to it that passed, and none was attached to these "
           "(the run's test results are in the calls above)</div>") if unverified else ""
    return f"<b>tasks</b><ul class='besser-tasks' style='margin:0'>{''.join(rows)}</ul>{why}"


def findings_html(state: RunViewState) -> str:
    if not state.findings:
        return ""
    rows = []
    for f in state.findings[-50:]:
        resolved = bool(f.get("resolved"))
        where = f" <code>{esc(f.get('path'))}{':' + esc(f.get('line')) if f.get('line') else ''}</code>" if f.get("path") else ""
        rows.append(f'<li class="besser-finding{" besser-finding-resolved" if resolved else ""}">'
                    f'{badge("resolved" if resolved else str(f.get("severity")))} '
                    f'<span class="besser-finding-text">{esc(f.get("source"))}: {esc(f.get("message"))}{where}</span></li>')
    open_blockers = sum(1 for f in state.findings if f.get("severity") == "blocker" and not f.get("resolved"))
    closed = sum(1 for f in state.findings if f.get("resolved"))
    counts = f'<small class="besser-meta">{plural(open_blockers, "open blocker")}, {closed:,} resolved</small>'
    return f"<b>findings</b> {counts}<ul class='besser-findings' style='margin:0'>{''.join(rows)}</ul>"


AUTHORSHIP_LABELS = {
    "generator_untouched": "generator output, untouched",
    "generator_llm_modified": "generator output modified by the LLM",
    "llm_authored": "written by the LLM",
    "generator_deleted": "generator output deleted",
}


def done_html(state: RunViewState, link_base: str | None = None) -> str:
    done = state.done
    if not done:
        return ""
    parts = [f"<b>done</b> {badge(str(done.get('status')))} {esc(done_summary(done))}"]
    for blocker in done.get("blockers") or []:
        parts.append(f'<div class="besser-error">blocker: {esc(blocker)}</div>')
    if state.waiting_s >= 0.5:
        parts.append(f'<div class="besser-meta besser-waited">the run waited {esc(seconds(state.waiting_s))} for approvals '
                     "(not counted in the phase times)</div>")
    authorship = done.get("authorship") or {}
    if authorship:
        total = sum(len(v) for v in authorship.values()) or 1
        rows = []
        for key, files in authorship.items():
            if not files:
                continue
            share = 100 * len(files) / total
            links = ", ".join(file_link(state, f, link_base) for f in sorted(files)[:30])
            more = f" … and {len(files) - 30:,} more" if len(files) > 30 else ""
            label = esc(AUTHORSHIP_LABELS.get(key, key))
            rows.append(f"<li>{label}: {plural(len(files), 'file')} ({share:.0f}%) <small>{links}{more}</small></li>")
        parts.append(f"<div>authorship</div><ul style='margin:0'>{''.join(rows)}</ul>")
    if state.run_dir:
        parts.append(f"<div><small>run folder: {file_link(state, '', link_base, label=state.run_dir)}</small></div>")
    return "".join(parts)


def done_summary(done: dict[str, Any]) -> str:
    """The ``done`` event's summary, and who cancelled a cancelled run when it says (``cancelled_by``)."""
    from widgets.wording import DECIDERS

    summary = str(done.get("summary") or "")
    who = DECIDERS.get(f"cancelled:{done.get('cancelled_by')}") if done.get("status") == "cancelled" else None
    return f"{summary} ({who})" if summary and who else (who or summary)


def run_text(state: RunViewState, note: str = "") -> str:
    """The whole run as plain text (static viewers, terminals, ``print(view)``)."""
    lines = [f"run {state.run_id or '…'} [{state.status_text}] {state.request[:200]}".rstrip()]
    if note:
        lines.append(note)
    lines.append(timeline_text(state))
    lines.extend(rows_text(state))
    lines.extend(f"  {'resolved' if f.get('resolved') else f.get('severity')}: {f.get('message')}" for f in state.findings[-10:])
    if state.done:
        lines.append(f"done: {state.done.get('status')} {done_summary(state.done)}".rstrip())
        for key, files in (state.done.get("authorship") or {}).items():
            if files:
                lines.append(f"  {AUTHORSHIP_LABELS.get(key, key)}: {plural(len(files), 'file')}")
        lines.extend(f"  blocker: {b}" for b in state.done.get("blockers") or [])
    return "\n".join(lines)


def rows_text(state: RunViewState) -> list[str]:
    """Pending cards first, then every call in order, one line each (the text twin of the view)."""
    from widgets.wording import row_text

    pending = [f"  [waiting] {row_text(card, state.calls.get(card.call_id))}" for card in state.open_approvals()]
    decided = []
    for key in state.rows:
        card, call = state.row(key)
        if card is None or not card.open:
            decided.append(f"  {row_text(card, call, badge=True)}")
    return pending + decided

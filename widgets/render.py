"""HTML and plain text for the pieces of a run view, from ``RunViewState`` alone.

Shared by the live widgets (HTML) and their ``_repr_mimebundle_`` fallbacks for static viewers
(text), so both always say the same thing. Every value is escaped; nothing here holds state.
"""

from __future__ import annotations

import html
import json
import os
from typing import Any
from urllib.parse import quote, urlsplit

from kernel_ext.safetext import shown_text
from widgets.state import ApprovalView, RunViewState

STATUS_MARK = {"pending": "○", "started": "◐", "done": "●", "skipped": "–", "failed": "✕"}
STATUS_COLOR = {
    "completed": "#1a7f37", "executed": "#1a7f37", "approved": "#1a7f37",
    "blocked": "#9a6700", "waiting": "#9a6700", "pending": "#57606a", "running": "#0969da", "starting": "#57606a",
    "failed": "#cf222e", "denied": "#cf222e", "stale input": "#cf222e", "expired": "#9a6700",
    "cancelled": "#57606a", "interrupted": "#9a6700", "queued": "#8250df",
}
ARGUMENT_CHARS = 1500


def esc(value: Any) -> str:
    """HTML for any value: escaped, and shown-not-obeyed (``safetext.shown_text``: HTML escaping
    leaves bidi overrides and line separators live, which could reorder what a card says)."""
    return html.escape(shown_text(str(value)), quote=True)


def badge(text: str) -> str:
    color = STATUS_COLOR.get(text.split(" (")[0].split(",")[0], "#57606a")
    return f'<span style="color:#fff;background:{color};border-radius:8px;padding:0 6px;font-size:90%">{esc(text)}</span>'


def seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


# -- header and meter ---------------------------------------------------------------------


def meter_text(state: RunViewState) -> str:
    cost = state.cost
    return (
        f"{seconds(state.elapsed_s) or '0 ms'} · ${float(cost.get('cost_usd') or 0):.4f} · "
        f"{int(cost.get('input_tokens') or 0)}+{int(cost.get('output_tokens') or 0)} tokens · {int(cost.get('turns') or 0)} turns"
    )


def header_html(state: RunViewState, note: str = "") -> str:
    waiting = len(state.open_approvals())
    status = f"waiting for {waiting} approval{'s' * (waiting > 1)}" if waiting and not state.finished else state.status_text
    parts = [f"<b>run {esc(state.run_id or '…')}</b> {badge(status)}"]
    if state.request:
        parts.append(f"<div><i>{esc(state.request[:300])}</i></div>")
    if note:
        parts.append(f'<div style="color:#57606a">{esc(note)}</div>')
    for error in state.errors[-3:]:
        parts.append(f'<div style="color:#cf222e">{esc(error["code"])}: {esc(error["message"])}</div>')
    return "".join(parts)


# -- timeline -----------------------------------------------------------------------------


def timeline_html(state: RunViewState) -> str:
    cells = []
    for phase in state.phases.values():
        mark = STATUS_MARK.get(phase.status, "?")
        title = esc(phase.message) if phase.message else ""
        cells.append(f'<td title="{title}" style="padding:2px 10px">{mark} {esc(phase.name)}'
                     f'<br><small>{esc(seconds(phase.duration_s))}</small></td>')
    current = state.calls.get(state.current_call) if state.current_call else None
    now = f"running <code>{esc(current.name)}</code> {esc(current.summary)}" if current else ""
    provider = f"provider: {esc(state.provider_label)} ({esc(state.provider_kind)})"
    sandbox = f"sandbox: {esc(state.sandbox_tier or 'n/a')}"
    return (
        f"<table><tr>{''.join(cells)}</tr></table>"
        f'<div style="color:#57606a"><small>{provider} · {sandbox} · {esc(meter_text(state))}</small></div>'
        + (f"<div><small>{now}</small></div>" if now else "")
    )


def timeline_text(state: RunViewState) -> str:
    phases = "  ".join(f"{STATUS_MARK.get(p.status, '?')} {p.name} {seconds(p.duration_s)}".rstrip() for p in state.phases.values())
    return (f"{phases}\nprovider: {state.provider_label} ({state.provider_kind}) · "
            f"sandbox: {state.sandbox_tier or 'n/a'} · {meter_text(state)}")


# -- approval cards -----------------------------------------------------------------------


def card_html(card: ApprovalView, note: str = "") -> str:
    request = card.request or {}
    arguments = request.get("arguments", {})
    body = [f"<b>{esc(card.name)}</b> <small>({esc(card.category)}, call {esc(card.call_id)})</small> {badge(card.outcome)}"]
    command = arguments.get("command") if isinstance(arguments, dict) else None
    if command:
        risk = request.get("risk") or (request.get("plan") or {}).get("risk") or "unclassified"
        body.append(f"<div>command <code>{esc(command)}</code> · risk {esc(risk)}</div>")
    shown = json.dumps(arguments, indent=1, ensure_ascii=False, default=str)
    if len(shown) > ARGUMENT_CHARS:
        shown = shown[:ARGUMENT_CHARS] + f"\n… {len(shown) - ARGUMENT_CHARS} characters more"
    body.append(f'<pre style="max-height:12em;overflow:auto;margin:2px 0">{esc(shown)}</pre>')
    proposal = request.get("proposal") or ""
    if proposal:
        body.append(f'<pre style="max-height:20em;overflow:auto;margin:2px 0">{diff_html(proposal)}</pre>')
    if note:
        body.append(f'<div style="color:#57606a">{esc(note)}</div>')
    return "".join(body)


def diff_html(text: str) -> str:
    lines = []
    for line in text.splitlines():
        added, removed = line.startswith("+") and not line.startswith("+++"), line.startswith("-") and not line.startswith("---")
        color = "#1a7f37" if added else "#cf222e" if removed else None
        lines.append(f'<span style="color:{color}">{esc(line)}</span>' if color else esc(line))
    return "\n".join(lines)


def card_text(card: ApprovalView) -> str:
    return f"[{card.outcome}] {card.name} ({card.category}, call {card.call_id})"


# -- tasks, findings, done ----------------------------------------------------------------


def texts_html(state: RunViewState) -> str:
    return "".join(f'<div style="color:#57606a"><small>{esc(t[:500])}</small></div>' for t in state.texts[-3:])


def tasks_html(state: RunViewState) -> str:
    if not state.tasks:
        return ""
    rows = "".join(
        f"<li>{'☑' if str(t.get('status', '')).lower() in CLOSED_TASKS else '☐'} {esc(t.get('id', ''))} {esc(t.get('text', ''))}"
        f" <small>{esc(t.get('status', ''))}</small></li>"
        for t in state.tasks
    )
    return f"<b>tasks</b><ul style='margin:0'>{rows}</ul>"


def findings_html(state: RunViewState) -> str:
    if not state.findings:
        return ""
    rows = "".join(
        f"<li>{badge(str(f.get('severity')))} {esc(f.get('source'))}: {esc(f.get('message'))}"
        + (f" <code>{esc(f.get('path'))}{':' + esc(f.get('line')) if f.get('line') else ''}</code>" if f.get("path") else "")
        + "</li>"
        for f in state.findings[-50:]
    )
    return f"<b>findings</b><ul style='margin:0'>{rows}</ul>"


CLOSED_TASKS = ("verified", "implemented", "existing")
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
    parts = [f"<b>done</b> {badge(str(done.get('status')))} {esc(done.get('summary') or '')}"]
    for blocker in done.get("blockers") or []:
        parts.append(f'<div style="color:#cf222e">blocker: {esc(blocker)}</div>')
    authorship = done.get("authorship") or {}
    if authorship:
        total = sum(len(v) for v in authorship.values()) or 1
        rows = []
        for key, files in authorship.items():
            share = 100 * len(files) / total
            links = ", ".join(file_link(state, f, link_base) for f in sorted(files)[:30])
            more = f" and {len(files) - 30} more" if len(files) > 30 else ""
            rows.append(f"<li>{esc(AUTHORSHIP_LABELS.get(key, key))}: {len(files)} files ({share:.0f}%) <small>{links}{more}</small></li>")
        parts.append(f"<div>authorship</div><ul style='margin:0'>{''.join(rows)}</ul>")
    if state.run_dir:
        parts.append(f"<div><small>run folder: {file_link(state, '', link_base, label=state.run_dir)}</small></div>")
    return "".join(parts)


def file_link(state: RunViewState, relative: str, link_base: str | None, label: str | None = None) -> str:
    """A link the notebook front end opens: relative to the kernel's folder, or under ``link_base``.

    ``run_dir`` and file names come from events (a replayed ``events.jsonl`` may be crafted), so
    the link is only ever a relative path or a path under an http(s) or same-origin
    ``link_base``: every segment is percent-encoded (``javascript:`` cannot become a scheme),
    and anything else is shown as plain text.
    """
    href = file_href(state.run_dir, relative, link_base)
    text = esc(label or relative)
    return f'<a href="{esc(href)}" target="_blank">{text}</a>' if href is not None else text


def file_href(run_dir: str, relative: str, link_base: str | None) -> str | None:
    """The URL of a run file, or None when no safe one exists."""
    target = os.path.join(run_dir, "app", relative) if relative else run_dir
    if link_base is None:
        try:
            target = os.path.relpath(target)
        except ValueError:
            return None
        if not target or os.path.isabs(target) or target.startswith(("/", "\\")):
            return None
        return quote(target.replace("\\", "/"), safe="/")
    base = urlsplit(link_base)
    if base.scheme not in ("", "http", "https") or (not base.scheme and base.netloc):
        return None  # e.g. javascript:, data:, or a protocol-relative //host
    return link_base.rstrip("/") + "/" + quote(target.replace("\\", "/").lstrip("/"), safe="/")


def run_text(state: RunViewState, note: str = "") -> str:
    """The whole run as plain text (static viewers, terminals, ``print(view)``)."""
    lines = [f"run {state.run_id or '…'} [{state.status_text}] {state.request[:200]}".rstrip()]
    if note:
        lines.append(note)
    lines.append(timeline_text(state))
    lines.extend("  " + card_text(card) for card in state.approvals.values())
    lines.extend(f"  {f.get('severity')}: {f.get('message')}" for f in state.findings[-10:])
    if state.done:
        lines.append(f"done: {state.done.get('status')} {state.done.get('summary') or ''}".rstrip())
        for key, files in (state.done.get("authorship") or {}).items():
            lines.append(f"  {AUTHORSHIP_LABELS.get(key, key)}: {len(files)} files")
        lines.extend(f"  blocker: {b}" for b in state.done.get("blockers") or [])
    return "\n".join(lines)

"""A card's body, by tool: what a person needs to decide, never the arguments' raw JSON.

- edits: the path and a readable diff (``diffview``: highlighted, side by side where there is room);
- new files: the content, highlighted, with line numbers;
- ``test_api``: the requests as a table (method, path, expected status, redacted body);
- ``run_command`` / ``install_dependencies`` / ``sh_run``: the command, cwd, risk class and reasons;
- generators: the generator and its target;
- anything else: the proposal the tool prepared.
The arguments stay available, folded, as a name/value table. Once the call ran, its result
sits on the card (``result_html``); a decided card folds into one row (``row_html``) that
expands to the full card.
"""

from __future__ import annotations

from typing import Any

from kernel_ext.secrets import redact
from widgets.diffview import code_view, diff_view
from widgets.render import badge, esc
from widgets.state import ApprovalView, CallView
from widgets.wording import ids_line, outcome, result_line, row_text, row_words, target

VALUE_CHARS = 2000
SHELL_TOOLS = ("run_command", "install_dependencies", "sh_run", "sh_kill", "sh_restore")


def compact(value: Any, depth: int = 0) -> str:
    """A value as a person reads it: ``username: ada, password: [redacted]`` (no JSON quoting)."""
    if isinstance(value, dict):
        inner = ", ".join(f"{k}: {compact(v, depth + 1)}" for k, v in value.items())
        return f"({inner})" if depth else inner
    if isinstance(value, list):
        return "[" + ", ".join(compact(v, depth + 1) for v in value) + "]"
    if value is None:
        return "none"
    return str(value)


def _clipped(text: str) -> str:
    return text if len(text) <= VALUE_CHARS else text[:VALUE_CHARS] + f"… ({len(text) - VALUE_CHARS:,} more characters)"


def arguments_html(arguments: Any, ids: str = "") -> str:
    """The arguments, folded: one row per argument, each value as text (multi-line values in a block);
    ``ids`` (``wording.ids_line``): the call's own id, kept here, never on the card's face."""
    if not isinstance(arguments, dict) or not arguments:
        return (f'<details class="besser-args"><summary>details</summary><div class="besser-meta besser-ids">{esc(ids)}</div>'
                "</details>") if ids else ""
    head = f'<div class="besser-meta besser-ids">{esc(ids)}</div>' if ids else ""
    rows = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else compact(value)
        cell = f"<pre>{esc(_clipped(text))}</pre>" if "\n" in text or len(text) > 100 else f"<code>{esc(text)}</code>"
        rows.append(f"<tr><th>{esc(key)}</th><td>{cell}</td></tr>")
    return f'<details class="besser-args"><summary>arguments</summary>{head}<table class="besser-table">{"".join(rows)}</table></details>'


# -- bodies per tool --------------------------------------------------------------------------


def _is_new_file(request: dict[str, Any]) -> bool:
    shots = request.get("snapshots") or request.get("files") or []
    return bool(shots) and all(isinstance(s, dict) and not s.get("exists") for s in shots)


def edit_body(request: dict[str, Any], arguments: dict[str, Any], colour: bool = True) -> str:
    path = str(arguments.get("path") or "")
    proposal = str(request.get("proposal") or "")
    content = arguments.get("content")
    if isinstance(content, str) and _is_new_file(request):
        return (f'<div class="besser-body besser-body-newfile"><div>new file <code>{esc(path)}</code>'
                f' <span class="besser-meta">({content.count(chr(10)) + (not content.endswith(chr(10)))} lines)</span></div>'
                f"{code_view(content, path, colour=colour)}</div>")
    if proposal.startswith("---") or "\n@@ " in proposal:
        diff = diff_view(proposal, colour=colour)
        return f'<div class="besser-body besser-body-edit"><div>edit <code>{esc(path)}</code></div>{diff}</div>'
    return f'<div class="besser-body besser-body-edit"><div><code>{esc(path)}</code></div><pre>{esc(proposal)}</pre></div>'


def test_body(arguments: dict[str, Any]) -> str:
    requests = [r for r in arguments.get("requests") or [] if isinstance(r, dict)]
    title = arguments.get("name") or arguments.get("scenario_id") or ""
    head = f'<div>API test <b>{esc(title)}</b> <span class="besser-meta">({esc(arguments.get("action", "run"))})</span></div>'
    if not requests:
        return f'<div class="besser-body besser-body-test">{head}<div class="besser-meta">replays the saved scenario</div></div>'
    rows = []
    for number, spec in enumerate(redact(requests)):
        body = spec.get("json", spec.get("body"))
        headers = spec.get("headers") or {}
        shown = compact(body) if body is not None else ""
        if headers:
            shown = (shown + " · " if shown else "") + "headers: " + compact(headers)
        expected = spec.get("expected_status")
        expected = "/".join(map(str, expected)) if isinstance(expected, list) else ("" if expected is None else str(expected))
        rows.append(f"<tr><td>{number}</td><td>{esc(spec.get('method', ''))}</td><td><code>{esc(spec.get('path', ''))}</code></td>"
                    f"<td>{esc(expected)}</td><td>{esc(_clipped(shown))}</td></tr>")
    table = ('<table class="besser-table besser-requests"><tr><th>#</th><th>method</th><th>path</th><th>expected status</th>'
             f'<th>body</th></tr>{"".join(rows)}</table>')
    return f'<div class="besser-body besser-body-test">{head}{table}</div>'


def command_body(name: str, request: dict[str, Any], arguments: dict[str, Any]) -> str:
    """The command, where it runs, its risk class and the reasons the planner gave."""
    details = request.get("details") or {}
    plan: dict[str, Any] = details["plan"] if isinstance(details.get("plan"), dict) else {}
    lines = str(request.get("proposal") or "").splitlines()
    command = arguments.get("command") or next((line[2:] for line in lines if line.startswith("$ ")), "")
    risk = details.get("risk") or plan.get("category") or ""
    reasons: list[str] = []
    after = False
    for line in lines:
        if line.startswith("$ "):
            after = True
        elif after and line.startswith("risk:"):
            risk = risk or line[5:].split("(")[0].strip()
            reasons.append(line[5:].strip())
        elif after and line.strip():
            reasons.append(line.strip())
    if not lines or not after:  # a proposal without a command line (sh_kill, sh_restore): it is the reason
        reasons = [line for line in lines if line.strip()]
    cwd = arguments.get("working_dir") or arguments.get("cwd") or "the shell's current folder"
    items = "".join(f"<li>{esc(reason)}</li>" for reason in reasons[:12])
    return (f'<div class="besser-body besser-body-command"><div>{esc(name)} {badge(str(risk or "unclassified"))}'
            f' <span class="besser-meta">in <code>{esc(cwd)}</code></span></div>'
            + (f'<pre class="besser-command">$ {esc(command)}</pre>' if command else "")
            + (f'<ul class="besser-reasons">{items}</ul>' if items else "") + "</div>")


def generator_body(name: str, request: dict[str, Any], arguments: dict[str, Any]) -> str:
    details = request.get("details") or {}
    files = [f for f in details.get("files") or [] if isinstance(f, str)]
    overwrites = [f for f in details.get("overwrites") or [] if isinstance(f, str)]
    listing = "".join(f"<li><code>{esc(f)}</code>{' (overwritten)' if f in overwrites else ''}</li>" for f in files[:200])
    more = f"<li>… {len(files) - 200:,} more</li>" if len(files) > 200 else ""
    return (f'<div class="besser-body besser-body-generator"><div>generator <b>{esc(name.removeprefix("generate_"))}</b></div>'
            f'<div>{esc(request.get("proposal") or "")}</div>'
            + (f'<details class="besser-args"><summary>{len(files):,} files</summary><ul>{listing}{more}</ul></details>' if files else "")
            + "</div>")


def generic_body(request: dict[str, Any]) -> str:
    proposal = str(request.get("proposal") or "")
    return f'<div class="besser-body besser-body-generic"><pre>{esc(proposal)}</pre></div>' if proposal else ""


def body_html(card: ApprovalView, colour: bool = True) -> str:
    """The part of a card a person decides on, chosen by the tool. ``colour``: syntax colours in code
    (what a card waiting for a person gets; a folded row's code keeps its added/removed marks)."""
    request = card.request or {}
    arguments: dict[str, Any] = request["arguments"] if isinstance(request.get("arguments"), dict) else {}
    if card.category == "generate" or card.name.startswith("generate_"):
        body = generator_body(card.name, request, arguments)
    elif card.name in SHELL_TOOLS or card.category == "shell" or "command" in arguments:
        body = command_body(card.name, request, arguments)
    elif card.name == "test_api" or "requests" in arguments:
        body = test_body(arguments)
    elif "path" in arguments and card.category == "edit":
        body = edit_body(request, arguments, colour)
    else:
        body = generic_body(request)
    return body + arguments_html(arguments, ids_line(card.call_id, card.category))


# -- results and the card -------------------------------------------------------------------


def result_html(card: ApprovalView) -> str:
    """What the call did, on its card; empty until it ran (or was refused)."""
    if card.ok is None and card.error_code is None:
        return ""
    line = outcome(card, None) if not card.ok else result_line(card.name, card.ok, card.error_code, card.result, card.result_data)
    parts = [f"<div><b>{esc(line)}</b></div>"]
    data = card.result_data or {}
    report = data.get("report") if isinstance(data.get("report"), dict) else None
    if report is not None:
        from widgets.report import normalise, table_html

        rows, summary = normalise(report)
        parts.append(f'<details class="besser-report"><summary>request report</summary>{table_html(rows, summary)}</details>')
    else:
        tail = [line for stream in ("stdout", "stderr") for line in str(data.get(stream) or "").splitlines()][-8:]
        if tail:
            parts.append(f"<pre>{esc(chr(10).join(tail))}</pre>")
    tone = "besser-result-ok" if card.ok else "besser-result-failed"
    return f'<div class="besser-result {tone}">{"".join(parts)}</div>'


def header_line(card: ApprovalView, live: bool = False) -> str:
    """``live`` (a card in the widget): an open card's pill says detached once the view is."""
    where = target(card.name, (card.request or {}).get("arguments"), card.request)
    pill = badge(card.outcome)
    if live and card.open:
        pill = f'<span class="besser-live">{pill}</span><span class="besser-detached">{badge("detached")}</span>'
    return f"<b>{esc(card.name)}</b> <code>{esc(where)}</code> {pill}"  # its call id: in the folded details


def card_html(card: ApprovalView, note: str = "", header: bool = True, body: str | None = None, live: bool = False) -> str:
    """The full card: what is asked, the per-tool body (``body`` when already rendered), the result
    once there, and a note."""
    parts = [f"<div>{header_line(card, live)}</div>" if header else "", body_html(card) if body is None else body, result_html(card)]
    if note:
        parts.append(f'<div class="besser-meta">{esc(note)}</div>')
    return "".join(parts)


def row_html(card: ApprovalView | None, call: CallView | None, note: str = "", body: str | None = None) -> str:
    """A decided call in one line (tool, target, outcome, who decided) that expands to its card."""
    name = card.name if card is not None else (call.name if call is not None else "?")
    arguments = (card.request or {}).get("arguments") if card is not None else (call.arguments if call else {})
    where = target(name, arguments, card.request if card is not None else None)
    word, said, by = row_words(card, call)
    summary = (f'<summary class="besser-row-line" title="{esc(row_text(card, call))}"><span class="besser-row-tool">{esc(name)}</span> '
               f'<span class="besser-row-target">{esc(where)}</span> {badge(word)} '
               f'<span class="besser-row-outcome">{esc(said)}</span>'
               + (f' <span class="besser-row-by besser-meta">· {esc(by)}</span>' if by else "") + "</summary>")
    if card is not None:
        inner = card_html(card, note, header=False, body=body if body is not None else body_html(card, colour=False))
    else:
        result = call.result.strip() if call and call.ok is not None else ""  # in full, ids and all: this is the fold
        inner = (f'<div class="besser-result"><pre>{esc(_clipped(result))}</pre></div>' if result else "") + arguments_html(
            call.arguments if call else {}, ids_line(call.call_id) if call else "")
    owner = card if card is not None else call
    return f'<details class="besser-row" data-call="{esc(owner.call_id if owner is not None else "")}">{summary}{inner}</details>'


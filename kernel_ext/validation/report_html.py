"""HTML renderings of a scenario report and of validate_app's result (static, escaped, no JS).

Used for ``_repr_html_`` in a notebook and by the ``%%test_api`` magic; every value is
escaped, and the values are already redacted by the time they get here.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

_STYLE = ("<style>.bt{border-collapse:collapse;font:12px monospace}.bt td,.bt th{border:1px solid #d0d7de;padding:2px 6px;"
          "text-align:left;vertical-align:top}.bt .ok{color:#1a7f37}.bt .bad{color:#cf222e}</style>")


def _body(message: Any) -> str:
    body = message.body
    if body in (None, ""):
        return ""
    text = body if isinstance(body, str) else json.dumps(body, indent=1, ensure_ascii=False)
    dropped = message.body_chars - len(text) if message.truncated else 0
    more = f"\n... {dropped} more characters" if dropped > 0 else ""
    return escape(text + more)


def _headers(headers: dict[str, str]) -> str:
    return escape("".join(f"{k}: {v}\n" for k, v in headers.items()))


def scenario_html(report: Any) -> str:
    state = "<span class='ok'>passed</span>" if report.passed else "<span class='bad'>failed</span>"
    title = escape(report.scenario_id or report.name or "scenario")
    parts = [_STYLE, f"<div><b>{title}</b>: {state} &middot; {len(report.requests)} requests &middot; {report.total_ms:.0f} ms"]
    if report.sandbox:
        parts.append(f" &middot; sandbox {escape(report.sandbox)}{'' if not report.network else ' (network NOT isolated)'}")
    parts.append("</div>")
    for problem in filter(None, [report.error, report.startup_error and f"application startup: {report.startup_error}"]):
        parts.append(f"<div class='bad' style='color:#cf222e'>{escape(problem)}</div>")
    parts.append("<table class='bt'><tr><th></th><th>request</th><th>status</th><th>checks</th><th>ms</th></tr>")
    for r in report.requests:
        mark = "<span class='ok'>&#10003;</span>" if r.passed else "<span class='bad'>&#10007;</span>"
        checks = "".join(
            f"<div class='{'ok' if a.ok else 'bad'}'>{escape(a.path)}: {escape(repr(a.expected))}"
            f"{'' if a.ok else ' &ne; ' + escape(repr(a.actual))}</div>" for a in r.assertions)
        if r.error:
            checks = f"<div class='bad'>{escape(r.error)}</div>" + checks
        detail = (f"<details><summary>{escape(r.method)} "
                  f"{escape(r.path)}</summary><b>request</b><pre>{_headers(r.request.headers)}"
                  f"{_body(r.request)}</pre><b>response</b><pre>{_headers(r.response.headers)}{_body(r.response)}</pre></details>")
        expected = f" <small>(expected {escape(str(r.expected_status))})</small>" if r.expected_status is not None else ""
        parts.append(f"<tr><td>{mark}</td><td>{detail}</td><td>{r.status if r.status is not None else '&mdash;'}{expected}</td>"
                     f"<td>{checks}</td><td>{r.duration_ms:.0f}</td></tr>")
    parts.append("</table>")
    if report.crashed and report.app_log_tail.strip():
        parts.append(f"<details><summary>app log (tail)</summary><pre>{escape(report.app_log_tail[-3000:])}</pre></details>")
    return "".join(parts)


def validation_html(result: Any) -> str:
    report = result.report
    boots = {True: "boots", False: "does NOT boot", None: "not run"}[report.boots]
    parts = [_STYLE, f"<div><b>validate_app</b>: {len(report.blockers)} blockers &middot; app {boots} &middot; "
                     f"cannot create: {escape(', '.join(report.cannot_create) or 'none')} &middot; "
                     f"cannot run: {escape(', '.join(report.cannot_run) or 'none')}</div>",
             "<table class='bt'><tr><th>severity</th><th>code</th><th>message</th></tr>"]
    for f in report.findings:
        cls = "bad" if f.severity == "blocker" else ""
        parts.append(f"<tr><td class='{cls}'>{escape(f.severity)}</td><td>{escape(f.code)}</td><td>{escape(f.message)}</td></tr>")
    parts.append("</table>")
    return "".join(parts)

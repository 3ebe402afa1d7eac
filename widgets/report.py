"""``RequestReport``: one row per API request (method, resolved path, status got and expected,
assertions, timing, passed or failed), each opening on its bodies; credentials are shown redacted.

It takes the ``test_api`` tool's report as data (a dict with ``requests`` or a plain list of rows). Each row may
carry ``method``, ``path``, ``status``, ``expected_status``, ``assertions`` (a list of
``{path, expected, actual, ok}``), ``duration_ms`` and ``request`` / ``response`` with
``headers`` and ``body``. Whatever the tool already redacted, headers and bodies are passed through
``kernel_ext.secrets.redact`` once more here, so a credential never reaches the screen.
"""

from __future__ import annotations

import json
from typing import Any

from kernel_ext.secrets import redact
from widgets.base import StaticFallback
from widgets.render import badge, esc
from widgets.theme import STYLE

BODY_CHARS = 4000


def normalise(report: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(rows, summary) from a report dict, a list of rows, or a pydantic report."""
    if hasattr(report, "model_dump"):
        report = report.model_dump()
    if isinstance(report, list):
        rows, summary = report, {}
    elif isinstance(report, dict):
        rows = report.get("requests") or report.get("results") or []
        summary = {k: v for k, v in report.items() if k not in ("requests", "results")}
    else:
        raise TypeError(f"a request report is a dict or a list of rows, not {type(report).__name__}")
    return [redact(dict(row)) for row in rows if isinstance(row, dict)], redact(summary)


def row_passed(row: dict[str, Any]) -> bool:
    if "passed" in row:
        return bool(row["passed"])
    expected = row.get("expected_status")
    if expected is not None and row.get("status") != expected:
        return False
    return all(a.get("ok", True) for a in _assertions(row))


def _assertions(row: dict[str, Any]) -> list[dict[str, Any]]:
    found = row.get("assertions") or []
    if isinstance(found, dict):
        return [{"path": k, **(v if isinstance(v, dict) else {"ok": bool(v)})} for k, v in found.items()]
    return [a for a in found if isinstance(a, dict)]


def _timing(row: dict[str, Any]) -> str:
    ms = row.get("duration_ms", row.get("elapsed_ms"))
    return f"{float(ms):.0f} ms" if isinstance(ms, (int, float)) else ""


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=1, ensure_ascii=False, default=str)
    return text if len(text) <= BODY_CHARS else text[:BODY_CHARS] + f"\n… {len(text) - BODY_CHARS} characters more"


def _title(row: dict[str, Any]) -> str:
    status, expected = row.get("status", "—"), row.get("expected_status")
    wanted = f" (expected {expected})" if expected is not None and expected != status else ""
    return f"{row.get('method', '?')} {row.get('path', '')} → {status}{wanted}"


def detail_html(row: dict[str, Any]) -> str:
    parts = []
    for side in ("request", "response"):
        part = row.get(side) or {}
        headers = part.get("headers") or {}
        head = "".join(f"{esc(k)}: {esc(v)}\n" for k, v in headers.items())
        body = _shown(part["body"]) if part.get("body") not in (None, "") else ""
        shown = f"<pre>{head}{esc(body)}</pre>" if head or body else "<div class='besser-meta'>(nothing sent)</div>"
        parts.append(f"<div class='besser-req-side'><b>{side}</b>{shown}</div>")
    failed = [a for a in _assertions(row) if not a.get("ok", True)]
    for a in failed:
        parts.append(f"<div class='besser-error'>{esc(a.get('path'))}: expected {esc(a.get('expected'))}, "
                     f"got {esc(a.get('actual'))}</div>")
    return "".join(parts)


HEAD = ("#", "method", "path", "status", "expected", "assertions", "time", "result")


def _cells(number: int, row: dict[str, Any]) -> tuple[str, ...]:
    checks = _assertions(row)
    passed = sum(1 for a in checks if a.get("ok", True))
    expected = row.get("expected_status")
    return (str(number), esc(row.get("method", "")), f"<code>{esc(row.get('path', ''))}</code>", esc(row.get("status", "—")),
            esc(expected) if expected is not None else "—", f"{passed}/{len(checks)}" if checks else "—",
            esc(_timing(row)), badge("passed" if row_passed(row) else "failed"))


def table_html(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The requests as a table, one row each, with the status got and the status expected apart."""
    head = "".join(f"<th>{name}</th>" for name in HEAD)
    lines = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in _cells(n, row)) + "</tr>" for n, row in enumerate(rows))
    return f"<div><b>{_caption(rows, summary)}</b></div><table class='besser-table besser-req-table'><tr>{head}</tr>{lines}</table>"


def _caption(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    total = sum(row_passed(r) for r in rows)
    return f"{total}/{len(rows)} requests passed" + (f" · {esc(summary.get('name'))}" if summary.get("name") else "")


def report_html(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    """The report on its own: each request a row that opens on its request and response (plain
    HTML ``details``, so it works with no kernel, in nbconvert and on GitHub)."""
    head = "".join(f"<span>{name}</span>" for name in HEAD)
    items = "".join(
        "<details class='besser-req'><summary class='besser-req-line'>"
        + "".join(f"<span>{cell}</span>" for cell in _cells(n, row))
        + f"</summary><div class='besser-req-detail'>{detail_html(row)}</div></details>"
        for n, row in enumerate(rows)
    )
    return (f"{STYLE}<div class='besser-request-report'><div><b>{_caption(rows, summary)}</b> "
            "<small class='besser-meta'>(click a row for its request and response)</small></div>"
            f"<div class='besser-req-line besser-req-head'>{head}</div>{items}</div>")


def report_text(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    out = [f"{sum(row_passed(r) for r in rows)}/{len(rows)} requests passed"]
    for number, row in enumerate(rows):
        mark = "ok  " if row_passed(row) else "FAIL"
        out.append(f"{mark} {number} {_title(row)} {_timing(row)}".rstrip())
        for side in ("request", "response"):
            for key, value in ((row.get(side) or {}).get("headers") or {}).items():
                out.append(f"       {side} {key}: {value}")
    return "\n".join(out)


class RequestReport(StaticFallback):
    """Shown as static HTML and text, never as a widget: a report is final when it is shown, so a
    reopened notebook shows it with no kernel (a widget would need its model)."""

    def __init__(self, report: Any):
        self.rows, self.summary = normalise(report)

    @property
    def passed(self) -> bool:
        return all(row_passed(r) for r in self.rows)

    def to_text(self) -> str:
        return report_text(self.rows, self.summary)

    def to_html(self) -> str:
        return report_html(self.rows, self.summary)

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.static_bundle()

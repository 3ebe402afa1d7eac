"""``RequestReport``: one row per API request (method, resolved path, status, assertions,
timing) with the bodies expandable; credentials are shown redacted.

It takes the ``test_api`` tool's report as data (a dict with ``requests`` or a plain list of rows). Each row may
carry ``method``, ``path``, ``status``, ``expected_status``, ``assertions`` (a list of
``{path, expected, actual, ok}``), ``duration_ms`` and ``request`` / ``response`` with
``headers`` and ``body``. Whatever the tool already redacted, headers and bodies are passed through
``kernel_ext.secrets.redact`` once more here, so a credential never reaches the screen.
"""

from __future__ import annotations

import json
from typing import Any

import ipywidgets as w

from kernel_ext.secrets import redact
from widgets.base import StaticFallback
from widgets.render import badge, esc

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
    return f"{row.get('method', '?')} {row.get('path', '')} → {row.get('status', '—')}"


def detail_html(row: dict[str, Any]) -> str:
    parts = []
    for side in ("request", "response"):
        part = row.get(side) or {}
        headers = part.get("headers") or {}
        head = "".join(f"{esc(k)}: {esc(v)}\n" for k, v in headers.items())
        body = _shown(part["body"]) if part.get("body") not in (None, "") else ""
        parts.append(f"<b>{side}</b><pre style='max-height:16em;overflow:auto'>{head}{esc(body)}</pre>")
    failed = [a for a in _assertions(row) if not a.get("ok", True)]
    for a in failed:
        parts.append(f"<div style='color:#cf222e'>{esc(a.get('path'))}: expected {esc(a.get('expected'))}, "
                     f"got {esc(a.get('actual'))}</div>")
    return "".join(parts)


def table_html(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = []
    for number, row in enumerate(rows):
        checks = _assertions(row)
        passed = sum(1 for a in checks if a.get("ok", True))
        lines.append(
            f"<tr><td>{number}</td><td>{esc(row.get('method', ''))}</td><td><code>{esc(row.get('path', ''))}</code></td>"
            f"<td>{esc(row.get('status', ''))}{' / ' + esc(row['expected_status']) if row.get('expected_status') is not None else ''}</td>"
            f"<td>{passed}/{len(checks)}</td><td>{esc(_timing(row))}</td><td>{badge('executed' if row_passed(row) else 'failed')}</td></tr>"
        )
    head = "<tr><th>#</th><th>method</th><th>path</th><th>status / expected</th><th>assertions</th><th>time</th><th></th></tr>"
    total = sum(row_passed(r) for r in rows)
    caption = f"{total}/{len(rows)} requests passed" + (f" · {esc(summary.get('name'))}" if summary.get("name") else "")
    return f"<div><b>{caption}</b></div><table>{head}{''.join(lines)}</table>"


def report_text(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    out = [f"{sum(row_passed(r) for r in rows)}/{len(rows)} requests passed"]
    for number, row in enumerate(rows):
        mark = "ok  " if row_passed(row) else "FAIL"
        out.append(f"{mark} {number} {_title(row)} {_timing(row)}".rstrip())
        for side in ("request", "response"):
            for key, value in ((row.get(side) or {}).get("headers") or {}).items():
                out.append(f"       {side} {key}: {value}")
    return "\n".join(out)


class RequestReport(StaticFallback, w.VBox):
    def __init__(self, report: Any, **kwargs):
        self.rows, self.summary = normalise(report)
        table = w.HTML(table_html(self.rows, self.summary))
        details = w.Accordion(children=[w.HTML(detail_html(row)) for row in self.rows], selected_index=None)
        for index, row in enumerate(self.rows):
            details.set_title(index, _title(row))
        super().__init__(children=(table, details), **kwargs)

    @property
    def passed(self) -> bool:
        return all(row_passed(r) for r in self.rows)

    def to_text(self) -> str:
        return report_text(self.rows, self.summary)

    def to_html(self) -> str:
        return table_html(self.rows, self.summary)

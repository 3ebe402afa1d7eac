"""Small display objects the magics return: a notice, the runs table, the config.

Each has ``_repr_mimebundle_`` with text/plain (terminals, static viewers) and text/html.
"""

from __future__ import annotations

import datetime as dt
import html
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernel_ext.hosting.summaries import RunSummary


class Notice:
    """One line for the person at the notebook (a fallback, an unavailable feature)."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": f"<div>{html.escape(self.text)}</div>"}


WAITING_MARK = "⏳"  # a run that waits for a person's decision


class RunsTable:
    COLUMNS = ("id", "status", "request", "started", "events", "waiting")

    def __init__(self, runs: list[RunSummary], note: str = ""):
        self.runs = runs
        self.note = note

    def _rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for run in self.runs:
            started = run.started_at
            when = dt.datetime.fromtimestamp(started).strftime("%Y-%m-%d %H:%M:%S") if started else ""
            status = f"queued, position {run.queue_position}" if run.queue_position else run.status
            status = f"{WAITING_MARK} {status}" if run.pending_approvals else status
            rows.append((run.id, status, run.request[:60], when, str(run.events), str(len(run.pending_approvals))))
        return rows

    def _waiting_line(self) -> str:
        waiting = [run.id for run in self.runs if run.pending_approvals]
        if not waiting:
            return ""
        runs = ", ".join(f"%besser attach {run_id}" for run_id in waiting[:5])
        return f"{WAITING_MARK} {len(waiting)} run{'s' * (len(waiting) > 1)} wait{'s' * (len(waiting) == 1)} for a decision: {runs}"

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        rows = self._rows()
        if not rows:
            text = "no runs yet"
            return {"text/plain": "\n".join(filter(None, (self.note, text))), "text/html": f"<div>{html.escape(text)}</div>"}
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(self.COLUMNS)]
        def line(cells):
            return "  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()
        waiting = self._waiting_line()
        text = "\n".join([*(filter(None, [self.note, waiting])), line(self.COLUMNS), *(line(r) for r in rows)])
        head = "".join(f"<th>{c}</th>" for c in self.COLUMNS)
        body = "".join(("<tr style='font-weight:bold'>" if r[1].startswith(WAITING_MARK) else "<tr>")
                       + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        banner = f"<div><b>{html.escape(waiting)}</b></div>" if waiting else ""
        return {"text/plain": text, "text/html": f"{banner}<table><tr>{head}</tr>{body}</table>"}


class ConfigView:
    def __init__(self, config: dict[str, Any], note: str = ""):
        self.config = config
        self.note = note

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, str]:
        text = json.dumps(self.config, indent=2, default=str)
        plain = f"{self.note}\n{text}" if self.note else text
        return {"text/plain": plain, "text/html": f"<pre>{html.escape(plain)}</pre>"}

"""The reading part of an exported run: what was asked, what happened, who decided, what came out.

Each section is built from the run's stored events and recipe only (redacted as they were
stored); every piece of text a model or a person supplied is fenced (``text.fence``). A section
is a list of ``(kind, source)`` cells, ``kind`` being ``markdown`` or ``code``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kernel_ext.hosting.eventtext import describe
from kernel_ext.hosting.export.record import RunRecord, dumps
from kernel_ext.hosting.export.text import bullets, cell, fence, inline, new_file_diff

Cell = tuple[str, str]

AUTHORSHIP = (
    ("generator_untouched", "written by the generator, untouched"),
    ("generator_llm_modified", "written by the generator, modified by the LLM"),
    ("llm_authored", "authored by the LLM"),
    ("generator_deleted", "written by the generator, deleted by the LLM"),
)


def overview(record: RunRecord, version: str) -> list[Cell]:
    started, done, recipe = record.started, record.done, record.recipe
    select = next((e for e in record.of_type("phase") if e.phase == "select" and e.status == "done"), None)
    how = select.details.get("how", "") if select is not None else ""
    when = dt.datetime.fromtimestamp(record.events[0].ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    rows = [
        ("status", done.status),
        ("summary", done.summary),
        ("model", recipe["model"].get("name", "")),
        ("generator", f"{recipe.get('generator', '')} ({how})" if how else recipe.get("generator", "")),
        ("provider", f"{started.provider_label} ({started.provider_kind})" if started else "none"),
        ("sandbox", started.sandbox_tier if started else ""),
        ("shell tools", "on" if started and started.shell_tools_enabled else "off"),
        ("started", when),
        ("cost", _cost(record)),
    ]
    table = "| | |\n|---|---|\n" + "\n".join(f"| {name} | {cell(value)} |" for name, value in rows)
    head = (f"# Run {inline(record.run_id)}\n\nExported by `%besser export` (besser-jupyter-agent {cell(version)}). "
            "It shows the model as code, the request, the timeline, each decided call with who decided it, "
            "the findings, the request reports and who wrote which file. Its last cells re-run the generation "
            "offline, from the provider turns the run recorded, into a fresh folder.\n\n" + table)
    return [("markdown", head)]


def request(record: RunRecord) -> list[Cell]:
    return [("markdown", "## The request\n\n" + fence(str(record.recipe.get("request", ""))))]


def timeline(record: RunRecord) -> list[Cell]:
    start = record.events[0].ts
    lines = []
    for event in record.events:
        try:
            line = describe(event)
        except Exception as exc:  # noqa: BLE001 - one odd event must not end the export
            line = f"[{event.type}] (not shown: {type(exc).__name__})"
        if line:
            lines.append(f"{event.ts - start:7.2f}s  {line}")
    return [("markdown", "## Timeline\n\nSeconds since the run started.\n\n" + fence("\n".join(lines)))]


def decided_calls(record: RunRecord) -> list[Cell]:
    resolved = {e.call_id: e for e in record.of_type("approval_resolved")}
    results = {e.call_id: e for e in record.of_type("tool_result")}
    cells: list[Cell] = []
    for asked in record.of_type("approval_requested"):
        decision = resolved.get(asked.call_id)
        verdict = "undecided" if decision is None else f"{'approved' if decision.approved else 'denied'} by {decision.by}"
        parts = [f"### {inline(asked.call_id)} {inline(asked.name)} ({cell(asked.category)}): {cell(verdict)}"]
        parts.append(_proposal(asked.request))
        result = results.get(asked.call_id)
        if result is not None:
            outcome = "ok" if result.ok else f"refused: {result.error_code}"
            parts.append(f"Result ({cell(outcome)}):\n\n" + fence(result.summary or "(no summary)"))
        cells.append(("markdown", "\n\n".join(parts)))
    intro = ("## Decided calls\n\nEvery call that needed a decision, as its card showed it (the diff, the command or "
             "the arguments), who decided it (`card`: a person; `auto`: the approve mode the run was started with; "
             "`scripted`/`host`: a host script; `policy`, `timeout`, `cancelled`) and what it did.")
    return [("markdown", intro + ("" if cells else "\n\n*No call needed a decision.*")), *cells]


def _proposal(frozen: dict[str, Any]) -> str:
    arguments = frozen.get("arguments") or {}
    proposal = frozen.get("proposal") or ""
    if proposal:
        return fence(proposal, "diff")
    if isinstance(arguments.get("content"), str) and isinstance(arguments.get("path"), str):
        return fence(new_file_diff(arguments["path"], arguments["content"]), "diff")
    if isinstance(arguments.get("command"), str):
        plan = frozen.get("details") or {}
        shown = fence(arguments["command"], "sh")
        return shown + ("\n\nPlan:\n\n" + fence(dumps(plan), "json") if plan else "")
    return "Arguments:\n\n" + fence(dumps(arguments), "json")


def findings(record: RunRecord) -> list[Cell]:
    lines = []
    for f in record.of_type("finding"):
        where = f" ({f.path}{':' + str(f.line) if f.line else ''})" if f.path else ""
        lines.append(f"[{f.severity}] {f.source}: {f.message}{where}")
    done = record.done
    lines += [f"[blocker left] {b}" for b in done.blockers]
    tasks = [f"[{t.get('status', '')}] {t.get('id', '')} {t.get('text', '')}" for t in done.verification.get("tasks", [])]
    body = "## Findings\n\n" + (fence("\n".join(lines)) if lines else "*None.*")
    if tasks:
        body += "\n\nThe task list at the end:\n\n" + fence("\n".join(tasks))
    return [("markdown", body)]


def request_reports(record: RunRecord) -> list[Cell]:
    cells: list[Cell] = []
    for result in record.of_type("tool_result"):
        report = (result.data or {}).get("report")
        if result.name != "test_api" or not isinstance(report, dict):
            continue
        verdict = "passed" if report.get("passed") else "failed"
        title = f"### {inline(str(report.get('scenario_id', '')))} {cell(report.get('name', ''))}: {verdict}"
        cells.append(("markdown", f"{title}\n\n{fence(result.summary)}\n\nThe report, as stored:\n\n{fence(dumps(report), 'json')}"))
    intro = "## Request reports\n\nThe `test_api` scenarios the run ran against its app, redacted as they were stored."
    return [("markdown", intro + ("" if cells else "\n\n*The run ran no request scenario.*")), *cells]


def authorship(record: RunRecord) -> list[Cell]:
    split = record.done.authorship
    parts = ["## Who wrote which file"]
    for key, title in AUTHORSHIP:
        files = list(split.get(key, []))
        parts.append(f"**{title}** ({len(files)}):\n\n{bullets(files)}")
    return [("markdown", "\n\n".join(parts))]


def _cost(record: RunRecord) -> str:
    costs = record.of_type("cost")
    if not costs:
        return "no provider calls"
    last = costs[-1]  # the meter's totals: each cost event carries the run's figures so far
    return f"{len(costs)} provider turns, {last.input_tokens} input / {last.output_tokens} output tokens, ${last.cost_usd:.4f}"

"""The Phase 2 system prompt, assembled from the parts this run needs and nothing more.

The complete-CRUD-frontend rule appears only when a frontend is needed; the runtime
verification runbook only when shell tools are on, a FastAPI backend is present and the
operator did not turn it off. The first message is the request followed by what Phase 1's
output checks found (``first_message``), so a pre-existing issue reaches the model as context
instead of being discovered in Phase 3.
"""

from __future__ import annotations

from collections.abc import Sequence

from kernel_ext.findings import Finding
from kernel_ext.providers.messages import summarise

BASE = """You customise an application that a deterministic generator already produced from a B-UML domain model.
The generated scaffold is correct: change it only where the request needs it, and never rewrite it from memory.

How to work:
- Look before you edit: list_files, read_file (it returns a read_id), then replace_file_lines with that read_id
  for a range you were shown. modify_file replaces an exact, unique anchor. write_file creates new files.
- Ask the model instead of guessing: query_class, list_classes_with, get_constraints_for.
- Keep the checklist true: task_list done needs a check or evidence citing a file you wrote
  (evidence=[{id, path, quote}]); existing=true for scaffold code you read that already does the job;
  blocked needs a reason.
- Prove behaviour with test_api scenarios against a disposable copy of the app; a failing retained scenario blocks completion.
- Every change you propose is checked by the host and may need a person's approval; a refusal names its reason.
- When everything on the checklist is done and proven, answer without a tool call."""

FRONTEND_RULE = """A frontend is required: write a React frontend under frontend/ that covers complete CRUD
(list, create, edit, delete) for every entity of the model, talking to the FastAPI backend's routes."""

RUNBOOK = """Shell tools are on. To verify at runtime: run_command 'python .besser_probe.py up' boots the backend detached,
'python .besser_probe.py routes' lists its routes, 'python .besser_probe.py req GET /path' sends a request (both boot the
backend first when it is not running), 'python .besser_probe.py down' stops it."""


FINDINGS_SHOWN = 12  # Phase 1's findings the model reads: a count and the first of them
FINDING_CHARS = 400
OVERVIEW_CHARS = 24_000
CHECKLIST_CHARS = 24_000  # tasks are short (tools/task_list.py); this bounds the whole list too


def system_prompt(*, frontend: bool, shell: bool, fastapi_backend: bool, model_overview: str, tasks: str, runbook: bool = True) -> str:
    """The prompt, each variable part bounded: it is re-sent on every turn. ``runbook=False``
    (the operator's ``BESSER_LLM_SHELL_RUNBOOK=0``) leaves the runtime runbook out."""
    parts = [BASE]
    if frontend:
        parts.append(FRONTEND_RULE)
    if shell and fastapi_backend and runbook:
        parts.append(RUNBOOK)
    parts.append(f"Domain model overview:\n{summarise(model_overview, OVERVIEW_CHARS)}")
    parts.append(f"Checklist:\n{summarise(tasks, CHECKLIST_CHARS)}")
    return "\n\n".join(parts)


def phase1_findings(findings: Sequence[Finding]) -> str:
    """What Phase 1's output checks found, for the model: handed over as context, not left for
    Phase 3 to discover (a count and the first ``FINDINGS_SHOWN``, each bounded)."""
    if not findings:
        return "[host] Phase 1's output checks (syntax, imports, app import) found nothing to report in the scaffold."
    lines = [f"- [{f.severity}] {f.source}: {summarise(f.message, FINDING_CHARS)}" + (f" ({f.path}:{f.line})" if f.path and f.line
             else f" ({f.path})" if f.path else "") for f in findings[:FINDINGS_SHOWN]]
    more = [f"... and {len(findings) - FINDINGS_SHOWN} more"] if len(findings) > FINDINGS_SHOWN else []
    return "\n".join([f"[host] Phase 1's output checks found {len(findings)} issue(s) in the scaffold, before any change "
                      "(blockers fail validation unless fixed):", *lines, *more])


def first_message(text: str, findings: Sequence[Finding] | None) -> str:
    """``text`` (the request; the scaffold for the gap plan), then Phase 1's findings (``None``: Phase 1
    did not run, as in a modify run on an unchanged model)."""
    return text if findings is None else f"{text}\n\n{phase1_findings(findings)}"

"""The Phase 2 system prompt, assembled from the parts this run needs and nothing more.

The complete-CRUD-frontend rule appears only when a frontend is needed; the runtime
verification runbook only when shell tools are on, a FastAPI backend is present and the
operator did not turn it off.
"""

from __future__ import annotations

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

RUNBOOK = """Shell tools are on. To verify at runtime: run_command 'python probe.py up' boots the backend detached,
'python probe.py routes' lists its routes, 'python probe.py req GET /path' sends a request, 'python probe.py down' stops it."""


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

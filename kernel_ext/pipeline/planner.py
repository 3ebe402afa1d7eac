"""The two cheap planning steps before the tool loop: pick the generator, plan the gap.

``choose_generator`` honours an explicit target (no call), then word rules (the request
names a stack), and asks the provider with one forced-choice call only when neither decides.
``plan_gap`` asks once for the task list that turns the scaffold into what was requested;
an empty list means the scaffold already suffices and Phase 2 is skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from kernel_ext.providers.base import Provider
from kernel_ext.providers.bounds import CallBudget
from kernel_ext.providers.messages import Conversation
from kernel_ext.tools.task_list import task_text

MAX_TASKS = 16

_TARGET_WORDS = (
    ("django", re.compile(r"\bdjango\b", re.I)),
    ("web_app", re.compile(r"\bfull[- ]stack\b", re.I)),
    ("fastapi_backend", re.compile(r"\b(fastapi|backend|rest\s*api|api|crud|endpoints?)\b", re.I)),
    ("sqlalchemy", re.compile(r"\b(sqlalchemy|orm)\b", re.I)),
    ("pydantic", re.compile(r"\bpydantic\b", re.I)),
    ("java_classes", re.compile(r"\bjava\b", re.I)),
    ("sql", re.compile(r"\bsql\s+(schema|ddl|script)\b", re.I)),
)


class _ChooseArgs(BaseModel):
    generator: str = Field(description="the generator that best fits the request")


class _TasksArgs(BaseModel):
    tasks: list[str] = Field(default_factory=list, max_length=MAX_TASKS,
                             description="what must still be done; empty when the scaffold already suffices")


# A request naming one of these asks for a stack a BESSER generator does cover (it keeps its generator).
_BESSER_STACK_NAMES = re.compile(r"\b(fastapi|django|sqlalchemy|pydantic|python)\b", re.I)


@dataclass(frozen=True)
class Choice:
    generator: str
    how: str  # "explicit" | "rules" | "provider" | "default" | "stack-metadata"
    note: str = ""  # a line for the timeline when the choice needs saying (no generator covers the stack)


def choose_by_rules(request: str, choices: list[str]) -> str | None:
    for target, pattern in _TARGET_WORDS:
        if target in choices and pattern.search(request):
            return target
    return None


async def choose_generator(
    request: str, explicit: str | None, choices: list[str], provider: Provider | None, budget: CallBudget | None = None
) -> Choice:
    if explicit:
        return Choice(explicit.removeprefix("generate_"), "explicit")
    uncovered = choose_stack_metadata(request)
    if uncovered is not None:
        return uncovered
    ruled = choose_by_rules(request, choices)
    if ruled:
        return Choice(ruled, "rules")
    default = "fastapi_backend" if "fastapi_backend" in choices else (choices[0] if choices else "")
    if provider is None or not choices:
        return Choice(default, "default")
    conversation = Conversation(
        system="You pick the one code generator that best serves a request. Answer by calling choose_generator.",
    )
    conversation.user(f"Request: {request}\nGenerators: {', '.join(choices)}")
    tool = {"name": "choose_generator", "description": "Pick one generator.", "parameters": _ChooseArgs.model_json_schema()}
    reply = await provider.complete(conversation, [tool], max_tokens=200, budget=budget)
    for call in reply.tool_calls:
        picked = (call.parsed() or {}).get("generator", "")
        if picked in choices:
            return Choice(picked, "provider")
    return Choice(default, "default")


def choose_stack_metadata(request: str) -> Choice | None:
    """A stack no BESSER generator covers (Next.js, Rust, Kotlin/Spring) takes the stack-metadata
    path: Phase 1 writes that stack's build files only, and the timeline says why. A request that
    also names a stack BESSER covers (FastAPI, Django, ...) keeps the BESSER generator."""
    from kernel_ext.generation.registry import get_target
    from kernel_ext.generation.stack_metadata import detect_stack

    stack = detect_stack(request)
    if stack is None or _BESSER_STACK_NAMES.search(request):
        return None
    spec = get_target(stack)
    note = (f"no BESSER generator covers {spec.label.removesuffix(' build files')}: Phase 1 writes only its build "
            f"files, {spec.description.rstrip('.')}; Phase 2 writes the code")
    return Choice(spec.name, "stack-metadata", note)


async def plan_gap(
    provider: Provider, request: str, scaffold_summary: str, model_overview: str, budget: CallBudget | None = None
) -> list[str]:
    """One planning call: the tasks between the scaffold and the request (at most 16, each
    at most ``MAX_TASK_CHARS``; a longer one keeps its head and a note of what was cut)."""
    conversation = Conversation(
        system=(
            "You plan the work that remains after a code generator produced a scaffold. "
            "Compare the request with the scaffold and call submit_tasks with short, checkable tasks "
            "(at most 16). Submit an empty list when the scaffold already does everything asked."
        )
    )
    conversation.user(f"Request: {request}\n\nDomain model:\n{model_overview}\n\nScaffold:\n{scaffold_summary}")
    tool = {"name": "submit_tasks", "description": "Submit the task list.", "parameters": _TasksArgs.model_json_schema()}
    reply = await provider.complete(conversation, [tool], max_tokens=1200, budget=budget)
    for call in reply.tool_calls:
        if call.name == "submit_tasks":
            tasks = (call.parsed() or {}).get("tasks", [])
            if isinstance(tasks, list):
                return _tasks(str(t) for t in tasks[: MAX_TASKS * 4])
    # A model that answered in prose: one task per bullet line (lines end at \n only).
    return _tasks(re.sub(r"^\s*(?:[-*]|\d+[.)])\s*", "", line) for line in reply.text.split("\n", MAX_TASKS * 4)[: MAX_TASKS * 4])


def _tasks(texts: Iterable[str]) -> list[str]:
    out = [task_text(t) for t in texts if t.strip()]
    return out[:MAX_TASKS]


def scaffold_summary(files: list[str], limit: int = 60) -> str:
    shown = files[:limit]
    more = f"\n... and {len(files) - limit} more files" if len(files) > limit else ""
    return "\n".join(shown) + more


def render_json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)

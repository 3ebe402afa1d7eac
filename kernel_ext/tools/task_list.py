"""The run's checklist and the ``task_list`` tool: work is closed by checks or by evidence.

Rules (each a named refusal when broken):
- ``done`` runs the task's attached verifier when it has one (an exception is a failed check);
  without one, ``evidence=[{id, path, quote}]`` must cite a successful write of this run whose
  file still holds the quote: the task is then *implemented*, acceptance still unverified.
- ``existing=true`` closes a task with scaffold code that already does the job: the file must
  have been read in this run and the quote must be executable code found in it.
- ``blocked`` needs a reason and keeps the work required; a later passing check clears it.
- ``drop`` is only for work outside the request: tasks from the plan cannot be dropped.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools.base import Category, ToolArgs, ToolContext, ToolOutcome, ToolSpec
from kernel_ext.tools.code_text import QuoteSpan, meaningful, quote_spans
from kernel_ext.tools.evidence import evidence_log
from kernel_ext.tools.read_ids import read_store
from kernel_ext.tools.written_lines import written_lines
from kernel_ext.workspace import sha256_hex

SERVICE = "task_list"
Verifier = Callable[[], "Awaitable[tuple[bool, str]] | tuple[bool, str]"]
OPEN_STATUSES = frozenset({"open", "blocked"})
MAX_TASK_CHARS = 500  # a task is a short, checkable line; the checklist is re-sent in every prompt
MAX_MODEL_TASKS = 64  # tasks the model may add; the host's own (plan, carried, model change) are not counted


def task_text(text: str, limit: int = MAX_TASK_CHARS) -> str:
    """One line of at most ``limit`` characters; a longer text keeps its head and says what was cut."""
    window = text[: limit * 2]
    flat = " ".join(window.split())
    if len(flat) <= limit and len(window) == len(text):
        return flat
    keep = limit - 32
    return f"{flat[:keep]} [... {max(len(text) - keep, 1)} chars omitted]"


@dataclass
class Task:
    id: str
    text: str
    origin: Literal["request", "model"] = "model"
    status: Literal["open", "verified", "implemented", "existing", "blocked", "dropped"] = "open"
    reason: str = ""
    evidence: list[dict[str, Any]] = field(default_factory=list)
    verifier: Verifier | None = None
    check: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "origin": self.origin,
            "status": self.status,
            "reason": self.reason,
            "evidence": self.evidence,
            "has_check": self.verifier is not None,
            "check": self.check,
        }


class TaskList:
    """The ordered tasks of one run (the host adds plan tasks and attaches verifiers)."""

    def __init__(self) -> None:
        self.tasks: dict[str, Task] = {}
        self.revision = 0

    def add(self, text: str, origin: str = "model", verifier: Verifier | None = None) -> Task:
        if origin == "model" and sum(t.origin == "model" for t in self.tasks.values()) >= MAX_MODEL_TASKS:
            raise ToolFailure("too_large", f"the checklist already holds {MAX_MODEL_TASKS} tasks of yours; "
                              "finish, merge or drop some before adding more")
        task = Task(f"T{len(self.tasks) + 1}", task_text(text), origin, verifier=verifier)  # type: ignore[arg-type]
        self.tasks[task.id] = task
        self.revision += 1
        return task

    def get(self, task_id: str) -> Task:
        if task_id not in self.tasks:
            raise ToolFailure("unknown_task", f"no task {task_id!r}; tasks are {', '.join(self.tasks) or 'none'}")
        return self.tasks[task_id]

    def open_tasks(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.status in OPEN_STATUSES]

    def outcomes(self) -> list[dict[str, Any]]:
        return [t.as_dict() for t in self.tasks.values()]

    def render(self) -> str:
        if not self.tasks:
            return "no tasks yet"
        return "\n".join(f"[{t.status}] {t.id} {t.text}" + (f" ({task_text(t.reason or t.check)})" if t.reason or t.check else "")
                         for t in self.tasks.values())

    async def run_check(self, task: Task) -> tuple[bool, str]:
        """Run the attached verifier; an exception is a failed check, never a pass."""
        try:
            outcome = task.verifier()  # type: ignore[misc]
            passed, detail = (await outcome) if inspect.isawaitable(outcome) else outcome
        except Exception as exc:  # noqa: BLE001 - a verifier bug must read as a failed check
            return False, f"the check raised {type(exc).__name__}: {exc}"
        return bool(passed), str(detail)


class EvidenceItem(ToolArgs):
    id: str = Field(description="the task id this evidence is for")
    path: str
    quote: str = Field(max_length=4000, description="code copied from the file that does the task")


class Reasoned(ToolArgs):
    id: str
    reason: str = Field(min_length=1)


class TaskListArgs(ToolArgs):
    action: Literal["list", "done", "add", "drop", "blocked", "mixed"]
    id: str | None = None
    ids: list[str] = Field(default_factory=list)
    text: str | None = None
    texts: list[str] = Field(default_factory=list)
    reason: str | None = None
    existing: bool = False
    evidence: list[EvidenceItem] = Field(default_factory=list, max_length=20)
    done_ids: list[str] = Field(default_factory=list)
    add_texts: list[str] = Field(default_factory=list)
    drop: list[Reasoned] = Field(default_factory=list)
    blocked: list[Reasoned] = Field(default_factory=list)


async def _task_list(args: TaskListArgs, ctx: ToolContext) -> ToolOutcome:
    tasks: TaskList = ctx.service(SERVICE)
    notes: list[str] = []
    single = [args.id] if args.id else []
    if args.action == "add":
        for text in [args.text or "", *args.texts]:
            if text.strip():
                notes.append(f"added {tasks.add(text).id}")
        if not notes:
            raise ToolFailure("missing_argument", "add needs text or texts")
    elif args.action == "done":
        notes += await _close(tasks, ctx, single + args.ids, args)
    elif args.action == "blocked":  # ids with one reason, or ``blocked`` items each with its own
        reason = (args.reason or "").strip()
        if (single or args.ids) and not reason:
            raise ToolFailure("missing_argument", "blocked needs a reason: give reason with id/ids, or blocked=[{id, reason}]; "
                              "the work stays required")
        if not (single or args.ids or args.blocked):
            raise ToolFailure("missing_argument", "blocked needs id/ids with a reason, or blocked=[{id, reason}]")
        notes += [_block(tasks, tid, reason) for tid in single + args.ids]
        notes += [_block(tasks, item.id, item.reason) for item in args.blocked]
    elif args.action == "drop":
        notes += [_drop(tasks, tid, args.reason or "") for tid in single + args.ids]
    elif args.action == "mixed":
        notes += [f"added {tasks.add(t).id}" for t in args.add_texts if t.strip()]
        if args.done_ids:
            notes += await _close(tasks, ctx, args.done_ids, args)
        notes += [_drop(tasks, item.id, item.reason) for item in args.drop]
        notes += [_block(tasks, item.id, item.reason) for item in args.blocked]
    tasks.revision += 1 if args.action != "list" else 0
    body = "\n".join([*notes, "", tasks.render()]) if notes else tasks.render()
    return ToolOutcome(body, {"tasks": tasks.outcomes()})


async def _close(tasks: TaskList, ctx: ToolContext, ids: list[str], args: TaskListArgs) -> list[str]:
    if not ids:
        raise ToolFailure("missing_argument", "done needs id or ids")
    notes = []
    for task_id in ids:
        task = tasks.get(task_id)
        if task.status == "dropped":
            raise ToolFailure("invalid_argument", f"{task_id} was dropped")
        if task.verifier is not None:
            passed, detail = await tasks.run_check(task)
            task.check = detail
            if passed:
                task.status, task.reason = "verified", ""
                notes.append(f"{task_id} verified: {detail}")
            else:
                notes.append(f"{task_id} check failed: {detail} (the task stays open)")
            continue
        items = [e for e in args.evidence if e.id == task_id]
        if not items:
            raise ToolFailure(
                "evidence_required",
                f"{task_id} has no automatic check: cite evidence=[{{id, path, quote}}] from a write of this run"
                + (" or from a file you read (existing=true)" if not args.existing else ""),
            )
        for item in items:
            _check_evidence(ctx, item, existing=args.existing)
        task.evidence = [item.model_dump() for item in items]
        task.status, task.reason = ("existing" if args.existing else "implemented"), ""
        notes.append(f"{task_id} {'covered by existing code' if args.existing else 'implemented'} (acceptance not verified)")
    return notes


def _check_evidence(ctx: ToolContext, item: EvidenceItem, *, existing: bool) -> None:
    workspace = ctx.service("workspace")
    loc = workspace.locate(item.path)
    if existing:
        if not read_store(ctx.state).was_read(loc):
            raise ToolFailure("evidence_not_read", f"read {item.path!r} in this run before citing it as existing code")
    else:
        writes = [r for r in evidence_log(ctx.state).for_path(loc.display) if not r.deleted]
        if not writes:
            raise ToolFailure("evidence_not_written", f"this run made no successful write to {item.path!r}; cite a file you changed")
    text = workspace.read_text(loc)
    spans = list(quote_spans(loc.display, text, item.quote))  # located in the file, judged by the file's code
    if not spans:
        raise ToolFailure("evidence_not_found", f"the quote is not in {item.path!r} as it is now")
    cited = [span for span in spans if meaningful(span.code)]
    if not cited:
        raise ToolFailure(ErrorCode.EVIDENCE_NOT_CODE, "quote executable code: at least a line with two words of code "
                          "(comments, blank lines, or `}`, `pass`, `return` alone are not evidence)")
    if not existing:
        _check_written(ctx, loc.display, text, item, cited)


def _check_written(ctx: ToolContext, path: str, text: str, item: EvidenceItem, cited: list[QuoteSpan]) -> None:
    """A citation of a write must quote code this run brought: every line of code the quote covers
    in the file is new to the tree (by content, against the tree as the run began), none untouched."""
    changed = written_lines(ctx.state).current(path, text, sha256_hex(text.encode("utf-8")))
    if changed is None:
        raise ToolFailure(ErrorCode.EVIDENCE_UNTOUCHED, f"{item.path!r} changed outside the file tools (before this run "
                          "first wrote it, or since it last did), so what this run changed is not known; cite a file "
                          "as the file tools left it")
    if not any(span.lines <= changed for span in cited):
        raise ToolFailure(ErrorCode.EVIDENCE_UNTOUCHED, f"the quote is in {item.path!r} but not on lines this run wrote or "
                          "changed: it covers code the tree held before this run (an untouched line, or code moved or "
                          "copied from another file; whitespace and comments do not count); quote the code your edit "
                          "wrote (or use existing=true for code you only read)")


def _block(tasks: TaskList, task_id: str, reason: str) -> str:
    task = tasks.get(task_id)
    task.status, task.reason = "blocked", reason
    return f"{task_id} blocked: {reason} (still required)"


def _drop(tasks: TaskList, task_id: str, reason: str) -> str:
    task = tasks.get(task_id)
    if task.origin == "request":
        raise ToolFailure("task_required", f"{task_id} comes from the request and cannot be dropped; mark it blocked with a reason instead")
    if not reason.strip():
        raise ToolFailure("missing_argument", "drop needs a reason")
    task.status, task.reason = "dropped", reason
    return f"{task_id} dropped: {reason}"


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="task_list",
        category=Category.PLAN,
        args_model=TaskListArgs,
        description=(
            "The run's checklist: list, add, done (with a check or evidence), blocked (with reason), "
            "drop (only work outside the request), or mixed."
        ),
        run=_task_list,
        requires=frozenset({SERVICE, "workspace"}),
    ),
)

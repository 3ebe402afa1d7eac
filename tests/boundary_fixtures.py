"""Small tool families used by the boundary tests (real workspace, real files)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from kernel_ext.boundary import ExecutionPolicy, Executor, always_approve
from kernel_ext.errors import ToolFailure
from kernel_ext.tools.base import Category, Preparation, ToolArgs, ToolContext, ToolOutcome, ToolSpec
from kernel_ext.tools.registry import ToolCatalog
from kernel_ext.workspace import Workspace, publish, snapshot


class PathArgs(ToolArgs):
    path: str


class WriteArgs(ToolArgs):
    path: str
    content: str
    tags: list[str] = Field(default_factory=list)


RECEIVED: list[dict] = []


def _peek(args: PathArgs, ctx: ToolContext) -> ToolOutcome:
    return ToolOutcome(ctx.workspace.read_text(args.path), {"path": args.path})


def _prepare_write(args: WriteArgs, ctx: ToolContext) -> Preparation:
    ctx.workspace.locate(args.path)
    return Preparation(files=(args.path,), proposal=f"write {len(args.content)} characters to {args.path}")


def _write(args: WriteArgs, ctx: ToolContext) -> ToolOutcome:
    RECEIVED.append(args.model_dump())
    before = snapshot(ctx.workspace, args.path)
    publish(ctx.workspace, args.path, args.content.encode(), expected=before.identity if before.exists else None)
    return ToolOutcome(f"wrote {args.path}", {"path": args.path})


def _fail(args: PathArgs, ctx: ToolContext) -> ToolOutcome:
    raise ToolFailure("custom_refusal", f"refused {args.path}")


def _crash(args: PathArgs, ctx: ToolContext) -> ToolOutcome:
    raise ZeroDivisionError("tool bug")


def _shell(args: PathArgs, ctx: ToolContext) -> ToolOutcome:
    return ToolOutcome("ran")


TOOLS = (
    ToolSpec("peek", Category.READ, PathArgs, "Read a file.", _peek, requires=frozenset({"workspace"})),
    ToolSpec("put", Category.EDIT, WriteArgs, "Write a file.", _write, _prepare_write, frozenset({"workspace"})),
    ToolSpec("refuse", Category.READ, PathArgs, "Always refuses.", _fail),
    ToolSpec("crash", Category.READ, PathArgs, "Has a bug.", _crash),
    ToolSpec("sh", Category.SHELL, PathArgs, "Needs the shell service.", _shell, requires=frozenset({"shell"})),
)


# An Executor over some tools (edits and reads allowed), for tests of the boundary's own edges.
EDIT = ExecutionPolicy.allowing([Category.EDIT, Category.READ])


def executor(project: Path | None, *specs: ToolSpec, approver=always_approve) -> Executor:
    services = {"workspace": Workspace(project)} if project is not None else {}
    return Executor(ToolCatalog(specs), ToolContext(services=services), policy=EDIT, approver=approver)

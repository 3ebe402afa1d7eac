"""Whole-file changes: ``write_file`` and ``delete_file``.

``write_file`` creates files freely, but replaces an existing one only when this run saw the
current version whole: a rewrite from memory is how scaffold code silently disappears.
``delete_file`` removes one regular file (never a link's target, never a folder).
"""

from __future__ import annotations

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.tools.base import (
    Category,
    Preparation,
    ToolArgs,
    ToolContext,
    ToolOutcome,
    ToolSpec,
)
from kernel_ext.tools.edit_commit import EditPlan, check_python, commit, counted
from kernel_ext.tools.edit_gates import refuse_new_elisions, strip_gutter
from kernel_ext.tools.evidence import evidence_log
from kernel_ext.tools.files_common import (
    FILE_SERVICES,
    changed_ranges,
    count_lines,
    existing,
    full_diff,
    load_text,
    locate,
    not_found,
    split_lines,
    to_newline,
    workspace_of,
)
from kernel_ext.tools.read_ids import read_store
from kernel_ext.tools.written_lines import generated_digest, written_lines
from kernel_ext.workspace import Location, file_lock, remove, snapshot
from kernel_ext.workspace.locks import lock_key

PROPOSAL_MAX_CHARS = 12_000


class WriteArgs(ToolArgs):
    path: str = Field(description="File to create (or to replace, if you read all of it in this run).")
    content: str = Field(description="The complete file content.")


class DeleteArgs(ToolArgs):
    path: str = Field(description="File to delete, relative to the workspace root.")


# -- write_file ---------------------------------------------------------------------------------


def _plan_write(args: WriteArgs, ctx: ToolContext, loc: Location) -> EditPlan:
    content = strip_gutter(args.content, "content")
    workspace_of(ctx).check_writable(loc)  # a protected path is refused by that name, read or not
    if not existing(ctx, loc):
        refuse_new_elisions("", content, loc.display)
        count = count_lines(content)
        plan = EditPlan("write_file", loc, None, content, ((1, count),) if count else ((1, 0),))
        check_python(plan)
        return plan
    before = load_text(ctx, loc)
    known = read_store(ctx.state).known_version(lock_key(loc))
    if known is None:
        raise ToolFailure(
            ErrorCode.NOT_READ,
            f"{loc.display!r} exists and this run has not read all of it; a rewrite from memory would drop code. "
            "read_file it completely first, or change it with modify_file / replace_file_lines",
        )
    if known != before.sha256:
        raise ToolFailure(ErrorCode.STALE_INPUT, f"{loc.display!r} changed since it was read; read it again before rewriting it")
    content = to_newline(content, before.newline)
    if content == before.text:
        raise ToolFailure(ErrorCode.NO_CHANGE, f"content is identical to {loc.display!r}; nothing to do")
    refuse_new_elisions(before.text, content, loc.display)
    new_lines = split_lines(content)
    plan = EditPlan("write_file", loc, before, content, changed_ranges(before.lines, new_lines))
    plan.new_lines = new_lines
    check_python(plan)
    return plan


def _prepare_write(args: WriteArgs, ctx: ToolContext) -> Preparation:
    loc = locate(ctx, args.path)
    plan = _plan_write(args, ctx, loc)
    old = plan.before.lines if plan.before else []
    diff = full_diff(loc.display, old, plan.new_lines)
    if len(diff) > PROPOSAL_MAX_CHARS:
        diff = diff[:PROPOSAL_MAX_CHARS] + f"\n[... diff cut: {len(diff)} characters in all]\n"
    return Preparation(files=(loc.display,), proposal=diff)


def _run_write(args: WriteArgs, ctx: ToolContext) -> ToolOutcome:
    loc = locate(ctx, args.path)
    with file_lock(loc):
        plan = _plan_write(args, ctx, loc)
        done = commit(ctx, plan)
    verb = "created" if plan.before is None else "rewrote"
    text = f"{verb} {loc.display} ({len(plan.new_lines)} lines)"
    notes = [n for n in (*plan.notes, done.note) if n]
    data = {
        "path": loc.display,
        "status": "created" if plan.before is None else "applied",
        "written": True,
        "sha256": plan.new_sha,
        "changed": [list(r) for r in plan.changed],
        "evidence_id": done.record.id,
    }
    return ToolOutcome("\n".join([text, *notes]), data)


# -- delete_file --------------------------------------------------------------------------------


def _require(ctx: ToolContext, loc: Location) -> None:
    if not existing(ctx, loc):
        raise not_found(workspace_of(ctx), loc)
    workspace_of(ctx).check_writable(loc)


def _prepare_delete(args: DeleteArgs, ctx: ToolContext) -> Preparation:
    loc = locate(ctx, args.path)
    _require(ctx, loc)
    shot = snapshot(workspace_of(ctx), loc)
    size = shot.identity.size if shot.identity else 0
    return Preparation(files=(loc.display,), proposal=f"delete {loc.display} ({size} bytes, sha256 {shot.sha256[:12]})")


def _run_delete(args: DeleteArgs, ctx: ToolContext) -> ToolOutcome:
    ws = workspace_of(ctx)
    loc = locate(ctx, args.path)
    with file_lock(loc):
        _require(ctx, loc)
        shot = snapshot(ws, loc)
        if shot.problem or shot.identity is None:
            raise ToolFailure(ErrorCode.NOT_REGULAR_FILE, f"{loc.display!r} cannot be deleted: {shot.problem}")
        remove(ws, loc, expected=shot.identity)
        record = evidence_log(ctx.state).record("delete_file", loc.display, "", shot.sha256, (), deleted=True)
        read_store(ctx.state).forget(lock_key(loc))
        written_lines(ctx.state).track(loc.display, shot.sha256, shot.text, "",  # the baseline outlives the file
                                       generated=generated_digest(ctx.state, loc.display))
    return ToolOutcome(
        f"deleted {loc.display}",
        {"path": loc.display, "status": "deleted", "written": True, "evidence_id": record.id, "before_sha256": shot.sha256},
    )


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="write_file",
        category=Category.EDIT,
        args_model=WriteArgs,
        description=(
            "Create a file with the given content. Replacing an existing file requires having read all of it "
            "in this run; prefer modify_file or replace_file_lines for changes."
        ),
        run=counted(_run_write),
        prepare=counted(_prepare_write),
        requires=FILE_SERVICES,
        blocking=True,  # gates (parse, import guard), then a write and its fsyncs: off the server's loop
    ),
    ToolSpec(
        name="delete_file",
        category=Category.EDIT,
        args_model=DeleteArgs,
        description="Delete one file from the workspace (not a folder).",
        run=_run_delete,
        prepare=_prepare_delete,
        requires=FILE_SERVICES,
        blocking=True,  # a removal and its folder's fsync: off the server's loop
    ),
)

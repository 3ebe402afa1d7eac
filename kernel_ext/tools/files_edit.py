"""The text editors: ``replace_file_lines`` (read-id guarded) and ``modify_file`` (anchor based).

Both plan the edit in ``prepare`` (the approval card gets the file snapshot and a diff) and
plan it again in ``run`` under the file's lock from a fresh read, then ``commit`` it. Every
refusal happens before the write and leaves the disk unchanged.
"""

from __future__ import annotations

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.safetext import line_range, plural
from kernel_ext.tools.anchors import closest_lines, duplicate_insertion, find
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
from kernel_ext.tools.evidence import evidence_log, fingerprint
from kernel_ext.tools.files_common import (
    FILE_SERVICES,
    Loaded,
    full_diff,
    load_text,
    locate,
    shown,
    split_lines,
    to_newline,
    window_diff,
)
from kernel_ext.tools.read_ids import read_store
from kernel_ext.workspace import Location, file_lock
from kernel_ext.workspace.locks import lock_key

ECHO_CONTEXT = 2
REPLAY_MIN_CHARS = 6  # shorter new text is too common to suggest a replay
ECHO_MAX_LINES = 40


class ReplaceLinesArgs(ToolArgs):
    path: str = Field(description="The file the read_id was issued for.")
    read_id: str = Field(description="The read_id returned by read_file for the current version of the file.")
    start_line: int = Field(ge=1, description="First line to replace (1-based, as read_file numbers it).")
    end_line: int = Field(ge=1, description="Last line to replace (inclusive).")
    new_text: str = Field(description="The complete new text for those lines, without line numbers ('' deletes them).")


class ModifyArgs(ToolArgs):
    path: str = Field(description="File to change, relative to the workspace root.")
    old_text: str = Field(description="Text that occurs exactly once in the file (the anchor).")
    new_text: str = Field(description="Its replacement (to insert, repeat the anchor and add the new lines).")
    replace_all: bool = Field(False, description="Replace every exact occurrence of old_text.")


# -- replace_file_lines -------------------------------------------------------------------------


def _plan_replace(args: ReplaceLinesArgs, ctx: ToolContext, loc: Location) -> EditPlan:
    view = read_store(ctx.state).view(args.read_id)
    if view.key != lock_key(loc):
        raise ToolFailure(
            ErrorCode.UNKNOWN_READ_ID,
            f"read_id {args.read_id!r} was issued for {view.path!r}, not {loc.display!r}; read {loc.display!r} first",
        )
    before = load_text(ctx, loc)
    if before.sha256 != view.sha256:
        raise ToolFailure(
            ErrorCode.STALE_INPUT,
            f"{loc.display!r} changed since read_id {args.read_id!r} was issued; no edit applied. Read it again",
        )
    first, last = args.start_line, args.end_line
    if last < first:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"end_line {last} is before start_line {first}")
    unseen = view.uncovered(first, last)
    if unseen:
        raise ToolFailure(
            ErrorCode.UNREAD_RANGE,
            f"lines {first}-{last} were not all shown in full by read_id {args.read_id!r} (it shows lines "
            f"{view.first}-{view.last} of {view.total}; not shown in full: {_ranges(unseen)}). read_file with "
            f"offset={first - 1} (offset is 0-based) shows line {first} onwards",
            {"shown": [view.first, view.last], "total": view.total},
        )
    lines = before.lines
    new_text = to_newline(strip_gutter(args.new_text), before.newline)
    if new_text and not new_text.endswith("\n") and (last < len(lines) or lines[-1].endswith("\n")):
        new_text += before.newline
    old_segment = lines[first - 1 : last]
    new_segment = split_lines(new_text)
    if new_segment == old_segment:
        raise ToolFailure(ErrorCode.NO_CHANGE, f"lines {first}-{last} of {loc.display!r} already read exactly like new_text; nothing to do")
    refuse_new_elisions("".join(old_segment), new_text, loc.display)
    new_lines = lines[: first - 1] + new_segment + lines[last:]
    count = len(new_segment)
    changed = ((first, first + count - 1),)
    plan = EditPlan("replace_file_lines", loc, before, "".join(new_lines), changed, hint=(first, last, count))
    plan.new_lines = new_lines  # cached_property: reuse the list instead of splitting again
    check_python(plan)
    return plan


def _prepare_replace(args: ReplaceLinesArgs, ctx: ToolContext) -> Preparation:
    loc = locate(ctx, args.path)
    plan = _plan_replace(args, ctx, loc)
    first, last = args.start_line, args.end_line
    diff = window_diff(loc.display, plan.old_lines, plan.new_lines, first, last, plan.changed[0][1])
    return Preparation(files=(loc.display,), proposal=diff, data={"changed": [list(r) for r in plan.changed]})


def _run_replace(args: ReplaceLinesArgs, ctx: ToolContext) -> ToolOutcome:
    loc = locate(ctx, args.path)
    with file_lock(loc):
        plan = _plan_replace(args, ctx, loc)
        done = commit(ctx, plan)
        read_store(ctx.state).spend(args.read_id)
    first, count = args.start_line, plan.changed[0][1] - args.start_line + 1
    what = f"replaced lines {args.start_line}-{args.end_line} of {loc.display}"
    what += f" with {count} line{'s' if count != 1 else ''}" if count else " (deleted them)"
    text = f"{what}; the file now has {len(plan.new_lines)} lines. read_id {args.read_id} is spent: read again before another range edit."
    return _outcome(text, plan, done, _echo(plan.new_lines, first, first + count - 1))


# -- modify_file --------------------------------------------------------------------------------


def _plan_modify(args: ModifyArgs, ctx: ToolContext, loc: Location) -> EditPlan | ToolOutcome:
    before = load_text(ctx, loc)
    old_text = to_newline(strip_gutter(args.old_text, "old_text"), before.newline)
    new_text = to_newline(strip_gutter(args.new_text, "new_text"), before.newline)
    if not old_text:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "old_text is empty; to create or rewrite a whole file use write_file")
    if old_text == new_text:
        raise ToolFailure(ErrorCode.NO_CHANGE, "old_text and new_text are identical; nothing to do")
    receipt_key = fingerprint("modify_file", path=loc.display, old_text=args.old_text, new_text=args.new_text, replace_all=args.replace_all)
    matches = find(before.text, before.lines, old_text, new_text, replace_all=args.replace_all)
    if not matches:
        return _unmatched(ctx, loc, before, old_text, new_text, receipt_key)
    if all(_already_there(before.text, m, old_text, new_text) for m in matches):
        return _replayed(ctx, loc, before, receipt_key, "new_text is already in place around old_text")
    if len(matches) == 1:
        reason = duplicate_insertion(before.lines, matches[0], old_text, new_text)
        if reason:
            raise ToolFailure(
                ErrorCode.DUPLICATE_INSERTION,
                f"{reason} (lines near {matches[0].first_line}-{matches[0].last_line} of {loc.display!r}); "
                "it looks already present, so nothing was inserted. Read the file to check",
            )
    refuse_new_elisions(old_text * len(matches), "".join(m.replacement for m in matches), loc.display)
    pieces, cursor = [], 0
    for m in matches:
        pieces += [before.text[cursor : m.start], m.replacement]
        cursor = m.end
    pieces.append(before.text[cursor:])
    new_full = "".join(pieces)
    if new_full == before.text:
        raise ToolFailure(ErrorCode.NO_CHANGE, f"the replacement leaves {loc.display!r} exactly as it is; nothing to do")
    changed, hint = _changes(before, matches, new_full)
    plan = EditPlan("modify_file", loc, before, new_full, changed, hint=hint, fingerprint=receipt_key)
    if matches[0].tier != "exact":
        plan.notes.append(f"matched by the {matches[0].tier} tier (whitespace differed from old_text)")
    check_python(plan)
    return plan


def _unmatched(ctx: ToolContext, loc: Location, before: Loaded, old_text: str, new_text: str, receipt_key: str) -> ToolOutcome:
    """No anchor: answer ``already_applied`` only with a receipt, else ``possible_replay`` or ``no_match``."""
    if len(new_text.strip()) >= REPLAY_MIN_CHARS and new_text in before.text:
        return _replayed(ctx, loc, before, receipt_key, "old_text is not in the file but new_text already is")
    near = closest_lines(before.lines, old_text)
    hint = f" Closest lines: {', '.join(map(str, near))}." if near else ""
    raise ToolFailure(
        ErrorCode.NO_MATCH,
        f"old_text was not found in {loc.display!r}.{hint} Copy it exactly from read_file output (without the "
        "'NNN| ' numbers), or use read_file + replace_file_lines",
        {"closest_lines": near},
    )


def _already_there(text: str, m, old_text: str, new_text: str) -> bool:
    """True when the file already holds new_text exactly where this anchor match sits inside it."""
    if m.tier != "exact" or old_text not in new_text:
        return False
    k = new_text.find(old_text)
    while k >= 0:
        start = m.start - k
        if start >= 0 and text.startswith(new_text, start):
            return True
        k = new_text.find(old_text, k + 1)
    return False


def _replayed(ctx: ToolContext, loc: Location, before: Loaded, receipt_key: str, why: str) -> ToolOutcome:
    """``already_applied`` with a receipt of this exact edit and an unchanged file; else ``possible_replay``."""
    receipt = evidence_log(ctx.state).receipt(loc.display, receipt_key)
    if receipt is not None and receipt.sha256 == before.sha256:
        return ToolOutcome(
            f"already_applied: this exact edit of {loc.display} succeeded earlier in this run (evidence #{receipt.id}) "
            "and the file is unchanged since; nothing written",
            {"path": loc.display, "status": "already_applied", "evidence_id": receipt.id, "written": False},
        )
    raise ToolFailure(
        ErrorCode.POSSIBLE_REPLAY,
        f"{why} in {loc.display!r}: this edit may have been applied before (for instance before a restart). "
        "Nothing was written and no success is claimed; read the file to check",
    )


def _changes(before: Loaded, matches, new_full: str) -> tuple[tuple[tuple[int, int], ...], tuple[int, int, int] | None]:
    ranges, shift = [], 0
    for m in matches:
        count = len(split_lines(m.replacement)) if m.replacement else 0
        first = m.first_line + shift
        ranges.append((first, first + count - 1) if count else (first, first - 1))
        shift += count - (m.last_line - m.first_line + 1)
    hint = None
    if len(matches) == 1 and _whole_lines(before.text, matches[0]):
        m = matches[0]
        hint = (m.first_line, m.last_line, len(split_lines(m.replacement)) if m.replacement else 0)
    elif len(matches) == 1:
        m = matches[0]  # a partial-line anchor: the touched lines are still one contiguous region
        new_count = m.last_line - m.first_line + 1 + (len(split_lines(new_full)) - len(before.lines))
        hint = (m.first_line, m.last_line, new_count) if new_count >= 0 else None
    return tuple(ranges), hint


def _whole_lines(text: str, m) -> bool:
    return (m.start == 0 or text[m.start - 1] == "\n") and (m.end == len(text) or text[m.end - 1] == "\n")


def _prepare_modify(args: ModifyArgs, ctx: ToolContext) -> Preparation:
    loc = locate(ctx, args.path)
    plan = _plan_modify(args, ctx, loc)
    if isinstance(plan, ToolOutcome):
        return Preparation(files=(loc.display,), proposal="already applied: nothing will be written")
    first = plan.changed[0][0]
    last_old = plan.hint[1] if plan.hint else first
    diff = window_diff(loc.display, plan.old_lines, plan.new_lines, first, last_old, plan.changed[-1][1])
    if len(plan.changed) > 1:
        diff = full_diff(loc.display, plan.old_lines, plan.new_lines)
    return Preparation(files=(loc.display,), proposal=diff)


def _run_modify(args: ModifyArgs, ctx: ToolContext) -> ToolOutcome:
    loc = locate(ctx, args.path)
    with file_lock(loc):
        plan = _plan_modify(args, ctx, loc)
        if isinstance(plan, ToolOutcome):
            return plan
        done = commit(ctx, plan)
    first, last = plan.changed[0][0], plan.changed[-1][1]
    if len(plan.changed) == 1 and plan.changed[0][1] >= plan.changed[0][0]:
        where = "new " + line_range(*plan.changed[0])
    else:
        where = "new lines " + ", ".join(
            (str(a) if b == a else f"{a}-{b}") if b >= a else f"removed before {a}" for a, b in plan.changed)
    text = f"modified {loc.display} ({where}); the file now has {plural(len(plan.new_lines), 'line')}"
    return _outcome(text, plan, done, _echo(plan.new_lines, first, last))


# -- shared -------------------------------------------------------------------------------------


def _outcome(text: str, plan: EditPlan, done, echo: str) -> ToolOutcome:
    notes = [n for n in (*plan.notes, done.note) if n]
    body = "\n".join([text, *notes, *([echo] if echo else [])])
    data = {
        "path": plan.loc.display,
        "status": "applied",
        "written": True,
        "sha256": plan.new_sha,
        "changed": [list(r) for r in plan.changed],
        "evidence_id": done.record.id,
    }
    return ToolOutcome(body, data)


def _echo(lines: list[str], first: int, last: int) -> str:
    """The edited region with its new numbers (plus a little context), for the model to check."""
    if not lines:
        return "(the file is now empty)"
    lo = max(1, first - ECHO_CONTEXT)
    hi = min(len(lines), max(last, first - 1) + ECHO_CONTEXT)
    hi = min(hi, lo + ECHO_MAX_LINES - 1)
    return "\n".join(f"{n:>4}| {shown(lines[n - 1])}" for n in range(lo, hi + 1))


def _ranges(numbers: list[int]) -> str:
    spans, start, prev = [], numbers[0], numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(f"{start}-{prev}" if prev != start else str(start))
        if n is not None:
            start = prev = n
    return ", ".join(spans[:5]) + (" ..." if len(spans) > 5 else "")


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="replace_file_lines",
        category=Category.EDIT,
        args_model=ReplaceLinesArgs,
        description=(
            "Replace lines start_line..end_line (1-based, inclusive) of a file you read with read_file, using its "
            "read_id. new_text is the complete new text for those lines; the old text need not be repeated. "
            "After a successful edit, read again before another range edit of that file."
        ),
        run=counted(_run_replace),
        prepare=counted(_prepare_replace),
        requires=FILE_SERVICES,
        blocking=True,  # gates (parse, import guard), then a write and its fsyncs: off the server's loop
    ),
    ToolSpec(
        name="modify_file",
        category=Category.EDIT,
        args_model=ModifyArgs,
        description=(
            "Replace old_text (which must occur exactly once, copied from the file) with new_text. To insert, "
            "use a unique anchor and repeat it in new_text with the added lines."
        ),
        run=counted(_run_modify),
        prepare=counted(_prepare_modify),
        requires=FILE_SERVICES,
        blocking=True,  # gates (parse, import guard), then a write and its fsyncs: off the server's loop
    ),
)

"""The read family: ``list_files``, ``read_file``, ``search_in_files``.

Argument names are BESSER's (models already know them). Every result is bounded and says
what it left out and how to get the rest. ``read_file`` numbers lines ``NNN| `` and returns a
``read_id`` (in the text and in ``data["read_id"]``) that ``replace_file_lines`` checks.
"""

from __future__ import annotations

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.safetext import line_range
from kernel_ext.tools.base import Category, ToolArgs, ToolContext, ToolOutcome, ToolSpec
from kernel_ext.tools.files_common import (
    FILE_SERVICES,
    load_text,
    locate,
    shown,
    workspace_of,
)
from kernel_ext.tools.import_guard import checker_for_root, is_guarded
from kernel_ext.tools.read_ids import read_store
from kernel_ext.tools.search import search
from kernel_ext.workspace import Walker
from kernel_ext.workspace.locks import lock_key

LIST_LIMIT = 400
READ_LIMIT_LINES = 2000
READ_MAX_CHARS = 14_000
LINE_MAX_CHARS = 1_000
SEARCH_LIMIT = 200
HIT_MAX_CHARS = 300


class ListFilesArgs(ToolArgs):
    path: str = Field(".", description="Folder to list, relative to the workspace root (default: the root).")


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File to read, relative to the workspace root.")
    offset: int = Field(0, ge=0, description="Lines to skip first (0-based): offset=N starts at line N+1.")
    limit: int | None = Field(None, ge=1, description="At most this many lines (default: as many as fit).")


class SearchArgs(ToolArgs):
    pattern: str = Field(description="Python regular expression, matched against each line.")
    file_glob: str = Field("*", description="Only files whose name matches this glob (e.g. '*.py').")
    path: str = Field(".", description="Folder to search in (default: the whole workspace).")


def _list_files(args: ListFilesArgs, ctx: ToolContext) -> ToolOutcome:
    walker = Walker(workspace_of(ctx), args.path)
    shown_lines: list[str] = []
    entries: list[dict] = []
    found = 0
    for entry in walker:
        found += 1
        if len(entries) >= LIST_LIMIT:
            continue
        if entry.kind == "dir":
            shown_lines.append(entry.path + "/")
        elif entry.kind == "link":
            shown_lines.append(f"{entry.path} -> {entry.target} (link; not followed)")
        else:
            shown_lines.append(entry.path)
        entries.append({"path": entry.path, "kind": entry.kind, "size": entry.size})
    footer = [f"{found} entries" + ("" if walker.complete else " (stopped counting at the scan limit)")]
    if found > len(entries):
        footer.append(f"{found - len(entries)} more not listed: list a subfolder with path=...")
    if walker.not_descended:
        footer.append("not entered (tool folders): " + ", ".join(p + "/" for p in walker.not_descended))
    if walker.skipped:
        footer.append("skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(walker.skipped.items())))
    data = {
        "path": args.path,
        "entries": entries,
        "total": found,
        "cut": found - len(entries),
        "not_descended": list(walker.not_descended),
        "skipped": dict(walker.skipped),
        "complete": walker.complete,
    }
    return ToolOutcome("\n".join([*shown_lines, "", *footer]).strip(), data)


def _read_file(args: ReadFileArgs, ctx: ToolContext) -> ToolOutcome:
    loc = locate(ctx, args.path)
    loaded = load_text(ctx, loc)
    if is_guarded(loc.name):
        (ctx.services.get("import_checker") or checker_for_root(str(loc.root))).warm()
    lines, total = loaded.lines, len(loaded.lines)
    if total and args.offset >= total:
        raise ToolFailure(
            ErrorCode.INVALID_ARGUMENT,
            f"offset {args.offset} is past the end: {loc.display!r} has {total} lines (offset is 0-based)",
        )
    start = min(args.offset, total)
    stop = min(total, start + (args.limit or READ_LIMIT_LINES))
    rendered: list[str] = []
    cut: set[int] = set()
    used = 0
    end = start
    for number in range(start + 1, stop + 1):
        text = shown(lines[number - 1])
        if len(text) > LINE_MAX_CHARS:
            text = f"{text[:LINE_MAX_CHARS]} [... line cut: {len(text)} characters; not editable with this read_id]"
            cut.add(number)
        row = f"{number:>4}| {text}"
        if rendered and used + len(row) + 1 > READ_MAX_CHARS:
            break
        rendered.append(row)
        used += len(row) + 1
        end = number
    view = read_store(ctx.state).mint(lock_key(loc), loc.display, loaded.sha256, start + 1, end, frozenset(cut), total)
    if total == 0:
        header = f"{loc.display} is empty (read_id {view.read_id})"
    else:
        header = f"{loc.display} {line_range(start + 1, end)} of {total} (read_id {view.read_id})"
    footer = []
    if end < total:
        footer.append(f"[{line_range(end + 1, total)} not shown: read_file with offset={end} to continue]")
    observation = "\n".join([header, *rendered, *footer])
    data = {
        "path": loc.display,
        "read_id": view.read_id,
        "start_line": start + 1,
        "end_line": end,
        "total_lines": total,
        "sha256": loaded.sha256,
        "truncated": end < total or start > 0,
        "cut_lines": sorted(cut),
    }
    return ToolOutcome(observation, data)


def _search_in_files(args: SearchArgs, ctx: ToolContext) -> ToolOutcome:
    found = search(workspace_of(ctx), args.pattern, file_glob=args.file_glob, start=args.path, limit=SEARCH_LIMIT)
    rows = []
    for hit in found.hits:
        text = hit.text if len(hit.text) <= HIT_MAX_CHARS else hit.text[:HIT_MAX_CHARS] + " [...]"
        rows.append(f"{hit.path}:{hit.line}: {text}")
    summary = f"{found.total} matching lines in {found.files_matched} of {found.files_searched} files"
    footer = [summary]
    if found.total > len(found.hits):
        footer.append(f"{found.total - len(found.hits)} more matches not shown: narrow the pattern, file_glob or path")
    if found.skipped:
        footer.append("skipped: " + ", ".join(f"{n} {why}" for why, n in sorted(found.skipped.items())))
    if not found.complete:
        footer.append("the walk stopped at its scan limit: search a subfolder for complete results")
    data = {
        "matches": [{"path": h.path, "line": h.line, "text": h.text} for h in found.hits],
        "total": found.total,
        "cut": found.total - len(found.hits),
        "files_matched": found.files_matched,
        "files_searched": found.files_searched,
        "skipped": dict(found.skipped),
        "engine": found.engine,
    }
    return ToolOutcome("\n".join(rows + ([""] if rows else []) + footer), data)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="list_files",
        category=Category.READ,
        args_model=ListFilesArgs,
        description="List files and folders under a workspace folder (links are shown, never followed).",
        run=_list_files,
        requires=FILE_SERVICES,
    ),
    ToolSpec(
        name="read_file",
        category=Category.READ,
        args_model=ReadFileArgs,
        description=(
            "Read a text file with 'NNN| ' line numbers (windowed for long files). Returns a read_id for "
            "replace_file_lines; the numbers are not part of the file."
        ),
        run=_read_file,
        requires=FILE_SERVICES,
    ),
    ToolSpec(
        name="search_in_files",
        category=Category.READ,
        args_model=SearchArgs,
        description="Search file contents line by line with a regular expression; returns path:line: text.",
        run=_search_in_files,
        requires=FILE_SERVICES,
        blocking=True,  # a walk, reads and a regex over the whole tree: in a worker thread, off the server's loop
    ),
)

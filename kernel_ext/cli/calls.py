"""``calls --workspace DIR [--allow CAT ...] [--approve yes|no] 'JSON-LIST'``: several calls, one run.

``tool`` runs one call per process, so per-run state (a ``read_id``, the record of what was
read whole) ends with it. ``calls`` runs a list of calls through one Executor and one run
state, so ``read_file`` then ``replace_file_lines`` works from a shell. A string argument of
the form ``{{N.key}}`` is replaced by ``data[key]`` of the N-th result (0-based), e.g.
``{"read_id": "{{0.read_id}}"}``. The list may also come from a file (``@calls.json``) or
stdin (``-``). Prints the results as a JSON list; exit 0 whether or not tools refused.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

_REFERENCE = re.compile(r"^\{\{(\d+)\.([A-Za-z0-9_.]+)\}\}$")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("calls", help="run a list of tool calls through one Executor (one run state)")
    parser.add_argument("--workspace", required=True, type=Path, help="the project folder (the fence root)")
    parser.add_argument("--allow", action="append", default=[], metavar="CATEGORY", help="allow a category beyond read; repeatable")
    parser.add_argument("--approve", choices=("yes", "no"), default="no", help="the host's answer to approval requests")
    parser.add_argument("--enable-shell", action="store_true",
                        help="operator switch: install the sandboxed shell service, one persistent shell for the whole list "
                        "(BESSER_LLM_ENABLE_SHELL_TOOLS=1 does the same)")
    parser.add_argument("calls", help='JSON list of {"name": ..., "arguments": {...}}, @FILE, or - for stdin')
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from kernel_ext.boundary import (
        ExecutionPolicy,
        Executor,
        ToolCall,
        always_approve,
        always_deny,
    )
    from kernel_ext.tools.base import Category, ToolContext
    from kernel_ext.tools.registry import default_catalog
    from kernel_ext.tools.task_list import SERVICE, TaskList
    from kernel_ext.tools.written_lines import record_start
    from kernel_ext.workspace import Workspace

    if not args.workspace.is_dir():
        print(f"error: workspace {str(args.workspace)!r} is not a directory", file=sys.stderr)
        return 2
    unknown = [c for c in args.allow if c not in {str(c) for c in Category}]
    if unknown:
        print(f"error: unknown category {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        plan = _load(args.calls)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    context = ToolContext(services={"workspace": Workspace(args.workspace), SERVICE: TaskList()})  # one checklist per list
    record_start(context.state, args.workspace)  # as a run's Phase 2 does: what the list's writes are measured from
    from kernel_ext.sandbox import shell_service_for_run

    shell = shell_service_for_run(args.workspace, run_id="cli", enable=True if args.enable_shell else None)
    if shell is not None:
        context.services["shell"] = shell
    executor = Executor(
        default_catalog(),
        context,
        policy=ExecutionPolicy.allowing(args.allow),
        approver=always_approve if args.approve == "yes" else always_deny,
    )
    results: list[dict[str, Any]] = []
    try:
        for index, item in enumerate(plan):
            arguments = _resolve(item.get("arguments", {}), results)
            result = executor.execute_sync(ToolCall(f"cli-{index}", str(item.get("name", "")), arguments))
            results.append(result.model_dump(mode="json"))
    finally:
        if shell is not None:
            shell.close()
    print(json.dumps(results, ensure_ascii=False, indent=2))
    return 0


def _load(source: str) -> list[dict[str, Any]]:
    if source == "-":
        text = sys.stdin.read()
    elif source.startswith("@"):
        text = Path(source[1:]).read_text(encoding="utf-8")
    else:
        text = source
    plan = json.loads(text)
    if not isinstance(plan, list) or not all(isinstance(i, dict) for i in plan):
        raise ValueError('calls must be a JSON list of {"name": ..., "arguments": {...}} objects')
    return plan


def _resolve(value: Any, results: list[dict[str, Any]]) -> Any:
    """Replace ``{{N.key}}`` strings with values from earlier results' data (missing: left as is)."""
    if isinstance(value, dict):
        return {k: _resolve(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, results) for v in value]
    if isinstance(value, str):
        match = _REFERENCE.match(value)
        if match and int(match.group(1)) < len(results):
            found: Any = results[int(match.group(1))].get("data", {})
            for key in match.group(2).split("."):
                if not isinstance(found, dict) or key not in found:
                    return value
                found = found[key]
            return found
    return value

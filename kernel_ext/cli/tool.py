"""``tool --workspace DIR [--allow CAT ...] [--approve yes|no] NAME 'JSON-ARGS'``.

Runs one call through the real Executor and prints the ToolResult as JSON. Exit 0 whether
or not the tool refused (a refusal is an observation); non-zero only for usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("tool", help="run one tool call through the Executor")
    parser.add_argument("--workspace", required=True, type=Path, help="the project folder (the fence root)")
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="CATEGORY",
        help="allow a tool category beyond read (edit, generate, test, shell, plan); repeatable",
    )
    parser.add_argument("--approve", choices=("yes", "no"), default="no", help="the host's answer to approval requests")
    parser.add_argument("--list", action="store_true", help="print the offered tools and their schemas instead")
    parser.add_argument("--model", help="a model file (.py, .plantuml, .json) or example:NAME, installed as the 'domain_model' service")
    parser.add_argument(
        "--enable-shell",
        action="store_true",
        help="operator switch: install the sandboxed shell service (run_command, install_dependencies); "
        "BESSER_LLM_ENABLE_SHELL_TOOLS=1 in the environment does the same",
    )
    parser.add_argument("name", nargs="?")
    parser.add_argument("arguments", nargs="?", default="{}", help="the arguments as a JSON object")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from kernel_ext.tools.base import Category, ToolContext
    from kernel_ext.workspace import Workspace

    if not args.workspace.is_dir():
        print(f"error: workspace {str(args.workspace)!r} is not a directory", file=sys.stderr)
        return 2
    known = {str(c) for c in Category}
    unknown = [c for c in args.allow if c not in known]
    if unknown:
        print(f"error: unknown category {', '.join(unknown)}; choose from {', '.join(sorted(known))}", file=sys.stderr)
        return 2
    from kernel_ext.hosting.options import OperatorSettings

    extra = OperatorSettings.from_environment().extra_roots  # the operator's extra fence roots (BESSER_EXTRA_ROOTS)
    context = ToolContext(services={"workspace": Workspace(args.workspace, extra)})
    if args.model:
        from kernel_ext.errors import ToolFailure

        try:
            context.services["domain_model"] = _settled_model(args)
        except ToolFailure as exc:
            print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
            return 2
    from kernel_ext.sandbox import shell_service_for_run

    shell = shell_service_for_run(args.workspace, run_id="cli", enable=True if args.enable_shell else None)
    if shell is not None:
        context.services["shell"] = shell
    try:
        return _execute(args, context)
    finally:
        if shell is not None:
            shell.close()


def _settled_model(args: argparse.Namespace) -> Any:
    """The model as ``generate`` without a request takes it: names checked, foreign method bodies
    kept only with ``--approve yes`` (the one answer this command has), else stubs (a note on stderr)."""
    from kernel_ext.hosting.options import OperatorSettings
    from kernel_ext.model.loading import load
    from kernel_ext.model.names import check_names
    from kernel_ext.pipeline.method_bodies import decide_without_card

    loaded = load(args.model)
    check_names(loaded.model, origin=loaded.origin)
    settled = decide_without_card(loaded.model, OperatorSettings.from_environment().model_method_bodies,
                                  args.approve == "yes", hint="pass --approve yes to keep them")
    for finding in settled.findings:
        print(f"note: [{finding.severity}] {finding.code}: {finding.message}", file=sys.stderr)
    return settled.model


def _execute(args: argparse.Namespace, context: Any) -> int:
    from kernel_ext.boundary import (
        ExecutionPolicy,
        Executor,
        ToolCall,
        always_approve,
        always_deny,
    )
    from kernel_ext.tools.registry import default_catalog

    executor = Executor(
        default_catalog(),
        context,
        policy=ExecutionPolicy.allowing(args.allow),
        approver=always_approve if args.approve == "yes" else always_deny,
    )
    if args.list:
        print(json.dumps(executor.offered.provider_schemas(), indent=2))
        return 0
    if not args.name:
        print("error: a tool NAME is required (or --list)", file=sys.stderr)
        return 2
    result = executor.execute_sync(ToolCall("cli-1", args.name, args.arguments))
    print(result.to_json())
    return 0

"""A pipeline run on the command line: the timeline as text lines, as it happens.

Categories named by ``--approve`` pass; on a terminal every other card is asked for (``prompt``:
yes / no / quit), and without one it is denied, which the first line says. Exit 0 when the run completed, 1 when blockers remain or it
failed, 2 for a refusal before the run started.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from kernel_ext.hosting.eventtext import describe
from kernel_ext.hosting.flags import switches_from
from kernel_ext.safetext import shown_text

if TYPE_CHECKING:
    from kernel_ext.cli.prompt import Printed
    from kernel_ext.hosting.options import BudgetArgs


def run_pipeline(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from kernel_ext.cli.prompt import Printed, TerminalCards, announce, cancel_once_recorded, interactive
    from kernel_ext.errors import ToolFailure
    from kernel_ext.pipeline.generation import generate

    extra = {c.strip() for c in args.allow.split(",") if c.strip()}
    unknown = extra - {"edit", "test", "shell", "generate", "plan"}
    if unknown:
        print(f"error: unknown category {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    out = args.out or Path("besser_runs") / time.strftime("%Y%m%d-%H%M%S")
    asking = interactive()
    if not asking:
        print(announce(args.approve), flush=True)
    try:
        run = generate(
            args.model, args.request, run_dir=out, provider=args.provider, target=args.generator,
            approve=args.approve, approver=None if asking else (lambda request: False),
            allow_shell_tools="shell" in extra or None, **_budgets(args),
        )
    except ToolFailure as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except ValidationError as exc:  # a budget out of range
        first = exc.errors()[0]
        print(f"error: invalid_argument: {'.'.join(map(str, first['loc']))}: {first['msg']}", file=sys.stderr)
        return 2
    printed = Printed()
    if asking:
        cards = TerminalCards(lambda call_id, yes: run.decide(call_id, yes, by="terminal"),
                              lambda call_id: cancel_once_recorded(run, call_id), printed=printed)
        run.context.approver.on_request = cards
    done = await print_timeline(run, printed)
    print(f"run folder: {out}")
    return 0 if done is not None and done.status == "completed" else 1


def _budgets(args: argparse.Namespace) -> BudgetArgs:
    """The budgets the command line names (one not given keeps the request's default)."""
    budgets: BudgetArgs = {"max_turns": args.max_turns, **switches_from(args)}
    if getattr(args, "max_runtime", None) is not None:
        budgets["max_runtime_s"] = args.max_runtime
    if getattr(args, "max_cost", None) is not None:
        budgets["max_cost_usd"] = args.max_cost
    return budgets


async def print_timeline(run, printed: Printed | None = None):
    """Print each event worth reading as it happens (seconds since start); the ``done`` event.
    ``printed`` learns each card's event once the lines before it are out."""
    started = time.monotonic()
    if hasattr(sys.stdout, "reconfigure"):  # a terminal that cannot show a character gets its escape, not a traceback
        sys.stdout.reconfigure(errors="backslashreplace")
    said = ""  # the last error's message: a run that ends on it says it once, not again as the summary
    async for event in run.events.follow(0):
        if event.type == "done" and event.summary and event.summary == said:
            event = event.model_copy(update={"summary": "the run stopped on the error above"})
        said = event.message if event.type == "error" else said
        try:
            line = describe(event)
        except Exception as exc:  # noqa: BLE001 - one odd event must not end the timeline
            line = f"[{event.type}] (not shown: {type(exc).__name__})"
        if line:  # shown, never obeyed: bidi overrides and line separators from the model are escaped
            print(f"{time.monotonic() - started:7.2f}s  {shown_text(line)}", flush=True)
        if printed is not None:
            printed.mark(event)
    if printed is not None:
        printed.end()
    return await run.wait()

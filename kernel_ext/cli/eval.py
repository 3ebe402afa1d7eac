"""``eval [--provider P] [--model M] [--tasks T,...] [--repeat N] [--record DIR] [--shell on|off] [--json FILE]``.

Runs the evaluation suite (``kernel_ext.eval``) with a provider and prints the results table:
pass rate per task and overall with a Wilson interval, tokens, cost, turns, wall time, tool calls,
refusals by code and how often the model recovered, Phase 3 repairs. Every card is answered by
the labelled ``approve=all`` policy. Exit 0 when every run passed its verifier, 1 when one did not,
2 for a usage or configuration problem (one line, no traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernel_ext.eval.live import PlannedRun
    from kernel_ext.eval.runner import TaskOutcome


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("eval", help="run the evaluation suite with a provider and print the results table")
    parser.add_argument("--provider", default=None,
                        help="openai | anthropic | replay:DIR_OR_FILE | scripted:oracle|null|wrong "
                             "(default: the live provider the environment's keys name)")
    parser.add_argument("--model", default=None, help="the live model (default: BESSER_LLM_MODEL, else the provider's default)")
    parser.add_argument("--tasks", default="", help="comma-separated task ids (default: every task, or every cassette)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per task (a replay runs each cassette once)")
    parser.add_argument("--record", type=Path, default=None, metavar="DIR", help="keep each run as a cassette <task>.r<N>.jsonl")
    parser.add_argument("--shell", choices=("on", "off"), default="off", help="the runs' shell tools (default off)")
    parser.add_argument("--approve", choices=("all",), default="all",
                        help="who answers the cards: the host's approve=all policy (no person is there to ask)")
    parser.add_argument("--runs", type=Path, default=None, metavar="DIR",
                        help="where each run's folder goes (default besser_runs/eval-<time>)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.eval.live import ProviderChoice

    if args.list:
        from kernel_ext.eval.live import SHIPPED
        from kernel_ext.eval.tasks import TASKS

        for task in TASKS.values():
            print(f"{task.id:28} {task.model:8} {task.covers}")
        print(f"shipped cassettes (each task's oracle script, recorded; not a model): replay:{SHIPPED}")
        return 0
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] or None
    try:
        choice = ProviderChoice(args.provider or _from_environment(), args.model)
        if choice.kind == "replay" and args.repeat != 1:
            raise ToolFailure("invalid_argument", "--repeat does not apply to a replay: each cassette is one recorded run")
        runs = choice.plan(tasks, args.repeat)
        choice.check()
    except ToolFailure as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    return asyncio.run(_run(args, choice, runs))


def _from_environment() -> str:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.providers.config import LIVE_PROVIDERS, ProviderConfig

    configured = ProviderConfig.from_env().provider
    if configured in LIVE_PROVIDERS:
        return str(configured)
    raise ToolFailure("not_configured", "no live provider is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY "
                      "(or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama), or give --provider "
                      "replay:DIR or scripted:oracle")


async def _run(args: argparse.Namespace, choice, runs: list[PlannedRun]) -> int:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.eval.live import run_suite
    from kernel_ext.eval.results import to_text
    from kernel_ext.eval.runner import verifier_host

    runs_dir = args.runs or Path("besser_runs") / time.strftime("eval-%Y%m%d-%H%M%S")
    print(f"besser-agent eval: {len(runs)} run(s) with {choice.spec}; run folders in {runs_dir}", flush=True)
    try:
        with verifier_host() as host:
            results = await run_suite(choice, runs, runs_dir, host, record=args.record, shell=args.shell == "on",
                                      progress=_progress)
    except ToolFailure as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    print()
    print(to_text(results))
    if args.json is not None:
        results.write(args.json)
        print(f"results: {args.json}")
    if args.record is not None:
        print(f"cassettes: {args.record} (replay with --provider replay:{args.record})")
    return 0 if results.all_passed else 1


def _progress(index: int, total: int, planned: PlannedRun, outcome: TaskOutcome) -> None:
    verdict = "passed" if outcome.passed else "FAILED (" + ", ".join(outcome.report.failed) + ")"
    print(f"[{index}/{total}] {planned.task.id} r{planned.repeat}: {verdict}; run {outcome.metrics.status or 'unended'}, "
          f"{outcome.metrics.wall_s:.1f} s", flush=True)

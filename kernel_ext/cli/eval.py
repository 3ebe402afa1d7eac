"""``eval [--provider P] [--model M] [--tasks T,...] [--repeat N] [--record DIR] [--shell on|off] [--json FILE]``.

Runs the evaluation suite (``kernel_ext.eval``) with a provider and prints the results table:
pass rate per task and overall with a Wilson interval, tokens, cost, turns, wall time, tool calls,
refusals by code and how often the model recovered, Phase 3 repairs. Every card is answered by
the labelled ``approve=all`` policy. Exit 0 when every run passed its verifier, 1 when one did not,
2 for a usage or configuration problem (one line, no traceback), 130 when a person interrupted it.

Nothing computed is lost on the way out: the folders it writes (``--runs``, ``--record``, the JSON's)
are tried before the first run, the JSON is rewritten after every run, and a suite ended early (Ctrl-C,
an endpoint that never answers) still prints the table of the runs that finished.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernel_ext.eval.live import PlannedRun, ProviderChoice
    from kernel_ext.eval.results import SuiteResults
    from kernel_ext.eval.runner import TaskOutcome

INTERRUPTED = 130  # the shell's code for a command ended by Ctrl-C (128 + SIGINT)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("eval", help="run the evaluation suite with a provider and print the results table")
    parser.add_argument("--provider", default=None,
                        help="openai | anthropic | replay:DIR_OR_FILE | scripted:oracle|null|wrong "
                             "(default: the live provider the environment's keys name)")
    parser.add_argument("--model", default=None, help="the live model (default: BESSER_LLM_MODEL, else the provider's default)")
    parser.add_argument("--tasks", default=None, help="comma-separated task ids (default: every task, or every cassette)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per task (a replay runs each cassette once)")
    parser.add_argument("--record", type=Path, default=None, metavar="DIR", help="keep each run as a cassette <task>.r<N>.jsonl")
    parser.add_argument("--shell", choices=("on", "off"), default="off", help="the runs' shell tools (default off)")
    parser.add_argument("--approve", choices=("all",), default="all",
                        help="who answers the cards: the host's approve=all policy (no person is there to ask)")
    parser.add_argument("--runs", type=Path, default=None, metavar="DIR",
                        help="where each run's folder goes (default besser_runs/eval-<time>)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="also write the results as JSON (rewritten after every run)")
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
    try:
        tasks = _task_ids(args.tasks)
        choice = ProviderChoice(args.provider or _from_environment(), args.model)
        if choice.kind == "replay" and args.repeat != 1:
            raise ToolFailure("invalid_argument", "--repeat does not apply to a replay: each cassette is one recorded run")
        runs = choice.plan(tasks, args.repeat)
        choice.check()
        args.runs = args.runs or Path("besser_runs") / time.strftime("eval-%Y%m%d-%H%M%S")
        _prepare_outputs(args)
    except ToolFailure as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    kept: list[SuiteResults] = []
    try:
        return asyncio.run(_run(args, choice, runs, kept))
    except KeyboardInterrupt:
        return _interrupted(args, kept, len(runs))


def _task_ids(spec: str | None) -> list[str] | None:
    """``--tasks``: None (not given) is every task; given, it must name at least one."""
    from kernel_ext.errors import ToolFailure

    if spec is None:
        return None
    ids = [t.strip() for t in spec.split(",") if t.strip()]
    if not ids:
        raise ToolFailure("invalid_argument", f"--tasks {spec!r} names no task (comma-separated ids; --list shows them)")
    return ids


def _prepare_outputs(args: argparse.Namespace) -> None:
    """Every place the suite writes, checked before the first run (and nothing made yet): a live suite
    is not spent for a folder that turns out to be read-only at the end."""
    from kernel_ext.errors import ToolFailure

    if args.json is not None and args.json.is_dir():
        raise ToolFailure("invalid_argument", f"--json {args.json}: is a folder; give a file name")
    places = [("--runs", args.runs, args.runs), ("--record", args.record, args.record),
              ("--json", args.json, args.json.parent if args.json else None)]
    for flag, named, folder in places:
        if folder is not None and (why := _cannot_write(folder)):
            raise ToolFailure("invalid_argument", f"{flag} {named}: {why}")


def _cannot_write(folder: Path) -> str:
    """Why ``folder`` could not be made or written in ("" when it can): read from its nearest existing
    ancestor, so checking creates nothing."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if os.access(existing, os.W_OK | os.X_OK):
        return ""
    read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    return f"cannot write in {existing} ({'a read-only file system' if read_only else 'no write permission'})"


def _from_environment() -> str:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.providers.config import LIVE_PROVIDERS, ProviderConfig

    configured = ProviderConfig.from_env().provider
    if configured in LIVE_PROVIDERS:
        return str(configured)
    raise ToolFailure("not_configured", "no live provider is configured: set OPENAI_API_KEY or ANTHROPIC_API_KEY "
                      "(or OPENAI_BASE_URL=http://localhost:11434/v1 for Ollama), or give --provider "
                      "replay:DIR or scripted:oracle")


async def _run(args: argparse.Namespace, choice: ProviderChoice, runs: list[PlannedRun], kept: list[SuiteResults]) -> int:
    from kernel_ext.errors import ToolFailure
    from kernel_ext.eval.live import run_suite
    from kernel_ext.eval.runner import verifier_host

    def keep(results: SuiteResults) -> None:
        kept[:] = [results]
        _write_json(args, results)

    print(f"besser-agent eval: {len(runs)} run(s) with {choice.spec}; run folders in {args.runs}", flush=True)
    try:
        with verifier_host() as host:
            results = await run_suite(choice, runs, args.runs, host, record=args.record, shell=args.shell == "on",
                                      progress=_progress, keep=keep)
    except (ToolFailure, OSError) as exc:
        code, message = (exc.code, exc.message) if isinstance(exc, ToolFailure) else ("io_error", str(exc))
        _finish(args, kept, f"{code}: {message}")
        print(f"error: {code}: {message}", file=sys.stderr)
        return 2
    _finish(args, [results], "")
    if results.stopped:
        print(f"error: stopped: {results.stopped}", file=sys.stderr)
        return 2
    return 0 if results.all_passed else 1


def _interrupted(args: argparse.Namespace, kept: list[SuiteResults], planned: int) -> int:
    done = len(kept[0].runs) if kept else 0
    _finish(args, kept, "interrupted by Ctrl-C (the run under way was not verified)")
    print(f"error: interrupted: Ctrl-C after {done} of {planned} runs" + (f"; {done} kept above" if done else ""),
          file=sys.stderr)
    return INTERRUPTED


def _finish(args: argparse.Namespace, kept: list[SuiteResults], stopped: str) -> None:
    """The table of the runs that finished (none: nothing to show), the JSON, where the cassettes are."""
    from kernel_ext.eval.results import to_text

    if not kept or not kept[0].runs:
        return
    results = kept[0]
    results.stopped = results.stopped or stopped
    print()
    print(to_text(results))
    if _write_json(args, results):
        print(f"results: {args.json}")
    if args.record is not None:
        print(f"cassettes: {args.record} (replay with --provider replay:{args.record})")


def _write_json(args: argparse.Namespace, results: SuiteResults) -> bool:
    """The results file, replaced whole; a write that fails is said once per call and the suite goes on."""
    if args.json is None:
        return False
    try:
        results.write(args.json)
    except OSError as exc:
        print(f"warning: --json {args.json}: cannot write ({exc.strerror or type(exc).__name__}); "
              "the table printed is the record", file=sys.stderr)
        return False
    return True


def _progress(index: int, total: int, planned: PlannedRun, outcome: TaskOutcome) -> None:
    verdict = "passed" if outcome.passed else "FAILED (" + ", ".join(outcome.report.failed) + ")"
    ended = outcome.metrics.status or "unended"
    error = f" ({outcome.metrics.error})" if outcome.metrics.error and not outcome.passed else ""
    print(f"[{index}/{total}] {planned.task.id} r{planned.repeat}: {verdict}; run {ended}{error}, "
          f"{outcome.metrics.wall_s:.1f} s", flush=True)

"""The shell tools: ``sh_run``, ``sh_detail``, ``sh_logs``, ``sh_kill``, ``sh_plan``, checkpoints.

Thin wrappers over ``kernel_ext.sandbox.shtools.shell.Shell`` (the same functions a notebook calls).
Every tool requires the ``shell`` service, which a host installs only when the operator enabled
shell tools, so none of them is offered otherwise. ``sh_run``'s preparation classifies the
command statically (``sh_plan``): the approval card shows the plan text and
``Preparation.data`` carries the risk class; the result carries it too (``risk``).

Categories follow what each tool can do: ``sh_run``, ``sh_kill`` and ``sh_restore`` change
things (``shell``, approved per call); ``sh_checkpoint`` writes only host state (``plan``);
``sh_detail``, ``sh_logs``, ``sh_plan`` and ``sh_checkpoints`` only read (``read``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox.shtools import MAX_COMMAND_CHARS, ShRunRequest
from kernel_ext.tools.base import (
    Category,
    Preparation,
    ToolArgs,
    ToolContext,
    ToolOutcome,
    ToolSpec,
    plan_caveat,
    plan_context,
    shell_service,
)

if TYPE_CHECKING:  # imported when a tool runs, so offering the tools stays cheap
    from kernel_ext.sandbox import Shell


class ShRunArgs(ToolArgs, ShRunRequest):
    """``sh_run``'s arguments are ``ShRunRequest``'s fields (see ``kernel_ext.sandbox.shtools.options``)."""


class ShDetailArgs(ToolArgs):
    id: str = Field(description="the command id from sh_run")
    selector: Literal["stdout", "stderr", "meta", "trace"] = Field(default="stdout", description="which part of the record")
    match: str | None = Field(default=None, description="a regular expression: only matching lines, with their numbers")
    start_line: int = Field(default=1, description="first line to return (1-based)")
    max_lines: int = Field(default=400, description="at most this many lines (1..2000)")


class ShLogsArgs(ToolArgs):
    id: str = Field(description="the id of a background command")
    stream: Literal["stdout", "stderr", "both"] = "both"
    stdout_cursor: int = Field(default=0, description="bytes of stdout already read (pass back the last stdout_cursor)")
    stderr_cursor: int = Field(default=0, description="bytes of stderr already read (pass back the last stderr_cursor)")
    full: bool = Field(default=False, description="new output uncondensed (at most 64 KiB per stream per poll)")


class ShKillArgs(ToolArgs):
    id: str = Field(description="the id of a background command")
    signal: str = Field(default="SIGTERM", description="SIGTERM (escalates to SIGKILL after 2 s), SIGKILL, SIGINT, SIGHUP, ...")


class ShPlanArgs(ToolArgs):
    command: str = Field(max_length=MAX_COMMAND_CHARS, description="a shell command line to classify (never run)")


class ShCheckpointArgs(ToolArgs):
    label: str = Field(description="1-64 letters, digits, '.', '_' or '-'")
    dir: str | None = Field(default=None, description="folder inside the workspace (default: the workspace root)")


class ShCheckpointsArgs(ToolArgs):
    dir: str | None = Field(default=None, description="only the checkpoints taken of this folder (default: every folder of the workspace)")


def _toolkit(ctx: ToolContext) -> Shell:
    """The ``sh_*`` toolkit over the run's shell service (gated by ``shell_service``)."""
    service = shell_service(ctx)
    from kernel_ext.sandbox import Shell, ShellService

    if not isinstance(service, ShellService):  # the toolkit needs the sandbox's own service, not any ShellAccess
        raise ToolFailure(ErrorCode.SHELL_DISABLED, "the sh_* tools need the sandbox's shell service")
    return Shell.for_service(service)


def _json(data: object) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(", ", ": "), default=str)


def _expected_exit(args: ShRunArgs) -> int:
    """The exit code the call expected (``expect.exit``, else 0)."""
    return args.expect.exit if args.expect and args.expect.exit is not None else 0


# -- sh_run ---------------------------------------------------------------------------------------


def prepare_sh_run(args: ShRunArgs, ctx: ToolContext) -> Preparation:
    prepared = _toolkit(ctx).prepare(args)
    how = "in the background" if args.background else f"timeout {prepared.timeout_s:g} s"
    where = prepared.placement.cwd
    proposal = f"run in the {prepared.choice.tier} sandbox (cwd {where}, {how}):\n$ {args.command}\n{prepared.plan.text()}"
    return Preparation(proposal=proposal, data={"risk": prepared.plan.category, "plan": prepared.plan.as_dict()})


def sh_run(args: ShRunArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.sandbox.shtools import render, succeeded

    result = _toolkit(ctx).execute(args)
    text = render(result)
    if args.background or succeeded(args, result):
        return ToolOutcome(text, result)
    if result.get("timed_out"):
        code = ErrorCode.TIMEOUT
    elif result.get("assert_ok") is False and result["exit"] == _expected_exit(args):
        code = ErrorCode.EXPECTATION_FAILED
    else:
        code = ErrorCode.EXECUTION_FAILED
    raise ToolFailure(code, text, result)


# -- reading --------------------------------------------------------------------------------------


def sh_detail(args: ShDetailArgs, ctx: ToolContext) -> ToolOutcome:
    found = _toolkit(ctx).detail(args.id, args.selector, args.match, args.start_line, args.max_lines)
    body = found.pop("text", None)
    lines = found.pop("lines", None)
    head = _json({k: v for k, v in found.items() if k != "meta"})
    if "meta" in found:
        text = f"{head}\n{_json(found['meta'])}"
    elif lines is not None:
        text = head + ("\n" + "\n".join(lines) if lines else "\n(no matching lines)")
    else:
        text = f"{head}\n{body}" if body else head
    data = {**found, **({"text": body} if body is not None else {}), **({"lines": lines} if lines is not None else {})}
    return ToolOutcome(text, data)


def sh_logs(args: ShLogsArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.sandbox.shtools import render

    result = _toolkit(ctx).logs(args.id, args.stream, args.stdout_cursor, args.stderr_cursor, args.full)
    return ToolOutcome(render(result), result)


def sh_plan(args: ShPlanArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.shellplan.plan import classify

    if not args.command.strip():
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "the command is empty")
    service = shell_service(ctx)
    plan = classify(args.command, plan_context(service)).caveated(plan_caveat(service))  # as the run's live shell would
    return ToolOutcome(f"$ {args.command}\n{plan.text()}", {"command": args.command, **plan.as_dict()})


# -- sh_kill --------------------------------------------------------------------------------------


def prepare_sh_kill(args: ShKillArgs, ctx: ToolContext) -> Preparation:
    from kernel_ext.sandbox.shtools import signal_name

    shell = _toolkit(ctx)
    name = signal_name(args.signal)
    meta = shell.records.meta(args.id)
    return Preparation(
        proposal=f"send {name} to background command {args.id} and every process it started:\n$ {meta.get('command', '?')}",
        data={"risk": "mutating"},
    )


def sh_kill(args: ShKillArgs, ctx: ToolContext) -> ToolOutcome:
    result = _toolkit(ctx).kill(args.id, args.signal)
    return ToolOutcome(_json(result), result)


# -- checkpoints ----------------------------------------------------------------------------------


def sh_checkpoint(args: ShCheckpointArgs, ctx: ToolContext) -> ToolOutcome:
    result = _toolkit(ctx).checkpoint(args.label, args.dir)
    return ToolOutcome(_json(result), result)


def prepare_sh_restore(args: ShCheckpointArgs, ctx: ToolContext) -> Preparation:
    preview = _toolkit(ctx).restore_preview(args.label, args.dir)
    taken = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(preview["created_at"]))
    proposal = (
        f"restore {preview['dir']} to checkpoint {args.label!r} (taken {taken}, {preview['files']} files):\n"
        f"will write {preview['written']} file(s) or link(s), delete {preview['removed']} "
        f"entr{'y' if preview['removed'] == 1 else 'ies'}"
        f" (a folder with everything in it), leave {preview['unchanged']} unchanged\n"
        "risk: destructive (not reversible): changes made since are overwritten and files added since are deleted"
    )
    return Preparation(proposal=proposal, data={"risk": "destructive"})


def sh_restore(args: ShCheckpointArgs, ctx: ToolContext) -> ToolOutcome:
    result = _toolkit(ctx).restore(args.label, args.dir)
    return ToolOutcome(_json(result), result)


def sh_checkpoints(args: ShCheckpointsArgs, ctx: ToolContext) -> ToolOutcome:
    found = _toolkit(ctx).checkpoints(args.dir)
    text = "\n".join(f"{c['label']}  {c['origin']}  {c['files']} files  "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(c['created_at']))}" for c in found)
    empty = f"no checkpoints of {args.dir!r} in this project" if args.dir is not None else "no checkpoints in this project"
    return ToolOutcome(text or empty, {"checkpoints": found})


_SHELL = frozenset({"shell"})

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="sh_run",
        category=Category.SHELL,
        args_model=ShRunArgs,
        description=(
            "Run a command in a fresh sandbox and get a quiet structured result: id, exit, ok (exit == 0), ms, and only "
            "what matters (line counts, files_changed, condensed output, assertions). The full output is stored: use sh_detail "
            "instead of re-running. expect checks post-conditions in the same call; background: true starts a server or watcher."
        ),
        run=sh_run,
        prepare=prepare_sh_run,
        requires=_SHELL,
        blocking=True,
    ),
    ToolSpec(
        name="sh_detail",
        category=Category.READ,
        args_model=ShDetailArgs,
        description=(
            "Read a stored command's full stdout/stderr (paged), only the lines matching a pattern (with numbers), its metadata, or "
            "its trace. Never re-runs."
        ),
        run=sh_detail,
        requires=_SHELL,
        blocking=True,
    ),
    ToolSpec(
        name="sh_logs",
        category=Category.READ,
        args_model=ShLogsArgs,
        description=(
            "Poll a background command: only output after the byte cursors you pass back, plus status (running/exited/killed), exit "
            "and line counts."
        ),
        run=sh_logs,
        requires=_SHELL,
        blocking=True,
    ),
    ToolSpec(
        name="sh_kill",
        category=Category.SHELL,
        args_model=ShKillArgs,
        description=(
            "Stop a background command and every process it started (SIGTERM, then SIGKILL after 2 s). Answers already_exited once "
            "it has ended."
        ),
        run=sh_kill,
        prepare=prepare_sh_kill,
        requires=_SHELL,
        blocking=True,
    ),
    ToolSpec(
        name="sh_plan",
        category=Category.READ,
        args_model=ShPlanArgs,
        description=(
            "Classify a command without running it: read-only, mutating, destructive, network, complex or unknown, with "
            "reversibility and file effects."
        ),
        run=sh_plan,
        requires=_SHELL,
        blocking=True,  # planning is linear but up to ~1 s at the length cap: off the loop
    ),
    ToolSpec(
        name="sh_checkpoint",
        category=Category.PLAN,
        args_model=ShCheckpointArgs,
        description=(
            "Snapshot a folder of the workspace under a label (copy-on-write where possible) so a bad step can be undone with "
            "sh_restore."
        ),
        run=sh_checkpoint,
        requires=_SHELL,
        blocking=True,
    ),
    ToolSpec(
        name="sh_restore",
        category=Category.SHELL,
        args_model=ShCheckpointArgs,
        description=(
            "Restore a folder to a checkpoint exactly (files added since are removed). Only into the folder the checkpoint was taken "
            "of."
        ),
        run=sh_restore,
        prepare=prepare_sh_restore,
        requires=_SHELL,
        blocking=True,
    ),
    ToolSpec(
        name="sh_checkpoints",
        category=Category.READ,
        args_model=ShCheckpointsArgs,
        description=(
            "List this project's checkpoints (label, folder, size, time); dir lists only those taken of that folder."
        ),
        run=sh_checkpoints,
        requires=_SHELL,
        blocking=True,
    ),
)

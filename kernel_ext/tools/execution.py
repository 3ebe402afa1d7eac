"""Shell tools: ``run_command`` and ``install_dependencies`` (category ``shell``).

Both need the ``shell`` service, which a host installs only when the operator enabled shell
tools; without it they are never offered, and a model naming them anyway is refused by the
boundary. The gate is checked again here at call time. Success is earned: a command that
exits non-zero, times out or floods its output comes back as a failure with its record.
Commands run in the run's sandboxed session (see ``kernel_ext.sandbox``); only the first
word is checked against an operator's program list, the sandbox confines the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.shellplan.words import MAX_COMMAND_CHARS
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
from kernel_ext.tools.dependency_pins import apply_pins
from kernel_ext.tools.services import CommandOutcome, ShellAccess

if TYPE_CHECKING:
    from kernel_ext.workspace import Workspace

PIP_INSTALL = 'python -m pip install --ignore-installed --prefix "$HOME/.local"'


class RunCommandArgs(ToolArgs):
    command: str = Field(
        max_length=MAX_COMMAND_CHARS,
        description="a shell command line, run in the run's persistent shell (cd and export carry over)",
    )
    working_dir: str | None = Field(
        default=None, description="run this one command in another folder of the workspace, without moving the shell"
    )
    timeout: float | None = Field(default=None, gt=0, le=600, description="seconds (default 120, at most 600)")


class InstallDependenciesArgs(ToolArgs):
    working_dir: str | None = Field(default=None, description="the project folder inside the workspace (default: its root)")
    command: str | None = Field(
        default=None,
        max_length=MAX_COMMAND_CHARS,
        description="the install command; by default pip for requirements.txt/pyproject.toml, npm for package.json",
    )


def _outcome(record: CommandOutcome, extra: dict[str, Any] | None = None) -> ToolOutcome:
    data = record.as_data()
    data.update(extra or {})
    text = record.observation()
    if extra and extra.get("pinned"):
        pins = "; ".join(f"{p['to']} ({p['because']})" for p in extra["pinned"])
        text = f"pinned in requirements.txt before installing: {pins}\n{text}"
    if record.ok:
        return ToolOutcome(text, data)
    code = ErrorCode.TIMEOUT if record.timed_out else ErrorCode.EXECUTION_FAILED
    raise ToolFailure(code, text, data)


def _proposal(ctx: ToolContext, command: str, working_dir: str | None, timeout: str) -> Preparation:
    service = shell_service(ctx)
    tier = service.describe()["sandbox_tier"]
    where = working_dir or "the shell's current folder"
    from kernel_ext.shellplan.plan import classify

    header = f"run in the {tier} sandbox ({where}, timeout {timeout}):\n$ {command}"
    plan = classify(command, plan_context(service, working_dir)).caveated(plan_caveat(service))  # as the session runs it
    return Preparation(proposal=f"{header}\n{plan.text()}", data={"risk": plan.category})


def prepare_run_command(args: RunCommandArgs, ctx: ToolContext) -> Preparation:
    return _proposal(ctx, args.command, args.working_dir, f"{args.timeout or 120:g} s")


def run_command(args: RunCommandArgs, ctx: ToolContext) -> ToolOutcome:
    record = shell_service(ctx).run(args.command, working_dir=args.working_dir, timeout=args.timeout)
    return _outcome(record)


# -- install_dependencies ------------------------------------------------------------------------


def _workspace(ctx: ToolContext, service: ShellAccess) -> Workspace:
    from kernel_ext.workspace import Workspace

    return ctx.workspace or Workspace(service.workspace)


def _rel(working_dir: str | None, name: str) -> str:
    base = (working_dir or "").strip().strip("/")
    return f"{base}/{name}" if base and base != "." else name


def _default_command(ws: Workspace, working_dir: str | None) -> str:
    if ws.lstat(_rel(working_dir, "requirements.txt")) is not None:
        return f"{PIP_INSTALL} -r requirements.txt"
    if ws.lstat(_rel(working_dir, "pyproject.toml")) is not None or ws.lstat(_rel(working_dir, "setup.py")) is not None:
        return f"{PIP_INSTALL} ."
    if ws.lstat(_rel(working_dir, "package.json")) is not None:
        return "npm install"
    raise ToolFailure(
        ErrorCode.NOT_FOUND,
        f"no requirements.txt, pyproject.toml or package.json in {working_dir or 'the workspace root'!r}; pass 'command'",
    )


def _pin(ws: Workspace, working_dir: str | None) -> list[dict[str, Any]]:
    from kernel_ext.workspace import Identity, publish

    path = _rel(working_dir, "requirements.txt")
    if ws.lstat(path) is None:
        return []
    data, st = ws.read_bytes(path, max_bytes=1024 * 1024)
    text = data.decode("utf-8", errors="replace")
    pinned_text, changes = apply_pins(text)
    if changes:
        publish(ws, path, pinned_text.encode("utf-8"), expected=Identity.of(st))
    return changes


def prepare_install(args: InstallDependenciesArgs, ctx: ToolContext) -> Preparation:
    service = shell_service(ctx)
    ws = _workspace(ctx, service)
    command = args.command or _default_command(ws, args.working_dir)
    preparation = _proposal(ctx, command, args.working_dir or ".", "300 s")
    files = (_rel(args.working_dir, "requirements.txt"),) if ws.lstat(_rel(args.working_dir, "requirements.txt")) else ()
    note = "\nknown-incompatible pairs in requirements.txt are pinned first" if files else ""
    return Preparation(files=files, proposal=preparation.proposal + note)


def install_dependencies(args: InstallDependenciesArgs, ctx: ToolContext) -> ToolOutcome:
    from kernel_ext.sandbox import INSTALL_TIMEOUT_S

    service = shell_service(ctx)
    service.check_enabled()
    ws = _workspace(ctx, service)
    if args.working_dir:
        ws.locate(args.working_dir)  # refuses a folder outside the fence before anything changes
    command = args.command or _default_command(ws, args.working_dir)
    pinned = _pin(ws, args.working_dir)
    record = service.run(
        command,
        working_dir=args.working_dir or ".",
        timeout=INSTALL_TIMEOUT_S,
        default_timeout=INSTALL_TIMEOUT_S,
        preserve_state=True,
    )
    outcome = _outcome(record, {"pinned": pinned})
    return _with_app_environment(outcome, ws, args.working_dir, service)


def _with_app_environment(outcome: ToolOutcome, ws: Any, working_dir: str | None, service: Any) -> ToolOutcome:
    """The app's own environment, built for the requirements.txt just installed from (the app host
    never runs on what the shell installed: ``kernel_ext.appenv``). Refused with ``requirements_unmet``
    when no allowed source provides a package."""
    path = _rel(working_dir, "requirements.txt")
    if ws.lstat(path) is None:
        return outcome
    from kernel_ext.appenv.environment import prepare_for_install

    data, _st = ws.read_bytes(path, max_bytes=1024 * 1024)
    settings = getattr(service, "settings", None)
    environment = prepare_for_install(data, network=bool(getattr(settings, "session_network", False)),
                                      policy=getattr(settings, "policy", None))
    return ToolOutcome(f"{outcome.observation}\napp environment: {environment.line()}",
                       {**outcome.data, "app_environment": environment.describe()})


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        name="run_command",
        category=Category.SHELL,
        args_model=RunCommandArgs,
        description=(
            "Run a shell command in this run's sandboxed shell (like a terminal: cd and export carry over, "
            "background processes keep running). Returns exit code and output; success only on exit 0. "
            "Long output is cut for you and saved in full under .besser_command_output/ (read_file and search_in_files read "
            "it; sh_detail and sh_logs take the result's id)."
        ),
        run=run_command,
        prepare=prepare_run_command,
        requires=frozenset({"shell"}),
        blocking=True,
    ),
    ToolSpec(
        name="install_dependencies",
        category=Category.SHELL,
        args_model=InstallDependenciesArgs,
        description=(
            "Install the project's dependencies into the run's own environment (never the server's), and build "
            "the app's environment for its requirements.txt (what test_api and validation run it with). "
            "Pins known-incompatible pairs in requirements.txt first and lists them under 'pinned'. "
            "Leaves the shell's directory and variables unchanged. Timeout 300 s."
        ),
        run=install_dependencies,
        prepare=prepare_install,
        requires=frozenset({"shell"}),
        blocking=True,
    ),
)

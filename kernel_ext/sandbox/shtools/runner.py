"""One ``sh_run`` command in a fresh sandbox: where it may write, what it may see, how it ends.

``sh_run`` does not use the run's persistent shell (``session``): each call may ask for its own
confinement (writes limited to ``cwd``, no network, hidden paths), so each gets a sandbox built
from the confinement core's pieces (``Confinement``, ``spawn_confined``, ``supervisor.Job``)
over the run's workspace and ``$HOME`` (what ``install_dependencies`` installed is there).
Output is captured in full up to the capture cap (past it the tree is killed) and handed
to the record store; nothing is spilled into the workspace.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox import landlock, netns
from kernel_ext.sandbox.capture import CAPTURE_CAP, StreamCapture
from kernel_ext.sandbox.confined import Confined, spawn_confined
from kernel_ext.sandbox.shares import STDERR_TAIL
from kernel_ext.sandbox.shtools.options import SandboxOptions
from kernel_ext.sandbox.spec import Confinement, is_within
from kernel_ext.sandbox.supervisor import Job
from kernel_ext.sandbox.tiers import Tier, TierChoice
from kernel_ext.workspace import treewalk
from kernel_ext.workspace.fence import check_path_text
from kernel_ext.workspace.internal import INTERNAL_NAMES

if TYPE_CHECKING:  # the service is the session layer's; the toolkit only reads it
    from kernel_ext.sandbox.runnet import RunNetwork
    from kernel_ext.sandbox.session.service import ShellService

SECRET_FILES = re.compile(
    r"^(?:\.env(?:\.(?!example$|sample$|template$|dist$)[\w.-]+)?|.*\.(?:pem|key|p12|pfx|jks|kdbx|keystore)|id_(?:rsa|dsa|ecdsa|ed25519)(?:\.pub)?"
    r"|\.netrc|\.npmrc|\.pypirc|\.git-credentials|credentials(?:\.json)?|\.htpasswd|secrets?\.(?:json|ya?ml|toml))$"
)
SECRET_DIRS = frozenset({".ssh", ".aws", ".gnupg", ".docker", ".kube", ".azure", "gcloud"})
SECRET_SCAN_CAP = 20_000
_SCAN_SKIP = INTERNAL_NAMES | {".git", "node_modules", "__pycache__", ".venv", "venv"}


@dataclass(frozen=True)
class Placement:
    """The confinement of one call and what it hides."""

    conf: Confinement
    cwd: str  # relative to the workspace root ("." for the root)
    confined_writes: bool
    secrets_protected: int = 0
    shared: RunNetwork | None = None  # the run's one private network, which the command joins (runnet)


@dataclass
class Attempt:
    exit_code: int | None
    timed_out: bool
    capped: bool
    ms: float
    stdout: bytes
    stderr: bytes
    stdout_lines: int
    stderr_lines: int
    secrets_removed: int
    trace: bytes | None = None
    net_note: str | None = None  # a private network's outbound traffic could not be set up
    memory_note: str | None = None  # the sandbox's memory limit stopped it (``shares.MEMORY_LIMIT``)


def resolve_inside(workspace: Path, base: Path, path: str, what: str) -> Path:
    """``path`` (relative to ``base``, or absolute) resolved, refused unless inside the workspace."""
    check_path_text(path)
    found = Path(os.path.realpath(base / path))
    if not is_within(found, workspace):
        raise ToolFailure(ErrorCode.OUTSIDE_WORKSPACE, f"{what} {path!r} is outside the workspace")
    return found


def place(service: ShellService, choice: TierChoice, cwd: str | None, sandbox: bool | SandboxOptions | None) -> Placement:
    """Build the confinement for a call; refuse what the active tier cannot enforce."""
    workspace: Path = service.workspace
    where = resolve_inside(workspace, workspace, cwd, "cwd") if cwd else workspace
    if not where.is_dir():
        raise ToolFailure(ErrorCode.NOT_FOUND, f"cwd {cwd!r} is not a directory")
    net = netns.plan(service.settings.network_mode, choice.tier)  # private: the run's namespace, joined
    network = net.network
    shared = service.network() if net.private else None
    rel = str(where.relative_to(workspace)) if where != workspace else "."
    if not sandbox:
        conf = Confinement.for_run(workspace, service.home, network=network, hidden=service.hidden, cwd=where,
                                   private_net=net.private, network_limits=net.limits)
        return Placement(conf, rel, False, shared=shared)
    options = sandbox if isinstance(sandbox, SandboxOptions) else SandboxOptions()
    if choice.tier is Tier.OFF:
        raise ToolFailure(
            ErrorCode.SANDBOX_OPTION_UNSUPPORTED,
            "sandbox options need a confining sandbox; this server runs commands unconfined (operator override)",
        )
    if options.network is True and not network:
        raise ToolFailure(ErrorCode.SANDBOX_OPTION_UNSUPPORTED,
                          "the network is off for commands on this server (operator setting)")
    if options.network is False and choice.tier is Tier.LANDLOCK and landlock.abi_version() < 4:
        raise ToolFailure(ErrorCode.SANDBOX_OPTION_UNSUPPORTED,
                          "this kernel's Landlock cannot block the network; network: false is refused")
    network = network if options.network is None else options.network
    writable = [resolve_inside(workspace, where, p, "writable folder") for p in options.writable]
    for folder in writable:
        if not folder.is_dir():
            raise ToolFailure(ErrorCode.NOT_FOUND, f"writable folder {str(folder.relative_to(workspace))!r} is not a directory")
    hidden = [Path(os.path.realpath(where / p)) for p in options.deny_read]
    secrets = secret_paths(workspace) if options.protect_secrets else []
    hidden += secrets
    readable = (workspace,) if where != workspace else ()
    conf = Confinement.for_run(
        where, service.home, network=network, writable=writable, readable=readable, hidden=(*service.hidden, *hidden), cwd=where,
        private_net=net.private, network_limits=net.limits if options.network is not False else ()
    )
    if choice.tier is Tier.LANDLOCK and any(is_within(h, w) for h in conf.hidden for w in conf.writable_paths()):
        raise ToolFailure(
            ErrorCode.SANDBOX_OPTION_UNSUPPORTED,
            "this server's sandbox (Landlock) cannot hide paths inside a writable folder; deny_read/protect_secrets refused",
        )
    return Placement(conf, rel, True, len(secrets), shared if conf.private_net else None)


def secret_paths(root: Path) -> list[Path]:
    """Secret-looking files and folders under ``root`` (walked without following links, capped)."""
    found: list[Path] = []
    try:
        fd = treewalk.open_dir(root)
    except OSError:
        return found
    try:
        for count, (rel, _st) in enumerate(treewalk.walk(fd, _SCAN_SKIP)):
            if count >= SECRET_SCAN_CAP:
                break
            name = rel.rsplit("/", 1)[-1]
            if (SECRET_FILES.match(name) or name in SECRET_DIRS) and not any(is_within(root / rel, f) for f in found):
                found.append(root / rel)
    finally:
        os.close(fd)
    return found


def start(choice: TierChoice, conf: Confinement, argv: list[str], stdout: StreamCapture, stderr: StreamCapture, *,
          stable: bool, shared: RunNetwork | None = None) -> tuple[Job, Confined]:
    """Spawn ``argv`` confined by ``conf`` with piped output into the captures; returns the job and how it started
    (secrets removed, the note of a private network left without outbound traffic, its memory watch)."""
    assert choice.tier is not None
    try:
        started = spawn_confined(argv, conf, tier=choice.tier, stable=stable, shared=shared)
    except OSError as exc:
        raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"could not start the sandbox: {exc.strerror}") from None
    return Job(started.process, stdout=stdout, stderr=stderr), started


def network_fields(conf: Confinement, note: str | None = None) -> dict[str, Any]:
    """What every ``sh_run`` result (foreground or background) says about its network: ``network: false``
    when off; ``network_limits`` for ``host`` (the operator's choice), a private network that fell back
    to none, or one whose outbound traffic could not be set up (``note``)."""
    fields: dict[str, Any] = {} if conf.network else {"network": False}
    limits = [*conf.network_limits, *([note] if note else [])]
    if limits:
        fields["network_limits"] = limits
    return fields


def shell_argv(command: str) -> list[str]:
    return ["bash", "--noprofile", "--norc", "-c", command]


def run_once(choice: TierChoice, placement: Placement, command: str, timeout_s: float, strace: str | None = None) -> Attempt:
    """Run ``command`` once to completion (or the deadline); ``strace`` traces it."""
    sinks = io.BytesIO(), io.BytesIO()
    captures = [StreamCapture(head_keep=0, tail_keep=0, sink=sink, sink_limit=CAPTURE_CAP) for sink in sinks]
    conf, argv, trace_dir = placement.conf, shell_argv(command), None
    if strace is not None:
        trace_dir = Path(tempfile.mkdtemp(prefix="besser-trace-"))
        conf = replace(conf, writable=(*conf.writable, trace_dir))
        from kernel_ext.sandbox.shtools.trace import wrap

        argv = wrap(argv, trace_dir / "trace", strace)
    try:
        job, started = start(choice, conf, argv, captures[0], captures[1], stable=False, shared=placement.shared)
        outcome = job.run(timeout_s)
        trace = _read_trace(trace_dir) if trace_dir is not None else None
    finally:
        if trace_dir is not None:
            shutil.rmtree(trace_dir, ignore_errors=True)
    out, err = (c.result() for c in captures)
    stderr = sinks[1].getvalue()
    memory = started.memory.note(0, outcome.exit_code, stderr[-STDERR_TAIL:].decode(errors="replace"))
    return Attempt(
        outcome.exit_code, outcome.timed_out, outcome.capped, outcome.duration_s * 1000,
        sinks[0].getvalue(), stderr, out.lines, err.lines, started.secrets_removed, trace, started.net_note, memory,
    )


def _read_trace(folder: Path) -> bytes:
    try:
        with open(folder / "trace", "rb") as handle:
            return handle.read(CAPTURE_CAP)
    except OSError:
        return b""


def backoff(base_ms: int, attempt: int) -> None:
    if base_ms > 0:
        time.sleep(min(base_ms * (2 ** (attempt - 1)), 10_000) / 1000)

"""A fresh one-off sandbox per call: checks, probes, and commands past the session limit.

Validators and probes that execute generated code call ``run_confined``: a sandbox used for
that call only (network unshared by default), so nothing an agent's command left running or
changed in its shell can steer a check. Its processes stop when it returns. The sandbox is
usually prepared in advance (``spares``): built before the call, never used before it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox import spares
from kernel_ext.sandbox.confined import require_tier, spawn_confined
from kernel_ext.sandbox.env import split_secrets
from kernel_ext.sandbox.record import CommandRecord, new_record_id
from kernel_ext.sandbox.shares import MEMORY_LIMIT, NO_WATCH, STDERR_TAIL, MemoryWatch
from kernel_ext.sandbox.spec import Confinement, is_within
from kernel_ext.sandbox.spill import attach_spill
from kernel_ext.sandbox.supervisor import MAX_STDIN, Job, Outcome, feed_stdin
from kernel_ext.sandbox.tempsweep import make_temp_home
from kernel_ext.sandbox.tiers import OFF_WARNING, Tier, TierChoice

__all__ = ["execute", "release_workspace", "require_tier", "run_confined"]


def run_confined(
    argv: Sequence[str],
    workspace_root: str | os.PathLike[str],
    timeout: float,
    network: bool = False,
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    home: str | os.PathLike[str] | None = None,
    writable: Sequence[str | os.PathLike[str]] = (),
    readable: Sequence[str | os.PathLike[str]] = (),
    hidden: Sequence[str | os.PathLike[str]] = (),
    policy: str | None = None,
    spill_output: bool = True,
    label: str | None = None,
) -> CommandRecord:
    """Run ``argv`` (no shell) in a fresh sandbox over ``workspace_root``; a failing command is a record, not an error.

    ``cwd`` must lie inside the workspace (default: its root); ``env`` adds variables (secret
    names are still removed); ``stdin`` is at most 64 KiB; ``home`` defaults to a fresh
    temporary folder removed afterwards. ``writable`` adds writable folders, ``readable``
    read-only ones (outside the system folders every sandbox shows), ``hidden`` masks
    paths that would otherwise be visible. Refuses with ``sandbox_unavailable`` when the
    operator's tier cannot start, ``outside_workspace`` for a ``cwd`` outside it.
    """
    if not argv:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "run_confined needs a non-empty argv")
    if stdin is not None and len(stdin) > MAX_STDIN:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"stdin is limited to {MAX_STDIN} bytes; pass a file in the workspace")
    choice = require_tier(policy)
    assert choice.tier is not None
    workspace = Path(os.path.realpath(workspace_root))
    if not workspace.is_dir():
        raise ToolFailure(ErrorCode.NOT_FOUND, f"workspace {str(workspace_root)!r} is not a directory")
    where = Path(os.path.realpath(workspace / cwd)) if cwd is not None else workspace
    if not is_within(where, workspace):
        raise ToolFailure(ErrorCode.OUTSIDE_WORKSPACE, f"working directory {str(cwd)!r} is outside the workspace")
    extra_env, dropped = split_secrets(env or {})
    if home is None and not readable and spares.valid_env_names(extra_env):
        writable_paths = tuple(Path(os.path.realpath(p)) for p in writable)
        hidden_paths = tuple(Path(os.path.realpath(p)) for p in hidden)
        try:
            prepared = spares.pool().take(choice.tier, workspace, network, writable_paths, hidden_paths)
        except OSError as exc:
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"could not start the sandbox: {exc.strerror or exc}") from None
        try:
            if prepared.hand_over(where, list(argv), extra_env, stdin):
                outcome = Job(prepared.process).run(timeout)
                removed = prepared.secrets_removed + len(dropped)
                return _record(choice, prepared.conf, where, argv, outcome, removed, label, spill_output,
                               memory=prepared.memory)
        finally:
            prepared.discard()
    own_home = home is None
    home_dir = Path(home) if home is not None else make_temp_home("besser-oneoff-home-")
    try:
        conf = Confinement.for_run(workspace, home_dir, network=network, writable=writable, readable=readable,
                                   hidden=hidden, cwd=where)
        return execute(choice, conf, argv, timeout, stdin=stdin, env=env, spill_output=spill_output, label=label)
    finally:
        if own_home:
            shutil.rmtree(home_dir, ignore_errors=True)


def execute(
    choice: TierChoice,
    conf: Confinement,
    argv: Sequence[str],
    timeout: float,
    *,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    spill_output: bool = True,
    label: str | None = None,
    notes: Sequence[str] = (),
) -> CommandRecord:
    """Build a sandbox for ``conf`` now and run ``argv`` once in it (the session's fallback, odd cases)."""
    assert choice.tier is not None
    if stdin is not None and len(stdin) > MAX_STDIN:
        raise ValueError(f"stdin input above {MAX_STDIN} bytes: pass a file in the workspace instead")
    try:
        # parked: a launcher already in the sandbox's task cap takes the command (no cgroup join, no
        # shell on the way); its stdin is always a pipe, closed after ``stdin`` is written
        started = spawn_confined(argv, conf, tier=choice.tier, env=env, parked=True,
                                 stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL)
    except OSError as exc:
        raise ToolFailure(ErrorCode.EXECUTION_FAILED, f"could not start the sandbox: {exc.strerror}") from None
    if started.process.stdin is not None:
        feed_stdin(started.process, stdin or b"")
    outcome = Job(started.process).run(timeout)
    notes = [*notes, started.net_note] if started.net_note else notes
    return _record(choice, conf, conf.working_dir(), argv, outcome, started.secrets_removed, label, spill_output, notes,
                   started.memory)


def _record(
    choice: TierChoice,
    conf: Confinement,
    where: Path,
    argv: Sequence[str],
    outcome: Outcome,
    secrets_removed: int,
    label: str | None,
    spill_output: bool,
    notes: Sequence[str] = (),
    memory: MemoryWatch = NO_WATCH,
) -> CommandRecord:
    all_notes = list(notes)
    if choice.tier is Tier.OFF:
        all_notes.insert(0, OFF_WARNING)
    stopped = memory.note(0, outcome.exit_code, outcome.stderr.result().text[-STDERR_TAIL:])
    if stopped:
        all_notes.append(stopped)
    record = CommandRecord(
        id=new_record_id(),
        command=label or shlex.join(argv),
        tier=str(choice.tier),
        network=conf.network or choice.tier is Tier.OFF,
        cwd=str(where.relative_to(conf.workspace)) if is_within(where, conf.workspace) else str(where),
        exit_code=outcome.exit_code,
        timed_out=outcome.timed_out,
        output_capped=outcome.capped,
        duration_ms=outcome.duration_s * 1000,
        stdout=outcome.stdout.result(),
        stderr=outcome.stderr.result(),
        timeout_s=outcome.timeout_s,
        notes=tuple(all_notes),
        limits=(*choice.limits(conf.network), *conf.network_limits),
        secrets_removed=secrets_removed,
        started_at=time.time() - outcome.duration_s,
        extra={"network_mode": "host" if choice.tier is Tier.OFF else conf.network_mode},
        stopped_by=MEMORY_LIMIT if stopped else None,
    )
    return attach_spill(record, conf.workspace) if spill_output else record


def release_workspace(workspace_root: str | os.PathLike[str]) -> int:
    """A run ended: kill the sandboxes prepared for its checks (unused ones expire anyway)."""
    return spares.pool().discard_for(workspace_root)

"""One persistent shell per run, like a terminal, inside the run's sandbox.

``cd`` and exported variables carry over because every command runs in the same ``bash``
(the wire is in ``protocol``). Job control (``set -m``) gives each pipeline its own
process group; a process a command starts in the background keeps running after it returns,
so a server started in one command answers the next.

On timeout or output cap the shell is told to abandon the command and every process that
appeared since it began is killed (``proctree.kill_new``): the shell and what earlier
commands left running are untouched. A shell that does not come back is restarted. Exported
variables are saved after every command and the directory is known from every marker, so
a new shell (after ``exit``, an idle close, or a restart) starts where the last one stopped,
and the next result says that background processes are gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox import netns, proctree
from kernel_ext.sandbox.capture import StreamCapture
from kernel_ext.sandbox.confined import spawn_confined
from kernel_ext.sandbox.record import CommandRecord, new_record_id
from kernel_ext.sandbox.runnet import RunNetwork
from kernel_ext.sandbox.session.overflow import run_overflow
from kernel_ext.sandbox.session.protocol import (
    CommandFiles,
    ControlChannel,
    Marker,
    command_line,
    control_root,
    init_script,
    read_and_remove,
    shell_caveat,
)
from kernel_ext.sandbox.shares import MEMORY_LIMIT, NO_WATCH, STDERR_TAIL
from kernel_ext.sandbox.spec import Confinement, is_within
from kernel_ext.sandbox.spill import attach_spill
from kernel_ext.sandbox.supervisor import Pump, release
from kernel_ext.sandbox.tiers import OFF_WARNING, Tier, TierChoice
from kernel_ext.workspace.fence import check_path_text


class Slots(Protocol):
    """What a session asks of the registry that holds it (``registry.SessionRegistry``, which
    imports this module): a live slot before its shell starts, and the slot back when it ends."""

    def admit(self, session: ShellSession, /) -> bool: ...

    def release(self, session: ShellSession, /) -> None: ...

log = logging.getLogger(__name__)
KILL_GRACE_S = 3.0
ABORT_ROUND_S = 0.2
START_TIMEOUT_S = 10.0


class ShellSession:
    """The shell of one run. Thread-safe: commands run one after another, in order."""

    def __init__(
        self,
        choice: TierChoice,
        workspace: str | os.PathLike[str],
        home: str | os.PathLike[str],
        *,
        network: bool | str = True,
        hidden: tuple[str, ...] = (),
        registry: Slots | None = None,
        key: str = "",
        shared: RunNetwork | None = None,
    ):
        """``network``: a mode (``off`` / ``private`` / ``host``, see ``netns``); a bool means off or host.
        ``shared``: the run's one private network (``runnet``), which the session joins."""
        if choice.tier is None:
            raise ValueError("a session needs an available tier")
        self.choice = choice
        self.key = key
        self.registry = registry
        self.ctl = Path(tempfile.mkdtemp(prefix="besser-shell-", dir=control_root()))
        mode = network if isinstance(network, str) else ("host" if network else "off")
        net = netns.plan(mode, choice.tier)
        self.conf = Confinement.for_run(workspace, home, network=net.network, writable=(self.ctl,), hidden=hidden,
                                        private_net=net.private, network_limits=net.limits)
        self.cwd, self.shared = self.conf.workspace, shared
        self.last_used = time.monotonic()
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.RLock()
        self._counter = 0
        self._control = ControlChannel()
        self._pending_notes: list[str] = []
        self._started_once = False
        self._machinery: set[int] = set()
        self._shell_pid = 0
        self._secrets_removed = 0
        self._memory = NO_WATCH  # the live shell's sandbox: did its memory limit stop a command
        self.closed = False
        self.kill_grace_s = KILL_GRACE_S
        self.caveat = ""  # what earlier commands left that changes what a name runs (PATH), see ``shell_caveat``

    # -- state -----------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def background_pids(self) -> list[int]:
        """Processes living in the session besides the shell machinery (for status displays)."""
        if not self.alive or self._proc is None:
            return []
        return [p for p in proctree.descendants(self._proc.pid) if p not in self._machinery]

    # -- running ---------------------------------------------------------------------------

    def run(
        self,
        command: str,
        *,
        timeout: float,
        working_dir: str | os.PathLike[str] | None = None,
        preserve_state: bool = False,
    ) -> CommandRecord:
        """Run ``command`` in the shell (or, when no slot is free, in a one-off sandbox)."""
        with self._lock:
            if self.closed:
                raise ToolFailure(ErrorCode.EXECUTION_FAILED, "this run's shell was closed with its run")
            wd = self._working_dir(working_dir)
            self.last_used = time.monotonic()
            try:
                if not self.alive and not self._start():
                    return self._run_oneoff(command, timeout, wd, preserve_state)
                return self._run_in_shell(command, timeout, wd, preserve_state)
            finally:
                self.last_used = time.monotonic()

    def _working_dir(self, working_dir: str | os.PathLike[str] | None) -> Path | None:
        if working_dir is None:
            return None
        check_path_text(os.fspath(working_dir))
        path = Path(os.path.realpath(self.conf.workspace / working_dir))
        if not is_within(path, self.conf.workspace):
            raise ToolFailure(ErrorCode.OUTSIDE_WORKSPACE, f"working_dir {str(working_dir)!r} is outside the workspace")
        if not path.is_dir():
            raise ToolFailure(ErrorCode.NOT_FOUND, f"working_dir {str(working_dir)!r} is not a directory")
        return path

    def _start(self) -> bool:
        if self.registry is not None and not self.registry.admit(self):
            return False
        try:
            with open(self.ctl / "shell.err", "wb") as errors:
                started = spawn_confined([shutil.which("bash") or "/bin/bash", "--noprofile", "--norc"], self.conf,
                                         tier=self.choice.tier, stdin=subprocess.PIPE, stderr=errors,
                                         cwd=self.conf.workspace, stable=True, shared=self.shared)
            self._proc = started.process
            self._secrets_removed = started.secrets_removed
            self._memory = started.memory
            if started.net_note:
                self._pending_notes.append(started.net_note)
        except OSError as exc:
            if self.registry is not None:
                self.registry.release(self)
            log.error("could not start a shell session: %s", exc)
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, "the shell could not be started on this server") from None
        self._control.clear()
        self._send(init_script(self.ctl, self.cwd, self.conf.workspace))
        if self._await_marker("R", START_TIMEOUT_S) is None:
            self._terminate()
            self._log_shell_errors()
            raise ToolFailure(ErrorCode.EXECUTION_FAILED, "the shell could not be started on this server")
        self.caveat = shell_caveat(self.ctl)
        # Everything alive now is the sandbox's own machinery (bwrap or launcher, and the shell).
        chain = proctree.descendants(self._proc.pid)
        self._machinery = {self._proc.pid, *chain}
        self._shell_pid = chain[-1] if chain else self._proc.pid
        if self._started_once:
            self._pending_notes.append("a new shell was started: directory and exported variables were restored; background "
                                       "processes from earlier commands are gone")
        self._started_once = True
        return True

    def _send(self, text: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(text.encode())
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the shell is gone; the control channel's EOF reports it

    def _run_in_shell(self, command: str, timeout: float, wd: Path | None, preserve: bool) -> CommandRecord:
        assert self._proc is not None and self._proc.stdout is not None
        self._counter += 1
        n = self._counter
        files = CommandFiles(self.ctl, n, command)
        stdout, stderr = StreamCapture(), StreamCapture()
        pump = Pump()
        pump.add(files.out_fd, stdout.feed)
        pump.add(files.err_fd, stderr.feed)
        marker: list[Marker] = []
        ctl_fd = self._proc.stdout.fileno()
        pump.add(ctl_fd, lambda data: self._control.feed(data, marker, str(n)))
        root = self._proc.pid
        before = proctree.snapshot(root)
        memory, kills_before = self._memory, self._memory.kills()
        self._send(command_line(n, self.ctl, wd, preserve))
        started = time.monotonic()
        started_at = time.time()
        timed_out = capped = stuck = False
        killed_at = last_round = 0.0
        while not marker:
            now = time.monotonic()
            if not killed_at:
                timed_out = now - started >= timeout
                capped = not timed_out and (stdout.over_cap or stderr.over_cap)
                if timed_out or capped:
                    killed_at = now
            if killed_at and now - last_round >= ABORT_ROUND_S:
                last_round = now
                self._abort_round(before)
            if killed_at and now - killed_at > self.kill_grace_s:
                stuck = True  # the shell does not come back (it ignores the abort): restart it
                break
            if not pump.watching(ctl_fd):  # control EOF: the shell is gone
                break
            limit = timeout - (now - started) if not killed_at else ABORT_ROUND_S
            pump.once(min(max(limit, 0.0), 0.5))
        duration = time.monotonic() - started
        for fd in (files.out_fd, files.err_fd):
            pump.drain(fd)
        files.retire()
        notes = self._take_notes()
        code, pwd = (marker[0].status, marker[0].cwd) if marker else (None, "")
        self.caveat = shell_caveat(self.ctl, notes) if marker else self.caveat  # said on every result while it holds
        stopped = memory.note(kills_before, code, stderr.result().text[-STDERR_TAIL:])
        if stopped:
            notes.append(stopped)
        if stuck:
            self._terminate()
            code = -9
            notes.append("the shell did not return after the command was stopped and was restarted; background processes from "
                         "earlier commands are gone")
        elif not marker:  # the shell ended: ``exit``, ``exec``, or a crash
            code = self._terminate(wait_s=1.0)
            pwd = read_and_remove(self.ctl / "cwd")
            if code is None or code < 0:
                self._log_shell_errors()
            notes.append("the shell exited (exit ends the session); the next command starts a new shell in the same directory, "
                         "background processes are gone")
        if pwd:
            self.cwd = Path(pwd)
        if not is_within(self.cwd, self.conf.workspace):
            notes.append(f"the command ended in {self.cwd}, outside the workspace; the next command starts at the workspace root")
            self.cwd = self.conf.workspace
            if self.alive:
                self._send(f"builtin cd -- {shlex.quote(str(self.cwd))}\n")
        return self._record(command, code, timed_out, capped, duration, stdout, stderr, timeout, wd, notes, started_at,
                            MEMORY_LIMIT if stopped else None)

    def _abort_round(self, before: set[tuple[int, int]]) -> None:
        """Stop the running command: ask the shell to abandon it, kill what it started.

        The shell's USR1 trap returns from the sourced command (one level per signal, so a
        command inside a function unwinds over a few rounds); killing every process that
        appeared since the command began ends its foreground and background work.
        """
        assert self._proc is not None
        with contextlib.suppress(OSError):
            os.kill(self._shell_pid, signal.SIGUSR1)
        proctree.kill_new(self._proc.pid, before, keep=self._machinery)

    def _take_notes(self) -> list[str]:
        notes, self._pending_notes = self._pending_notes, []
        if self.choice.tier is Tier.OFF:
            notes.insert(0, OFF_WARNING)
        return notes

    def _record(self, command: str, code: int | None, timed_out: bool, capped: bool, duration: float,
                stdout: StreamCapture, stderr: StreamCapture, timeout: float, wd: Path | None, notes: list[str],
                started_at: float, stopped_by: str | None = None) -> CommandRecord:
        where = wd if wd is not None else self.cwd
        record = CommandRecord(
            id=new_record_id(),
            command=command,
            tier=str(self.choice.tier),
            network=self.conf.network or self.choice.tier is Tier.OFF,
            cwd=str(where.relative_to(self.conf.workspace)) if is_within(where, self.conf.workspace) else str(where),
            exit_code=code,
            timed_out=timed_out,
            output_capped=capped,
            duration_ms=duration * 1000,
            stdout=stdout.result(),
            stderr=stderr.result(),
            timeout_s=timeout,
            notes=tuple(notes),
            limits=(*self.choice.limits(self.conf.network), *self.conf.network_limits),
            secrets_removed=self._secrets_removed,
            started_at=started_at,
            extra={"session": "shell", "network_mode": "host" if self.choice.tier is Tier.OFF else self.conf.network_mode},
            stopped_by=stopped_by,
        )
        return attach_spill(record, self.conf.workspace)

    def _run_oneoff(self, command: str, timeout: float, wd: Path | None, preserve: bool) -> CommandRecord:
        """No free session slot: the same confinement, fresh, with directory and environment carried."""
        self._counter += 1
        record, landed = run_overflow(self.choice, self.conf, self.ctl, self._counter, command, wd or self.cwd, timeout,
                                      preserve, self._take_notes())
        if landed is not None and wd is None:
            self.cwd = landed if is_within(landed, self.conf.workspace) else self.conf.workspace
        return record

    # -- closing ---------------------------------------------------------------------------

    def close(self, reason: str = "") -> bool:
        """Stop the shell and everything in it, keeping directory and environment for a restart."""
        with self._lock:
            if not self.alive:
                self._proc = None
                return False
            self._terminate()
            if reason:
                self._pending_notes.append(reason)
            return True

    def close_if_idle(self, idle_seconds: float, clock: Callable[[], float], note: str) -> bool:
        """Close when no command ran for ``idle_seconds``; never interrupts a running command."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            if self.alive and clock() - self.last_used >= idle_seconds:
                return self.close(note)
            return False
        finally:
            self._lock.release()

    def dispose(self) -> None:
        """Close for good (run finished): processes killed, control folder removed."""
        with self._lock:
            if self.alive:
                self._terminate()
            self.closed = True
            shutil.rmtree(self.ctl, ignore_errors=True)

    def _await_marker(self, kind: str, timeout: float) -> Marker | None:
        """Wait for the shell's ``kind`` marker on the control channel (None: gone or too slow)."""
        assert self._proc is not None and self._proc.stdout is not None
        marker: list[Marker] = []
        pump = Pump()
        pump.add(self._proc.stdout.fileno(), lambda data: self._control.feed(data, marker, kind))
        deadline = time.monotonic() + timeout
        while not marker and pump.active and time.monotonic() < deadline:
            pump.once(deadline - time.monotonic())
        return marker[0] if marker else None

    def _terminate(self, wait_s: float = 0.0) -> int | None:
        """Kill the session's whole tree; ``wait_s`` first lets a shell that is exiting finish.

        A root that already exited is reaped without signalling its pid (it could be reused);
        its machinery (bubblewrap's PID namespace, the launcher) took its processes with it.
        """
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        code = None
        if wait_s > 0:
            try:
                code = proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                code = None
        code = release(proc, kill=code is None)
        if self.registry is not None:
            self.registry.release(self)
        return code

    def _log_shell_errors(self) -> None:
        try:
            text = (self.ctl / "shell.err").read_text(errors="replace").strip()
        except OSError:
            return
        if text:
            log.warning("shell session %s ended unexpectedly: %s", self.key or "?", text[-2000:])


"""The ``shell`` service a host installs into a run's ``ToolContext`` when the operator allows it.

It ties one run to the server's sandbox: the tier in force, the run's session in the
server's ``SessionRegistry``, the run's workspace and ``$HOME``, the run's deadline, the
operator's program list. Tools call ``run``; the gate is checked again on every call, so a
service object built for a run whose operator did not enable shell tools refuses too.

Hosts use ``shell_service_for_run`` (returns None when shell tools are off, so the service is
simply never installed and the tools never offered) and ``close`` when the run ends.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.sandbox import netns, runnet, tempsweep
from kernel_ext.sandbox.config import (
    ShellSettings,
    shell_tools_enabled,
    startup_settings,
)
from kernel_ext.sandbox.record import CommandRecord
from kernel_ext.sandbox.session.persistent import ShellSession
from kernel_ext.sandbox.session.registry import SessionRegistry
from kernel_ext.sandbox.shtools.records import RecordStore, default_state_dir
from kernel_ext.sandbox.tiers import UNAVAILABLE_MESSAGE, TierChoice, choose_tier
from kernel_ext.shellplan.denylist import check_command
from kernel_ext.shellplan.undo import Checkpoint, PlanContext

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
INSTALL_TIMEOUT_S = 300.0
DISABLED_MESSAGE = (
    "shell tools are disabled on this server; only the operator can enable them "
    "(BESSER_LLM_ENABLE_SHELL_TOOLS=1 at start-up, or an explicit library argument)"
)


class ShellDescription(TypedDict):
    """For the run's metadata: is the shell on, which tier, what that tier does not give."""

    shell_tools_enabled: bool
    sandbox_policy: str
    sandbox_tier: str
    sandbox_limits: list[str]
    session_network: bool
    network_mode: str  # off | private | host
    network_limits: list[str]


class ShellService:
    """One run's access to the sandboxed shell."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        run_id: str = "local",
        enabled: bool = False,
        home: str | os.PathLike[str] | None = None,
        registry: SessionRegistry | None = None,
        settings: ShellSettings | None = None,
        deadline: float | None = None,
        hidden: tuple[str, ...] = (),
    ):
        self.workspace = Path(os.path.realpath(workspace))
        self._folder = _identity(self.workspace)  # the run's folder as it was: a swap ends the shell
        self.run_id = run_id
        self.enabled = bool(enabled)
        self.settings = settings or startup_settings()
        self.deadline = deadline
        self.hidden = hidden
        self._own_registry = registry is None
        self.registry = registry or SessionRegistry(self.settings.max_sessions, self.settings.idle_seconds)
        self._own_home = home is None
        self.home = Path(home) if home is not None else tempsweep.make_temp_home("besser-home-", f"{run_id}-")
        if self._own_home:
            tempsweep.hold_temp_home(self.home)  # a long-lived notebook Shell's home is never "stale"
        self.home.mkdir(parents=True, exist_ok=True)
        self._choice: TierChoice | None = None
        # Where this run's command records are kept (the ``sh_*`` toolkit's store, shared), so
        # ``sh_detail`` / ``sh_logs`` read a run_command id; made on the first command.
        self.records: RecordStore | None = None
        self.state_dir: Path | None = None
        self._on_close: list[Callable[[], object]] = []
        self._network: runnet.RunNetwork | None = None
        self._network_lock = threading.Lock()
        self._checkpoints: tuple[Checkpoint, ...] = ()  # taken in this run, oldest first (``note_checkpoint``)
        self.registry.watch(run_id, self.workspace, self._folder_removed)

    # -- the tier -----------------------------------------------------------------------------

    @property
    def choice(self) -> TierChoice:
        if self._choice is None:
            self._choice = choose_tier(self.settings.policy)
        return self._choice

    def describe(self) -> ShellDescription:
        """For the run's metadata: is the shell on, which tier, what that tier does not give."""
        choice = self.choice
        return {
            "shell_tools_enabled": self.enabled,
            "sandbox_policy": self.settings.policy,
            "sandbox_tier": str(choice.tier) if choice.tier else "unavailable",
            "sandbox_limits": list(choice.limits(self.settings.session_network)),
            "session_network": self.settings.session_network,
            "network_mode": self.settings.network_mode,
            "network_limits": list(netns.plan(self.settings.network_mode, choice.tier).limits),
        }

    # -- running --------------------------------------------------------------------------------

    def check_enabled(self) -> TierChoice:
        if not self.enabled:
            raise ToolFailure(ErrorCode.SHELL_DISABLED, DISABLED_MESSAGE)
        choice = self.choice
        if not choice.available:
            log.error("shell command refused, sandbox unavailable (policy %s): %s", choice.policy, choice.cause)
            raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE, UNAVAILABLE_MESSAGE)
        current = _identity(self.workspace)
        if self._folder is None:  # made before its folder existed: the first folder seen is the run's
            self._folder = current
        if current is None or current != self._folder:  # removed, or replaced (by a link, or another folder)
            raise ToolFailure(ErrorCode.NOT_FOUND, "the run's folder was removed or replaced, so its shell has ended; "
                                                   "start a new run")
        return choice

    def timeout_for(self, requested: float | None, default: float = DEFAULT_TIMEOUT_S) -> float:
        """The effective timeout: default or requested (up to 600 s), never past the run's deadline."""
        if requested is not None and requested <= 0:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "timeout must be a positive number of seconds")
        timeout = min(float(requested) if requested is not None else default, MAX_TIMEOUT_S)
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 1:
                raise ToolFailure(ErrorCode.TIMEOUT, "the run has no time left for a command")
            timeout = min(timeout, remaining)
        return timeout

    def network(self) -> runnet.RunNetwork | None:
        """The run's one private network, which its session and ``sh_run`` commands join (made on first use);
        None when commands get no private network."""
        choice = self.choice
        if choice.tier is None or not netns.plan(self.settings.network_mode, choice.tier).private:
            return None
        with self._network_lock:
            if self._network is None or self._network.closed:
                self._network = runnet.for_run(choice, self.workspace, self.home, self.hidden)
            return self._network

    def session(self) -> ShellSession:
        choice = self.check_enabled()
        return self.registry.session(
            self.run_id,
            lambda: ShellSession(choice, self.workspace, self.home, network=self.settings.network_mode, hidden=self.hidden,
                                 shared=self.network()),
        )

    def note_checkpoint(self, label: str, folder: str) -> None:
        """A checkpoint this run took of ``folder`` (relative to the workspace): a later deletion it
        covers is rated reversible, and the card names it (a label taken again replaces its entry)."""
        with self._network_lock:
            kept = tuple(c for c in self._checkpoints if c.label != label)
            self._checkpoints = (*kept, Checkpoint(label, folder or "."))

    def plan_context(self, working_dir: str | os.PathLike[str] | None = None) -> PlanContext:
        """What a command is planned with: this run's checkpoints and the folder it starts in
        (``working_dir``, else the session's current folder), relative to the workspace."""
        if working_dir is None:
            session = self.registry.get(self.run_id)
            where = session.cwd if session is not None and not session.closed else self.workspace
        else:
            where = Path(working_dir) if os.path.isabs(working_dir) else self.workspace / working_dir
        rel = os.path.relpath(os.path.normpath(where), self.workspace)
        return PlanContext(self._checkpoints, rel if rel != ".." and not rel.startswith("../") else None)

    def plan_caveat(self) -> str:
        """Why a command's static rating cannot be trusted in this run's live shell ("" when it can):
        an earlier command changed PATH, or left definitions the per-command reset could not drop."""
        found = self.registry.get(self.run_id)
        return found.caveat if found is not None and not found.closed else ""

    def run(
        self,
        command: str,
        *,
        working_dir: str | None = None,
        timeout: float | None = None,
        default_timeout: float = DEFAULT_TIMEOUT_S,
        preserve_state: bool = False,
    ) -> CommandRecord:
        """Policy checks, then the command in the run's session. A failing command is a record, not an error."""
        self.check_enabled()
        check_command(command, self.settings.allowed_programs)
        effective = self.timeout_for(timeout, default_timeout)
        network = self.network()
        if network is not None:
            network.refresh()  # the host's addresses it gained since the last command are kept out first
        record = self.session().run(command, timeout=effective, working_dir=working_dir, preserve_state=preserve_state)
        self._keep(record)
        return record

    def _keep(self, record: CommandRecord) -> None:
        """Store the record by its id; a store that cannot be written costs the lookup, never the result."""
        try:
            if self.records is None:
                self.state_dir = default_state_dir()
                self.records = RecordStore(self.state_dir, self.workspace)
            self.records.save_command(record)
        except (OSError, ToolFailure) as exc:
            log.warning("command record %s not stored: %s", record.id, exc)

    def stop_processes(self, reason: str = "the session's processes were stopped before validation") -> bool:
        """Kill the session's processes now (directory and environment kept)."""
        found = self.registry.get(self.run_id)
        return found.close(reason) if found is not None else False

    def on_close(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` when the run's service closes, before its sandboxes are killed
        (the ``sh_*`` toolkit stops its background jobs this way)."""
        self._on_close.append(callback)

    def _folder_removed(self) -> None:
        """The registry saw the run's folder go: its session is already ended; stop what the close hooks own
        (the ``sh_*`` background jobs) too. The home stays until the host closes the run."""
        for callback in list(self._on_close):
            callback()
        self._close_network()

    def _close_network(self) -> None:
        with self._network_lock:
            if self._network is not None:
                self._network.close()

    def close(self) -> None:
        """The run ended: kill everything it started (close hooks, session, prepared check sandboxes),
        remove its temporary home."""
        from kernel_ext.sandbox.oneoff import release_workspace

        callbacks, self._on_close = self._on_close, []
        for callback in callbacks:
            callback()
        self.registry.close_run(self.run_id)
        self._close_network()
        release_workspace(self.workspace)
        if self._own_registry:
            self.registry.close()
        if self._own_home:
            shutil.rmtree(self.home, ignore_errors=True)
            tempsweep.release_temp_home(self.home)


def shell_service_for_run(
    workspace: str | os.PathLike[str],
    *,
    run_id: str = "local",
    enable: bool | None = None,
    home: str | os.PathLike[str] | None = None,
    registry: SessionRegistry | None = None,
    settings: ShellSettings | None = None,
    deadline: float | None = None,
    hidden: tuple[str, ...] = (),
) -> ShellService | None:
    """The service to install as ``services["shell"]``, or None when the operator did not enable shell tools."""
    if not shell_tools_enabled(enable):
        return None
    return ShellService(workspace, run_id=run_id, enabled=True, home=home, registry=registry, settings=settings,
                        deadline=deadline, hidden=hidden)


def _identity(folder: Path) -> tuple[int, int] | None:
    """(device, inode) of ``folder`` itself, never through a link; None unless it is a directory."""
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None

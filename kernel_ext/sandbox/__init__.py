"""The sandboxed shell: tiers (bwrap, landlock, off), sessions, one-off checks, captured output.

Imports are lazy (``%load_ext`` stays fast). The names most callers need:

- ``run_confined(argv, workspace_root, timeout, network=False, ...) -> CommandRecord``:
  a fresh one-off sandbox for checks and probes (``oneoff``); ``release_workspace`` at run end.
- ``WarmWorker(plan)``: a long-lived confined worker speaking JSON frames over pipes
  (``workers``, ``frames``: the app host, the import checker), restarted after a failure.
  Outside this package, no other way starts a process that runs project code.
- ``require_tier`` (``confined``): the operator's tier, or the ``sandbox_unavailable`` refusal.
  Inside this package, ``confined.spawn_confined`` is the one start of every confined process
  (tier, launch line with caps, scrubbed environment): the one-off path, the spares, the
  session, ``sh_run`` and the workers build on it; code outside may not call it.
- ``SessionRegistry``, ``ShellSession``, ``ShellService`` / ``shell_service_for_run``: the
  per-run persistent shell and its service (``session/``); ``Shell``: the ``sh_*`` toolkit
  (``shtools/``). Both build on the core here; the core imports neither.
- ``shell_tools_enabled``, ``ShellSettings`` (``config``); ``choose_tier``, ``Tier`` (``tiers``).
- ``CommandRecord`` (``record``), ``scrub_environment`` (``env``).

The command policy and ``sh_plan``'s classifier run no process and live below this package,
in ``kernel_ext.shellplan``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_ext.lazy import lazy_exports

if TYPE_CHECKING:  # the real types for a type checker; at run time each name is imported on first use
    from kernel_ext.sandbox.boot import package_program
    from kernel_ext.sandbox.capture import StreamResult
    from kernel_ext.sandbox.config import ShellSettings, env_flag, shell_tools_enabled
    from kernel_ext.sandbox.confined import Confined, require_tier
    from kernel_ext.sandbox.env import scrub_environment
    from kernel_ext.sandbox.oneoff import release_workspace, run_confined
    from kernel_ext.sandbox.record import CommandRecord
    from kernel_ext.sandbox.session.persistent import ShellSession
    from kernel_ext.sandbox.session.registry import SessionRegistry
    from kernel_ext.sandbox.session.service import DISABLED_MESSAGE, INSTALL_TIMEOUT_S, ShellService, shell_service_for_run
    from kernel_ext.sandbox.shtools.shell import Shell
    from kernel_ext.sandbox.spec import Confinement
    from kernel_ext.sandbox.tempsweep import TempSweeper, hold_temp_home, make_temp_home, release_temp_home
    from kernel_ext.sandbox.tiers import OFF_WARNING, Tier, TierChoice, choose_tier
    from kernel_ext.sandbox.workers import WarmWorker, WorkerPlan, start_worker


_EXPORTS = {
    "run_confined": "oneoff",
    "require_tier": "confined",
    "Confined": "confined",
    "release_workspace": "oneoff",
    "start_worker": "workers",
    "WarmWorker": "workers",
    "WorkerPlan": "workers",
    "SessionRegistry": "session.registry",
    "ShellSession": "session.persistent",
    "ShellService": "session.service",
    "Shell": "shtools.shell",
    "shell_service_for_run": "session.service",
    "shell_tools_enabled": "config",
    "ShellSettings": "config",
    "choose_tier": "tiers",
    "Tier": "tiers",
    "TierChoice": "tiers",
    "CommandRecord": "record",
    "StreamResult": "capture",
    "scrub_environment": "env",
    "Confinement": "spec",
    "package_program": "boot",
    "OFF_WARNING": "tiers",
    "TempSweeper": "tempsweep",
    "hold_temp_home": "tempsweep",
    "make_temp_home": "tempsweep",
    "release_temp_home": "tempsweep",
    "env_flag": "config",
    "DISABLED_MESSAGE": "session.service",
    "INSTALL_TIMEOUT_S": "session.service",
}

__all__ = [
    "DISABLED_MESSAGE",
    "INSTALL_TIMEOUT_S",
    "OFF_WARNING",
    "CommandRecord",
    "Confined",
    "Confinement",
    "SessionRegistry",
    "Shell",
    "ShellService",
    "ShellSession",
    "ShellSettings",
    "StreamResult",
    "TempSweeper",
    "Tier",
    "TierChoice",
    "WarmWorker",
    "WorkerPlan",
    "choose_tier",
    "env_flag",
    "hold_temp_home",
    "make_temp_home",
    "package_program",
    "release_temp_home",
    "release_workspace",
    "require_tier",
    "run_confined",
    "scrub_environment",
    "shell_service_for_run",
    "shell_tools_enabled",
    "start_worker",
]


__getattr__, __dir__ = lazy_exports("kernel_ext.sandbox",
                                    {name: f"kernel_ext.sandbox.{module}" for name, module in _EXPORTS.items()})

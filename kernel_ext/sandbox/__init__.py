"""The sandboxed shell: tiers (bwrap, landlock, off), sessions, one-off checks, captured output.

Imports are lazy (``%load_ext`` stays fast). The names most callers need:

- ``run_confined(argv, workspace_root, timeout, network=False, ...) -> CommandRecord``:
  a fresh one-off sandbox for checks and probes (``oneoff``); ``release_workspace`` at run end.
- ``SessionRegistry``: the server's sessions (``registry``); ``ShellSession`` (``session``).
- ``ShellService`` / ``shell_service_for_run``: the per-run ``shell`` service (``service``).
- ``shell_tools_enabled``, ``ShellSettings`` (``config``); ``choose_tier``, ``Tier`` (``tiers``).
- ``CommandRecord`` (``record``), ``scrub_environment`` (``env``), ``check_command``.
"""

from __future__ import annotations

from kernel_ext.lazy import lazy_exports

_EXPORTS = {
    "run_confined": "oneoff",
    "require_tier": "oneoff",
    "release_workspace": "oneoff",
    "SessionRegistry": "registry",
    "ShellSession": "session",
    "ShellService": "service",
    "Shell": "shell",
    "shell_service_for_run": "service",
    "shell_tools_enabled": "config",
    "ShellSettings": "config",
    "choose_tier": "tiers",
    "Tier": "tiers",
    "TierChoice": "tiers",
    "CommandRecord": "record",
    "StreamResult": "capture",
    "scrub_environment": "env",
    "check_command": "command_policy",
    "Confinement": "spec",
}

__all__ = [
    "Shell",
    "CommandRecord",
    "Confinement",
    "SessionRegistry",
    "ShellService",
    "ShellSession",
    "ShellSettings",
    "StreamResult",
    "Tier",
    "TierChoice",
    "check_command",
    "choose_tier",
    "release_workspace",
    "require_tier",
    "run_confined",
    "scrub_environment",
    "shell_service_for_run",
    "shell_tools_enabled",
]


__getattr__, __dir__ = lazy_exports("kernel_ext.sandbox", {name: f"kernel_ext.sandbox.{module}" for name, module in _EXPORTS.items()})

"""One persistent shell per run (``run_command``), inside the run's sandbox.

- ``ShellSession`` (``persistent``): the run's ``bash``, ``cd`` and exports carried over;
  its wire to the host (scripts, markers, FIFOs) is ``protocol``.
- ``SessionRegistry`` (``registry``): the server's sessions, a live-slot limit, idle closing.
- ``ShellService`` / ``shell_service_for_run`` (``service``): what a run's ``ToolContext``
  holds when the operator allows shell tools.

Built on the confinement core one level up (tiers, ``spawn_confined``, supervisor, one-off
fallback); nothing in the core imports this package. Imports are lazy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernel_ext.lazy import lazy_exports

if TYPE_CHECKING:  # the real types for a type checker; at run time each name is imported on first use
    from kernel_ext.sandbox.session.persistent import ShellSession
    from kernel_ext.sandbox.session.registry import SessionRegistry
    from kernel_ext.sandbox.session.service import ShellService, shell_service_for_run


_EXPORTS = {
    "ShellSession": "persistent",
    "SessionRegistry": "registry",
    "ShellService": "service",
    "shell_service_for_run": "service",
}

__all__ = [
    "SessionRegistry",
    "ShellService",
    "ShellSession",
    "shell_service_for_run",
]

__getattr__, __dir__ = lazy_exports("kernel_ext.sandbox.session",
                                    {name: f"kernel_ext.sandbox.session.{module}" for name, module in _EXPORTS.items()})

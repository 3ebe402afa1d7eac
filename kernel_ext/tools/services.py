"""What tools call on the services a host installs in a ``ToolContext``, as Protocols.

A service's own module may be heavy (the sandboxed shell brings the confinement stack): tools
type against these Protocols, import nothing at load, and each seam lists exactly the calls
made across it. ``kernel_ext.sandbox.session.service.ShellService`` is the one ``ShellAccess`` the host
installs (``pipeline/run_shell.py``, ``cli/tool.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

__all__ = ["CommandOutcome", "ShellAccess"]


class CommandOutcome(Protocol):
    """One finished command, as a tool reports it (``sandbox.record.CommandRecord``)."""

    @property
    def ok(self) -> bool: ...

    @property
    def timed_out(self) -> bool: ...

    def as_data(self) -> dict[str, Any]: ...

    def observation(self) -> str: ...


class ShellAccess(Protocol):
    """One run's sandboxed shell: on only when the operator enabled it, never by a request."""

    @property
    def enabled(self) -> bool: ...

    @property
    def workspace(self) -> Path: ...

    @property
    def home(self) -> Path: ...

    def describe(self) -> Mapping[str, Any]:
        """For the run's metadata and a command's approval card: is the shell on, which tier."""
        ...

    def check_enabled(self) -> object:
        """Refuse (``SHELL_DISABLED``, ``SANDBOX_UNAVAILABLE``) unless a command could run now."""
        ...

    def run(
        self,
        command: str,
        *,
        working_dir: str | None = None,
        timeout: float | None = None,
        default_timeout: float = ...,
        preserve_state: bool = False,
    ) -> CommandOutcome:
        """Policy checks, then the command in the run's session; a failing command is an outcome."""
        ...

    def stop_processes(self, reason: str = ...) -> bool:
        """Kill the session's processes now (its folder and environment are kept)."""
        ...

    def close(self) -> None:
        """The run ended: everything it started is stopped."""
        ...

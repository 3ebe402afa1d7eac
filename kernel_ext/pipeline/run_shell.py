"""The run's shell, as the orchestrator installs it, and the sandbox tier its metadata names.

The service exists only when the operator enabled shell tools (a request can never turn it on);
the sandbox package loads on first use here, not when the pipeline is imported.
"""

from __future__ import annotations

from kernel_ext.hosting.options import OperatorSettings
from kernel_ext.hosting.run import RunContext
from kernel_ext.tools.services import ShellAccess

__all__ = ["active_tier", "shell_for_run"]


def active_tier(policy: str) -> str:
    """The sandbox tier in force for ``policy`` (self-tested once per process), for every run's metadata."""
    from kernel_ext.sandbox import choose_tier

    choice = choose_tier(policy)
    return str(choice.tier) if choice.available else f"unavailable ({policy})"


def shell_for_run(ctx: RunContext, operator: OperatorSettings) -> ShellAccess | None:
    """The run's ``shell`` service, or None when the operator did not enable shell tools."""
    from kernel_ext.sandbox import shell_service_for_run

    return shell_service_for_run(ctx.layout.app_dir, run_id=ctx.run_id, enable=operator.shell_tools_enabled)

"""The run's shell, as the orchestrator installs it, and the sandbox tier its metadata names.

The service exists only when the operator enabled shell tools (a request can never turn it on);
the sandbox package loads on first use here, not when the pipeline is imported.
"""

from __future__ import annotations

from pathlib import Path

from kernel_ext.hosting.options import OperatorSettings
from kernel_ext.hosting.run import RunContext
from kernel_ext.tools.services import ShellAccess

__all__ = ["active_tier", "shell_for_run", "write_probe"]


def active_tier(policy: str) -> str:
    """The sandbox tier in force for ``policy`` (self-tested once per process), for every run's metadata."""
    from kernel_ext.sandbox import choose_tier

    choice = choose_tier(policy)
    return str(choice.tier) if choice.available else f"unavailable ({policy})"


def shell_for_run(ctx: RunContext, operator: OperatorSettings) -> ShellAccess | None:
    """The run's ``shell`` service, or None when the operator did not enable shell tools."""
    from kernel_ext.sandbox import shell_service_for_run

    return shell_service_for_run(ctx.layout.app_dir, run_id=ctx.run_id, enable=operator.shell_tools_enabled)


def write_probe(root: Path, operator: OperatorSettings, generator: str) -> None:
    """The runtime probe the runbook names, when shell tools are on for a FastAPI backend: a run's
    own file (``workspace/internal.py``), hidden, read-only to the file tools and outside the
    manifest, so it is neither scaffold nor LLM work."""
    if not (operator.shell_tools_enabled and generator == "fastapi_backend"):
        return
    from kernel_ext.workspace import PROBE_FILE, Workspace, publish

    data = (Path(__file__).parent / "data" / "probe.py").read_bytes()
    publish(Workspace(root, protected=()), PROBE_FILE, data)  # the host's write, not a tool's

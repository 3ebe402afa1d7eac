"""Shared helpers for the shell-tool tests: a run with a real bubblewrap sandbox behind the Executor.

Everything is real: the bwrap tier (skipped with the host's reason where it cannot start),
records and checkpoints in a temporary state folder, processes looked up in the host's /proc.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sandbox_fixtures import make_run

from kernel_ext.boundary import (
    ApprovalPolicy,
    ApprovalRequest,
    ExecutionPolicy,
    Executor,
    ToolCall,
)
from kernel_ext.sandbox import tiers
from kernel_ext.sandbox.config import ShellSettings
from kernel_ext.sandbox.session.service import ShellService
from kernel_ext.sandbox.shtools.shell import Shell
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

needs_bwrap = pytest.mark.skipif(
    tiers.self_test(tiers.Tier.BWRAP) is not None,
    reason=f"bubblewrap cannot start here: {tiers.self_test(tiers.Tier.BWRAP)}",
)


@dataclass
class Harness:
    ws: Path
    home: Path
    state: Path
    service: ShellService
    shell: Shell
    executor: Executor
    requests: list[ApprovalRequest] = field(default_factory=list)

    def call(self, name: str, **arguments: Any):
        return self.executor.execute_sync(ToolCall(f"c-{name}", name, arguments))

    def tree(self) -> dict[str, bytes | str]:
        """Every entry of the workspace: file bytes, link targets, ``dir`` for folders."""
        return tree_of(self.ws)


def tree_of(root: Path) -> dict[str, bytes | str]:
    found: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            found[rel] = "link:" + os.readlink(path)
        elif path.is_dir():
            found[rel] = "dir"
        else:
            found[rel] = path.read_bytes()
    return found


@pytest.fixture
def h(tmp_path):
    """The default harness (bwrap, shell tools on, network on, a host that approves); closed after."""
    found = harness(tmp_path)
    yield found
    found.service.close()


def harness(tmp_path: Path, *, enabled: bool = True, network: bool | str = True, approve: bool = True, programs=None,
            max_background: int | None = None) -> Harness:
    cause = tiers.self_test(tiers.Tier.BWRAP)
    if cause is not None:
        pytest.skip(f"bubblewrap cannot start here: {cause}")
    run = make_run(tmp_path)
    state = tmp_path / "state"
    mode = network if isinstance(network, str) else "private" if network else "off"  # on: the default, private
    settings = ShellSettings(policy="bwrap", session_network=mode != "off", network_mode=mode,
                             allowed_programs=frozenset(programs) if programs else None)
    service = ShellService(run.ws, run_id="t", enabled=enabled, home=run.home, settings=settings)
    shell = Shell.for_service(service, state_dir=state, max_background=max_background)
    requests: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        requests.append(request)
        return approve

    executor = Executor(
        default_catalog(),
        ToolContext(services={"workspace": Workspace(run.ws), "shell": service}),
        policy=ExecutionPolicy.allowing(["shell", "plan"]),
        approvals=ApprovalPolicy(),
        approver=approver,
    )
    return Harness(run.ws, run.home, state, service, shell, executor, requests)


def files_under(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []

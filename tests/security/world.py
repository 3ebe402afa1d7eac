"""The security suite's world: a run folder, a guarded world outside it, real executors.

Every case builds the same world (``sandbox_fixtures.make_run``): our run's workspace and home,
a sibling run holding a secret, and an ``outside`` folder standing for the host (a secret file,
a Python module, a folder). ``World.unchanged()`` compares all of it, byte for byte, with the
state taken before the attack (``file_tool_helpers.tree_state``): a case asserts containment
AND that call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from file_tool_helpers import tree_state
from sandbox_fixtures import Run, make_run, token

from kernel_ext.boundary import (
    ApprovalPolicy,
    ExecutionPolicy,
    Executor,
    ToolCall,
    ToolResult,
    always_approve,
)
from kernel_ext.sandbox.config import ShellSettings
from kernel_ext.sandbox.session.registry import SessionRegistry
from kernel_ext.sandbox.session.service import ShellService
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

HOST_SECRET = "HOST-SECRET-5b0e7c1d"


@dataclass
class World:
    """Our run plus everything an attack must leave alone (``outside`` and the other run)."""

    run: Run
    outside: Path
    before: dict[str, Any] = field(default_factory=dict)

    @property
    def ws(self) -> Path:
        return self.run.ws

    @property
    def secret_file(self) -> Path:
        return self.outside / "host_secret.txt"

    def guarded(self) -> tuple[Path, ...]:
        return (self.outside, self.run.other_ws.parent)

    def snapshot(self) -> None:
        self.before = tree_state(*self.guarded())

    def unchanged(self) -> bool:
        """True when nothing outside our run changed since ``snapshot`` (asserted by every case)."""
        return tree_state(*self.guarded()) == self.before


def make_world(tmp_path: Path) -> World:
    run = make_run(tmp_path)
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "host_secret.txt").write_text(HOST_SECRET + "\n")
    (outside / "module.py").write_text("VALUE = 'outside'\n")
    (outside / "folder" / "inner.txt").write_text("inner\n")
    (run.ws / "app.py").write_text("print('hello')\n")
    found = World(run, outside)
    found.snapshot()
    return found


def shell_executor(world: World, registry: SessionRegistry, policy: str, *, network: bool = False,
                   approver=always_approve, approvals: ApprovalPolicy | None = None, extra: dict | None = None) -> Executor:
    """Workspace, file tools and the operator-enabled shell, as a run with shell tools on has them."""
    settings = ShellSettings(policy=policy, session_network=network)
    shell = ShellService(world.ws, run_id="sec", enabled=True, home=world.run.home, registry=registry, settings=settings)
    services = {"workspace": Workspace(world.ws), "shell": shell, **(extra or {})}
    return Executor(default_catalog(), ToolContext(services=services), policy=ExecutionPolicy.allowing(["read", "edit", "shell"]),
                    approvals=approvals or ApprovalPolicy.without_approval_for("shell"), approver=approver)


def file_executor(root: Path, *, approver=always_approve, observer=None) -> Executor:
    """The default catalog over a workspace only (no shell), edits allowed by an always-yes host."""
    return Executor(default_catalog(), ToolContext(services={"workspace": Workspace(root)}),
                    policy=ExecutionPolicy.allowing(["read", "edit"]), approver=approver, observer=observer)


def call(executor: Executor, name: str, **arguments: Any) -> ToolResult:
    return executor.execute_sync(ToolCall("sec-1", name, arguments))


def sh(executor: Executor, command: str, timeout: float = 30) -> ToolResult:
    return call(executor, "run_command", command=command, timeout=timeout)


def attack(executor: Executor, command: str, policy: str) -> ToolResult:
    """Run an escape attempt; assert it started in ``policy``'s sandbox, ran, and failed there.

    ``not result.ok`` alone would also pass for a shell that never started (or a refusal
    before the sandbox): the command first prints a fresh mark, so a refused attack is one
    that ran, in the named tier, and exited non-zero on its own.
    """
    mark = token()
    result = sh(executor, f"echo {mark}; {command}")
    assert not result.ok, f"{command!r} succeeded in the {policy} sandbox: {output(result)}"
    assert result.error is not None and result.error.code == "execution_failed", (command, result.observation)
    assert result.data["tier"] == policy and not result.data["timed_out"], (command, result.data)
    assert mark in result.data["stdout"], f"{command!r} never ran: {output(result)}"
    assert isinstance(result.data["exit_code"], int) and result.data["exit_code"] != 0, (command, result.data)
    return result


def output(result: ToolResult) -> str:
    """Everything a command printed, as the run records it (success or not)."""
    data = result.data
    return "\n".join(str(data.get(k, "")) for k in ("stdout", "stderr")) + "\n" + result.observation

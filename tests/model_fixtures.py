"""Helpers shared by the model and generation tests (real BESSER, no fakes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kernel_ext.boundary import ApprovalPolicy, ExecutionPolicy, Executor, ToolCall, always_approve
from kernel_ext.tools.base import ToolContext
from kernel_ext.tools.registry import default_catalog


def executor_for(services: dict, *, allow=("generate",), approver=always_approve, observer=None, approvals=None) -> Executor:
    return Executor(
        default_catalog(),
        ToolContext(services=services),
        policy=ExecutionPolicy.allowing(allow),
        approvals=approvals or ApprovalPolicy(),
        approver=approver,
        observer=observer,
    )


def call(executor: Executor, name: str, arguments: dict | str | None = None):
    return executor.execute_sync(ToolCall("t-1", name, arguments or {}))


def cli(*args: str, cwd=None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernel_ext", *args], capture_output=True, text=True, timeout=timeout, cwd=cwd)


def write_python_model(model, path: Path) -> Path:
    """BESSER's own Python form of ``model`` (``domain_model_to_code``)."""
    from besser.utilities.buml_code_builder import domain_model_to_code

    domain_model_to_code(model, str(path))
    return path


def tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def minimal_gui_model(name: str = "LibraryApp"):
    """The smallest GUI model BESSER's React and web-app generators accept: one empty screen."""
    from besser.BUML.metamodel.gui import GUIModel, Module, Screen

    home = Screen(name="Home", description="home page", view_elements=set(), is_main_page=True)
    return GUIModel(name=name, package="com.example", versionCode="1", versionName="1.0",
                    modules={Module(name="Main", screens={home})}, description="Library app")

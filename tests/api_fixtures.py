"""Helpers for the test_api / validate_app tests: real generated apps, a real sandboxed host.

The Library backend is generated once per test process with F5's ``run_phase1`` (BESSER's
own FastAPI generator) and copied into each test's folder. The hand-written apps live in
``tests/apps/``. Tools are called through the host-owned Executor, as a run would.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

import pytest

from kernel_ext.boundary import (
    ApprovalPolicy,
    ExecutionPolicy,
    Executor,
    ToolCall,
    always_approve,
)
from kernel_ext.sandbox import tiers
from kernel_ext.tools.base import RunState, ToolContext
from kernel_ext.tools.registry import default_catalog
from kernel_ext.workspace import Workspace

APPS = Path(__file__).parent / "apps"


def sandbox_cause() -> str | None:
    """Why the operator's sandbox cannot start here (None when it can)."""
    choice = tiers.choose_tier("auto")
    return None if choice.available else choice.cause


requires_sandbox = pytest.mark.skipif(sandbox_cause() is not None, reason=f"no sandbox tier here: {sandbox_cause()}")


@lru_cache(maxsize=1)
def _generated_library() -> Path:
    from kernel_ext.generation import run_phase1
    from kernel_ext.model.examples import build_library_model

    root = Path(tempfile.mkdtemp(prefix="besser-f6-library-"))
    atexit.register(shutil.rmtree, root, True)
    result = run_phase1(build_library_model(), root, check=False)
    assert result.subdir == "backend" and (root / "backend" / "main_api.py").exists()
    return root


@pytest.fixture(scope="module")
def host():
    """One warm sandboxed app host per test module, closed at its end."""
    from kernel_ext.validation.apphost.host import AppHost

    h = AppHost()
    yield h
    h.close()


def library_workspace(target: Path) -> Path:
    """A fresh copy of the generated Library project (``backend/`` inside) at ``target``."""
    shutil.copytree(_generated_library(), target)
    return target


def app_workspace(name: str, target: Path) -> Path:
    """A copy of ``tests/apps/<name>`` as ``<target>/backend``."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.copytree(APPS / name, target / "backend")
    return target


def executor_for(root: Path, host, *, state: RunState | None = None, services: dict | None = None) -> Executor:
    all_services = {"workspace": Workspace(root), "app_host": host, **(services or {})}
    return Executor(
        default_catalog(),
        ToolContext(services=all_services, state=state or RunState(run_id="f6-test")),
        policy=ExecutionPolicy.allowing(["test"]),
        approvals=ApprovalPolicy.without_approval_for("test"),
        approver=always_approve,
    )


def call(executor: Executor, name: str, arguments: dict):
    return executor.execute_sync(ToolCall("t-1", name, arguments))


def tree_state(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

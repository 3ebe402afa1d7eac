"""``%%test_api``: run a cell's requests against a run's app with the ``test_api`` tool.

The cell body lists requests (JSON or YAML): a list of ``{method, path, json?, headers?,
expected_status?, expected_fields?}`` or ``{"name": ..., "requests": [...]}``. The call goes
through the boundary like any other (the person who wrote the cell is the approver of this one
``test`` call) and the report renders as a ``RequestReport``.
"""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from widgets.report import RequestReport


def parse_cell(text: str) -> dict[str, Any]:
    """The scenario from a cell body; ValueError with a reason when it is not one."""
    if not text.strip():
        raise ValueError("the cell is empty: list the requests, e.g. [{\"method\": \"GET\", \"path\": \"/books\"}]")
    try:
        data = json.loads(text)
    except ValueError:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"the cell is neither JSON nor YAML: {exc}") from None
    if isinstance(data, list):
        data = {"requests": data}
    if not isinstance(data, dict) or not isinstance(data.get("requests"), list) or not data["requests"]:
        raise ValueError("expected a list of requests, or an object with a non-empty 'requests' list")
    if not all(isinstance(r, dict) and r.get("method") and r.get("path") for r in data["requests"]):
        raise ValueError("every request needs at least 'method' and 'path'")
    return data


def run_cell(app_dir: Path, scenario: dict[str, Any]) -> RequestReport:
    """Run ``test_api`` once through the Executor (in a worker thread: the kernel loop keeps going).

    Running the cell is the person's decision, so the test category needs no further card.
    """
    from kernel_ext.boundary import ExecutionPolicy, Executor, ToolCall
    from kernel_ext.boundary.policy import ApprovalPolicy
    from kernel_ext.tools import api_test as module
    from kernel_ext.tools.base import ToolContext
    from kernel_ext.tools.registry import ToolCatalog
    from kernel_ext.workspace import Workspace
    from widgets.report import RequestReport

    executor = Executor(
        ToolCatalog(module.TOOLS),
        ToolContext(services={"workspace": Workspace(app_dir)}),
        policy=ExecutionPolicy.allowing(["test"]),
        approvals=ApprovalPolicy.without_approval_for("test"),
    )
    arguments = {"action": "run", **scenario}
    call = ToolCall("notebook-1", "test_api", arguments)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        result = pool.submit(executor.execute_sync, call).result()
    if not result.ok:
        raise ValueError(f"{result.error_code}: {result.observation}")
    return RequestReport(result.data.get("report", result.data))

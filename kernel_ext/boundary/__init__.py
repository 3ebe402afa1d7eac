"""The host-owned boundary every tool call crosses."""

from kernel_ext.boundary.approval import (
    ApprovalRequest,
    AsyncApprover,
    BoundaryEvent,
    ScriptedApprover,
    Verdict,
    always_approve,
    always_deny,
)
from kernel_ext.boundary.calls import CallIds, ToolCall, ToolError, ToolResult
from kernel_ext.boundary.executor import Executor
from kernel_ext.boundary.policy import Approval, ApprovalPolicy, ExecutionPolicy

__all__ = [
    "Approval",
    "ApprovalPolicy",
    "ApprovalRequest",
    "AsyncApprover",
    "BoundaryEvent",
    "CallIds",
    "ExecutionPolicy",
    "Executor",
    "ScriptedApprover",
    "ToolCall",
    "ToolError",
    "ToolResult",
    "Verdict",
    "always_approve",
    "always_deny",
]

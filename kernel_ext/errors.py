"""The one refusal type every layer raises, and the stable codes it carries.

A refusal is an observation with a named reason, never an exception that kills a run:
lower layers (workspace, sandbox, tools) raise ``ToolFailure``; the boundary turns it
into a failed ``ToolResult``. Codes are stable strings that tests, events and models
rely on; add new ones here so the full list stays readable in one place.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    # boundary: resolving and validating a call
    UNKNOWN_TOOL = "unknown_tool"
    TOOL_NOT_OFFERED = "tool_not_offered"
    INVALID_JSON = "invalid_json"
    MISSING_ARGUMENT = "missing_argument"
    INVALID_ARGUMENT = "invalid_argument"
    # boundary: authorisation
    POLICY_DENIED = "policy_denied"
    APPROVAL_DENIED = "approval_denied"
    STALE_INPUT = "stale_input"
    # workspace fence
    OUTSIDE_WORKSPACE = "outside_workspace"
    SYMLINK_REFUSED = "symlink_refused"
    NOT_REGULAR_FILE = "not_regular_file"
    PROTECTED_PATH = "protected_path"
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    TOO_LARGE = "too_large"
    # tool execution
    EXECUTION_FAILED = "execution_failed"
    TIMEOUT = "timeout"
    INTERNAL_ERROR = "internal_error"


class ToolFailure(Exception):
    """A recoverable, named refusal. ``code`` is stable; ``message`` names the problem."""

    def __init__(self, code: ErrorCode | str, message: str, data: dict[str, Any] | None = None):
        super().__init__(f"{code}: {message}")
        self.code = str(code)
        self.message = message
        self.data = dict(data or {})

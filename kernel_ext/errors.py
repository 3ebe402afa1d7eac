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
    ARGUMENTS_TOO_DEEP = "arguments_too_deep"  # tool arguments nested past safejson.MAX_JSON_DEPTH
    INVALID_JSON = "invalid_json"
    MISSING_ARGUMENT = "missing_argument"
    INVALID_ARGUMENT = "invalid_argument"
    SECRET_IN_ARGUMENTS = "secret_in_arguments"  # a known secret of the run (or a piece of one) in a call
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
    TREE_TOO_LARGE = "tree_too_large"  # a copy, snapshot, checkpoint, digest or archive past its budget (workspace/treebudget.py)
    HARD_LINK_REFUSED = "hard_link_refused"
    FILE_BUSY = "file_busy"
    NOT_TEXT = "not_text"
    # model-supplied regular expressions (kernel_ext.safe_regex: RE2, linear time)
    REGEX_UNSUPPORTED = "regex_unsupported"
    # file tools: read ids, edit gates, anchors, replays
    UNKNOWN_READ_ID = "unknown_read_id"
    READ_ID_SPENT = "read_id_spent"
    UNREAD_RANGE = "unread_range"
    NOT_READ = "not_read"
    NO_CHANGE = "no_change"
    ELISION = "elision"
    NUMBERED_TEXT = "numbered_text"
    SYNTAX_ERROR = "syntax_error"
    BREAKS_IMPORT = "breaks_import"
    NO_MATCH = "no_match"
    AMBIGUOUS_MATCH = "ambiguous_match"
    DUPLICATE_INSERTION = "duplicate_insertion"
    POSSIBLE_REPLAY = "possible_replay"
    CHECKER_UNAVAILABLE = "checker_unavailable"
    # tool execution
    EXECUTION_FAILED = "execution_failed"
    TIMEOUT = "timeout"
    # shell and sandbox (kernel_ext.sandbox, run_command, install_dependencies)
    SHELL_DISABLED = "shell_disabled"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    COMMAND_DENIED = "command_denied"
    PROGRAM_NOT_ALLOWED = "program_not_allowed"
    # shell tools (sh_run, sh_detail, sh_logs, sh_kill, checkpoints: kernel_ext.sandbox)
    UNKNOWN_COMMAND_ID = "unknown_command_id"
    CURSOR_OUT_OF_RANGE = "cursor_out_of_range"
    BACKGROUND_INCOMPATIBLE = "background_incompatible"
    BACKGROUND_LIMIT = "background_limit"
    EXPECTATION_FAILED = "expectation_failed"
    SANDBOX_OPTION_UNSUPPORTED = "sandbox_option_unsupported"
    INVALID_LABEL = "invalid_label"
    UNKNOWN_CHECKPOINT = "unknown_checkpoint"
    CHECKPOINT_ORIGIN_MISMATCH = "checkpoint_origin_mismatch"
    INTERNAL_ERROR = "internal_error"
    # LLM providers (kernel_ext.providers); TIMEOUT above is shared
    INVALID_KEY = "invalid_key"
    UPSTREAM_LLM = "upstream_llm"
    BAD_REQUEST = "bad_request"
    CANCELLED = "cancelled"
    COST_CAP = "cost_cap"
    COST_UNPRICED = "cost_unpriced"  # a cost cap and a configured model with no known price (meter.unpriced_cap)
    MODEL_MISMATCH = "model_mismatch"  # the endpoint named another model than the configured one (noted, never priced)
    USAGE_REFUSED = "usage_refused"  # an endpoint's token counts no meter can take (counted as an estimate)
    NOT_CONFIGURED = "not_configured"
    REPLAY_DIVERGED = "replay_diverged"
    REPLY_TOO_LARGE = "reply_too_large"  # a reply past a size limit (providers/bounds.py)
    BUDGET = "budget"  # the run's wall time or token budget spent while a call was under way
    BUDGET_EXHAUSTED = "budget_exhausted"  # the endpoint (a gateway's key, an account's quota) refuses: no money left
    CONTEXT_TOO_LONG = "context_too_long"  # the endpoint says the conversation is past the model's window (providers/overflow.py)
    # models and generators
    NOT_A_MODEL = "not_a_model"
    INVALID_MODEL = "invalid_model"
    EMPTY_MODEL = "empty_model"
    UNSAFE_MODEL_SOURCE = "unsafe_model_source"
    INVALID_NAME = "invalid_name"
    GENERATOR_UNAVAILABLE = "generator_unavailable"
    GENERATION_FAILED = "generation_failed"
    # test_api and validate_app (kernel_ext.validation, kernel_ext.tools.api_test)
    HEADER_REFUSED = "header_refused"
    EXTERNAL_URL = "external_url"
    CORRECTION_REQUIRED = "correction_required"
    TOO_MANY_SCENARIOS = "too_many_scenarios"
    RUNTIME_CHECKS_DISABLED = "runtime_checks_disabled"
    # the generated app's own environment (kernel_ext.appenv)
    REQUIREMENTS_UNMET = "requirements_unmet"
    REQUIREMENTS_INVALID = "requirements_invalid"  # a requirements.txt line the reader cannot parse or evaluate
    APP_ENV_CACHE_UNSAFE = "app_env_cache_unsafe"  # the overlay cache is a link, not the server user's, or writable by others
    PHASE1_CACHE_UNSAFE = "phase1_cache_unsafe"  # Phase 1's output cache is a link, another user's, or writable by others
    # task list (kernel_ext.tools.task_list): listed so every code a tool raises is named (fuzzing found these missing)
    UNKNOWN_TASK = "unknown_task"
    TASK_REQUIRED = "task_required"
    EVIDENCE_REQUIRED = "evidence_required"
    EVIDENCE_NOT_READ = "evidence_not_read"
    EVIDENCE_NOT_WRITTEN = "evidence_not_written"
    EVIDENCE_NOT_FOUND = "evidence_not_found"
    EVIDENCE_NOT_CODE = "evidence_not_code"
    EVIDENCE_UNTOUCHED = "evidence_untouched"  # the quote is in the file, but on lines this run did not write


class ToolFailure(Exception):
    """A recoverable, named refusal. ``code`` is stable; ``message`` names the problem."""

    def __init__(self, code: ErrorCode | str, message: str, data: dict[str, Any] | None = None):
        super().__init__(f"{code}: {message}")
        self.code = str(code)
        self.message = message
        self.data = dict(data or {})


class ConfigurationError(ValueError):
    """An operator setting that cannot be used (a bad ``BESSER_*`` value or traitlet), named at start:
    the CLI and the magics print its one line, never a traceback."""

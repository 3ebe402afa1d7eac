"""What a caller may ask of ``sh_run``: one pydantic model for the tool and the Python API alike.

The tool's arguments model inherits these fields, so the schema a model sees, the checks the
host runs and the keywords a notebook passes to ``Shell.run`` are the same object.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.shellplan.words import MAX_COMMAND_CHARS

MAX_TIMEOUT_MS = 600_000
DEFAULT_TIMEOUT_MS = 120_000
# Options that only make sense once a command has finished: refused with ``background``.
NEEDS_FINISH = ("expect", "trace", "retries", "retry_on_exit", "backoff_ms", "full", "timeout_ms")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SandboxOptions(_Strict):
    network: bool | None = Field(default=None,
                                 description="false: no network at all for this command (default: the server's setting)")
    writable: list[str] = Field(
        default_factory=list,
        description="extra writable folders inside the workspace; with any sandbox option, writes are confined to cwd plus these",
    )
    deny_read: list[str] = Field(default_factory=list,
                                 description="paths (relative to cwd, or absolute) the command may not read")
    protect_secrets: bool = Field(default=False,
                                  description="hide secret files in the tree (.env, keys, .netrc, ...) from the command")


class Expect(_Strict):
    exit: int | None = Field(default=None, description="the exit code that counts as success (default 0)")
    stdout_contains: str | list[str] | None = Field(default=None, description="text(s) stdout must contain")
    stdout_matches: str | None = Field(default=None, description="a regular expression stdout must match (multi-line)")
    stderr_empty: bool | None = Field(default=None, description="true: stderr must be empty")
    file_exists: str | list[str] | None = Field(default=None, description="path(s), relative to cwd, that must exist afterwards")
    file_absent: str | list[str] | None = Field(default=None,
                                                description="path(s), relative to cwd, that must not exist afterwards")
    changed: bool | list[str] | None = Field(
        default=None,
        description="true: some file changed; false: none did; a list: each of these paths (relative to cwd) changed"
    )
    max_ms: int | None = Field(default=None, gt=0, description="the command must finish within this many milliseconds")

    @field_validator("stdout_matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            stdout_regex(value)  # a ValueError naming the reason when RE2 cannot take it
        return value


def stdout_regex(pattern: str):
    """``stdout_matches`` compiled on the linear-time engine (multi-line); ValueError when refused."""
    from kernel_ext.errors import ToolFailure
    from kernel_ext.safe_regex import compile_untrusted

    try:
        return compile_untrusted(pattern, what="stdout_matches", multiline=True)
    except ToolFailure as exc:
        raise ValueError(f"{exc.code}: {exc.message}") from None


class ShRunRequest(_Strict):
    command: str = Field(max_length=MAX_COMMAND_CHARS, description="the shell command line (bash), run in a fresh sandbox")
    cwd: str | None = Field(default=None, description="working folder inside the workspace (default: its root)")
    full: bool = Field(default=False, description="return stdout/stderr uncondensed (bounded) instead of head and tail")
    timeout_ms: int | None = Field(
        default=None, gt=0, le=MAX_TIMEOUT_MS, description="milliseconds before the whole process tree is killed (default 120000)"
    )
    expect: Expect | None = Field(default=None, description="post-conditions checked in the same call")
    retries: int = Field(default=0, ge=0, le=10, description="run again up to this many times while the attempt fails")
    retry_on_exit: list[int] | None = Field(default=None, description="retry only on these exit codes (default: any failure)")
    backoff_ms: int = Field(default=250, ge=0, le=60_000, description="wait before a retry, doubled each time")
    sandbox: bool | SandboxOptions | None = Field(
        default=None, description="true or options: confine writes to cwd (+ writable), optionally no network, hidden paths"
    )
    scrub_env: bool = Field(default=True, description="always on: the environment is an allowlist without secrets")
    no_store: bool = Field(default=False, description="keep this record in memory only (for output that may hold secrets)")
    background: bool = Field(default=False,
                             description="start and return at once (servers, watchers); poll with sh_logs, stop with sh_kill")
    trace: bool = Field(default=False, description="trace files and processes with strace (when installed)")

    def timeout_s(self) -> float:
        return (self.timeout_ms or DEFAULT_TIMEOUT_MS) / 1000

    def finish_options_given(self) -> list[str]:
        """Options set to a non-default value that need the command to finish."""
        defaults = type(self).model_fields
        return [
            name
            for name in NEEDS_FINISH
            if name in self.model_fields_set and getattr(self, name) != defaults[name].get_default(call_default_factory=True)
        ]


def parse_sh_request(command: str, options: dict[str, Any]) -> ShRunRequest:
    """An ``sh_run`` request from the tool's arguments; a bad option is one named ``invalid_argument``."""
    try:
        return ShRunRequest.model_validate({"command": command, **options})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, problems) from None

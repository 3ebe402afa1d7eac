"""Regular expressions a model or a tool argument supplies, on a linear-time engine.

Python's ``re`` backtracks: ``^(\\w|\\w)*!`` on one 40-character line never returns, and it holds
the GIL while it tries, so every thread of the process (the Jupyter server's event loop
included) stops with it. Every pattern that comes from outside the host's own source is
therefore compiled here, on RE2 (``google-re2``), whose matching time is linear in the text.

RE2 has no backreferences, lookaround, possessive or atomic groups, ``\\Z`` or verbose mode.
A pattern that needs one of them is refused with ``ErrorCode.REGEX_UNSUPPORTED`` and a reason
the model can act on; a pattern that is not a regular expression at all is
``INVALID_ARGUMENT``; an over-long one is ``TOO_LARGE``. ``re2`` is imported on first use, so
``%load_ext`` stays light.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from kernel_ext.errors import ErrorCode, ToolFailure

MAX_PATTERN_CHARS = 2000
MAX_PROGRAM_BYTES = 8 << 20  # RE2's memory budget for one compiled pattern

__all__ = ["MAX_PATTERN_CHARS", "Matcher", "compile_untrusted"]


class Matcher(Protocol):
    """What callers use of a compiled pattern (RE2's ``_Regexp``)."""

    pattern: Any

    def search(self, text: str | bytes) -> Any: ...  # RE2 reads both; a str pattern on UTF-8 bytes gives the same answer


def compile_untrusted(pattern: str, *, what: str = "pattern", multiline: bool = False, dotall: bool = False) -> Matcher:
    """``pattern`` compiled on RE2, or a ``ToolFailure`` naming why it cannot be.

    ``what`` names the argument in messages (``pattern``, ``match``, ``stdout_matches``);
    ``multiline`` and ``dotall`` mean what ``re.MULTILINE`` and ``re.DOTALL`` mean.
    """
    if not isinstance(pattern, str):
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{what} must be a string")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolFailure(
            ErrorCode.TOO_LARGE, f"{what} is {len(pattern)} characters; at most {MAX_PATTERN_CHARS} are accepted",
            {"limit": MAX_PATTERN_CHARS},
        )
    import re2  # lazy: only a run that searches pays for it

    options = re2.Options()
    options.max_mem = MAX_PROGRAM_BYTES
    options.log_errors = False
    options.dot_nl = dotall
    flags = "(?m)" if multiline else ""
    try:
        return re2.compile(flags + pattern, options)
    except re2.error as exc:
        reason = _reason(exc)
    raise _refusal(pattern, what, reason)


def _reason(exc: Exception) -> str:
    text = exc.args[0] if exc.args else str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return str(text)


def _refusal(pattern: str, what: str, reason: str) -> ToolFailure:
    """INVALID_ARGUMENT when Python would reject it too, else the feature RE2 lacks."""
    try:
        re.compile(pattern)  # compiling is bounded (the length cap above); matching never happens here
    except (re.error, RecursionError, OverflowError, MemoryError) as exc:
        return ToolFailure(ErrorCode.INVALID_ARGUMENT, f"{what} is not a valid regular expression: {exc}")
    if "pattern too large" in reason:
        return ToolFailure(ErrorCode.TOO_LARGE, f"{what} compiles to a program over RE2's memory budget; use a simpler pattern")
    return ToolFailure(
        ErrorCode.REGEX_UNSUPPORTED,
        f"{what} needs a feature the linear-time regex engine (RE2) does not have ({reason}): "
        "backreferences, lookahead/lookbehind, possessive or atomic groups, \\Z and verbose mode are not supported; "
        "rewrite it without them (\\z for the end of text)",
        {"engine": "re2", "reason": reason},
    )

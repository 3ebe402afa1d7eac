"""Checks on a command's text before it reaches the sandbox: a mistake-stopper, not a boundary.

Two checks, both cheap and both easy to get around on purpose:

- a denylist of obvious catastrophes (``sudo``, ``rm -rf /``, piping a download into a shell,
  fork bombs, reading ``~/.ssh`` or ``~/.aws``);
- an optional program allowlist. The command is split as a shell would split it (quotes
  respected, ``;``/``|``/``&`` separated); a broken or empty command is refused, and only the
  **first word** (after leading ``NAME=value`` assignments) is compared with the list.
  ``pytest; python evil.py`` passes a list holding ``pytest``.

What contains a command is the sandbox (namespaces or Landlock), never this module.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Iterable

from kernel_ext.errors import ErrorCode, ToolFailure

MAX_COMMAND_CHARS = 100_000

_HOME = r"(?:~|\$HOME|\$\{HOME\}|/root|/home/[^/\s]+)"
DENY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("privilege escalation (sudo/su/doas)", re.compile(r"(?:^|[\s;&|(`$])(?:sudo|doas|su)(?:\s|$)")),
    (
        "recursive delete of / or the home directory",
        re.compile(
            r"(?:^|[\s;&|(])rm\s+(?:-[a-zA-Z-]+\s+)*(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\s+(?:-[a-zA-Z-]+\s+)*"
            r"(?:--no-preserve-root\s+)?[\"']?(?:/|/\*|~|~/|~/\*|\$HOME/?|\$\{HOME\}/?|/\.)[\"']?(?:\s|$|;|&|\|)"
        ),
    ),
    ("a download piped into a shell", re.compile(r"\b(?:curl|wget|fetch)\b[^|;&]*\|\s*(?:sudo\s+)?(?:ba|z|da|k|fi)?sh\b")),
    ("a fork bomb", re.compile(r"(\w+|:)\s*\(\s*\)\s*\{\s*\1\s*\|\s*\1\s*&\s*\}")),
    ("reading SSH or cloud credentials", re.compile(_HOME + r"/\.(?:ssh|aws|gnupg|azure|kube|docker/config\.json)(?:/|\b)")),
    ("formatting or overwriting a disk", re.compile(r"\bmkfs(?:\.\w+)?\b|\bdd\b[^;&|]*\bof=/dev/(?:sd|hd|vd|nvme|xvd|mmcblk)")),
)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def check_command(command: str, allowed_programs: Iterable[str] | None = None) -> list[str]:
    """The command's words if it may be tried; ``ToolFailure`` naming why not otherwise."""
    if not isinstance(command, str) or not command.strip():
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "the command is empty")
    if len(command) > MAX_COMMAND_CHARS:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"the command is longer than {MAX_COMMAND_CHARS} characters")
    if "\x00" in command:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "the command contains a NUL byte")
    words = split_command(command)
    for reason, pattern in DENY_PATTERNS:
        if pattern.search(command):
            raise ToolFailure(
                ErrorCode.COMMAND_DENIED,
                f"refused before running: {reason}. This denylist only stops obvious mistakes; the sandbox confines the rest",
            )
    if allowed_programs is not None:
        allowed = frozenset(allowed_programs)
        program = first_program(words)
        if program is None or (program not in allowed and os.path.basename(program) not in allowed):
            shown = ", ".join(sorted(allowed)) or "none"
            raise ToolFailure(
                ErrorCode.PROGRAM_NOT_ALLOWED,
                f"{program or words[0]!r} is not on this server's program list ({shown}); only the first word is checked",
            )
    return words


def split_command(command: str) -> list[str]:
    """Split like a POSIX shell (quotes respected; ``; | & ( )`` become their own words)."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError as exc:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"the command cannot be parsed as a shell would: {exc}") from None
    if not words:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "the command is empty")
    return words


def first_program(words: list[str]) -> str | None:
    """The first word that is not a ``NAME=value`` assignment (None if there is none)."""
    for word in words:
        if _ASSIGNMENT.match(word):
            continue
        return word
    return None

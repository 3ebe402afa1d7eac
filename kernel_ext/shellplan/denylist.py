"""Checks on a command's text before it reaches the sandbox: a mistake-stopper, not a boundary.

Two checks, both cheap and both easy to get around on purpose:

- a denylist of obvious catastrophes (``sudo``, ``rm -rf /``, fork bombs, reading ``~/.ssh`` or
  ``~/.aws``, and whatever ``sh_plan`` rates as a download fed to a shell or interpreter: by a pipe,
  process or command substitution, here-string, or a downloaded file run later in the command);
- an optional program allowlist. The command is split as a shell would split it (quotes
  respected, ``;``/``|``/``&`` separated); a broken or empty command is refused, and only the
  **first word** (after leading ``NAME=value`` assignments) is compared with the list.
  ``pytest; python evil.py`` passes a list holding ``pytest``.

What contains a command is the sandbox (namespaces or Landlock), never this module.

The command is model-supplied and may be as long as ``MAX_COMMAND_CHARS``: every step here is
linear in its length (the split is ``words``, the denylist runs on RE2), so no command
stalls the server, whose event loop and GIL this check shares.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from kernel_ext.errors import ErrorCode, ToolFailure
from kernel_ext.shellplan.plan import classify
from kernel_ext.shellplan.scan import Scan, fork_bomb
from kernel_ext.shellplan.verdict import RUNS_DOWNLOAD
from kernel_ext.shellplan.words import MAX_COMMAND_CHARS, SplitError, split_words

__all__ = ["DENY_PATTERNS", "MAX_COMMAND_CHARS", "check_command", "first_program", "split_command"]

_HOME = r"(?:~|\$HOME|\$\{HOME\}|/root|/home/[^/\s]+)"
# (reason, pattern searched on RE2: ``scan``); the fork bomb needs a backreference, so it is ``fork_bomb``
FORK_BOMB = "a fork bomb"
# judged by ``sh_plan`` itself: whatever the plan rates as a download fed to a shell or interpreter
DOWNLOAD_RUN = "a download fed to a shell or interpreter (pipe, substitution, here-string, or a downloaded file run)"
DENY_PATTERNS: tuple[tuple[str, Scan | None], ...] = (
    ("privilege escalation (sudo/su/doas)", Scan(r"(?:^|[\s;&|(`$])(?:sudo|doas|su)(?:\s|$)")),
    (
        "recursive delete of / or the home directory",
        Scan(
            r"(?:^|[\s;&|(])rm\s+(?:-[a-zA-Z-]+\s+)*(?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\s+(?:-[a-zA-Z-]+\s+)*"
            r"(?:--no-preserve-root\s+)?[\"']?(?:/|/\*|~|~/|~/\*|\$HOME/?|\$\{HOME\}/?|/\.)[\"']?(?:\s|$|;|&|\|)"
        ),
    ),
    (DOWNLOAD_RUN, None),
    (FORK_BOMB, None),
    ("reading SSH or cloud credentials", Scan(_HOME + r"/\.(?:ssh|aws|gnupg|azure|kube|docker/config\.json)(?:/|\b)")),
    ("formatting or overwriting a disk", Scan(r"\bmkfs(?:\.\w+)?\b|\bdd\b[^;&|]*\bof=/dev/(?:sd|hd|vd|nvme|xvd|mmcblk)")),
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
    reason = _denied(command)
    if reason is not None:
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
    try:
        words = split_words(command)
    except SplitError as exc:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, f"the command cannot be parsed as a shell would: {exc}") from None
    if not words:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENT, "the command is empty")
    return words


def _denied(command: str) -> str | None:
    """The reason of the first denylist entry ``command`` matches (None if none does)."""
    for reason, scan in DENY_PATTERNS:
        if scan is not None and scan.search(command):
            return reason
        if (reason == FORK_BOMB and fork_bomb(command)) or (reason == DOWNLOAD_RUN and _runs_download(command)):
            return reason
    return None


def _runs_download(command: str) -> bool:
    """Whether ``sh_plan`` finds a download fed to a shell or interpreter: the plan's own answer, so
    the wrappers, interpreters and downloads it knows are the ones refused here."""
    return any(note.startswith(RUNS_DOWNLOAD) for note in classify(command).notes)


def first_program(words: list[str]) -> str | None:
    """The first word that is not a ``NAME=value`` assignment (None if there is none)."""
    for word in words:
        if _ASSIGNMENT.match(word):
            continue
        return word
    return None

"""What a ``sed`` script may do besides printing: run a command (``e``) or write a file (``w``).

GNU sed's ``e`` command and ``s///e`` flag run shell commands; ``w FILE``/``W FILE`` and the
``s///w FILE`` flag create (truncate) a file even without ``-i``; ``-f FILE`` runs a script this
reader never sees; ``--sandbox`` refuses all of these. ``sed -n 'w main.py' /dev/null`` empties
main.py and ``sed '1e rm -rf src' f`` deletes, so such a script is no read. The reader walks the
script once (linear in its length: a command's text is at most ``MAX_COMMAND_CHARS``) and, when
in doubt (a command letter it does not know), says so: over-flagging is the rule here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["SedEffects", "sed_effects"]

_NO_ARGUMENT = frozenset("=dDgGhHlnNpPxzFqQ")
_LABELLED = frozenset("bBtT:")  # a label to the end of the command
_TEXT = frozenset("aicrRv#")  # text, a file read or a comment: to the end of the line
_ADDRESS = frozenset("0123456789$,~+! \t")
_COMMAND_END = re.compile(r"[;\n]")


@dataclass(frozen=True)
class SedEffects:
    """``runs``: a command runs (``e``); ``writes``: the files it writes; ``unsure``: why the reader
    could not tell (a script file, a command letter it does not know)."""

    runs: bool = False
    writes: tuple[str, ...] = ()
    unsure: str = ""


def sed_effects(args: Sequence[str]) -> SedEffects:
    """What ``sed ARGS`` may do besides reading and printing (in place editing is not counted here)."""
    scripts: list[str] = []
    positional: list[str] = []
    script_file = sandbox = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            positional += args[i + 1 :]
            break
        if arg == "--sandbox":
            sandbox = True
        elif arg.startswith("--expression="):
            scripts.append(arg.split("=", 1)[1])
        elif arg == "--expression":
            scripts += args[i + 1 : i + 2]
            i += 1
        elif arg == "--file" or arg.startswith("--file="):
            script_file = True
        elif arg == "--line-length":
            i += 1
        elif arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            for k, flag in enumerate(arg[1:], start=1):
                attached = arg[k + 1 :]
                if flag in "ef":
                    value = attached if attached else (args[i + 1] if i + 1 < len(args) else "")
                    i += 0 if attached else 1
                    if flag == "e":
                        scripts.append(value)
                    else:
                        script_file = True
                    break
                if flag in "il":  # an attached suffix or length ends the cluster; -l N takes the next word
                    i += 1 if flag == "l" and not attached else 0
                    break
        elif not arg.startswith("--"):
            positional.append(arg)
        i += 1
    if sandbox:
        return SedEffects()
    if not scripts and not script_file and positional:
        scripts.append(positional[0])
    found = [_read(script) for script in scripts]
    runs = any(f.runs for f in found)
    writes = tuple(path for f in found for path in f.writes)
    unsure = "sed -f runs a script file this plan cannot read" if script_file else next((f.unsure for f in found if f.unsure), "")
    return SedEffects(runs, writes, unsure)


def _read(script: str) -> SedEffects:
    runs = False
    writes: list[str] = []
    n = len(script)
    i = 0
    while i < n:
        c = script[i]
        if c in _ADDRESS or c in ";\n{}":
            i += 1
            continue
        if c in "/\\":  # a regex address: /re/ or \cREc
            if c == "\\":
                i += 1
                if i >= n:
                    break
            i = _past_delimited(script, i, 1)
            while i < n and script[i] in "IM":
                i += 1
            continue
        if c in "wWe":
            argument, i = _to_line_end(script, i + 1)
            if c == "e":
                runs = True
            else:
                writes.append(argument.strip())
            continue
        if c in "sy":
            if i + 1 >= n or script[i + 1] in "\n\\":
                return SedEffects(runs, tuple(writes), f"sed: a {c} command this plan cannot read")
            i = _past_delimited(script, i + 1, 2)
            if c == "s":
                while i < n and script[i] in "gpiImMe0123456789":
                    runs = runs or script[i] == "e"
                    i += 1
                if i < n and script[i] == "w":
                    argument, i = _to_line_end(script, i + 1)
                    writes.append(argument.strip())
            continue
        if c in _NO_ARGUMENT:
            i += 1
            continue
        if c in _LABELLED:
            i = _to_command_end(script, i + 1)
            continue
        if c in _TEXT:
            i = _to_line_end(script, i + 1)[1]
            continue
        return SedEffects(runs, tuple(writes), f"sed: the command {c!r} is one this plan does not know")
    return SedEffects(runs, tuple(writes))


def _past_delimited(script: str, at: int, fields: int) -> int:
    """The index after ``fields`` fields delimited by ``script[at]`` (backslash escapes skipped)."""
    delimiter = script[at]
    i = at + 1
    n = len(script)
    while i < n and fields:
        if script[i] == "\\":
            i += 2
            continue
        if script[i] == delimiter:
            fields -= 1
        i += 1
    return i


def _to_line_end(script: str, at: int) -> tuple[str, int]:
    end = script.find("\n", at)
    end = len(script) if end < 0 else end
    return script[at:end], end


def _to_command_end(script: str, at: int) -> int:
    found = _COMMAND_END.search(script, at)  # one search, not a find per separator (":a;" * n stays linear)
    return found.start() if found else len(script)

"""The wire between the host and a session's ``bash``: scripts, command lines, markers, FIFOs.

- The host writes the command text to ``<ctl>/N.cmd`` and sends one line; the shell sources
  that file at top level (never in a function, so ``declare`` and ``source`` behave as
  typed), stdin from ``/dev/null``, output into the FIFOs ``<ctl>/N.o`` and ``<ctl>/N.e``.
- After it, the shell saves its exported variables to ``<ctl>/env`` and prints
  ``D N status cwd`` + NUL on its own stdout, the control channel.
- ``USR1`` makes the shell abandon the running command (``return`` from the sourced file,
  one level per signal). ``exit`` ends the shell; its EXIT trap saves variables and the
  directory (``<ctl>/cwd``). ``R`` announces a ready shell.
- A FIFO outlives its command when a background process keeps it open; the host then hands
  its end to the drainer, which discards that late output instead of mixing it into the
  next result (and instead of killing the process with SIGPIPE).
"""

from __future__ import annotations

import contextlib
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from kernel_ext.sandbox.supervisor import drainer

_INIT = r"""readonly __b_path="$PATH"
set -m
set -o physical
__b_reset() {{ POSIXLY_CORRECT=1; \
unset -f builtin command compgen declare enable type shopt unalias printf export local; local IFS=$' \t\n' __b_f; \
for __b_f in $(compgen -A function); do case $__b_f in __b_done|__b_exit|__b_reset) ;; *) unset -f "$__b_f";; esac; done; \
unset POSIXLY_CORRECT; unalias -a; shopt -u expand_aliases; \
{{ [[ $PATH == "$__b_path" ]] && builtin printf 'same\n' || builtin printf '%s\n' "$PATH"; compgen -A builtin compgen; \
compgen -A function; compgen -A alias; compgen -A disabled; shopt -q expand_aliases && builtin printf 'expand_aliases\n'; \
}} > {ctl}/state 2>/dev/null; }}
__b_done() {{ __b_run=; __b_reset; builtin export -p > {ctl}/env 2>/dev/null; builtin printf 'D %s %s %s\0' "$1" "$2" "$PWD"; }}
__b_exit() {{ builtin export -p > {ctl}/env 2>/dev/null; builtin printf '%s' "$PWD" > {ctl}/cwd; }}
readonly -f __b_reset __b_done __b_exit
trap __b_exit EXIT
trap '[ -n "$__b_run" ] && [ "${{FUNCNAME[0]:-}}" != __b_done ] && return 130' USR1
if [ -f {ctl}/env ]; then . {ctl}/env >/dev/null 2>&1; fi
__b_reset
builtin cd -- {cwd} 2>/dev/null || builtin cd -- {ws}
builtin printf 'R 0 %s\0' "$PWD"
"""
_OWN = frozenset({"compgen", "__b_done", "__b_exit", "__b_reset"})  # what a clean shell lists after a reset


def init_script(ctl: Path, cwd: Path, workspace: Path) -> str:
    """Job control, physical paths, the marker and trap functions, restored state, ``R``."""
    q = shlex.quote
    return _INIT.format(ctl=q(str(ctl)), cwd=q(str(cwd)), ws=q(str(workspace)))


def shell_caveat(ctl: Path, out: list[str] | None = None) -> str:
    """What the shell's last reset left that changes what a command name runs ("" when nothing).

    Before every command (and after a restart) the session drops the aliases and functions earlier
    commands defined; a changed ``PATH`` is kept, as in a terminal, and is named here, as are
    definitions the reset could not drop (a ``readonly -f`` function, a disabled builtin); also
    appended to ``out`` (a result's notes) when there is one.
    """
    try:
        lines = (ctl / "state").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "the shell did not report its state: what a command name runs is not known"
    notes = []
    if not lines or lines[0] != "same":
        notes.append(f"an earlier command changed PATH to {(lines or [''])[0][:300]!r}: a command name may run another program")
    left = sorted(set(lines[1:]) - _OWN - {""})
    if "compgen" not in lines[1:] or left:
        notes.append(f"definitions an earlier command made could not be dropped ({', '.join(left[:8]) or 'builtins disabled'}): "
                     "a command name may run something else")
    said = "; ".join(notes)
    if said and out is not None:
        out.append(said)
    return said


def command_line(n: int, ctl: Path, wd: Path | None, preserve: bool) -> str:
    """The line that runs command ``n``; ``preserve`` uses a subshell (directory and variables stay)."""
    q = shlex.quote
    cmd, out, err = q(f"{ctl}/{n}.cmd"), q(f"{ctl}/{n}.o"), q(f"{ctl}/{n}.e")
    enter = f"builtin cd -- {q(str(wd))} && " if wd is not None else ""
    if preserve:
        return f"__b_run=1; ( {enter}. {cmd} ) >{out} 2>{err} </dev/null; __b_done {n} $?\n"
    if wd is None:
        return f"__b_run=1; {{ . {cmd}; }} >{out} 2>{err} </dev/null; __b_done {n} $?\n"
    return (
        f"__b_back=$PWD; __b_run=1; {{ {enter}. {cmd}; }} >{out} 2>{err} </dev/null; "
        f'__b_rc=$?; builtin cd -- "$__b_back"; __b_done {n} $__b_rc\n'
    )


def oneoff_script(ctl: Path, start: Path, cmd: Path, preserve: bool) -> str:
    """The same command semantics for a one-off ``bash -c``: restore, run, save, exit with its status."""
    q = shlex.quote
    save = "" if preserve else f"; builtin export -p > {q(str(ctl))}/env; builtin printf '%s' \"$PWD\" > {q(str(ctl))}/cwd"
    return (
        f"set -o physical; if [ -f {q(str(ctl))}/env ]; then . {q(str(ctl))}/env >/dev/null 2>&1; fi; "
        f"builtin cd -- {q(str(start))} || exit 1; . {q(str(cmd))} </dev/null; __b_rc=$?{save}; exit $__b_rc"
    )


@dataclass(frozen=True)
class Marker:
    kind: str  # "D" (command done) or "R" (ready)
    status: int
    cwd: str


class ControlChannel:
    """Parses the NUL-terminated markers the shell prints on its stdout."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def clear(self) -> None:
        self._buffer.clear()

    def feed(self, data: bytes, found: list[Marker], expect: str) -> None:
        """Append ``data``; the first marker matching ``expect`` (``"R"`` or a command number) lands in ``found``."""
        self._buffer += data
        while b"\0" in self._buffer:
            raw, _, rest = bytes(self._buffer).partition(b"\0")
            self._buffer[:] = rest
            kind, _, tail = raw.decode("utf-8", "replace").partition(" ")
            number = ""
            if kind == "D":
                number, _, tail = tail.partition(" ")
            status, _, cwd = tail.partition(" ")
            wanted = (kind == "R" and expect == "R") or (kind == "D" and number == expect)
            if wanted and not found:
                found.append(Marker(kind, int(status) if status.lstrip("-").isdigit() else -1, cwd))


class CommandFiles:
    """Command ``n``'s text file and output FIFOs, opened by the host before the shell writes."""

    def __init__(self, ctl: Path, n: int, command: str):
        self.paths = (ctl / f"{n}.cmd", ctl / f"{n}.o", ctl / f"{n}.e")
        self.paths[0].write_text(command + "\n", encoding="utf-8")
        os.mkfifo(self.paths[1], 0o600)
        os.mkfifo(self.paths[2], 0o600)
        # Read-write: the shell's open for writing never blocks, and no early EOF is seen.
        self.out_fd = os.open(self.paths[1], os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self.err_fd = os.open(self.paths[2], os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)

    def retire(self) -> None:
        """After the command: give late writers to the drainer, close the rest, remove the files."""
        _retire(self.paths[1], self.out_fd)
        _retire(self.paths[2], self.err_fd)
        for path in self.paths:
            unlink_quietly(path)


def _retire(path: Path, rdwr_fd: int) -> None:
    try:
        ro = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        os.close(rdwr_fd)
        return
    os.close(rdwr_fd)  # now only other writers (background processes) keep the FIFO open
    try:
        data = os.read(ro, 1 << 16)
    except BlockingIOError:
        data = b"pending"
    if data:
        drainer().add(ro)
    else:
        os.close(ro)


def read_and_remove(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    unlink_quietly(path)
    return text


def unlink_quietly(path: str | os.PathLike[str]) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def control_root() -> str | None:
    """Where control folders live: shared memory when the host has it (the shell saves its
    variables there after every command, ten times faster than on disk), else the temp dir."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None

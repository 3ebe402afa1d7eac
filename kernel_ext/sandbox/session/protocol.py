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

_INIT = r"""set -m
set -o physical
__b_done() {{ __b_run=; builtin export -p > {ctl}/env 2>/dev/null; builtin printf 'D %s %s %s\0' "$1" "$2" "$PWD"; }}
__b_exit() {{ builtin export -p > {ctl}/env 2>/dev/null; builtin printf '%s' "$PWD" > {ctl}/cwd; }}
trap __b_exit EXIT
trap '[ -n "$__b_run" ] && [ "${{FUNCNAME[0]:-}}" != __b_done ] && return 130' USR1
if [ -f {ctl}/env ]; then . {ctl}/env >/dev/null 2>&1; fi
builtin cd -- {cwd} 2>/dev/null || builtin cd -- {ws}
builtin printf 'R 0 %s\0' "$PWD"
"""


def init_script(ctl: Path, cwd: Path, workspace: Path) -> str:
    """Job control, physical paths, the marker and trap functions, restored state, ``R``."""
    q = shlex.quote
    return _INIT.format(ctl=q(str(ctl)), cwd=q(str(cwd)), ws=q(str(workspace)))


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

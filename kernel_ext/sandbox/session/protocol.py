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
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from kernel_ext.sandbox.supervisor import drainer

_USR1 = """'[ -n "$__b_run" ] && [ "${FUNCNAME[0]:-}" != __b_done ] && return 130'"""
_TRAPS = f"trap -- '__b_exit' EXIT\ntrap -- {_USR1} SIGUSR1\n"  # ``trap -p`` of a clean shell
_DROP = "unset -f builtin command compgen declare enable type shopt unalias printf export local mapfile hash trap set read"
# After the full reset (``trap - {1..64}``) a signal still ignored is one the shell was started with
# ignored (bash keeps those: a server under ``nohup``, a parent ignoring SIGINT): not an earlier command's.
_INHERITED_IGNORE = re.compile(r"trap -- '' SIG[A-Z0-9+-]+")
_CLEAN_STATE = "k"  # the inventory line of a shell the check found clean
# Every command line ends with ``__b_light`` (functions named like the builtins the steps call
# dropped; aliases, ``expand_aliases`` and remembered paths (``hash -p``) cleared; errtrace on),
# then ``__b_untrap`` called from top level: a traced function, so the DEBUG, RETURN and ERR traps
# an untraced function neither sees nor clears are cleared for the shell; then ``__b_done``:
# options put back when they differ from the shell's first ones (``__b_opts``), and a check
# (``__b_check``, builtins only, no fork) of one listing (functions, disabled and loaded builtins,
# signal traps) against a clean shell's taken before anything ran (``__b_clean``); only when they
# differ does the full reset run (functions unset, builtins re-enabled or unloaded, signal traps
# restored). ``<ctl>/state`` is ``p`` (PATH) then ``k N`` (clean; N full resets so far), or, when
# the check still fails, the full inventory (``__b_inv``) for ``shell_caveat`` to name.
_INIT = r"""readonly __b_path="$PATH"
set -m
set -o physical
readonly __b_sopts="$SHELLOPTS" __b_bopts="$BASHOPTS"
builtin compgen -A builtin > {ctl}/builtins; builtin mapfile -t __b_l < {ctl}/builtins; readonly __b_bi=" ${{__b_l[*]}} "; unset __b_l
__b_nreset=0
__b_light() {{ POSIXLY_CORRECT=1; {drop}; unset POSIXLY_CORRECT; \
unalias -a; builtin hash -r; builtin shopt -u expand_aliases inherit_errexit; builtin set -E; }}
__b_list() {{ {{ builtin compgen -P 'f ' -A function; builtin compgen -P 'd ' -A disabled; builtin compgen -P 'b ' -A builtin; \
builtin trap -p; }} > {ctl}/defs 2>/dev/null; }}
__b_check() {{ [[ ${{__b_v@a}} != *r* && $SHELLOPTS == "$__b_sopts" && $BASHOPTS == "$__b_bopts" ]] || return 1; \
__b_list; IFS= builtin read -r -d '' __b_v < {ctl}/defs; [[ $__b_v == "$__b_clean" ]]; }}
__b_inv() {{ {{ [[ $PATH == "$__b_path" ]] && builtin printf 'p same\n' || builtin printf 'p %s\n' "$PATH"; \
builtin compgen -P 'f ' -A function; \
builtin compgen -P 'd ' -A disabled; builtin compgen -P 'b ' -A builtin; builtin printf 'B%s\n' "$__b_bi"; \
builtin printf 'o %s\n' "$SHELLOPTS" "$BASHOPTS"; builtin printf 'O %s\n' "$__b_sopts" "$__b_bopts"; \
builtin printf 't\n'; builtin trap -p; }} > {ctl}/state 2>/dev/null; }}
__b_reset() {{ POSIXLY_CORRECT=1; {drop}; \
local IFS=$' \t\n' __b_f __b_l; (( __b_nreset++ )); \
__b_list; builtin mapfile -t __b_l < {ctl}/defs; \
for __b_f in "${{__b_l[@]}}"; do case $__b_f in 'f __b_done'|'f __b_exit'|'f __b_reset'|'f __b_light'|\
'f __b_inv'|'f __b_list'|'f __b_check'|'f __b_state'|'f __b_opts'|'f __b_untrap') ;; \
'f '*) unset -f -- "${{__b_f#f }}";; 'd '*) builtin enable -- "${{__b_f#d }}";; \
'b '*) case $__b_bi in *" ${{__b_f#b }} "*) ;; *) builtin enable -d -- "${{__b_f#b }}";; esac;; esac; done 2>/dev/null; \
unset POSIXLY_CORRECT; builtin trap - {{1..64}} 2>/dev/null; builtin trap __b_exit EXIT; builtin trap {usr1} USR1; \
__b_light; __b_opts; }}
__b_opts() {{ [[ $SHELLOPTS == "$__b_sopts" && $BASHOPTS == "$__b_bopts" ]] && return; local IFS=$' \t\n' __b_f; \
if [[ $SHELLOPTS != "$__b_sopts" ]]; then for __b_f in ${{SHELLOPTS//:/ }}; do \
case :$__b_sopts: in *:$__b_f:*) ;; *) builtin set +o "$__b_f";; esac; done; \
for __b_f in ${{__b_sopts//:/ }}; do builtin set -o "$__b_f"; done; fi 2>/dev/null; \
if [[ $BASHOPTS != "$__b_bopts" ]]; then for __b_f in ${{BASHOPTS//:/ }}; do \
case :$__b_bopts: in *:$__b_f:*) ;; *) builtin shopt -u "$__b_f";; esac; done; \
for __b_f in ${{__b_bopts//:/ }}; do builtin shopt -s "$__b_f"; done; fi 2>/dev/null; }}
__b_untrap() {{ builtin trap - DEBUG RETURN ERR; }}
__b_state() {{ __b_check || {{ __b_reset; __b_check; }} || {{ __b_inv; return; }}; \
{{ [[ $PATH == "$__b_path" ]] && builtin printf 'p same\n' || builtin printf 'p %s\n' "$PATH"; \
builtin printf 'k %s\n' "$__b_nreset"; }} > {ctl}/state 2>/dev/null; }}
__b_done() {{ __b_run=; __b_opts; __b_state; \
builtin export -p > {ctl}/env 2>/dev/null; builtin printf 'D %s %s %s\0' "$1" "$2" "$PWD"; }}
__b_exit() {{ builtin export -p > {ctl}/env 2>/dev/null; builtin printf '%s' "$PWD" > {ctl}/cwd; }}
declare -ft __b_untrap
readonly -f __b_light __b_list __b_check __b_inv __b_reset __b_opts __b_untrap __b_state __b_done __b_exit
trap __b_exit EXIT
trap {usr1} USR1
__b_list; IFS= builtin read -r -d '' __b_v < {ctl}/defs; readonly __b_clean="$__b_v"
if [ -f {ctl}/env ]; then . {ctl}/env >/dev/null 2>&1; fi
__b_light; __b_untrap; __b_opts; __b_state
builtin cd -- {cwd} 2>/dev/null || builtin cd -- {ws}
builtin printf 'R 0 %s\0' "$PWD"
"""
_OWN = frozenset(f"__b_{name}" for name in ("done", "exit", "light", "list", "check", "inv", "reset", "state", "opts", "untrap"))


def init_script(ctl: Path, cwd: Path, workspace: Path) -> str:
    """Job control, physical paths, the marker, reset and trap functions, restored state, ``R``."""
    q = shlex.quote
    return _INIT.format(ctl=q(str(ctl)), cwd=q(str(cwd)), ws=q(str(workspace)), usr1=_USR1, drop=_DROP)


AFTER = "__b_run=; __b_light; __b_untrap; __b_done"  # what every command line ends with (then: number, status)


def shell_state(ctl: Path) -> list[str] | None:
    """The inventory the shell's last step wrote (lines), or None when it wrote none."""
    try:
        return (ctl / "state").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None


def _leftovers(lines: list[str]) -> list[str]:
    """Names of what the inventory shows besides a clean shell's: functions, disabled or loaded
    builtins (``builtins disabled`` when the list lacks any, as when ``compgen`` itself is),
    changed options, traps. Aliases are not listed: every command's light step drops them all
    (``unalias`` itself shadowed by a function that cannot be dropped is named as that function)."""
    tagged: dict[str, list[str]] = {}
    body, left = lines, []
    cut = lines.index("t") if "t" in lines else len(lines)
    body, traps = lines[:cut], lines[cut + 1 :]
    for line in body:
        tag, _, name = line.partition(" ")
        tagged.setdefault(tag, []).append(name)
    left = sorted(set(tagged.get("f", [])) - _OWN) + sorted(tagged.get("d", []))
    builtins, known = set(tagged.get("b", [])), set((tagged.get("B") or [""])[0].split())
    left += sorted(builtins - known)
    if known - builtins or not known:
        left.append("builtins disabled")
    if tagged.get("o") != tagged.get("O") or not tagged.get("O"):
        left.append("shell options")
    kept = [line for line in traps if not _INHERITED_IGNORE.fullmatch(line)]
    if cut == len(lines) or "\n".join(kept) + "\n" != _TRAPS:
        left.append("traps")
    return left


def shell_caveat(ctl: Path, out: list[str] | None = None) -> str:
    """What the shell's last reset left that changes what a command name runs ("" when nothing).

    Before every command (and after a restart) the session drops what earlier commands defined
    (aliases, functions, builtins, options, traps, remembered paths); a changed ``PATH`` is kept,
    as in a terminal, and is named here, as are definitions the reset could not drop (a
    ``readonly -f`` function, a disabled builtin); also appended to ``out`` (a result's notes)
    when there is one.
    """
    lines = shell_state(ctl)
    if lines is None:
        return "the shell did not report its state: what a command name runs is not known"
    notes = []
    if not lines or lines[0] != "p same":
        path = lines[0].removeprefix("p ") if lines else ""
        notes.append(f"an earlier command changed PATH to {path[:300]!r}: a command name may run another program")
    left = [] if len(lines) > 1 and lines[1].startswith(_CLEAN_STATE + " ") else _leftovers(lines)
    if left:
        notes.append(
            f"definitions an earlier command made could not be dropped ({', '.join(left[:8])}): a command name may run something else"
        )
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
        return f"__b_run=1; ( {enter}. {cmd} ) >{out} 2>{err} </dev/null; __b_rc=$?; {AFTER} {n} $__b_rc\n"
    if wd is None:
        return f"__b_run=1; {{ . {cmd}; }} >{out} 2>{err} </dev/null; __b_rc=$?; {AFTER} {n} $__b_rc\n"
    return (
        f"__b_back=$PWD; __b_run=1; {{ {enter}. {cmd}; }} >{out} 2>{err} </dev/null; "
        f'__b_rc=$?; builtin cd -- "$__b_back"; {AFTER} {n} $__b_rc\n'
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
            text = raw.decode("utf-8", "replace")
            if not text.startswith(("D ", "R ")):  # a trap's output ahead of the marker (it shares the shell's stdout)
                text = text[max(text.rfind("\nD "), text.rfind("\nR ")) + 1 :]
            kind, _, tail = text.partition(" ")
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

"""Which arguments a program writes: one rule per program, read by ``deletion.into_system``.

A write into a system path is destructive whatever the program (touch, mkdir, patch, unzip -d,
chmod, ln ...): rather than a special case per spelling, each program here names the operands it
creates, changes or writes into, and every one that lands outside the workspace (``reach.landing``)
makes the command destructive. Programs whose effects already name their targets (cp, mv, tee,
install, sort -o ...) need no entry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kernel_ext.shellplan.reach import ln_targets, permission_files
from kernel_ext.shellplan.verdict import positional, value_of

Rule = Callable[[Sequence[str]], list[str]]


def _operands(*valued: str) -> Rule:
    return lambda args: positional(args, valued)


def _values(args: Sequence[str], *flags: str) -> list[str]:
    """Every value of ``flags`` (``-d DIR``, ``--dir=DIR``, ``-dDIR``)."""
    out = []
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                out.append(args[i + 1])
            elif flag.startswith("--") and arg.startswith(flag + "="):
                out.append(arg.split("=", 1)[1])
            elif not flag.startswith("--") and arg.startswith(flag) and len(arg) > len(flag):
                out.append(arg[len(flag):])
    return out


def _permission(name: str) -> Rule:
    return lambda args: permission_files(name, args)


def _patch(args: Sequence[str]) -> list[str]:
    files = positional(args, ("-p", "-i", "--input", "-o", "--output", "-d", "--directory", "-r", "--reject-file", "-B",
                              "--prefix", "-F", "--fuzz", "-z", "--suffix", "-V", "-D", "--ifdef"))
    return files[:1] + _values(args, "-o", "--output", "-d", "--directory", "-r", "--reject-file")


def _unzip(args: Sequence[str]) -> list[str]:
    return _values(args, "-d")


def _mktemp(args: Sequence[str]) -> list[str]:
    folder = value_of(args, ("-p", "--tmpdir"))
    return positional(args, ("-p", "--tmpdir", "--suffix")) + ([folder] if folder else [])


WRITTEN: dict[str, Rule] = {
    "touch": _operands("-r", "-d", "-t", "--reference", "--date"),
    "mkdir": _operands("-m", "--mode", "--context"),
    "mkfifo": _operands("-m", "--mode"),
    "mknod": lambda args: positional(args, ("-m", "--mode"))[:1],
    "rmdir": _operands(),
    "mktemp": _mktemp,
    "patch": _patch,
    "unzip": _unzip,
    "ln": lambda args: ln_targets(args),
    **{name: _permission(name) for name in ("chmod", "chown", "chgrp", "chattr", "setfacl")},
}


def written(name: str, args: Sequence[str]) -> list[str]:
    """The operands ``name`` creates, changes or writes into (empty: none known beyond its effects)."""
    rule = WRITTEN.get(name)
    return rule(args) if rule is not None else []

"""Where an otherwise ordinary write lands decides how bad it is.

``mv``, ``cp``, ``install`` and ``rsync`` are mutating when they move files around, but
moving data onto a device (``mv db.sqlite /dev/null``) throws it away, and copying a device
onto a file (``cp /dev/null main.py``) empties it: both are destructive. ``chmod``,
``chown``, ``chgrp``, ``setfacl`` and ``chattr`` are mutating on a project folder, but applied
recursively at ``/``, a top-level system folder or a home folder they change thousands of
files nobody can put back by hand: destructive too. The checks are lexical (the command is
never run), so a variable that names a home (``$HOME``) counts as that home.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernel_ext.shellplan.verdict import Verdict, bad, positional

# Devices that only echo a stream back to the caller: copying onto them reads, it loses nothing.
_STREAMS = re.compile(r"/dev/(stdout|stderr|stdin|tty|fd/\d+)")
# ~, ~/, ~user, $HOME, ${HOME}, /root, /home/<user>, /Users/<user>: a home folder, spelled any usual way.
_HOME = re.compile(r"(~[A-Za-z0-9._-]*|\$HOME|\$\{HOME\}|/root|/home(/[^/]+)?|/Users(/[^/]+)?)")
_RECURSIVE = ("-R", "--recursive")
PERMISSION_PROGRAMS = frozenset(["chmod", "chown", "chgrp", "setfacl", "chattr"])
TRANSFER_PROGRAMS = frozenset(["mv", "cp", "install", "rsync"])


def worse_by_reach(name: str, args: Sequence[str]) -> Verdict | None:
    """A destructive verdict when where the command lands makes it one; None: judge it as usual."""
    if name in TRANSFER_PROGRAMS:
        devices = device_operands(args)
        if devices:
            what = "moving data onto a device discards it" if name == "mv" else "copying to or from a device discards or overwrites data"
            return bad("move" if name == "mv" else "copy", devices, f"{name} with {', '.join(devices)}: {what}")
    if name in PERMISSION_PROGRAMS:
        broad = sweeping_permission_change(args, positional(args, ("--reference", "-m", "-M", "-x", "-X")))
        if broad:
            return bad(name, broad, f"recursive {name} at {', '.join(broad)} changes every file below it; it cannot be undone by hand")
    return None


def device_operands(args: Sequence[str]) -> list[str]:
    """The words that name a device under ``/dev`` (not the caller's own streams), options' values included."""
    found = []
    for arg in args:
        word = arg.split("=", 1)[1] if arg.startswith("--") and "=" in arg else arg
        if word.startswith("/dev/") and not _STREAMS.fullmatch(word.rstrip("/")):
            found.append(word)
    return found


def broad_target(path: str) -> bool:
    """``/``, a top-level folder (``/etc``, ``/usr``, ...) or a home folder, with or without ``/``, ``/.`` or ``/*``."""
    word = path
    for tail in ("/*", "/.", "/"):
        while len(word) > len(tail) and word.endswith(tail):
            word = word[: -len(tail)]
    if word in ("/", "/*", "/."):
        return True
    if _HOME.fullmatch(word):
        return True
    return word.startswith("/") and word.count("/") == 1 and len(word) > 1


def recursive(args: Sequence[str]) -> bool:
    """``-R`` / ``--recursive`` given, alone or inside a group of short flags (``-Rf``, ``-fR``)."""
    for arg in args:
        if arg == "--":
            return False
        if arg in _RECURSIVE or (arg.startswith("-") and not arg.startswith("--") and "R" in arg[1:]):
            return True
    return False


def sweeping_permission_change(args: Sequence[str], words: Sequence[str]) -> list[str]:
    """The broad targets of a recursive permission or ownership change (empty: an ordinary one)."""
    if not recursive(args):
        return []
    return [w for w in words if broad_target(w)]

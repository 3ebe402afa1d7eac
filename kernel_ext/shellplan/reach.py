"""Where an otherwise ordinary write lands decides how bad it is.

``mv``, ``cp``, ``install``, ``rsync`` and ``ln`` are mutating when they move files around, but
moving data onto a sink (``mv db.sqlite /dev/null``, ``/dev/stdout``, ``/proc/self/fd/1``, a
``--target-directory`` in ``/dev``) throws it away, and copying a device onto a file (``cp
/dev/null main.py``) empties it: both are destructive. ``chmod``, ``chown``, ``chgrp``,
``setfacl`` and ``chattr`` are mutating on a project folder, but applied recursively at ``/``, a
top-level system folder or a home folder they change thousands of files nobody can put back by
hand: destructive too.

A word names a place only with the context it runs in, so ``Reach`` carries it down the plan:
``cwd``, the folder an earlier ``cd`` of the same command moved to (``cd / && chmod -R 777 .``
is ``chmod -R 777 /``), and ``sweep``, the folders a command is applied to file by file
(``find ROOTS -exec CMD {} +`` and ``find ROOTS | xargs CMD`` run CMD on everything under
ROOTS, which is a recursive CMD at ROOTS). The checks are lexical (the command is never run),
so a variable that names a home (``$HOME``) counts as that home; every doubt reads worse.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kernel_ext.shellplan.scan import Scan
from kernel_ext.shellplan.undo import NO_CONTEXT, PlanContext
from kernel_ext.shellplan.verdict import Verdict, bad, positional

# ~, ~/, ~user, $HOME, ${HOME}, /root, /home/<user>, /Users/<user>: a home folder, spelled any usual way.
_HOME = re.compile(r"(~[A-Za-z0-9._-]*|\$HOME|\$\{HOME\}|/root|/home(/[^/]+)?|/Users(/[^/]+)?)")
_PWD = re.compile(r"^(\$PWD|\$\{PWD\})(?=/|$)")
_HOME_PREFIX = re.compile(r"^(~[A-Za-z0-9._-]*|\$HOME|\$\{HOME\})(?=/|$)")
_HOME_BACK = re.compile(r"^/home/(~[A-Za-z0-9._-]*|\$HOME|\$\{HOME\})(?=/|$)")  # a home while a path is folded
# Sinks: every device, and a process's descriptors (/proc/self/fd/1 is the caller's stdout).
_SINK = re.compile(r"^/(dev(/.*)?|proc/[^/]+/fd(/.*)?)$")
_RECURSIVE = ("-R", "--recursive")
_RECURSIVE_MIN = len("--rec")  # GNU takes any unambiguous prefix: --rec, --recur, --recurs ... (--re is --reference too)
# Writing to these is harmless: the null device, the caller's own streams.
_NEUTRAL = re.compile(r"^/dev/(null|stdout|stderr|stdin|tty|fd/[0-9]+)$|^/proc/self/fd/[0-9]+$")
_KERNEL = re.compile(r"^/(dev|proc|sys)(/.*)?$")  # devices, process and kernel files: a write there is not to a file
_SCRATCH = re.compile(r"^/(tmp|var/tmp)(/.*)?$")
_PROTECTED_NAMES = frozenset([".git"])  # inside the workspace, but deleting it loses the history
_MODE = re.compile(r"^([0-7]{1,4}|[ugoa]*[-+=][-+=rwxXstugo,]*([,][ugoa]*[-+=][-+=rwxXstugo]*)*)$")
PERMISSION_PROGRAMS = frozenset(["chmod", "chown", "chgrp", "setfacl", "chattr"])
TRANSFER_PROGRAMS = frozenset(["mv", "cp", "install", "rsync", "ln"])
_TARGET_OPTION = frozenset(["mv", "cp", "install", "ln"])  # -t DIR / --target-directory[=]DIR name the target
_PERMISSION_VALUED = ("--reference", "-m", "-M", "-x", "-X")
SWEEP_MARK = "{}"
PATH_MAX = 4096  # a longer folder cannot be entered: the cwd is then not known
MAX_ROOTS = 8  # a sweep keeps this many start folders: expanding ``{}`` by thousands would cost the planner


@dataclass(frozen=True)
class Reach:
    """Where a command's relative words land (``cwd``) and what it is applied to (``sweep``)."""

    cwd: str | None = None  # None: the session's own folder, not known statically
    sweep: tuple[str, ...] = ()  # folders whose every file the command is applied to
    feed: tuple[str, ...] = ()  # folders whose file names arrive on stdin (from ``find`` through a pipe)
    appends: bool = False  # the swept names follow the arguments (xargs) rather than stand for ``{}`` (find)
    context: PlanContext = NO_CONTEXT  # the run's checkpoints and starting folder (``undo``)

    def moved(self, word: str | None) -> Reach:
        """After ``cd WORD`` (None: ``cd -`` or a computed folder: the folder is no longer known)."""
        if word is None:
            return replace(self, cwd=None)
        target = resolve(word or "~", self.cwd)
        relative = not target.startswith(("/", "~", "$")) and "$" not in target and "`" not in target
        known = (target.startswith("/") or _HOME_PREFIX.match(target) or relative) and len(target) <= PATH_MAX
        return replace(self, cwd=(posixpath.normpath(target) if relative else target) if known else None)

    def swept(self, roots: Sequence[str], *, cwd_in_root: bool = False, appends: bool = False) -> Reach:
        """Applied file by file to everything under ``roots`` (``-execdir``: run inside them)."""
        resolved = _kept(roots, self.cwd)
        cwd = resolved[0] if cwd_in_root and len(resolved) == 1 else self.cwd
        return Reach(cwd=cwd, sweep=resolved, appends=appends, context=self.context)

    def fed(self, roots: Sequence[str]) -> Reach:
        return replace(self, feed=_kept(roots, self.cwd))

    def fresh(self) -> Reach:
        """The same folder and run, nothing swept or fed (a subshell, a substitution, xargs without a find)."""
        return Reach(cwd=self.cwd, context=self.context)


UNPLACED = Reach()


def _kept(roots: Sequence[str], cwd: str | None) -> tuple[str, ...]:
    """At most ``MAX_ROOTS`` resolved roots, the broad ones and sinks first (each ``{}`` is expanded by them)."""
    resolved = [resolve(root, cwd) for root in roots] or [resolve(".", cwd)]
    ranked = sorted(dict.fromkeys(resolved), key=lambda r: not (broad_target(r) or _SINK.match(r)))
    return tuple(ranked[:MAX_ROOTS])


def resolve(word: str, cwd: str | None) -> str:
    """``word`` as a path: made absolute against a known ``cwd``, ``//``, ``.`` and ``..`` folded.

    A home keeps its spelling (``~``, ``~user``, ``$HOME``); ``..`` out of it is ``/home``.
    """
    if not word or word.startswith("-"):
        return word
    here = _PWD.match(word)
    if here and cwd is not None:  # $PWD is the folder a cd moved to
        word = cwd + word[here.end():]
    if not word.startswith(("/", "~", "$")):
        if cwd is None:
            return word
        word = f"{cwd}/{word}"
        if not word.startswith(("/", "~", "$")):  # a cd to a relative folder: still relative to the session's
            return posixpath.normpath(word) if "$" not in word and "`" not in word else word
    home = _HOME_PREFIX.match(word)
    if home:
        path = "/home/" + home.group(1) + word[home.end():]
    elif word.startswith("/"):
        path = word
    else:
        return word  # another variable: not known
    folded = re.sub(r"^/+", "/", posixpath.normpath(re.sub(r"^/+", "/", path)))
    back = _HOME_BACK.match(folded)
    return back.group(1) + folded[back.end():] if back else folded


def worse_by_reach(name: str, args: Sequence[str], reach: Reach = UNPLACED) -> Verdict | None:
    """A destructive verdict when where the command lands makes it one; None: judge it as usual."""
    words = applied(args, reach)
    if name in TRANSFER_PROGRAMS:
        sinks = sink_operands(name, words, reach.cwd)
        if sinks:
            what = "moving data onto a sink discards it" if name == "mv" else "copying to or from a device discards or overwrites data"
            return bad("move" if name == "mv" else "copy" if name != "ln" else "link", sinks, f"{name} with {', '.join(sinks)}: {what}")
    if name == "mv":
        away = [w for w in positional(words, ("-t", "-S", "--suffix", "--target-directory"))[:-1]
                if broad_target(resolve(w, reach.cwd)) or _home_child(resolve(w, reach.cwd))]
        if away:
            return bad("move", away, f"mv takes {', '.join(away)} away: a root, a top-level or home folder, or a folder of a home")
    written = _written_files(name, words)
    severe = [w for w in written if write_landing(w, reach.cwd) in SEVERE_WRITE]
    if severe:
        return bad("write", severe, f"{name} {SEVERE_WRITE[write_landing(severe[0], reach.cwd)]} ({', '.join(severe)})")
    if name == "tar" and _extracts(words):
        into = [d for d in _tar_dirs(words) if broad_target(resolve(d, reach.cwd)) or
                write_landing(d, reach.cwd) in ("home", "system", "parent", "kernel")]
        if into:
            return bad("extract", into, f"tar extracts over {', '.join(into)}: files outside the workspace are overwritten")
    if name in PERMISSION_PROGRAMS:
        every = recursive(words)
        targets = [resolve(t, reach.cwd) for t in permission_files(name, words)]
        broad = [t for t in targets if (broad_target(t) or landing(t) == "parent") and (every or t in reach.sweep)]
        if broad:
            how = "recursive " if every else "file by file, "
            return bad(name, broad, f"{how}{name} at {', '.join(broad)} changes every file below it; it cannot be undone by hand")
    return None


def _written_files(name: str, args: Sequence[str]) -> list[str]:
    """The files ``tee`` writes, or ``sed -i`` edits in place (``tee -a`` appends: not a truncation)."""
    if name == "tee" and not any(a in ("-a", "--append") or (a.startswith("-") and not a.startswith("--") and "a" in a) for a in args):
        return positional(args)
    if name in ("sed", "gsed") and any(a.startswith("-i") or a.startswith("--in-place") or
                                       (a.startswith("-") and not a.startswith("--") and "i" in a) for a in args):
        words = positional(args, ("-e", "-f", "-l", "--expression", "--file"))
        scripted = any(a in ("-e", "--expression", "-f", "--file") or a.startswith(("--expression=", "--file=")) for a in args)
        return words if scripted else words[1:]
    return []


def _extracts(args: Sequence[str]) -> bool:
    first = args[0] if args else ""
    return ("x" in first and not first.startswith("-")) or any(
        a in ("--extract", "--get") or (a.startswith("-") and not a.startswith("--") and "x" in a) for a in args)


def _tar_dirs(args: Sequence[str]) -> list[str]:
    out = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-C", "--directory")]
    out += [a.split("=", 1)[1] for a in args if a.startswith("--directory=")]
    return out + [a[2:] for a in args if a.startswith("-C") and len(a) > 2]


def permission_files(name: str, args: Sequence[str]) -> list[str]:
    """The files of a permission change: its operands after the mode or owner (none with ``--reference``)."""
    words = positional(args, _PERMISSION_VALUED)
    if name in ("setfacl",) or any(a.startswith("--reference") for a in args):
        return words
    if name == "chmod" and words and not _MODE.match(words[0]):
        return words  # a mode like -w was read as an option
    return words[1:]


def applied(args: Sequence[str], reach: Reach) -> list[str]:
    """The arguments with ``{}`` standing for the swept folders (xargs appends them when there is none)."""
    if not reach.sweep:
        return list(args)
    if not any(SWEEP_MARK in arg for arg in args):
        return [*args, *reach.sweep] if reach.appends else list(args)
    out: list[str] = []
    for arg in args:
        out.extend([arg.replace(SWEEP_MARK, root) for root in reach.sweep] if SWEEP_MARK in arg else [arg])
    return out


def sink_operands(name: str, args: Sequence[str], cwd: str | None = None) -> list[str]:
    """The words that name a sink: any operand or option value for mv/cp/install/rsync, the target for ln."""
    if name == "ln":
        candidates = ln_targets(args)
    else:
        candidates = [_option_value(name, arg) or arg for arg in args if arg not in ("--", "-")]
        candidates += [args[i + 1] for i, arg in enumerate(args[:-1]) if _takes_target(name, arg)]
    return list(dict.fromkeys(word for word in candidates if _SINK.match(resolve(word, cwd))))


def _option_value(name: str, arg: str) -> str:
    if arg.startswith("--") and "=" in arg:
        return arg.split("=", 1)[1]
    if name in _TARGET_OPTION and arg.startswith("-") and not arg.startswith("--") and "t" in arg[1:-1]:
        return arg[arg.index("t", 1) + 1:]  # -t/dev, -vt/dev: the rest of the cluster is the value
    return ""


def _takes_target(name: str, arg: str) -> bool:
    """``-t DIR``, ``-vt DIR``, ``--target-directory DIR`` (or any prefix GNU accepts, ``--target``)."""
    if name not in _TARGET_OPTION:
        return False
    if arg.startswith("--"):
        return len(arg) > 3 and "--target-directory".startswith(arg)
    return arg.startswith("-") and arg.endswith("t") and len(arg) > 1


def ln_targets(args: Sequence[str]) -> list[str]:
    named = [_option_value("ln", a) for a in args if _option_value("ln", a)]
    named += [args[i + 1] for i, arg in enumerate(args[:-1]) if _takes_target("ln", arg)]
    if named:
        return named
    words = positional(args, ("-S", "--suffix"))
    return words[-1:] if len(words) > 1 else []


def broad_target(path: str) -> bool:
    """``/``, a top-level folder (``/etc``, ``/usr``, ...) or a home folder, with or without ``/``, ``/.`` or ``/*``."""
    word = path
    for tail in ("/*", "/.", "/"):
        while len(word) > len(tail) and word.endswith(tail):
            word = word[: -len(tail)]
    if word in ("/", "/*", "/.", "//"):
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
        if len(arg) >= _RECURSIVE_MIN and "--recursive".startswith(arg):
            return True
    return False


def _home_child(path: str) -> bool:
    """``~/.ssh``, ``$HOME/project``, ``/home/u/x``: a folder right inside a home."""
    head, _sep, tail = path.rstrip("/").rpartition("/")
    return bool(tail) and tail not in (".", "..") and bool(_HOME.fullmatch(head))


def landing(path: str) -> str:
    """Where a resolved path lands: ``neutral`` (/dev/null, the caller's streams), ``kernel`` (a
    device, /proc, /sys), ``home``, ``system`` (any other absolute path but scratch), ``scratch``
    (/tmp), ``root`` (the workspace itself), ``parent`` (out of it by ``..``), ``unknown`` (a
    variable or substitution; ``system`` when it is the first part of an absolute path),
    ``protected`` (.git) or ``workspace`` (a named path inside it)."""
    if not path or "$" in path or "`" in path:
        if _HOME_PREFIX.match(path):
            return "home"
        first = path[1:].split("/", 1)[0] if path.startswith("/") else ""
        return "system" if "$" in first or "`" in first else "unknown"  # /${x}etc/hosts: absolute, lands anywhere
    if _NEUTRAL.match(path):
        return "neutral"
    if _KERNEL.match(path):
        return "kernel"
    if path.startswith("~") or _home_path(path):
        return "home"
    if path.startswith("/"):
        return "scratch" if _SCRATCH.match(path) else "system"
    folded = posixpath.normpath(path)
    if folded == ".":
        return "root"
    if folded == ".." or folded.startswith("../"):
        return "parent"
    return "protected" if folded.split("/", 1)[0] in _PROTECTED_NAMES else "workspace"


def _home_path(path: str) -> bool:
    match = _HOME.match(path)
    return match is not None and (match.end() == len(path) or path[match.end()] == "/")


def write_landing(word: str, cwd: str | None) -> str:
    """``landing`` of a word a command writes to, resolved against the tracked folder."""
    return landing(resolve(word, cwd))


_LITERAL_PATH = Scan(r"""['"]((?:/|~)[^'"\n]*)['"]""")


def literal_paths(code: str) -> list[str]:
    """The absolute or home paths quoted in code (``open('/etc/hosts', 'w')``, ``print > "/etc/x"``), in
    linear time: where code that writes files may write."""
    return [m.group(1).decode("utf-8", "replace") for m in _LITERAL_PATH.finditer(code)]


SEVERE_WRITE = {"kernel": "writes onto a device or kernel file", "home": "overwrites a file in a home folder",
                "system": "overwrites a system file outside the workspace", "parent": "overwrites a file outside the workspace"}


def sweeping_permission_change(args: Sequence[str], words: Sequence[str]) -> list[str]:
    """The broad targets of a recursive permission or ownership change (empty: an ordinary one)."""
    if not recursive(args):
        return []
    return [w for w in words if broad_target(w)]

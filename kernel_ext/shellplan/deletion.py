"""Deleting data, and writing into system paths: one answer per meaning, judged by reversibility.

A deletion (``rm``, ``unlink``, ``rimraf``, ``find -delete``, ``git clean``, ``rsync --delete``,
a truncating redirect with no command) is destructive, whatever wrapper runs it, wherever it sits
in a compound command and however its targets are spelled (``src``, ``./src``, ``src/``,
``"src"``: the same path once quotes are gone and the path is folded). It is mutating only when
every target is a named path inside the workspace that a checkpoint taken in this run covers
(``undo.PlanContext``); the note then names that checkpoint. A glob, a variable, a remote or an
absolute path is never covered: the planner cannot know what it names.

Any write into a system path (a home, ``/etc``, ``/usr``, a device, out of the workspace by
``..``, an absolute path whose first part is a variable), by copy, move, link, install, tee,
append, sync, or any operand ``written`` says a program writes, is destructive (``into_system``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

from kernel_ext.shellplan.reach import PERMISSION_PROGRAMS, SEVERE_WRITE, Reach, applied, landing, resolve, write_landing
from kernel_ext.shellplan.undo import Checkpoint
from kernel_ext.shellplan.verdict import DESTRUCTIVE, Verdict, bad, has, mut, positional, worst
from kernel_ext.shellplan.written import written

DELETERS = frozenset(["rm", "unlink", "rimraf", "del-cli", "trash"])
# Operations whose paths are written over or into (not created empty, not a permission change).
WRITE_OPS = frozenset(["write", "append", "copy", "move", "link", "replace", "install", "sync", "extract", "edit",
                       "overwrite", "truncate", "format", "fix", "compress", "grow"])
_UNPLACEABLE = frozenset("*?[{$`:")  # a glob, a variable or substitution, a remote (host:path)
_RSYNC_VALUED = ("-e", "--rsh", "--exclude", "--include", "--filter", "-f", "--exclude-from", "--include-from")


def deletion(targets: Sequence[str], reach: Reach, what: str, *, op: str = "delete", root: bool = False) -> Verdict:
    """Deleting ``targets`` (``what`` says how, in words): destructive unless a checkpoint taken in
    this run covers each one (then mutating, naming it). ``root``: the targets' own folders stay
    (``git clean``, a filtered ``find -delete``), so the workspace root may be one."""
    shown = list(dict.fromkeys(_folded(t) for t in targets))
    found = [_covering(t, reach, root) for t in shown]
    if shown and all(found):
        labels = list(dict.fromkeys(c.label for c in found if c is not None))
        named = ", ".join(repr(label) for label in labels)
        return mut(op, shown, note=f"{what}; checkpoint {named}, taken in this run, covers it: sh_restore "
                                   f"{labels[-1]} brings it back")
    return bad(op, shown, f"{what}: not reversible, and no checkpoint taken in this run covers it (take sh_checkpoint first)")


def _folded(word: str) -> str:
    """``./src/``, ``src/.`` and ``src`` are one path (shown and judged the same); a word the
    planner cannot place is kept as written."""
    if not word or _UNPLACEABLE.intersection(word) or word.startswith("-"):
        return word
    return posixpath.normpath(word) if not word.startswith("//") else word


def _covering(word: str, reach: Reach, root: bool) -> Checkpoint | None:
    if not word or _UNPLACEABLE.intersection(word) or word.startswith("-"):
        return None
    path = resolve(word, reach.cwd)
    where = landing(path)
    if where != "workspace" and not (root and where == "root"):
        return None
    return reach.context.covering(posixpath.normpath(path), root=root)


def delete_program(name: str, args: Sequence[str], reach: Reach) -> Verdict | None:
    """``rm`` and its kin, and ``rsync`` when it deletes (None: not a deletion, judge as usual)."""
    if name in DELETERS:
        targets = positional(applied(args, reach))
        flags = " -r" if any(a in ("-r", "-R", "--recursive") or (a[:1] == "-" and a[1:2] != "-" and set(a[1:]) & {"r", "R"})
                             for a in args) else ""
        shown = ", ".join(dict.fromkeys(_folded(t) for t in targets)) or "names given at run time"
        return deletion(targets, reach, f"{name}{flags} deletes {shown}")
    if name == "rsync":
        words = positional(applied(args, reach), _RSYNC_VALUED)
        if has(args, "--remove-source-files"):
            return deletion(words[:-1], reach, "rsync --remove-source-files deletes the sources")
        if any(a.startswith("--delete") for a in args):
            return deletion(words[-1:], reach, "rsync --delete removes files missing from the source", root=True)
    return None


def into_system(name: str, verdict: Verdict, reach: Reach, args: Sequence[str] = ()) -> Verdict:
    """``verdict`` made destructive when it writes into a system path (``cp x /etc/hosts``,
    ``tee -a /etc/profile``, ``install x /etc/foo``), whatever the kind of write; ``args``: the
    operands ``written`` says ``name`` writes (``touch /etc/nologin``, ``unzip -d /etc``) count too."""
    if verdict.category == DESTRUCTIVE:
        return verdict
    operands = written(name, applied(args, reach))
    # a permission change in a home (``chmod 700 ~``) stays ordinary; a recursive one is ``reach``'s
    places = set(SEVERE_WRITE) - ({"home"} if name in PERMISSION_PROGRAMS else set())
    for op, paths in [*(e for e in verdict.effects if e[0] in WRITE_OPS), ("write", tuple(operands))]:
        severe = [p for p in paths if write_landing(p, reach.cwd) in places]
        if severe:
            where = SEVERE_WRITE[write_landing(severe[0], reach.cwd)].replace("overwrites", "writes into", 1)
            return worst([verdict, bad(op, severe, f"{name} {where} ({', '.join(severe)})")])
    return verdict

"""The verdict type of ``sh_plan`` and the small argument helpers every rule shares.

Categories, from harmless to worst: ``read-only`` < ``mutating`` < ``unknown`` < ``complex`` <
``network`` < ``destructive``. ``unknown`` (a program we do not know) and ``complex`` (the shell
decides at run time) rank above ``mutating`` because either may hide a mutation. Combining
verdicts keeps the worst category and is reversible only when every part is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

READ_ONLY = "read-only"
MUTATING = "mutating"
UNKNOWN = "unknown"
COMPLEX = "complex"
NETWORK = "network"
DESTRUCTIVE = "destructive"
# The one note every way of feeding a download to a shell or interpreter carries: ``sh_plan`` rates it
# destructive and the denylist refuses any command whose plan carries it (one answer, not two lists).
RUNS_DOWNLOAD = "runs code downloaded from the network"
RANK = {READ_ONLY: 0, MUTATING: 1, UNKNOWN: 2, COMPLEX: 3, NETWORK: 4, DESTRUCTIVE: 5}
CATEGORIES = tuple(RANK)

Effect = tuple[str, tuple[str, ...]]  # (operation, paths)


@dataclass(frozen=True)
class Verdict:
    category: str
    reversible: bool = True
    effects: tuple[Effect, ...] = ()
    notes: tuple[str, ...] = ()
    runs_stdin: bool = False  # an interpreter executing whatever is piped into it
    scripts: tuple[str, ...] = ()  # script files a shell or interpreter runs (a download run later is fed to it)

    def at_least(self, category: str, note: str = "") -> Verdict:
        return worst([self, Verdict(category, category == READ_ONLY, notes=(note,) if note else ())])


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The combined verdict: worst category wins, reversible only if every part is."""
    items = list(verdicts)
    if not items:
        return Verdict(READ_ONLY)
    top = max(items, key=lambda v: RANK[v.category])
    notes: list[str] = []
    for v in items:
        notes.extend(n for n in v.notes if n and n not in notes)
    return Verdict(
        top.category,
        all(v.reversible for v in items) and top.category in (READ_ONLY, MUTATING),
        tuple(e for v in items for e in v.effects),
        tuple(notes),
        any(v.runs_stdin for v in items),
        tuple(dict.fromkeys(s for v in items for s in v.scripts)),
    )


def ro(note: str = "") -> Verdict:
    return Verdict(READ_ONLY, True, (), (note,) if note else ())


def mut(op: str = "", paths: Sequence[str] = (), reversible: bool = False, note: str = "") -> Verdict:
    return Verdict(MUTATING, reversible, ((op, tuple(paths)),) if op else (), (note,) if note else ())


def bad(op: str = "", paths: Sequence[str] = (), note: str = "") -> Verdict:
    return Verdict(DESTRUCTIVE, False, ((op, tuple(paths)),) if op else (), (note,) if note else ())


def net(note: str = "", op: str = "", paths: Sequence[str] = ()) -> Verdict:
    return Verdict(NETWORK, False, ((op, tuple(paths)),) if op else (), (note,) if note else ())


def unknown(note: str = "") -> Verdict:
    return Verdict(UNKNOWN, False, (), (note,) if note else ())


def runs_script(name: str, note: str) -> Verdict:
    """A shell or interpreter running the file ``name`` (unknown; ``plan`` makes it destructive when
    an earlier segment of the same command downloaded that file)."""
    return Verdict(UNKNOWN, False, (), (note,), scripts=(name,))


# -- argument helpers ----------------------------------------------------------------------------


def short_flags(args: Sequence[str]) -> set[str]:
    """Single-letter flags, clusters split (``-rf`` -> r, f), up to ``--``."""
    found: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            found.update(arg[1:])
    return found


def spelled_options(args: Sequence[str], names: Sequence[str]) -> list[str]:
    """Which of ``names`` (long options) ``args`` gives, abbreviations included: GNU getopt takes
    any unambiguous prefix (``--checkpoint-a=exec=...``), so a prefix of three letters or more counts."""
    return sorted({name for flag in long_flags(args) if len(flag) >= 5
                   for name in names if name.startswith(flag)})


def long_flags(args: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            out.add(arg.split("=", 1)[0])
    return out


def positional(args: Sequence[str], valued: Iterable[str] = ()) -> list[str]:
    """Arguments that are not options (options in ``valued`` take the next word as their value)."""
    takes = set(valued)
    out: list[str] = []
    skip = False
    after = False
    for arg in args:
        if skip:
            skip = False
            continue
        if after or not arg.startswith("-") or arg == "-":
            out.append(arg)
        elif arg == "--":
            after = True
        elif arg in takes:
            skip = True
    return out


def has(args: Sequence[str], *flags: str) -> bool:
    shorts, longs = short_flags(args), long_flags(args)
    return any((f in longs) if f.startswith("--") else (f[1:] in shorts) for f in flags)


def value_of(args: Sequence[str], flags: Sequence[str]) -> str | None:
    """The value after the first of ``flags`` (``-c CODE`` or ``--flag=VALUE``)."""
    for i, arg in enumerate(args):
        if arg in flags and i + 1 < len(args):
            return args[i + 1]
        for flag in flags:
            if flag.startswith("--") and arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


@dataclass(frozen=True)
class Plan:
    """The static judgement of one command: category, reversibility, file effects, per-segment classes."""

    command: str
    category: str
    reversible: bool
    effects: tuple[Effect, ...]
    notes: tuple[str, ...]
    segments: tuple[tuple[str, str], ...]

    def caveated(self, reason: str) -> Plan:
        """This plan in a shell where a name may not run what it names (the session's PATH changed):
        at least ``unknown``, with ``reason`` said; unchanged when there is no reason."""
        if not reason:
            return self
        category = self.category if RANK[self.category] >= RANK[UNKNOWN] else UNKNOWN
        return replace(self, category=category, reversible=self.reversible and category == self.category,
                       notes=(reason, *self.notes))  # first: notes are cut at 8

    @property
    def warning(self) -> str:
        return {
            DESTRUCTIVE: "DESTRUCTIVE: may lose data or history irreversibly; take sh_checkpoint first",
            NETWORK: "NETWORK: talks to other hosts (downloads, uploads, pushes or listens)",
            COMPLEX: "COMPLEX: parts are decided only at run time (substitution, redirection, globs, control flow)",
            UNKNOWN: "UNKNOWN: runs a program or code whose effects cannot be known statically",
        }.get(self.category, "")

    def merged_effects(self) -> list[dict[str, Any]]:
        merged: dict[str, list[str]] = {}
        for op, paths in self.effects:
            bucket = merged.setdefault(op, [])
            bucket.extend(p for p in paths if p not in bucket)
        return [{"op": op, "paths": paths[:10]} for op, paths in merged.items()]

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"category": self.category, "reversible": self.reversible, "effects": self.merged_effects()}
        if self.warning:
            data["warning"] = self.warning
        if self.notes:
            data["notes"] = list(self.notes[:8])
        if len(self.segments) > 1:
            data["segments"] = [{"command": text, "category": cat} for text, cat in self.segments]
        return data

    def text(self) -> str:
        lines = [f"risk: {self.category} ({'reversible' if self.reversible else 'not reversible'})"]
        if self.warning:
            lines.append(self.warning)
        for effect in self.merged_effects():
            lines.append(f"effect: {effect['op']} {' '.join(effect['paths'])}".rstrip())
        if len(self.segments) > 1:
            lines.extend(f"  {cat:<11} {text}" for text, cat in self.segments)
        lines.extend(f"note: {note}" for note in self.notes[:8])
        return "\n".join(lines)

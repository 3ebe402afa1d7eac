"""Which files a generator produced, with hashes, so a run can say who wrote what.

Phase 1 and every ``generate_*`` call record the files they published (path -> sha256).
At the end of a run, comparing that ledger with the final tree gives the authorship split:
generator output untouched, generator output the LLM modified, and files the LLM authored
(plus generator files that were deleted, listed separately).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from kernel_ext.workspace import treewalk
from kernel_ext.workspace.internal import INTERNAL_NAMES
from kernel_ext.workspace.treebudget import TreeBudget, TreeLimits, file_digest

SKIPPED_DIRS = INTERNAL_NAMES | {".git", "__pycache__", "node_modules", ".venv", "venv", ".pytest_cache"}


@dataclass(frozen=True)
class GeneratedFile:
    path: str  # workspace-relative, "/"-separated
    sha256: str
    size: int


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_hashes(root: str | os.PathLike[str], *, skip: Iterable[str] = SKIPPED_DIRS, notes: treewalk.Notes | None = None,
                visit: Callable[[str, int, os.stat_result], None] | None = None) -> dict[str, str]:
    """``{relative path: sha256}`` of the regular files under ``root``.

    Through descriptors (``treewalk.regular_files``): links never followed, FIFOs, sockets and
    devices never opened (counted in ``notes``), a file swapped for one mid-walk skipped. Bytes
    are read within the snapshot budget (``treebudget``: apparent size, every name); past it a
    file is recorded by size and time, so sparse files or hard links cannot cost hours of hashing.
    ``visit(rel, fd, stat)`` sees each open file first (it must read with ``os.pread``), so one
    walk serves a caller that also wants the texts (the evidence baseline).
    """
    notes = treewalk.Notes() if notes is None else notes
    budget = TreeBudget(TreeLimits.for_kind("snapshot"))
    out: dict[str, str] = {}
    try:
        fd = treewalk.open_dir(root)
    except OSError:
        return out
    try:
        for rel, file_fd, st in treewalk.regular_files(fd, frozenset(skip), notes):
            if visit is not None:
                visit(rel, file_fd, st)
            out[rel] = file_digest(budget, file_fd, st, notes)
    finally:
        os.close(fd)
    return out


def authorship_split(generated: Mapping[str, str], current: Mapping[str, str]) -> dict[str, list[str]]:
    """Split the ``current`` tree by who wrote each file (see the module docstring)."""
    split: dict[str, list[str]] = {
        "generator_untouched": [], "generator_llm_modified": [], "llm_authored": [], "generator_deleted": [],
    }
    for path in sorted(current):
        if path not in generated:
            split["llm_authored"].append(path)
        elif current[path] == generated[path]:
            split["generator_untouched"].append(path)
        else:
            split["generator_llm_modified"].append(path)
    split["generator_deleted"] = sorted(set(generated) - set(current))
    return split


@dataclass
class GenerationLedger:
    """Every generator-published file of a run, latest generation wins (kept in RunState)."""

    files: dict[str, str] = field(default_factory=dict)
    runs: list[dict] = field(default_factory=list)

    def record(self, generator: str, files: Iterable[GeneratedFile], options: Mapping | None = None, *,
               reused_from_cache: bool = False) -> None:
        """The files one generation published; the same whether made now or taken from Phase 1's cache
        (``reused_from_cache`` only marks its entry in ``runs``)."""
        listed = list(files)
        for f in listed:
            self.files[f.path] = f.sha256
        run = {"generator": generator, "options": dict(options or {}), "files": len(listed)}
        self.runs.append({**run, "reused_from_cache": True} if reused_from_cache else run)

    @property
    def reused_from_cache(self) -> bool:
        """Whether a generation of this run took its files from Phase 1's cache."""
        return any(run.get("reused_from_cache") for run in self.runs)

    def split(self, current: Mapping[str, str]) -> dict[str, list[str]]:
        return authorship_split(self.files, current)


LEDGER_KEY = "generation.ledger"


def ledger_of(state) -> GenerationLedger:
    """The run's ledger (``state`` is a ``RunState``)."""
    return state.store(LEDGER_KEY, GenerationLedger)

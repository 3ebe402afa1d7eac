"""What the run knows that a command's text does not: the checkpoints it took, where it starts.

Risk is judged by reversibility: deleting workspace data is destructive unless a checkpoint taken
in this run holds it, in which case the deletion can be undone (mutating) and the card names the
checkpoint to restore. The planner never reaches for the checkpoint store itself (``shellplan``
imports nothing from ``sandbox``): the shell toolkit records each checkpoint it takes and hands
them in as a ``PlanContext``. Without one (``NO_CONTEXT``) nothing counts as covered.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

_INTERNAL_PREFIX = ".besser"  # the run's own folders: never in a checkpoint, so never covered by one


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint taken in this run: its label and the folder it copied (relative to the
    workspace, ``.`` for all of it)."""

    label: str
    folder: str = "."


@dataclass(frozen=True)
class PlanContext:
    """The run's checkpoints (oldest first) and the folder the command starts in, relative to the
    workspace (None: not known, and then only a checkpoint of the whole workspace covers a path)."""

    checkpoints: tuple[Checkpoint, ...] = ()
    base: str | None = None

    def covering(self, path: str, *, root: bool = False) -> Checkpoint | None:
        """The newest checkpoint holding ``path`` (relative to where the command starts, already
        folded and inside the workspace), or None. ``root``: ``path`` may be the starting folder
        itself (what is deleted is below it, never the folder: ``git clean``, a filtered ``find -delete``)."""
        if not self.checkpoints:
            return None
        full = posixpath.normpath(f"{self.base}/{path}") if self.base not in (None, "", ".") else posixpath.normpath(path)
        escapes = full == ".." or full.startswith(("../", "/"))
        if (full == "." and not root) or escapes or full.split("/", 1)[0].startswith(_INTERNAL_PREFIX):
            return None
        for checkpoint in reversed(self.checkpoints):
            folder = posixpath.normpath(checkpoint.folder or ".")
            if folder == ".":
                return checkpoint
            if self.base is not None and (full == folder or full.startswith(folder + "/")):
                return checkpoint
        return None


NO_CONTEXT = PlanContext()
